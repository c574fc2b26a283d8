#!/usr/bin/env bash
# Proves that the real OpenStack CLI clients work unchanged against berth:
#   - `openstack resource ...` (python-openstackclient + osc-placement) against /placement
#   - `blazar host-...`, `blazar lease-...`, `blazar allocation-list` and the
#     `openstack reservation ...` equivalents (python-blazarclient) against /reservation/v1
#   - `openstack baremetal node ...` and `openstack baremetal allocation ...`
#     (python-ironicclient, negotiating Ironic's microversion) against /baremetal
# first without authentication (`--os-auth-type none --os-endpoint ...`), then in Keystone mode:
# a real Keystone (scripts/keystone.sh) with berth's services in its catalog, berth with
# `--auth keystone`, and `openstack resource ...`, `blazar ...` / `openstack reservation ...` and
# `openstack baremetal ...` (python-ironicclient) authenticating with a password and finding
# berth through the catalog, as in a cloud.
#
# Usage: bash scripts/openstack-clients.sh
#
# Environment:
#   BERTH_CLIENTS_VENV  virtualenv for the clients [default: target/openstack-clients-venv]
#   BERTH_BIN           berth binary to test; when unset, `cargo build --bin berth` builds one
#   BERTH_LOG           server log filter [default: info,sqlx=warn,tower_http=debug]
#   BERTH_CLIENTS_KEYSTONE  `0` skips the Keystone mode (under CI=true it always runs)
#
# The clients are pinned in scripts/openstack-clients.requirements.txt. The servers listen on
# 127.0.0.1 only and are killed by PID on exit. Every client call is bounded by `timeout 60`.
# The last line is `openstack-clients: N passed, M failed`; the exit status is non-zero when
# anything failed.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SCRIPT=openstack-clients
source scripts/common.sh

VENV=${BERTH_CLIENTS_VENV:-target/openstack-clients-venv}
REQUIREMENTS=scripts/openstack-clients.requirements.txt
CLIENT_TIMEOUT=60
HEALTH_TIMEOUT_S=30

log() { printf '%s\n' "$*"; }
# --- 1. the clients ---------------------------------------------------------------------------

# Exits 0 when every `name==version` pin in the requirements file is installed in the venv.
venv_satisfied() {
    [[ -x $VENV/bin/python && -x $VENV/bin/openstack && -x $VENV/bin/blazar ]] || return 1
    "$VENV/bin/python" scripts/pins-installed.py "$REQUIREMENTS"
}

log "==> clients: virtualenv $VENV"
if venv_satisfied; then
    log "    pinned clients already installed"
else
    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
    venv_satisfied || die "the virtualenv $VENV does not match $REQUIREMENTS after pip install"
fi
OPENSTACK=$VENV/bin/openstack
BLAZAR=$VENV/bin/blazar

# The server is on loopback: never send its requests through a proxy (pip above may need one).
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export NO_PROXY=$no_proxy

# The clients read OS_* variables (OS_CLOUD, OS_AUTH_URL, ...); only the flags below may count.
while IFS= read -r name; do
    unset "$name"
done < <(compgen -e | grep '^OS_' || true)

# --- 2. the server ----------------------------------------------------------------------------

if [[ -n ${BERTH_BIN:-} ]]; then
    BIN=$BERTH_BIN
else
    log "==> build: cargo build --bin berth"
    cargo build --quiet --bin berth
    BIN=${CARGO_TARGET_DIR:-target}/debug/berth
fi
[[ -x $BIN ]] || die "berth binary $BIN is not executable"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/berth-openstack-clients.XXXXXX")
SERVER_LOG=$TMP/berth.log
BERTH_PID=""
KEYSTONE_PID=""

stop_berth() {
    if [[ -n $BERTH_PID ]]; then
        kill "$BERTH_PID" 2>/dev/null || true
        wait "$BERTH_PID" 2>/dev/null || true
        BERTH_PID=""
    fi
}

cleanup() {
    local status=$?
    stop_berth
    if [[ -n $KEYSTONE_PID ]]; then
        # SIGINT: gunicorn stops its worker and exits at once.
        kill -INT "$KEYSTONE_PID" 2>/dev/null || true
        wait "$KEYSTONE_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

server_tail() {
    log "---- last 40 lines of the berth log ($SERVER_LOG) ----"
    tail -n 40 "$SERVER_LOG" 2>/dev/null || true
    log "----"
}

# Starts berth on a free loopback port, with extra flags ARGS...; retries when another process
# took the port first.
start_server() {
    local attempt deadline
    for attempt in 1 2 3; do
        PORT=$(free_port)
        BASE=http://127.0.0.1:$PORT
        log "==> server: $BIN serve --listen 127.0.0.1:$PORT --data-dir $TMP/data-$SERVER_RUN-$attempt $*"
        # Settings for berth come from the flags here, never from the caller's BERTH_* variables.
        env -u BERTH_CONFIG -u BERTH_DATABASE -u BERTH_AUTH -u BERTH_TOKENS -u BERTH_DEMO \
            -u BERTH_LISTEN -u BERTH_DATA_DIR \
            BERTH_LOG="${BERTH_LOG:-info,sqlx=warn,tower_http=debug}" NO_COLOR=1 \
            "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$TMP/data-$SERVER_RUN-$attempt" "$@" \
            >>"$SERVER_LOG" 2>&1 &
        BERTH_PID=$!
        deadline=$((SECONDS + HEALTH_TIMEOUT_S))
        while ((SECONDS < deadline)); do
            if curl -sf --noproxy "*" --max-time 2 "$BASE/healthz" >/dev/null; then
                log "    healthy at $BASE (pid $BERTH_PID)"
                return 0
            fi
            kill -0 "$BERTH_PID" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$BERTH_PID" 2>/dev/null; then
            server_tail
            die "berth did not answer $BASE/healthz within ${HEALTH_TIMEOUT_S}s"
        fi
        wait "$BERTH_PID" 2>/dev/null || true
        BERTH_PID=""
        log "    berth exited during start-up (attempt $attempt)"
    done
    server_tail
    die "berth did not start"
}
SERVER_RUN=noauth
start_server

PLACEMENT=("$OPENSTACK" --os-auth-type none --os-endpoint "$BASE/placement")
PLACEMENT_139=("${PLACEMENT[@]}" --os-placement-api-version 1.39)
RESERVATION=("$BLAZAR" --os-auth-type none --os-endpoint "$BASE/reservation/v1")
BAREMETAL=("$OPENSTACK" --os-auth-type none --os-endpoint "$BASE/baremetal")

# --- checks -----------------------------------------------------------------------------------

PASSED=0
FAILED=0
FAILURES=()
STEP=0
OUT=""         # stdout of the last client command
ERR=""         # stderr of the last client command
LAST_OK=1      # 0 when the last client command failed: its value checks are skipped

fail() {
    local what=$1
    FAILED=$((FAILED + 1))
    FAILURES+=("[$STEP] $what")
    log "    FAILED: $what"
    log "---- stdout ----"
    printf '%s\n' "$OUT"
    log "---- stderr ----"
    printf '%s\n' "$ERR"
    server_tail
    kill -0 "$BERTH_PID" 2>/dev/null || {
        log "openstack-clients: berth (pid $BERTH_PID) is no longer running"
        log "openstack-clients: $PASSED passed, $FAILED failed"
        exit 1
    }
}

pass() { PASSED=$((PASSED + 1)); }

# invoke CMD...: runs a client command with a bound, leaving its output in OUT/ERR and status in RC.
invoke() {
    local errfile=$TMP/stderr
    RC=0
    OUT=$(timeout "$CLIENT_TIMEOUT" "$@" 2>"$errfile") || RC=$?
    ERR=$(<"$errfile")
    if ((RC == 124)); then
        ERR+=$'\n'"(timed out after ${CLIENT_TIMEOUT}s)"
    fi
}

show_cmd() {
    local -a shown=("$@")
    shown[0]=${shown[0]##*/}
    log "    \$ ${shown[*]}"
}

# ok DESC CMD...: the command must exit 0.
ok() {
    local desc=$1
    shift
    STEP=$((STEP + 1))
    log "==> [$STEP] $desc"
    show_cmd "$@"
    invoke "$@"
    if ((RC == 0)); then
        LAST_OK=1
        pass
    else
        LAST_OK=0
        fail "$desc: exit status $RC"
    fi
}

# fails DESC TEXT CMD...: the command must exit non-zero and print TEXT (the server's message).
fails() {
    local desc=$1 text=$2
    shift 2
    STEP=$((STEP + 1))
    log "==> [$STEP] $desc (expected to fail)"
    show_cmd "$@"
    invoke "$@"
    LAST_OK=0
    if ((RC == 0)); then
        fail "$desc: exit status 0, expected a failure"
    elif ((RC == 124)); then
        fail "$desc: timed out"
    elif [[ "$OUT"$'\n'"$ERR" != *"$text"* ]]; then
        fail "$desc: exit status $RC but the output lacks \"$text\""
    else
        log "    failed as expected: $(printf '%s\n' "$ERR" | grep -F -- "$text" | head -n 1)"
        pass
    fi
}

# check EXPR: a Python expression over the last command's output must be true. In scope:
#   out  stdout as text
#   d    stdout parsed as JSON (text before the first '{' or '[' is skipped: blazar prints
#        "Created a new host:" before the JSON)
#   err  stderr as text
#   by(key)  for a JSON list of rows: {row[key]: row}
#   lines    the non-empty lines of stdout
check() {
    local expr=$1
    if ((LAST_OK == 0)); then
        log "    skipped: $expr"
        return 0
    fi
    local result=0
    printf '%s' "$OUT" | ERR_TEXT=$ERR python3 -c '
import json, os, sys
out = sys.stdin.read()
err = os.environ["ERR_TEXT"]
starts = [i for i in (out.find("{"), out.find("[")) if i >= 0]
try:
    d = json.loads(out[min(starts):]) if starts else None
except ValueError:
    d = None
lines = [line for line in out.splitlines() if line.strip()]
def by(key):
    return {row[key]: row for row in d}
try:
    ok = eval(sys.argv[1])
except Exception as error:
    print("    error evaluating the check: %r" % (error,))
    ok = False
sys.exit(0 if ok else 1)
' "$expr" || result=$?
    if ((result == 0)); then
        log "    ok: $expr"
        pass
    else
        fail "check $expr"
    fi
}

# value CMD...: the trimmed stdout of a command that must succeed (for ids and generations).
value() {
    invoke "$@"
    ((RC == 0)) || return 1
    printf '%s' "$OUT" | tr -d '[:space:]'
}

# --- 3. placement: openstack resource ... -------------------------------------------------------

RP1=11111111-1111-4111-8111-111111111111
RP2=22222222-2222-4222-8222-222222222222
UNKNOWN=99999999-9999-4999-8999-999999999999
AGG1=aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa
AGG2=bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb
TRAIT=CUSTOM_BERTH_CLIENTS_GPU
RC_NAME=CUSTOM_BERTH_CLIENTS_FPGA

log ""
log "### placement at $BASE/placement"

ok "resource provider create (root)" \
    "${PLACEMENT_139[@]}" resource provider create --uuid "$RP1" cn1 -f json
check "d['uuid'] == '$RP1' and d['name'] == 'cn1' and d['generation'] == 0"
check "d['root_provider_uuid'] == '$RP1' and d['parent_provider_uuid'] is None"

ok "resource provider create (child)" \
    "${PLACEMENT_139[@]}" resource provider create --uuid "$RP2" --parent-provider "$RP1" cn1-numa0 -f json
check "d['uuid'] == '$RP2' and d['parent_provider_uuid'] == '$RP1' and d['root_provider_uuid'] == '$RP1'"

ok "resource provider list" \
    "${PLACEMENT_139[@]}" resource provider list -f json
check "sorted(by('uuid')) == ['$RP1', '$RP2'] and by('uuid')['$RP2']['name'] == 'cn1-numa0'"

ok "resource provider list --name" \
    "${PLACEMENT_139[@]}" resource provider list --name cn1 -f json
check "[r['uuid'] for r in d] == ['$RP1']"

ok "resource provider list --in-tree" \
    "${PLACEMENT_139[@]}" resource provider list --in-tree "$RP2" -f json
check "sorted(by('uuid')) == ['$RP1', '$RP2']"

ok "resource provider show" \
    "${PLACEMENT_139[@]}" resource provider show "$RP2" -f json
check "d['name'] == 'cn1-numa0' and d['parent_provider_uuid'] == '$RP1' and d['generation'] == 0"

ok "resource provider set --name" \
    "${PLACEMENT_139[@]}" resource provider set "$RP1" --name cn1-renamed -f json
check "d['uuid'] == '$RP1' and d['name'] == 'cn1-renamed'"

ok "resource provider show -f value -c name" \
    "${PLACEMENT_139[@]}" resource provider show "$RP1" -f value -c name
check "out.strip() == 'cn1-renamed'"

fails "resource provider show of an unknown uuid" "No resource provider with uuid $UNKNOWN" \
    "${PLACEMENT_139[@]}" resource provider show "$UNKNOWN"

# Inventories.
ok "resource provider inventory set" \
    "${PLACEMENT_139[@]}" resource provider inventory set "$RP1" \
    --resource VCPU=8 --resource VCPU:allocation_ratio=4.0 --resource MEMORY_MB=16384 -f json
check "sorted(by('resource_class')) == ['MEMORY_MB', 'VCPU']"
check "by('resource_class')['VCPU']['total'] == 8 and by('resource_class')['VCPU']['allocation_ratio'] == 4.0"
check "by('resource_class')['MEMORY_MB']['total'] == 16384 and by('resource_class')['MEMORY_MB']['allocation_ratio'] == 1.0"

ok "resource provider inventory list" \
    "${PLACEMENT_139[@]}" resource provider inventory list "$RP1" -f json
check "sorted(by('resource_class')) == ['MEMORY_MB', 'VCPU'] and all(r['used'] == 0 for r in d)"

ok "resource provider inventory show" \
    "${PLACEMENT_139[@]}" resource provider inventory show "$RP1" VCPU -f json
check "d['total'] == 8 and d['allocation_ratio'] == 4.0 and d['reserved'] == 0"
check "d['min_unit'] == 1 and d['step_size'] == 1 and d['max_unit'] >= 8 and d['used'] == 0"

ok "resource provider inventory set --amend (new class)" \
    "${PLACEMENT_139[@]}" resource provider inventory set "$RP1" --amend --resource DISK_GB=100 -f json
check "sorted(by('resource_class')) == ['DISK_GB', 'MEMORY_MB', 'VCPU']"
check "by('resource_class')['DISK_GB']['total'] == 100 and by('resource_class')['VCPU']['allocation_ratio'] == 4.0"

ok "resource provider inventory class set" \
    "${PLACEMENT_139[@]}" resource provider inventory class set "$RP1" DISK_GB --total 50 --reserved 5 -f json
check "d['total'] == 50 and d['reserved'] == 5"

# As in real placement, `inventory class set` only replaces an existing class (PUT .../VGPU is a 400).
fails "resource provider inventory class set of a class the provider lacks" "HTTP 400" \
    "${PLACEMENT_139[@]}" resource provider inventory class set "$RP1" VGPU --total 2

ok "resource provider inventory set --amend (existing class)" \
    "${PLACEMENT_139[@]}" resource provider inventory set "$RP1" --amend --resource MEMORY_MB=1024 -f json
check "sorted(by('resource_class')) == ['DISK_GB', 'MEMORY_MB', 'VCPU']"
check "by('resource_class')['MEMORY_MB']['total'] == 1024 and by('resource_class')['VCPU']['allocation_ratio'] == 4.0"
check "by('resource_class')['DISK_GB']['total'] == 50 and by('resource_class')['DISK_GB']['reserved'] == 5"

ok "resource provider inventory delete --resource-class" \
    "${PLACEMENT_139[@]}" resource provider inventory delete "$RP1" --resource-class DISK_GB
ok "resource provider inventory list (after deleting one class)" \
    "${PLACEMENT_139[@]}" resource provider inventory list "$RP1" -f json
check "sorted(by('resource_class')) == ['MEMORY_MB', 'VCPU']"

fails "resource provider inventory show of a deleted class" "HTTP 404" \
    "${PLACEMENT_139[@]}" resource provider inventory show "$RP1" DISK_GB

ok "resource provider usage show" \
    "${PLACEMENT_139[@]}" resource provider usage show "$RP1" -f json
check "{r['resource_class']: r['usage'] for r in d} == {'VCPU': 0, 'MEMORY_MB': 0}"

# Allocation candidates, allocations and usages.
CONSUMER=cccccccc-cccc-4ccc-8ccc-cccccccccccc
ok "allocation candidate list" \
    "${PLACEMENT_139[@]}" allocation candidate list --resource VCPU=1 --resource MEMORY_MB=512 -f json
check "any(r['resource provider'] == '$RP1' for r in d) and all(r['resource provider'] != '$RP2' for r in d)"
ok "allocation candidate list --limit" \
    "${PLACEMENT_139[@]}" allocation candidate list --resource VCPU=1 --limit 1 -f json
check "len(d) == 1"
ok "resource provider allocation set" \
    "${PLACEMENT_139[@]}" resource provider allocation set "$CONSUMER" \
    --allocation "rp=$RP1,VCPU=2,MEMORY_MB=512" --project-id p1 --user-id u1 --consumer-type INSTANCE -f json
check "d[0]['resource_provider'] == '$RP1' and d[0]['resources'] == {'VCPU': 2, 'MEMORY_MB': 512}"
ok "resource provider allocation show" \
    "${PLACEMENT_139[@]}" resource provider allocation show "$CONSUMER" -f json
check "d[0]['project_id'] == 'p1' and d[0]['consumer_type'] == 'INSTANCE' and d[0]['resources']['VCPU'] == 2"
ok "resource usage show" \
    "${PLACEMENT_139[@]}" resource usage show p1 -f json
check "d[0]['resource_class'] == 'INSTANCE' and d[0]['usage']['VCPU'] == 2 and d[0]['usage']['consumer_count'] == 1"
ok "resource provider usage show (with an allocation)" \
    "${PLACEMENT_139[@]}" resource provider usage show "$RP1" -f json
check "{r['resource_class']: r['usage'] for r in d}['VCPU'] == 2"
fails "resource provider allocation set over capacity" "HTTP 409" \
    "${PLACEMENT_139[@]}" resource provider allocation set dddddddd-dddd-4ddd-8ddd-dddddddddddd \
    --allocation "rp=$RP1,VCPU=1000" --project-id p1 --user-id u1 --consumer-type INSTANCE
ok "resource provider allocation delete" \
    "${PLACEMENT_139[@]}" resource provider allocation delete "$CONSUMER"
ok "resource provider allocation show (after delete)" \
    "${PLACEMENT_139[@]}" resource provider allocation show "$CONSUMER" -f json
check "d == []"

# Aggregates (the generation is mandatory from 1.19).
GENERATION=$(value "${PLACEMENT_139[@]}" resource provider show "$RP1" -f value -c generation) || GENERATION=unknown
log "    (generation of $RP1 is $GENERATION)"
ok "resource provider aggregate set --generation" \
    "${PLACEMENT_139[@]}" resource provider aggregate set "$RP1" \
    --aggregate "$AGG1" --aggregate "$AGG2" --generation "$GENERATION" -f json
check "sorted(r['uuid'] for r in d) == ['$AGG1', '$AGG2']"

ok "resource provider aggregate list" \
    "${PLACEMENT_139[@]}" resource provider aggregate list "$RP1" -f json
check "sorted(r['uuid'] for r in d) == ['$AGG1', '$AGG2']"

fails "resource provider aggregate set with a stale generation" "HTTP 409" \
    "${PLACEMENT_139[@]}" resource provider aggregate set "$RP1" --aggregate "$AGG1" --generation "$GENERATION"

ok "resource provider list --member-of" \
    "${PLACEMENT_139[@]}" resource provider list --member-of "$AGG2" -f json
check "[r['uuid'] for r in d] == ['$RP1']"

# Traits.
ok "trait create" \
    "${PLACEMENT_139[@]}" trait create "$TRAIT"
ok "trait list --name startswith:CUSTOM_" \
    "${PLACEMENT_139[@]}" trait list --name startswith:CUSTOM_ -f value
check "lines == ['$TRAIT']"
ok "trait list (standard traits)" \
    "${PLACEMENT_139[@]}" trait list -f value
check "'$TRAIT' in lines and 'HW_CPU_X86_AVX' in lines"

ok "resource provider trait set" \
    "${PLACEMENT_139[@]}" resource provider trait set "$RP1" --trait "$TRAIT" --trait HW_CPU_X86_AVX -f value
check "sorted(lines) == ['$TRAIT', 'HW_CPU_X86_AVX']"
ok "resource provider trait list" \
    "${PLACEMENT_139[@]}" resource provider trait list "$RP1" -f json
check "sorted(r['name'] for r in d) == ['$TRAIT', 'HW_CPU_X86_AVX']"

ok "resource provider list --required" \
    "${PLACEMENT_139[@]}" resource provider list --required "$TRAIT" -f json
check "[r['uuid'] for r in d] == ['$RP1']"

fails "trait delete of a trait in use" "HTTP 409" \
    "${PLACEMENT_139[@]}" trait delete "$TRAIT"
ok "resource provider trait delete" \
    "${PLACEMENT_139[@]}" resource provider trait delete "$RP1"
ok "trait delete" \
    "${PLACEMENT_139[@]}" trait delete "$TRAIT"
ok "trait list --name startswith:CUSTOM_ (after delete)" \
    "${PLACEMENT_139[@]}" trait list --name startswith:CUSTOM_ -f json
check "d == []"

# Resource classes.
ok "resource class list" \
    "${PLACEMENT_139[@]}" resource class list -f value
check "{'VCPU', 'MEMORY_MB', 'DISK_GB'} <= set(lines)"
ok "resource class create" \
    "${PLACEMENT_139[@]}" resource class create "$RC_NAME"
ok "resource class show" \
    "${PLACEMENT_139[@]}" resource class show "$RC_NAME" -f value
check "out.strip() == '$RC_NAME'"
ok "resource class list (with the custom class)" \
    "${PLACEMENT_139[@]}" resource class list -f value
check "'$RC_NAME' in lines"
ok "resource class delete" \
    "${PLACEMENT_139[@]}" resource class delete "$RC_NAME"
ok "resource class list (after delete)" \
    "${PLACEMENT_139[@]}" resource class list -f value
check "'$RC_NAME' not in lines and 'VCPU' in lines"

# Without --os-placement-api-version the client first asks GET / and then uses 1.29.
ok "resource provider list (negotiated microversion)" \
    "${PLACEMENT[@]}" --debug resource provider list -f json
check "'OpenStack-API-Version: placement 1.29' in err and 'placement 1.39' not in err"
check "sorted(by('uuid')) == ['$RP1', '$RP2']"
ok "resource provider show (negotiated microversion)" \
    "${PLACEMENT[@]}" resource provider show "$RP2" -f json
check "d['root_provider_uuid'] == '$RP1' and d['parent_provider_uuid'] == '$RP1'"
ok "resource provider inventory list (negotiated microversion)" \
    "${PLACEMENT[@]}" resource provider inventory list "$RP1" -f json
check "by('resource_class')['VCPU']['total'] == 8"

# Deletion: a parent with a child is refused.
fails "resource provider delete of a parent" "HTTP 409" \
    "${PLACEMENT_139[@]}" resource provider delete "$RP1"
ok "resource provider inventory delete (all classes)" \
    "${PLACEMENT_139[@]}" resource provider inventory delete "$RP1"
ok "resource provider inventory list (empty)" \
    "${PLACEMENT_139[@]}" resource provider inventory list "$RP1" -f json
check "d == []"
ok "resource provider delete (child)" \
    "${PLACEMENT_139[@]}" resource provider delete "$RP2"
ok "resource provider delete (parent)" \
    "${PLACEMENT_139[@]}" resource provider delete "$RP1"
ok "resource provider list (empty)" \
    "${PLACEMENT_139[@]}" resource provider list -f json
check "d == []"

# --- 3. reservation: blazar host-... ------------------------------------------------------------

log ""
log "### reservation at $BASE/reservation/v1"

ok "host-create --extra" \
    "${RESERVATION[@]}" host-create --extra gpu=true --extra rack=r1 compute-1 -f json
check "lines[0] == 'Created a new host:'"
check "d['hypervisor_hostname'] == 'compute-1' and d['gpu'] == 'true' and d['rack'] == 'r1'"
# Real Blazar renders host ids as numeric strings; the client must be able to match ^[0-9]+$.
check "isinstance(d['id'], str) and d['id'].isdigit()"
HOST_ID=$(printf '%s' "$OUT" | python3 -c 'import json, sys; t = sys.stdin.read(); print(json.loads(t[t.find("{"):])["id"])' 2>/dev/null) \
    || HOST_ID=unknown
log "    (compute-1 has id $HOST_ID)"

ok "host-create (second host)" \
    "${RESERVATION[@]}" host-create compute-2 -f json
check "d['hypervisor_hostname'] == 'compute-2'"

ok "host-list" \
    "${RESERVATION[@]}" host-list -f json
check "sorted(by('hypervisor_hostname')) == ['compute-1', 'compute-2']"
check "str(by('hypervisor_hostname')['compute-1']['id']) == '$HOST_ID'"

ok "host-show by id" \
    "${RESERVATION[@]}" host-show "$HOST_ID" -f json
check "d['hypervisor_hostname'] == 'compute-1' and d['gpu'] == 'true' and d['rack'] == 'r1'"

ok "host-show by name" \
    "${RESERVATION[@]}" host-show compute-1 -f json
check "str(d['id']) == '$HOST_ID' and d['gpu'] == 'true'"

ok "host-update --extra" \
    "${RESERVATION[@]}" host-update --extra gpu=false --extra newcap=x compute-1
check "'compute-1' in out"
ok "host-show after host-update" \
    "${RESERVATION[@]}" host-show "$HOST_ID" -f json
check "d['gpu'] == 'false' and d['newcap'] == 'x' and d['rack'] == 'r1'"

fails "host-show of an unknown id" "ERROR: Host 987654 not found" \
    "${RESERVATION[@]}" host-show 987654

# --- 3. reservation: leases (blazar lease-... and openstack reservation lease ...) ---------------

OSC_RESERVATION=("$OPENSTACK" --os-auth-type none --os-endpoint "$BASE/reservation/v1")
at() { date -u -d "$1" '+%Y-%m-%d %H:%M'; }
plus() { date -u -d "$1 UTC $2" '+%Y-%m-%d %H:%M'; }
HOST_START=$(at '+4 hours')
HOST_END=$(at '+5 hours')
INST_END=$(at '+3 hours')

ok "host-create with inventory and a zone (compute-3, az1)" \
    "${RESERVATION[@]}" host-create --extra vcpus=8 --extra memory_mb=16384 --extra local_gb=100 \
    --extra availability_zone=az1 compute-3 -f json
check "d['hypervisor_hostname'] == 'compute-3' and d['availability_zone'] == 'az1' and d['vcpus'] == 8"
ok "host-create with inventory and a zone (compute-4, az2)" \
    "${RESERVATION[@]}" host-create --extra vcpus=8 --extra memory_mb=16384 --extra local_gb=100 \
    --extra availability_zone=az2 compute-4 -f json
check "d['availability_zone'] == 'az2'"

ok "lease-create --physical-reservation with hypervisor and AZ filters" \
    "${RESERVATION[@]}" lease-create \
    --physical-reservation 'min=1,max=2,hypervisor_properties=[">=", "$vcpus", "4"],resource_properties=["==", "$availability_zone", "az1"]' \
    --start-date "$HOST_START" --end-date "$HOST_END" hostlease -f json
check "lines[0] == 'Created a new lease:'"
check "d['name'] == 'hostlease' and d['status'] == 'PENDING' and d['start_date'].startswith('$HOST_START'.replace(' ', 'T'))"
check "'physical:host' in d['reservations'] and '\"min\": 1' in d['reservations']"

ok "lease-create --reservation virtual:instance, anti-affine, starting now" \
    "${RESERVATION[@]}" lease-create \
    --reservation resource_type=virtual:instance,vcpus=1,memory_mb=1024,disk_gb=10,amount=2,affinity=False \
    --end-date "$INST_END" instlease -f json
check "d['name'] == 'instlease' and 'virtual:instance' in d['reservations']"
check "'\"affinity\": false' in d['reservations'] and '\"flavor_id\"' in d['reservations']"

fails "lease-create that does not fit (3 anti-affine instances on 2 hosts)" "Not enough resources" \
    "${RESERVATION[@]}" lease-create \
    --reservation resource_type=virtual:instance,vcpus=1,memory_mb=1024,disk_gb=10,amount=3,affinity=False \
    --end-date "$INST_END" toomany

ok "lease-list" \
    "${RESERVATION[@]}" lease-list -f json
check "sorted(by('name')) == ['hostlease', 'instlease']"

ok "lease-show by name" \
    "${RESERVATION[@]}" lease-show hostlease -f json
check "d['name'] == 'hostlease' and d['end_date'].startswith('$HOST_END'.replace(' ', 'T'))"
HOST_LEASE=$(printf '%s' "$OUT" | python3 -c 'import json, sys; t = sys.stdin.read(); print(json.loads(t[t.find("{"):])["id"])' 2>/dev/null) \
    || HOST_LEASE=unknown

ok "lease-show by id" \
    "${RESERVATION[@]}" lease-show "$HOST_LEASE" -f json
check "d['id'] == '$HOST_LEASE'"

ok "lease-update --prolong-for 1h" \
    "${RESERVATION[@]}" lease-update --prolong-for 1h hostlease
ok "lease-show after lease-update" \
    "${RESERVATION[@]}" lease-show "$HOST_LEASE" -f json
check "d['end_date'].startswith('$(plus "$HOST_END" '+1 hour')'.replace(' ', 'T'))"

ok "allocation-list host" \
    "${RESERVATION[@]}" allocation-list host -f json
check "any('$HOST_LEASE' in str(row['reservations']) for row in d)"

ok "openstack reservation lease list" \
    "${OSC_RESERVATION[@]}" reservation lease list -f json
check "sorted(by('name')) == ['hostlease', 'instlease']"
ok "openstack reservation lease show" \
    "${OSC_RESERVATION[@]}" reservation lease show instlease -f json
check "d['name'] == 'instlease' and d['status'] in ('PENDING', 'ACTIVE')"
ok "openstack reservation lease set --prolong-for 30m" \
    "${OSC_RESERVATION[@]}" reservation lease set --prolong-for 30m hostlease
ok "openstack reservation lease show after set" \
    "${OSC_RESERVATION[@]}" reservation lease show "$HOST_LEASE" -f json
check "d['end_date'].startswith('$(plus "$HOST_END" '+90 minutes')'.replace(' ', 'T'))"
ok "openstack reservation lease create (physical:host via --reservation)" \
    "${OSC_RESERVATION[@]}" reservation lease create \
    --reservation 'resource_type=physical:host,min=1,max=1,hypervisor_properties=,resource_properties=["==", "$availability_zone", "az2"]' \
    --start-date "$HOST_START" --end-date "$HOST_END" osclease -f json
check "d['name'] == 'osclease'"
ok "openstack reservation allocation list host" \
    "${OSC_RESERVATION[@]}" reservation allocation list host -f json
check "sum(len(row['reservations']) if isinstance(row['reservations'], list) else str(row['reservations']).count('lease_id') for row in d) >= 2"
ok "openstack reservation lease delete" \
    "${OSC_RESERVATION[@]}" reservation lease delete osclease

ok "lease-delete (host lease)" \
    "${RESERVATION[@]}" lease-delete hostlease
ok "lease-delete (instance lease)" \
    "${RESERVATION[@]}" lease-delete instlease
ok "lease-list (empty)" \
    "${RESERVATION[@]}" lease-list -f json
check "d == []"
ok "host-delete compute-3" \
    "${RESERVATION[@]}" host-delete compute-3
ok "host-delete compute-4" \
    "${RESERVATION[@]}" host-delete compute-4

ok "host-delete by name" \
    "${RESERVATION[@]}" host-delete compute-2
ok "host-delete by id" \
    "${RESERVATION[@]}" host-delete "$HOST_ID"
ok "host-list (empty)" \
    "${RESERVATION[@]}" host-list -f json
check "d == []"

# --- 3. bare metal: openstack baremetal node ... and allocation ... -----------------------------

BM2_UUID=b2b2b2b2-0000-4000-8000-00000000b002

ok "baremetal node create bm-1" \
    "${BAREMETAL[@]}" baremetal node create --driver fake-hardware --name bm-1 \
    --resource-class baremetal-gold --property cpus=8 -f json
check "d['name'] == 'bm-1' and d['resource_class'] == 'baremetal-gold' and d['provision_state'] == 'enroll'"
check "d['maintenance'] is False and d['properties'] == {'cpus': 8} and d['allocation_uuid'] is None"
BM1_UUID=$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["uuid"])' 2>/dev/null) \
    || BM1_UUID=unknown
ok "baremetal node create bm-2 --uuid" \
    "${BAREMETAL[@]}" baremetal node create --driver fake-hardware --name bm-2 --uuid "$BM2_UUID" \
    --resource-class baremetal-gold -f json
check "d['uuid'] == '$BM2_UUID' and d['name'] == 'bm-2'"
for node in bm-1 bm-2; do
    ok "baremetal node manage $node" "${BAREMETAL[@]}" baremetal node manage "$node"
    ok "baremetal node provide $node" "${BAREMETAL[@]}" baremetal node provide "$node"
done
ok "baremetal node list (negotiated microversion)" \
    "${BAREMETAL[@]}" --debug baremetal node list -f json
check "sorted(by('name')) == ['bm-1', 'bm-2'] and all(r['provision_state'] == 'available' for r in d)"
check "by('name')['bm-2']['uuid'] == '$BM2_UUID' and all(r['maintenance'] is False for r in d)"
check "'X-OpenStack-Ironic-API-Version: 1.115' in err and 'x-openstack-ironic-api-version: 1.60' in err.lower()"
ok "baremetal node show bm-1" \
    "${BAREMETAL[@]}" baremetal node show bm-1 -f json
check "d['uuid'] == '$BM1_UUID' and d['provision_state'] == 'available' and d['properties'] == {'cpus': 8}"
ok "baremetal node set --property rack=r7" \
    "${BAREMETAL[@]}" baremetal node set --property rack=r7 bm-1
ok "baremetal node show after set" \
    "${BAREMETAL[@]}" baremetal node show bm-1 -f json
check "d['properties'] == {'cpus': 8, 'rack': 'r7'}"
ok "baremetal node maintenance set --reason" \
    "${BAREMETAL[@]}" baremetal node maintenance set --reason 'fan failure' bm-2
ok "baremetal node show in maintenance" \
    "${BAREMETAL[@]}" baremetal node show "$BM2_UUID" -f json
check "d['maintenance'] is True and d['maintenance_reason'] == 'fan failure'"
ok "baremetal node list --maintenance" \
    "${BAREMETAL[@]}" baremetal node list --maintenance -f json
check "[r['name'] for r in d] == ['bm-2']"

ok "baremetal allocation create (the node not in maintenance)" \
    "${BAREMETAL[@]}" baremetal allocation create --resource-class baremetal-gold --name alloc-1 \
    --extra team=web -f json
check "d['state'] == 'active' and d['node_uuid'] == '$BM1_UUID' and d['name'] == 'alloc-1'"
check "d['extra'] == {'team': 'web'} and d['resource_class'] == 'baremetal-gold' and d['last_error'] is None"
ok "baremetal allocation create (no node left: error)" \
    "${BAREMETAL[@]}" baremetal allocation create --resource-class baremetal-gold -f json
check "d['state'] == 'error' and d['node_uuid'] is None and d['last_error'].startswith('No available nodes')"
ok "baremetal node maintenance unset" \
    "${BAREMETAL[@]}" baremetal node maintenance unset bm-2
ok "baremetal node show out of maintenance" \
    "${BAREMETAL[@]}" baremetal node show bm-2 -f json
check "d['maintenance'] is False and d['maintenance_reason'] is None"
ok "baremetal allocation create --candidate-node" \
    "${BAREMETAL[@]}" baremetal allocation create --resource-class baremetal-gold \
    --candidate-node bm-2 --name alloc-2 -f json
check "d['state'] == 'active' and d['node_uuid'] == '$BM2_UUID' and d['candidate_nodes'] == ['$BM2_UUID']"
ok "baremetal allocation list" \
    "${BAREMETAL[@]}" baremetal allocation list -f json
check "sorted(by('name')) == ['alloc-1', 'alloc-2'] and all(r['state'] == 'active' for r in d)"
ok "baremetal allocation list --node" \
    "${BAREMETAL[@]}" baremetal allocation list --node bm-2 -f json
check "[r['name'] for r in d] == ['alloc-2']"
ok "baremetal allocation show by name" \
    "${BAREMETAL[@]}" baremetal allocation show alloc-1 -f json
check "d['node_uuid'] == '$BM1_UUID' and d['extra'] == {'team': 'web'} and d['state'] == 'active'"
ALLOC1_UUID=$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["uuid"])' 2>/dev/null) \
    || ALLOC1_UUID=unknown
ok "baremetal node show carries its allocation" \
    "${BAREMETAL[@]}" baremetal node show bm-1 -f json
check "d['allocation_uuid'] == '$ALLOC1_UUID'"
fails "baremetal allocation show (unknown)" "Allocation nowhere could not be found" \
    "${BAREMETAL[@]}" baremetal allocation show nowhere
fails "baremetal node delete (allocated node)" "HTTP 409" \
    "${BAREMETAL[@]}" baremetal node delete bm-1
ok "baremetal allocation delete" \
    "${BAREMETAL[@]}" baremetal allocation delete alloc-1 alloc-2
ok "baremetal allocation list (empty)" \
    "${BAREMETAL[@]}" baremetal allocation list -f json
check "d == []"
ok "baremetal node delete" \
    "${BAREMETAL[@]}" baremetal node delete bm-1 "$BM2_UUID"
ok "baremetal node list (empty)" \
    "${BAREMETAL[@]}" baremetal node list -f json
check "d == []"
fails "baremetal node show (deleted)" "could not be found (HTTP 404)" \
    "${BAREMETAL[@]}" baremetal node show bm-1

# --- 4. Keystone mode: password authentication, berth found through the catalog --------------

keystone_mode() {
    log ""
    log "### Keystone mode"
    bash scripts/keystone.sh install || die "cannot install Keystone (scripts/keystone.sh install)"
    local ks_dir=$TMP/keystone ks_port deadline
    ks_port=$(free_port)
    KS_URL=http://127.0.0.1:$ks_port/v3
    local admin_pw=admin-secret member_pw=member-secret berth_pw=berth-secret
    log "==> keystone: setup and serve at $KS_URL"
    BERTH_KEYSTONE_ADMIN_PASSWORD=$admin_pw bash scripts/keystone.sh setup "$ks_dir" "$ks_port" \
        || die "Keystone setup failed"
    bash scripts/keystone.sh serve "$ks_dir" "$ks_port" >>"$TMP/keystone.out" 2>&1 &
    KEYSTONE_PID=$!
    deadline=$((SECONDS + 90))
    until curl -sf --noproxy "*" --max-time 2 "$KS_URL" >/dev/null; do
        kill -0 "$KEYSTONE_PID" 2>/dev/null || die "Keystone exited: $(tail -n 20 "$ks_dir/gunicorn.log")"
        ((SECONDS < deadline)) || die "Keystone did not answer $KS_URL within 90s"
        sleep 0.5
    done
    log "    Keystone at $KS_URL (pid $KEYSTONE_PID)"

    local -a cloud=(--os-auth-url "$KS_URL" --os-user-domain-id default --os-project-domain-id default
        --os-region-name RegionOne --os-interface public)
    KS_ADMIN=("$OPENSTACK" "${cloud[@]}" --os-username admin --os-password "$admin_pw" --os-project-name admin)
    KS_MEMBER=("$OPENSTACK" "${cloud[@]}" --os-username demo-member --os-password "$member_pw" --os-project-name demo)
    KS_BLAZAR_MEMBER=("$BLAZAR" --os-auth-type password "${cloud[@]}" --os-username demo-member
        --os-password "$member_pw" --os-project-name demo)

    # berth with --auth keystone, validating tokens as user `berth` (role service in `service`).
    stop_berth
    cat >"$TMP/berth-keystone.toml" <<TOML
auth = "keystone"
[keystone]
auth_url = "$KS_URL"
username = "berth"
password = "$berth_pw"
project_name = "service"
TOML
    SERVER_RUN=keystone
    start_server --config "$TMP/berth-keystone.toml"

    ok "keystone: project create service" "${KS_ADMIN[@]}" project create service -f json
    ok "keystone: project create demo" "${KS_ADMIN[@]}" project create demo -f json
    ok "keystone: user create berth" "${KS_ADMIN[@]}" user create --password "$berth_pw" berth -f json
    ok "keystone: user create demo-member" "${KS_ADMIN[@]}" user create --password "$member_pw" demo-member -f json
    ok "keystone: role add service to berth" "${KS_ADMIN[@]}" role add --project service --user berth service
    ok "keystone: role add member to demo-member" "${KS_ADMIN[@]}" role add --project demo --user demo-member member
    local entry name type path
    for entry in "placement placement /placement" "blazar reservation /reservation/v1" "ironic baremetal /baremetal"; do
        read -r name type path <<<"$entry"
        ok "keystone: service create $type" "${KS_ADMIN[@]}" service create --name "$name" "$type" -f json
        ok "keystone: endpoint create $type" \
            "${KS_ADMIN[@]}" endpoint create --region RegionOne "$type" public "$BASE$path" -f json
        check "d['url'] == '$BASE$path' and d['service_type'] == '$type'"
    done
    ok "keystone: catalog list" "${KS_ADMIN[@]}" catalog list -f json
    check "{'placement', 'reservation', 'baremetal'} <= {row['Type'] for row in d}"

    # Every surface answers version discovery where keystoneauth looks from its catalog entry.
    ok "keystoneauth discovers each service from the catalog" "$VENV/bin/python" -c '
import sys
from keystoneauth1 import adapter, loading, session
auth = loading.get_plugin_loader("password").load_from_options(
    auth_url=sys.argv[1], username="admin", password=sys.argv[2], project_name="admin",
    user_domain_id="default", project_domain_id="default")
s = session.Session(auth=auth)
for service_type in ("placement", "reservation", "baremetal"):
    data = adapter.Adapter(s, service_type=service_type, region_name="RegionOne",
                           min_version="1", max_version="1.latest").get_endpoint_data()
    print(service_type, data.url, data.api_version, data.min_microversion, data.max_microversion)
' "$KS_URL" "$admin_pw"
    check "any(l.split()[0] == 'placement' and l.endswith('(1, 0) (1, 39)') for l in lines)"
    check "any(l.split()[0] == 'reservation' and '(1, 0)' in l for l in lines)"
    check "any(l.split()[0] == 'baremetal' and '(1, 0)' in l for l in lines)"

    # Placement: admin only (or a service), found through the catalog, negotiating its version.
    ok "keystone: resource provider create (admin)" \
        "${KS_ADMIN[@]}" --os-placement-api-version 1.39 resource provider create --uuid "$RP1" ks-cn1 -f json
    check "d['uuid'] == '$RP1' and d['name'] == 'ks-cn1'"
    ok "keystone: resource provider list (admin, negotiated microversion)" \
        "${KS_ADMIN[@]}" --debug resource provider list -f json
    check "[r['name'] for r in d] == ['ks-cn1']"
    check "'$BASE/placement/resource_providers' in err and 'X-Auth-Token: {SHA256}' in err"
    fails "keystone: resource provider list (member: policy)" "HTTP 403" \
        "${KS_MEMBER[@]}" resource provider list

    # Reservation: admin enrols a host, a member leases it and sees only its project's leases.
    ok "keystone: blazar host-create (admin)" \
        "$BLAZAR" --os-auth-type password "${cloud[@]}" --os-username admin --os-password "$admin_pw" \
        --os-project-name admin host-create --extra vcpus=8 --extra memory_mb=16384 --extra local_gb=100 ks-compute-1 -f json
    check "d['hypervisor_hostname'] == 'ks-compute-1'"
    fails "keystone: blazar host-list (member: policy)" "Policy does not allow" \
        "${KS_BLAZAR_MEMBER[@]}" host-list
    ok "keystone: blazar lease-create (member)" \
        "${KS_BLAZAR_MEMBER[@]}" lease-create --physical-reservation 'min=1,max=1,hypervisor_properties=,resource_properties=' \
        --start-date "$HOST_START" --end-date "$HOST_END" ks-lease -f json
    check "d['name'] == 'ks-lease'"
    ok "keystone: openstack reservation lease list (member)" \
        "${KS_MEMBER[@]}" reservation lease list -f json
    check "[r['name'] for r in d] == ['ks-lease']"
    ok "keystone: openstack project show demo" "${KS_ADMIN[@]}" project show demo -f value -c id
    local demo_id=$OUT
    ok "keystone: openstack reservation lease show (member)" \
        "${KS_MEMBER[@]}" reservation lease show ks-lease -f json
    check "d['project_id'] == '$demo_id'"
    ok "keystone: blazar lease-delete (member)" "${KS_BLAZAR_MEMBER[@]}" lease-delete ks-lease

    # Bare metal: a node enrolled with an admin token, listed and shown by the Ironic client.
    local token
    token=$(value "${KS_ADMIN[@]}" token issue -f value -c id) || token=none
    STEP=$((STEP + 1))
    log "==> [$STEP] keystone: enrol a node with an admin token (curl)"
    OUT=$(curl -s --noproxy "*" --max-time 10 -X POST -H "X-Auth-Token: $token" -H 'Content-Type: application/json' \
        "$BASE/baremetal/v1/nodes" -d '{"name": "ks-node-1", "resource_class": "baremetal-gold",
        "provision_state": "available", "properties": {"cpus": 8}}') || true
    ERR=""
    LAST_OK=1
    check "d['name'] == 'ks-node-1'"
    ok "keystone: openstack baremetal node list (admin)" "${KS_ADMIN[@]}" baremetal node list -f json
    check "[r['name'] for r in d] == ['ks-node-1'] and d[0]['provision_state'] == 'available'"
    ok "keystone: openstack baremetal node show (member)" "${KS_MEMBER[@]}" baremetal node show ks-node-1 -f json
    check "d['name'] == 'ks-node-1' and d['resource_class'] == 'baremetal-gold'"
    # A member's allocation is its project's; the admin sees every project's.
    ok "keystone: openstack baremetal allocation create (member)" \
        "${KS_MEMBER[@]}" baremetal allocation create --resource-class baremetal-gold --name ks-alloc -f json
    check "d['state'] == 'active' and d['owner'] == '$demo_id' and d['name'] == 'ks-alloc'"
    ok "keystone: openstack baremetal allocation list (admin)" \
        "${KS_ADMIN[@]}" baremetal allocation list -f json
    check "[r['name'] for r in d] == ['ks-alloc']"
    ok "keystone: openstack baremetal allocation delete (member)" \
        "${KS_MEMBER[@]}" baremetal allocation delete ks-alloc
    fails "keystone: wrong password (refused by Keystone)" "HTTP 401" \
        "$OPENSTACK" "${cloud[@]}" --os-username demo-member --os-password wrong --os-project-name demo \
        baremetal node list
}

if [[ ${BERTH_CLIENTS_KEYSTONE:-1} != 0 || ${CI:-} == true ]]; then
    keystone_mode
else
    log "openstack-clients: SKIPPED the Keystone mode (BERTH_CLIENTS_KEYSTONE=0)"
fi

# --- 5. result ----------------------------------------------------------------------------------

log ""
if ((FAILED > 0)); then
    log "failed steps:"
    printf '  %s\n' "${FAILURES[@]}"
    log "openstack-clients: $PASSED passed, $FAILED failed"
    exit 1
fi
log "openstack-clients: $PASSED passed, 0 failed"

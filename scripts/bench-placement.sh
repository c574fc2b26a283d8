#!/usr/bin/env bash
# Side-by-side load measurement of berth and OpenStack Placement, plus berth's allocation-write
# throughput, in one run. Prints a table at the end.
#
# Usage: bash scripts/bench-placement.sh
#
# What it does:
#   1. builds `berth` and `berth-load` in release mode;
#   2. installs OpenStack Placement (openstack-placement==16.0.0 from PyPI) and gunicorn into a
#      virtualenv (reused when it already matches), writes a placement.conf (SQLite file,
#      auth_strategy = noauth2) in a temporary directory and runs `placement-manage db sync`;
#   3. serves Placement's WSGI app `placement.wsgi.api:application` with gunicorn, ONE sync
#      worker with one thread, mounted at /placement on 127.0.0.1; serves berth
#      (`berth serve`, SQLite in a fresh data dir) on 127.0.0.1;
#   4. for each N in BENCH_SIZES grows both servers to N providers with `berth-load populate` and
#      times the same `berth-load get` invocation against each:
#        GET /placement/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048&member_of=!in:A,B
#      and the same with &limit=10;
#   5. times `berth-load put-allocations` (32 clients) against a fresh berth with 1,000 providers;
#   6. kills every process it started by PID and removes its temporary directory.
#
# Environment:
#   BENCH_SIZES                  provider counts [default: "100 1000 5000 10000"]
#   BERTH_REQUESTS               measured GETs per query on berth [default: 200]
#   PLACEMENT_REQUESTS           measured GETs per query on Placement [default: 20]
#   PLACEMENT_MAX_PROVIDERS      largest N measured on Placement [default: 10000]
#   PLACEMENT_POPULATE_SECONDS   time budget for populating Placement, all sizes together; a size
#                                whose estimated population time exceeds what is left is skipped
#                                for Placement (and so are the larger ones) [default: 720]
#   BENCH_WRITES                 allocation writes [default: 5000]
#   BENCH_WRITE_CLIENTS          concurrent writers [default: 32]
#   BENCH_WRITE_PROVIDERS        providers in the write test [default: 1000]
#   PLACEMENT_VENV               virtualenv for Placement [default: target/placement-venv]
#   PLACEMENT_PYTHON             interpreter that creates the virtualenv, >= 3.11 [default: python3]
#   BENCH_RESULTS                directory for the raw JSON results [default: target/bench-placement]
#   BERTH_BIN                    a berth binary to measure instead of building this tree's
#
# Every server listens on 127.0.0.1 only, and every load loop is bounded by a request count and by
# berth-load's --max-seconds.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SCRIPT=bench-placement
source scripts/common.sh

SIZES=${BENCH_SIZES:-"100 1000 5000 10000"}
BERTH_REQUESTS=${BERTH_REQUESTS:-200}
PLACEMENT_REQUESTS=${PLACEMENT_REQUESTS:-20}
PLACEMENT_MAX_PROVIDERS=${PLACEMENT_MAX_PROVIDERS:-10000}
PLACEMENT_POPULATE_SECONDS=${PLACEMENT_POPULATE_SECONDS:-720}
WRITES=${BENCH_WRITES:-5000}
WRITE_CLIENTS=${BENCH_WRITE_CLIENTS:-32}
WRITE_PROVIDERS=${BENCH_WRITE_PROVIDERS:-1000}
VENV=${PLACEMENT_VENV:-target/placement-venv}
PYTHON=${PLACEMENT_PYTHON:-python3}
RESULTS=${BENCH_RESULTS:-target/bench-placement}

PLACEMENT_PIN=16.0.0
GUNICORN_PIN=27.0.1
AGG_A=aaaaaaaa-0000-4000-8000-000000000001
AGG_B=bbbbbbbb-0000-4000-8000-000000000002
QUERY="/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048&member_of=!in:$AGG_A,$AGG_B"
BERTH=${BERTH_BIN:-target/release/berth}
LOAD=target/release/berth-load

log() { printf '%s\n' "$*" >&2; }
# --- processes and cleanup --------------------------------------------------------------------

TMP=$(mktemp -d -t bench-placement.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits until GET URL answers 200, or fails after 60 s or when process PID died.
# Starts berth with a fresh data dir; sets BERTH_URL.
start_berth() {
    local name=$1 port
    port=$(free_port)
    env -u BERTH_CONFIG -u BERTH_DATABASE -u BERTH_AUTH -u BERTH_TOKENS -u BERTH_DEMO \
        -u BERTH_LISTEN -u BERTH_DATA_DIR NO_COLOR=1 \
        "$BERTH" serve --listen "127.0.0.1:$port" --data-dir "$TMP/$name" \
        >"$TMP/$name.log" 2>&1 &
    PIDS+=($!)
    wait_ready "http://127.0.0.1:$port/healthz" "$!" "$TMP/$name.log" 60 -H 'X-Auth-Token: admin'
    BERTH_URL=http://127.0.0.1:$port/placement
    log "==> berth ($name) at $BERTH_URL, pid $!"
}

# --- 1. build ---------------------------------------------------------------------------------

if [[ -n ${BERTH_BIN:-} ]]; then
    log "==> cargo build --release --bin berth-load (berth: $BERTH_BIN)"
    cargo build --release --quiet --bin berth-load
    BERTH_SOURCE="given binary $BERTH_BIN"
else
    log "==> cargo build --release --bin berth --bin berth-load"
    cargo build --release --quiet --bin berth --bin berth-load
    BERTH_SOURCE="built from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] ||
        BERTH_SOURCE="$BERTH_SOURCE with uncommitted changes"
fi
[[ -x $BERTH ]] || die "no berth binary at $BERTH"
# Private copies, so that a rebuild of the work tree during the run changes nothing measured.
cp "$BERTH" "$TMP/berth-bin"
cp "$LOAD" "$TMP/berth-load-bin"
BERTH=$TMP/berth-bin
LOAD=$TMP/berth-load-bin

# --- 2. Placement in a virtualenv ---------------------------------------------------------------

# Prints the installed Placement version, or nothing.
placement_version() {
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("openstack-placement"))' \
        2>/dev/null || true
}

if [[ -x $VENV/bin/gunicorn && -x $VENV/bin/placement-manage && -n $(placement_version) ]]; then
    log "==> reusing $VENV (openstack-placement $(placement_version))"
else
    log "==> installing openstack-placement==$PLACEMENT_PIN and gunicorn==$GUNICORN_PIN into $VENV"
    [[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "openstack-placement==$PLACEMENT_PIN" "gunicorn==$GUNICORN_PIN"; then
        log "    openstack-placement==$PLACEMENT_PIN did not install; taking the newest that does"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            openstack-placement gunicorn
    fi
fi
PLACEMENT_VERSION=$(placement_version)
[[ -n $PLACEMENT_VERSION ]] || die "openstack-placement is not installed in $VENV"

# Placement reads $OS_PLACEMENT_CONFIG_DIR/placement.conf (placement/wsgi/__init__.py).
mkdir -p "$TMP/placement"
cat >"$TMP/placement/placement.conf" <<EOF
[DEFAULT]
debug = False

[placement_database]
connection = sqlite:///$TMP/placement/placement.db

[api]
auth_strategy = noauth2
EOF
"$VENV/bin/placement-manage" --config-file "$TMP/placement/placement.conf" db sync

PLACEMENT_PORT=$(free_port)
OS_PLACEMENT_CONFIG_DIR=$TMP/placement SCRIPT_NAME=/placement \
    "$VENV/bin/gunicorn" --workers 1 --threads 1 --worker-class sync --timeout 600 \
    --no-control-socket --bind "127.0.0.1:$PLACEMENT_PORT" \
    'placement.wsgi.api:application' >"$TMP/placement.log" 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$PLACEMENT_PORT/placement/" "$!" "$TMP/placement.log" 60 -H 'X-Auth-Token: admin'
PLACEMENT_URL=http://127.0.0.1:$PLACEMENT_PORT/placement
log "==> OpenStack Placement $PLACEMENT_VERSION (gunicorn, 1 sync worker) at $PLACEMENT_URL, pid $!"

start_berth berth
READ_URL=$BERTH_URL

# --- 3. reads -----------------------------------------------------------------------------------

rm -rf "$RESULTS"
mkdir -p "$RESULTS"

# measure SERVER URL N NAME PATH REQUESTS: one `berth-load get`, JSON kept in $RESULTS.
measure() {
    local server=$1 url=$2 n=$3 name=$4 path=$5 requests=$6
    log "    $server N=$n $name: berth-load get --path '$path' --requests $requests"
    "$LOAD" get --url "$url" --path "$path" --requests "$requests" --concurrency 1 \
        --warmup 3 --max-seconds 600 --json >"$RESULTS/$server-$n-$name.json"
}

# populate SERVER URL N: grows the server to N providers; prints the seconds it took.
populate() {
    local server=$1 url=$2 n=$3 max=$4 start=$SECONDS
    log "    $server: berth-load populate --providers $n"
    "$LOAD" populate --url "$url" --providers "$n" --concurrency 8 --max-seconds "$max" >&2
    printf '%s\n' $((SECONDS - start))
}

PLACEMENT_ON=1
PLACEMENT_HELD=0
PLACEMENT_SPENT=0
: >"$RESULTS/notes.txt"
for n in $SIZES; do
    log "==> N=$n"
    secs=$(populate berth "$READ_URL" "$n" 600)
    printf 'populate berth %s %s\n' "$n" "$secs" >>"$RESULTS/notes.txt"
    measure berth "$READ_URL" "$n" all "$QUERY" "$BERTH_REQUESTS"
    measure berth "$READ_URL" "$n" limit10 "$QUERY&limit=10" "$BERTH_REQUESTS"

    ((PLACEMENT_ON)) || continue
    if ((n > PLACEMENT_MAX_PROVIDERS)); then
        printf 'skip placement %s above PLACEMENT_MAX_PROVIDERS=%s\n' "$n" \
            "$PLACEMENT_MAX_PROVIDERS" >>"$RESULTS/notes.txt"
        PLACEMENT_ON=0
        continue
    fi
    left=$((PLACEMENT_POPULATE_SECONDS - PLACEMENT_SPENT))
    if ((PLACEMENT_HELD > 0 && PLACEMENT_SPENT > 0)); then
        estimate=$(((n - PLACEMENT_HELD) * PLACEMENT_SPENT / PLACEMENT_HELD))
        if ((estimate > left)); then
            printf 'skip placement %s estimated population %ss over the %ss left\n' "$n" \
                "$estimate" "$left" >>"$RESULTS/notes.txt"
            log "    Placement: skipping N=$n (estimated ${estimate}s of population, ${left}s left)"
            PLACEMENT_ON=0
            continue
        fi
    fi
    secs=$(populate placement "$PLACEMENT_URL" "$n" "$((left > 60 ? left : 60))")
    PLACEMENT_SPENT=$((PLACEMENT_SPENT + secs))
    PLACEMENT_HELD=$n
    printf 'populate placement %s %s\n' "$n" "$secs" >>"$RESULTS/notes.txt"
    measure placement "$PLACEMENT_URL" "$n" all "$QUERY" "$PLACEMENT_REQUESTS"
    measure placement "$PLACEMENT_URL" "$n" limit10 "$QUERY&limit=10" "$PLACEMENT_REQUESTS"
done

# --- 4. writes ----------------------------------------------------------------------------------

log "==> allocation writes: fresh berth, $WRITE_PROVIDERS providers, $WRITES writes, $WRITE_CLIENTS clients"
start_berth berth-writes
populate berth-writes "$BERTH_URL" "$WRITE_PROVIDERS" 600 >/dev/null
"$LOAD" put-allocations --url "$BERTH_URL" --requests "$WRITES" --concurrency "$WRITE_CLIENTS" \
    --max-seconds 120 --json >"$RESULTS/berth-writes.json"

# --- 5. table -----------------------------------------------------------------------------------

printf 'placement_version %s\n' "$PLACEMENT_VERSION" >>"$RESULTS/notes.txt"
printf 'berth %s\n' "$BERTH_SOURCE" >>"$RESULTS/notes.txt"
python3 - "$RESULTS" "$SIZES" "$WRITES" "$WRITE_CLIENTS" "$WRITE_PROVIDERS" <<'PY'
import json
import os
import sys

results, sizes, writes, clients, providers = sys.argv[1:6]


def load(name):
    path = os.path.join(results, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None


def cell(r):
    if r is None:
        return "skipped"
    return f"{r['median_ms']:.2f} / {r['p90_ms']:.2f} / {r['p99_ms']:.2f}"


notes = open(os.path.join(results, "notes.txt")).read().splitlines()
version = [n.split()[1] for n in notes if n.startswith("placement_version")][0]
print()
print(f"allocation_candidates, one client; ms median / p90 / p99 (OpenStack Placement {version})")
print(f"{'N':>6}  {'query':<8}  {'berth':<24}  {'Placement':<26}  {'ratio (median)':>14}")
for n in sizes.split():
    for query in ("all", "limit10"):
        b = load(f"berth-{n}-{query}")
        p = load(f"placement-{n}-{query}")
        ratio = f"{p['median_ms'] / b['median_ms']:.0f}x" if b and p else "-"
        print(f"{n:>6}  {query:<8}  {cell(b):<24}  {cell(p):<26}  {ratio:>14}")
print()
print("candidates returned (largest body, bytes):")
for n in sizes.split():
    b = load(f"berth-{n}-all")
    p = load(f"placement-{n}-all")
    print(f"  N={n}: berth {b['max_response_bytes'] if b else '-'}, "
          f"Placement {p['max_response_bytes'] if p else '-'}")
w = load("berth-writes")
print()
print(f"berth allocation writes (SQLite, {providers} providers, {clients} clients, {writes} writes):")
print(f"  {w['ok_per_s']:.0f} writes/s, {w['ok']} x 204 of {w['finished']}, "
      f"latency ms median {w['median_ms']:.2f} / p90 {w['p90_ms']:.2f} / p99 {w['p99_ms']:.2f}")
print()
print("notes:")
for line in notes:
    print("  " + line)
PY

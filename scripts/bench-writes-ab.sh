#!/usr/bin/env bash
# A/B of two berth binaries on plain writes, those that use none of the features added between
# them: lease creates (`berth-load create-leases`: 100 hosts, 5,000 single-instance leases, 32
# clients), the same sent each with its own `Idempotency-Key` (`--keyed`), and allocation writes
# (`berth-load put-allocations`: 200 providers from `berth-load populate`, 5,000 new consumers,
# 32 clients), each on a fresh SQLite data directory, or with BENCH_POSTGRES set on a fresh
# PostgreSQL database (one replica), the two binaries alternating (which goes first alternates
# too), ROUNDS rounds.
#
# Usage: bash scripts/bench-writes-ab.sh OLD_BERTH NEW_BERTH BERTH_LOAD [ROUNDS]
#   (ROUNDS defaults to 3; build the binaries with `cargo build --release`)
#   BENCH_POSTGRES   a PostgreSQL server URL without a database, e.g.
#                    postgres://postgres@127.0.0.1:5432: each server is given a fresh database
#                    `berth_writes_ab` on it (created with psql; dropped on exit)
#
# Prints one line per round, side and kind of write: writes per second and latency (median /
# p99 ms), then the medians. Every server it starts is stopped by PID on exit and its data
# directory removed; every server listens on 127.0.0.1.
set -euo pipefail
SCRIPT=bench-writes-ab
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
(($# >= 3)) || die "usage: bash scripts/bench-writes-ab.sh OLD_BERTH NEW_BERTH BERTH_LOAD [ROUNDS]"
OLD=$1
NEW=$2
LOAD=$3
ROUNDS=${4:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number, got $ROUNDS"
for binary in "$OLD" "$NEW" "$LOAD"; do
    [[ -x $binary ]] || die "not an executable: $binary"
done
POSTGRES=${BENCH_POSTGRES:-}
DATABASE=berth_writes_ab
if [[ -n $POSTGRES ]]; then
    command -v psql >/dev/null || die "psql is needed to create and drop the database"
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/berth-writes-ab.XXXXXX")
PID=
cleanup() {
    [[ -z $PID ]] || { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
    [[ -z $POSTGRES ]] || psql_admin -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" || true
    rm -rf "$TMP"
}
trap cleanup EXIT
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export NO_PROXY=$no_proxy

# serve NAME BINARY: serves the binary on a fresh data directory (and a fresh database, with
# BENCH_POSTGRES); sets BASE and PID.
serve() {
    local name=$1 binary=$2 port database=()
    port=$(free_port)
    rm -rf "${TMP:?}/$name"
    mkdir -p "$TMP/$name"
    if [[ -n $POSTGRES ]]; then
        psql_admin -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)"
        psql_admin -c "CREATE DATABASE $DATABASE"
        database=(--database "$POSTGRES/$DATABASE")
    fi
    env -u BERTH_CONFIG -u BERTH_DATABASE -u BERTH_AUTH -u BERTH_DEMO \
        "$binary" serve --data-dir "$TMP/$name" --listen "127.0.0.1:$port" "${database[@]}" \
        >"$TMP/$name.log" 2>&1 &
    PID=$!
    BASE=http://127.0.0.1:$port
    wait_ready "$BASE/healthz" "$PID" "$TMP/$name.log"
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=
}

# figures JSON: "writes/s median/p99" from berth-load's JSON result.
figures() {
    python3 -c 'import json, sys
r = json.loads(sys.argv[1].strip().splitlines()[-1])
print("%.0f %.1f %.1f" % (r["ok_per_s"], r["median_ms"], r["p99_ms"]))' "$1"
}

# measure SIDE BINARY: one lease run and one allocation run, each on a fresh server.
measure() {
    local side=$1 binary=$2 out
    serve "$side-leases" "$binary"
    out=$("$LOAD" create-leases --url "$BASE" --hosts 100 --leases 5000 --concurrency 32 --json)
    stop
    printf '%s leases %s\n' "$side" "$(figures "$out")" | tee -a "$TMP/results"
    serve "$side-keyed" "$binary"
    out=$("$LOAD" create-leases --url "$BASE" --hosts 100 --leases 5000 --concurrency 32 --keyed --json)
    stop
    printf '%s keyed-leases %s\n' "$side" "$(figures "$out")" | tee -a "$TMP/results"
    serve "$side-allocations" "$binary"
    "$LOAD" populate --url "$BASE/placement" --providers 200 >/dev/null
    out=$("$LOAD" put-allocations --url "$BASE/placement" --requests 5000 --concurrency 32 --json)
    stop
    printf '%s allocations %s\n' "$side" "$(figures "$out")" | tee -a "$TMP/results"
}

for round in $(seq 1 "$ROUNDS"); do
    printf 'round %s (load %s)\n' "$round" "$(cut -d' ' -f1-3 /proc/loadavg)"
    if ((round % 2)); then
        measure old "$OLD"
        measure new "$NEW"
    else
        measure new "$NEW"
        measure old "$OLD"
    fi
done
python3 - "$TMP/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, kind, rate, *_ = line.split()
    rows.setdefault((kind, side), []).append(float(rate))
for kind in ("leases", "keyed-leases", "allocations"):
    old, new = statistics.median(rows[(kind, "old")]), statistics.median(rows[(kind, "new")])
    print(f"median {kind}: old {old:.0f}/s, new {new:.0f}/s ({100 * new / old:.0f}%)")
PY

#!/usr/bin/env bash
# A/B of two berth binaries on the allocation-candidates query of scripts/bench-placement.sh: both
# serve side by side (SQLite, 127.0.0.1), are filled with the same N providers by
# `berth-load populate`, then are measured in turn, ROUNDS times each, 200 requests per query,
# one client: the full answer and `limit=10`.
#
# Usage: bash scripts/bench-ab.sh OLD_BERTH NEW_BERTH BERTH_LOAD [N [ROUNDS]]
#   (N defaults to 5000, ROUNDS to 3; build the binaries with `cargo build --release`)
#
# Prints one line per round, side and query with berth-load's figures (milliseconds). Every
# server it starts is killed by PID on exit and its data directory removed.
set -euo pipefail
SCRIPT=bench-ab
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OLD=$1
NEW=$2
LOAD=$3
N=${4:-5000}
ROUNDS=${5:-3}
AGG_A=aaaaaaaa-0000-4000-8000-000000000001
AGG_B=bbbbbbbb-0000-4000-8000-000000000002
QUERY="/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048&member_of=!in:$AGG_A,$AGG_B"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/berth-ab.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export NO_PROXY=$no_proxy

# start NAME BINARY: serves the binary on a free port; sets URL to its Placement URL (not run
# in a subshell, so that the server's PID is kept for the cleanup).
start() {
    local name=$1 binary=$2 port
    port=$(free_port)
    mkdir -p "$TMP/$name"
    "$binary" serve --data-dir "$TMP/$name" --listen "127.0.0.1:$port" >"$TMP/$name.log" 2>&1 &
    PIDS+=($!)
    wait_ready "http://127.0.0.1:$port/healthz" "$!" "$TMP/$name.log" 30
    URL="http://127.0.0.1:$port/placement"
}

start old "$OLD"
OLD_URL=$URL
start new "$NEW"
NEW_URL=$URL
for url in "$OLD_URL" "$NEW_URL"; do
    "$LOAD" populate --url "$url" --providers "$N" --concurrency 8 --max-seconds 600 >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
    for side in old new; do
        url=$OLD_URL
        [[ $side == new ]] && url=$NEW_URL
        for query in all limit10; do
            path=$QUERY
            [[ $query == limit10 ]] && path="$QUERY&limit=10"
            "$LOAD" get --url "$url" --path "$path" --requests 200 --concurrency 1 --warmup 3 \
                --max-seconds 300 --json >"$TMP/result.json"
            python3 - "$TMP/result.json" "$round" "$side" "$query" <<'PY'
import json
import sys

figures = json.load(open(sys.argv[1]))
print("round %s %s %-8s median %.3f  p90 %.3f  p99 %.3f ms" % (
    sys.argv[2], sys.argv[3], sys.argv[4],
    figures["median_ms"], figures["p90_ms"], figures["p99_ms"]))
PY
        done
    done
done

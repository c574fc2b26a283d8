#!/usr/bin/env bash
# Replicas of berth over one PostgreSQL database: writes to one replica and round robin, how soon
# a write on one replica shows on another, and the first read after a foreign write, for 1, 2
# and 3 replicas. Prints a table at the end.
#
# Usage: bash scripts/bench-replicas.sh [HOSTS [LEASES]]      (default 3000 hosts, 50000 leases)
#        bash scripts/bench-replicas.sh 200 2000               (a smoke run)
#
# Build the binaries first (the script does not build):
#   nice -n 19 cargo build --release -p berth-server -p berth-load
#
# What it does:
#   1. copies target/release/berth and target/release/berth-load aside (a rebuild during the run
#      changes nothing measured);
#   2. creates a fresh database BENCH_DATABASE_populated on BENCH_POSTGRES (dropped first if it
#      exists);
#   3. serves one berth on it (127.0.0.1, a free port) and populates HOSTS Blazar hosts and
#      LEASES leases with `berth-load create-leases`, then stops it; or, with
#      BENCH_PREPOPULATED=1, writes them straight into the database with `berth-load
#      populate-store` (hosts cn00000..., single-reservation leases over 2027; no server);
#   4. for each R in BENCH_REPLICAS copies that database to BENCH_DATABASE (`CREATE DATABASE
#      ... TEMPLATE`: every count starts from the same rows, none from what an earlier count
#      wrote), starts R replicas over it (each on 127.0.0.1, its own free port and data dir),
#      times how long each takes to answer /healthz, runs `berth-load replicas` against them
#      (--seed R, so each count writes its own leases and consumers) and stops them; all of it
#      BENCH_ROUNDS times, every round in the reverse order of the one before (1 3, 3 1, 1 3,
#      ...), so that a machine whose speed drifts over minutes moves every count alike; a
#      checkpoint follows the population and precedes each count, so none starts with
#      another's dirty pages left to flush;
#   5. stops every process it started by its pid and drops both databases (trap on exit);
#   6. prints each count's figures (of the first round), then each count's write throughput
#      against one replica's in the same round, round by round, and the median over the rounds.
#
# Environment:
#   BENCH_PREPOPULATED      1: populate with `berth-load populate-store`, not over HTTP [default: 0]
#   BENCH_REPLICAS          replica counts to measure [default: "1 2 3"]
#   BENCH_ROUNDS            times to measure every count, alternating [default: 1]
#   BENCH_REQUESTS          writes of each kind per write scenario [default: 2000]
#   BENCH_SAMPLES           samples per visibility / read-after-write scenario [default: 200]
#   BENCH_CLIENTS           concurrent clients of the write scenarios [default: 16]
#   BENCH_SCENARIO_SECONDS  longest one scenario runs [default: 120]
#   BENCH_FIRST_FOLLOWER    1: "replica 1" (where the one-replica scenario writes) is the last
#                           replica started, a follower that forwards its writes, not the first,
#                           which takes the writer's term (each count starts once the previous
#                           count's term has lapsed) [default: 0]
#   BENCH_POSTGRES          server URL, without a database [default: postgres://postgres@127.0.0.1:5432]
#   BENCH_DATABASE          database to create and drop, and with `_populated` after it, the
#                           populated copy each count starts from [default: berth_bench_replicas]
#   BENCH_RESULTS           directory for the raw JSON results [default: target/bench-replicas]
#   BERTH_BIN, BERTH_LOAD_BIN  the binaries [default: target/release/berth, target/release/berth-load]
#
# Every server listens on 127.0.0.1 only; every wait and every load loop is bounded.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SCRIPT=bench-replicas
source scripts/common.sh

HOSTS=${1:-3000}
LEASES=${2:-50000}
PREPOPULATED=${BENCH_PREPOPULATED:-0}
REPLICAS=${BENCH_REPLICAS:-"1 2 3"}
REQUESTS=${BENCH_REQUESTS:-2000}
SAMPLES=${BENCH_SAMPLES:-200}
CLIENTS=${BENCH_CLIENTS:-16}
ROUNDS=${BENCH_ROUNDS:-1}
SCENARIO_SECONDS=${BENCH_SCENARIO_SECONDS:-120}
POSTGRES=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432}
DATABASE=${BENCH_DATABASE:-berth_bench_replicas}
RESULTS=${BENCH_RESULTS:-target/bench-replicas}
BERTH=${BERTH_BIN:-target/release/berth}
LOAD=${BERTH_LOAD_BIN:-target/release/berth-load}

log() { printf '%s\n' "$*" >&2; }
[[ $HOSTS =~ ^[0-9]+$ && $HOSTS -gt 0 ]] || die "HOSTS must be a positive number, got $HOSTS"
[[ $LEASES =~ ^[0-9]+$ ]] || die "LEASES must be a number, got $LEASES"
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -gt 0 ]] || die "BENCH_ROUNDS must be a positive number, got $ROUNDS"
[[ $PREPOPULATED =~ ^[01]$ ]] || die "BENCH_PREPOPULATED must be 0 or 1, got $PREPOPULATED"
[[ $DATABASE =~ ^[a-z_][a-z0-9_]*$ ]] || die "BENCH_DATABASE must be a plain lower-case name"
[[ $POSTGRES =~ ^postgres(ql)?://([^@/]*@)?(127\.[0-9.]+|localhost)(:[0-9]+)?/?$ ]] ||
    die "BENCH_POSTGRES must be a loopback server URL without a database, got $POSTGRES"
POSTGRES=${POSTGRES%/}
[[ -x $BERTH ]] || die "no berth binary at $BERTH (nice -n 19 cargo build --release -p berth-server -p berth-load)"
[[ -x $LOAD ]] || die "no berth-load binary at $LOAD (nice -n 19 cargo build --release -p berth-server -p berth-load)"
command -v psql >/dev/null || die "psql is needed to create and drop the database"

# --- processes, database and cleanup ----------------------------------------------------------

TMP=$(mktemp -d -t bench-replicas.XXXXXX)
PIDS=()
DB_CREATED=0
POPULATED=${DATABASE}_populated

# Stops the given pids (TERM, then KILL after 20 s) and waits for them.
stop_pids() {
    local pid tries
    for pid in "$@"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        tries=0
        while kill -0 "$pid" 2>/dev/null && ((tries < 200)); do
            sleep 0.1
            tries=$((tries + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null || true
    done
}

cleanup() {
    ((${#PIDS[@]} == 0)) || stop_pids "${PIDS[@]}"
    if ((DB_CREATED)); then
        local db
        for db in "$DATABASE" "$POPULATED"; do
            psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" ||
                log "bench-replicas: could not drop database $db"
        done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits until GET URL answers 200, or fails after 600 s or when process PID died.
# start_replica NAME [DB]: serves berth over the database DB (BENCH_DATABASE if not given); sets
# REPLICA_URL, REPLICA_PID and READY_MS (milliseconds from the start to the first 200 of
# /healthz).
start_replica() {
    local name=$1 db=${2:-$DATABASE} port start
    port=$(free_port)
    mkdir -p "$TMP/$name"
    start=$(date +%s%N)
    env -u BERTH_CONFIG -u BERTH_DATABASE -u BERTH_AUTH -u BERTH_TOKENS -u BERTH_DEMO \
        -u BERTH_LISTEN -u BERTH_DATA_DIR NO_COLOR=1 \
        "$BERTH" serve --listen "127.0.0.1:$port" --data-dir "$TMP/$name" \
        --database "$POSTGRES/$db" >"$TMP/$name.log" 2>&1 &
    REPLICA_PID=$!
    PIDS+=("$REPLICA_PID")
    wait_ready "http://127.0.0.1:$port/healthz" "$REPLICA_PID" "$TMP/$name.log" 600
    READY_MS=$((($(date +%s%N) - start) / 1000000))
    REPLICA_URL=http://127.0.0.1:$port
    log "==> berth ($name) at $REPLICA_URL, pid $REPLICA_PID, ready in $READY_MS ms"
}

# forget_pids PID...: drops stopped pids from PIDS.
forget_pids() {
    local kept=() pid gone
    for pid in "${PIDS[@]}"; do
        for gone in "$@"; do
            [[ $pid == "$gone" ]] && continue 2
        done
        kept+=("$pid")
    done
    PIDS=("${kept[@]}")
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# rss_mib PID...: the resident memory of each process in MiB, comma-separated.
rss_mib() {
    local pid out=()
    for pid in "$@"; do
        out+=("$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || echo '?')")
    done
    (
        IFS=,
        echo "${out[*]}"
    )
}

# --- 1. binaries and database -----------------------------------------------------------------

cp "$BERTH" "$TMP/berth-bin"
cp "$LOAD" "$TMP/berth-load-bin"
BERTH=$TMP/berth-bin
LOAD=$TMP/berth-load-bin

rm -rf "$RESULTS"
mkdir -p "$RESULTS"
{
    printf 'berth %s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    printf 'nproc %s\n' "$(nproc)"
    printf 'postgres %s\n' "$(psql_admin -c 'SHOW server_version')"
    printf 'hosts %s leases %s requests %s samples %s clients %s prepopulated %s rounds %s\n' \
        "$HOSTS" "$LEASES" "$REQUESTS" "$SAMPLES" "$CLIENTS" "$PREPOPULATED" "$ROUNDS"
} >"$RESULTS/notes.txt"

log "==> database $POPULATED on $POSTGRES"
psql_admin -c "DROP DATABASE IF EXISTS $POPULATED WITH (FORCE)"
DB_CREATED=1
psql_admin -c "CREATE DATABASE $POPULATED"

# --- 2. population ------------------------------------------------------------------------------

if ((PREPOPULATED)); then
    log "==> berth-load populate-store --hosts $HOSTS --leases $LEASES"
    start=$SECONDS
    "$LOAD" populate-store --database "$POSTGRES/$POPULATED" --hosts "$HOSTS" --leases "$LEASES" \
        --json >"$RESULTS/populate-store.json"
    printf 'populate-store %s s, load after %s\n' $((SECONDS - start)) "$(loadavg)" \
        >>"$RESULTS/notes.txt"
else
    start_replica populate "$POPULATED"
    printf 'load before populate %s\n' "$(loadavg)" >>"$RESULTS/notes.txt"
    log "==> berth-load create-leases --hosts $HOSTS --leases $LEASES"
    start=$SECONDS
    "$LOAD" create-leases --url "$REPLICA_URL" --hosts "$HOSTS" --leases "$LEASES" \
        --concurrency 32 --max-seconds 3600 --json >"$RESULTS/populate.json"
    printf 'populate %s s, load after %s\n' $((SECONDS - start)) "$(loadavg)" >>"$RESULTS/notes.txt"
    stop_pids "$REPLICA_PID"
    forget_pids "$REPLICA_PID"
fi

# No dirty pages left for the checkpointer: every copy starts from rows already flushed. (Not
# analyzed: ANALYZE of the empty consumers and allocations tables makes PostgreSQL plan the
# foreign-key checks of allocation writes as scans of a table it believes empty, and keep
# those plans while it grows, until autovacuum analyzes it again; docs/benchmarks.md.)
log "==> CHECKPOINT after populating $POPULATED"
psql_admin -c "CHECKPOINT"

# --- 3. replicas --------------------------------------------------------------------------------

# replicas_run R ROUND: one count, over a fresh copy of the populated database; its results go
# to replicas-R.json (the first round) or replicas-R.roundN.json.
replicas_run() {
    local r=$1 round=$2 tag=$1 urls=() started=() ready=() i sampler url_list pid_list status
    if ((round > 1)); then
        tag=$r.round$round
    fi
    log "==> $r replica(s), round $round, over a copy of $POPULATED"
    psql_admin -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)"
    psql_admin -c "CREATE DATABASE $DATABASE TEMPLATE $POPULATED STRATEGY FILE_COPY"
    psql_admin -c "CHECKPOINT"
    for i in $(seq 1 "$r"); do
        start_replica "r$r-$i"
        urls+=("$REPLICA_URL")
        started+=("$REPLICA_PID")
        ready+=("$READY_MS")
    done
    if [ "${BENCH_FIRST_FOLLOWER:-0}" = 1 ] && [ "$r" -gt 1 ]; then
        # The last started first: a follower, since the first started holds the writer's term.
        urls=("${urls[-1]}" "${urls[@]:0:$((r - 1))}")
        started=("${started[-1]}" "${started[@]:0:$((r - 1))}")
    fi
    printf 'replicas %s round %s ready_ms %s rss_mib %s load before %s\n' "$r" "$round" "${ready[*]}" \
        "$(rss_mib "${started[@]}")" "$(loadavg)" >>"$RESULTS/notes.txt"
    # Load average every 5 s during the run (a bounded sampler, stopped below).
    (for _ in $(seq 1 720); do
        printf '%s %s\n' "$(date +%T)" "$(loadavg)"
        sleep 5
    done) >"$RESULTS/load-r$tag.txt" &
    sampler=$!
    PIDS+=("$sampler")
    url_list=$(
        IFS=,
        echo "${urls[*]}"
    )
    pid_list=$(
        IFS=,
        echo "${started[*]}"
    )
    log "    berth-load replicas --url $url_list --pid $pid_list"
    status=0
    "$LOAD" replicas --url "$url_list" --pid "$pid_list" --requests "$REQUESTS" --samples "$SAMPLES" \
        --concurrency "$CLIENTS" --scenario-seconds "$SCENARIO_SECONDS" --max-seconds 3000 \
        --seed "$r" --json >"$RESULTS/replicas-$tag.json" || status=$?
    stop_pids "$sampler"
    forget_pids "$sampler"
    printf 'replicas %s round %s exit %s rss_mib %s load after %s\n' "$r" "$round" "$status" \
        "$(rss_mib "${started[@]}")" "$(loadavg)" >>"$RESULTS/notes.txt"
    stop_pids "${started[@]}"
    forget_pids "${started[@]}"
    # The writer's term of the replicas just stopped lapses 3 s after its last renewal: wait it
    # out, so that the next count's first replica takes it (and "replica 1" is the writer).
    sleep 4
}

# Odd rounds take the counts in the order given, even rounds in reverse, so no count always
# runs first (after the population, or after a given other count).
reversed=$(printf '%s\n' $REPLICAS | tac | tr '\n' ' ')
for round in $(seq 1 "$ROUNDS"); do
    order=$REPLICAS
    if ((round % 2 == 0)); then
        order=$reversed
    fi
    for r in $order; do
        replicas_run "$r" "$round"
    done
done

# --- 4. table -----------------------------------------------------------------------------------

python3 - "$RESULTS" "$REPLICAS" "$ROUNDS" <<'PY'
import json
import os
import statistics
import sys

results, counts, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])


def load(name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    return json.load(open(path))


def cell(s):
    if s is None:
        return "-"
    cut = " (cut short)" if s["cut_short"] else ""
    bad = "" if s["ok"] == s["finished"] else f" [{s['finished'] - s['ok']} not ok]"
    return (f"{s['median_ms']:.1f} / {s['p99_ms']:.1f} / {s['max_ms']:.1f} ms, "
            f"{s['ok_per_s']:.0f}/s, {s['ok']} ok{bad}{cut}")


populate = load("populate")
if populate:
    print(f"populate: {populate['ok']} leases at {populate['ok_per_s']:.0f}/s")
store = load("populate-store")
if store:
    print(f"populate-store: {store['hosts']} hosts in {store['hosts_s']:.1f} s, "
          f"{store['leases']} leases in {store['leases_s']:.1f} s")
# The write scenarios, whose throughput the counts are compared by.
writes = [
    ("one writer: lease creates", lambda j: j["one_writer"]["lease_creates"]),
    ("one writer: allocation writes", lambda j: j["one_writer"]["allocation_writes"]),
    ("round robin: lease creates", lambda j: j["round_robin"]["lease_creates"]),
    ("round robin: allocation writes", lambda j: j["round_robin"]["allocation_writes"]),
]
rows = writes + [
    ("visibility: lease", lambda j: j["visibility"]["lease_creates"]),
    ("  its writes", lambda j: j["visibility"]["lease_creates"]["writes"]),
    ("visibility: allocation", lambda j: j["visibility"]["allocation_writes"]),
    ("  its writes", lambda j: j["visibility"]["allocation_writes"]["writes"]),
    ("first read after foreign write", lambda j: j["read_after_foreign_write"]["first_read"]),
    ("  second read", lambda j: j["read_after_foreign_write"]["second_read"]),
    ("  its writes", lambda j: j["read_after_foreign_write"]["writes"]),
]
print()
print("median / p99 / max, throughput, answers as expected")
for r in counts:
    j = load(f"replicas-{r}")
    print(f"R = {r}")
    if j is None:
        print("  no result")
        continue
    for title, pick in rows:
        print(f"  {title:<32} {cell(pick(j))}")
        cpu = (pick(j) or {}).get("cpu")
        if cpu:
            print(f"  {'':<32} CPU: replicas {cpu['replicas_ms']} ms, "
                  f"PostgreSQL {cpu['postgres_ms']} ms")
        commits = (pick(j) or {}).get("commits")
        if commits:
            print(f"  {'':<32} commits: {commits} "
                  f"({pick(j)['ok'] / commits:.1f} writes per commit)")
        # Round robin: the writes each replica took (replica 1 holds the writer's term and
        # decides its own, the others forward theirs; with BENCH_FIRST_FOLLOWER=1, replica 2).
        by_replica = (pick(j) or {}).get("by_replica")
        if by_replica:
            each = ", ".join(f"{i + 1}: {s['median_ms']:.1f} / {s['p99_ms']:.1f}"
                             for i, s in enumerate(by_replica))
            print(f"  {'':<32} by replica, median / p99 ms: {each}")
    for kind in ("lease_creates", "allocation_writes"):
        print(f"  visibility {kind}: most reads one sample needed "
              f"{j['visibility'][kind]['most_reads']}")

# Each count's write throughput against one replica's in the same round: the machine's speed
# drifts over minutes, so only ratios measured side by side, and their median over rounds, say
# what a count costs.
if "1" in counts and len(counts) > 1:
    print()
    print("writes per second against one replica's in the same round (median over rounds last)")
    for r in counts:
        if r == "1":
            continue
        print(f"R = {r}")
        for title, pick in writes:
            ratios = []
            for k in range(1, rounds + 1):
                suffix = "" if k == 1 else f".round{k}"
                one, this = load(f"replicas-1{suffix}"), load(f"replicas-{r}{suffix}")
                if one is None or this is None:
                    continue
                base = pick(one)["ok_per_s"]
                if base > 0:
                    ratios.append(100 * pick(this)["ok_per_s"] / base)
            if ratios:
                each = " ".join(f"{x:.0f}%" for x in ratios)
                print(f"  {title:<32} {each}; median {statistics.median(ratios):.1f}%")
print()
print("notes:")
for line in open(os.path.join(results, "notes.txt")).read().splitlines():
    print("  " + line)
PY

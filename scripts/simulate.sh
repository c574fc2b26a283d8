#!/usr/bin/env bash
# Runs the deterministic simulator of berth's write path (crates/berth-sim) in release: a campaign
# of seeds with crashes at every commit boundary that must all pass, then the negative controls,
# which must each be caught within 200 seeds: a disk that answers before it syncs, a recovery that
# drops the last commit, and (a second build, `--features planted`) allocations not checked
# against capacity, consumer generations not checked, a batch that answers before it commits, a
# restarted berth that forgets which lease events fired, floating IPs given without looking at
# the leases that hold them, a node claim that ends but leaves its allocation on the node.
#
# Usage: bash scripts/simulate.sh                  # CI: 1,000 seeds of 450 steps, the controls
#        SIM_MINUTES=60 bash scripts/simulate.sh   # a long campaign: seeds until an hour passed
#
# A step is one to four writes sent together, or a clock move: 450 steps are about 1,000 writes,
# so the CI campaign is about 10^6 writes.
#
# Environment:
#   SIM_SEED     first seed [default: 1]
#   SIM_SEEDS    seeds in the campaign [default: 1000]
#   SIM_STEPS    steps per seed [default: 450]
#   SIM_MINUTES  run seeds for this many minutes instead of SIM_SEEDS
# A failing seed is printed with the command that replays it; keep it in crates/berth-sim/seeds.txt.

set -euo pipefail
cd "$(dirname "$0")/.."

SEED=${SIM_SEED:-1}
SEEDS=${SIM_SEEDS:-1000}
STEPS=${SIM_STEPS:-450}
RELEASE=${CARGO_TARGET_DIR:-target}/release

echo "==> simulate: cargo build --release -p berth-sim --features planted (the planted controls)"
cargo build --quiet --release --locked -p berth-sim --features planted
cp "$RELEASE/berth-sim" "$RELEASE/berth-sim-planted"
echo "==> simulate: cargo build --release -p berth-sim"
cargo build --quiet --release --locked -p berth-sim
SIM=$RELEASE/berth-sim
PLANTED=$RELEASE/berth-sim-planted

if [[ -n ${SIM_MINUTES:-} ]]; then
    echo "==> simulate: seeds from $SEED for $SIM_MINUTES minutes, $STEPS steps each"
    "$SIM" --seed "$SEED" --minutes "$SIM_MINUTES" --steps "$STEPS"
else
    echo "==> simulate: $SEEDS seeds from $SEED, $STEPS steps each"
    "$SIM" --seed "$SEED" --seeds "$SEEDS" --steps "$STEPS"
fi

# control NAME WORDS BINARY ARGS...: the control must fail within 200 seeds, with the checker's
# WORDS in what it prints.
control() {
    local name=$1 words=$2 bin=$3
    shift 3
    local out status=0
    out=$("$bin" --seed 1 --seeds 200 --steps 300 "$@" 2>&1) || status=$?
    if ((status == 0)) || ! grep -q "$words" <<<"$out"; then
        echo "simulate: the negative control '$name' was NOT caught:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "==> simulate: negative control '$name' caught: $(head -n 1 <<<"$out")"
}
control "unsynced disk" "were told" "$SIM" --disk unsynced
control "lost last commit" "were told\|capacity promised twice" "$SIM" --defect lose-last-commit
control "no capacity check" "capacity promised twice" "$PLANTED" --defect skip-capacity-check
control "no generation check" "stale consumer generation was accepted" "$PLANTED" --defect skip-generation-check
control "answer before commit" "were told" "$PLANTED" --defect answer-before-commit
control "events fired again after a restart" "fired twice\|differs from the disk" "$PLANTED" \
    --defect refire-after-recovery
control "floating IPs given twice" "promised twice" "$PLANTED" --defect skip-floating-ip-check
control "a claim that keeps its node" "holds a node but the claim is gone" "$PLANTED" \
    --defect claim-keeps-node
echo "simulate: passed"

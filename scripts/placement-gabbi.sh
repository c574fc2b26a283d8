#!/usr/bin/env bash
# Placement's own API test suite against berth: every gabbi file of openstack-placement 16.0.0
# (79 files, 1,316 tests), run first against real Placement in process (the baseline) and then
# against berth, each file on a fresh berth serving Placement at the root of its own port with
# `--auth noauth2`, its fixture's data created over HTTP (scripts/placement-gabbi/).
#
# Usage: bash scripts/placement-gabbi.sh [--update-known] [FILE.yaml ...]
#
# Every test that passes on Placement must pass on berth, except those listed with a reason in
# scripts/placement-gabbi/expected-failures.txt and those in known-failures.txt (what berth does
# not match yet; the list may only shrink: a listed test that passes fails the run until it is
# removed, which `--update-known` does).
#
# Environment:
#   BERTH_GABBI_VENV  virtualenv [default: target/placement-gabbi-venv]
#   BERTH_BIN         berth binary to test; when unset, `cargo build --bin berth` builds one
#
# The last line is `placement-gabbi: ...` with the counts; a failing test's request, answer and
# assertion are in target/placement-gabbi/report.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

VENV=${BERTH_GABBI_VENV:-target/placement-gabbi-venv}
DIR=scripts/placement-gabbi
OUT=target/placement-gabbi
UPDATE=()
FILES=()
for arg in "$@"; do
    case $arg in
        --update-known) UPDATE=(--update-known) ;;
        *) FILES+=("$arg") ;;
    esac
done

if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" scripts/pins-installed.py "$DIR/requirements.txt"; then
    echo "placement-gabbi: installing the pinned suite into $VENV"
    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$DIR/requirements.txt"
fi

if [[ -z ${BERTH_BIN:-} ]]; then
    cargo build --quiet --locked --bin berth
    BERTH_BIN=target/debug/berth
fi
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export NO_PROXY=$no_proxy

mkdir -p "$OUT"
PY="$VENV/bin/python $DIR/run.py"
echo "placement-gabbi: the suite against Placement 16.0.0 (in process)"
$PY placement --json "$OUT/placement.json" "${FILES[@]}" >"$OUT/placement.log" 2>&1 ||
    { tail -n 40 "$OUT/placement.log"; exit 1; }
tail -n 1 "$OUT/placement.log"
echo "placement-gabbi: the suite against berth ($BERTH_BIN)"
$PY berth --berth "$BERTH_BIN" --json "$OUT/berth.json" "${FILES[@]}" >"$OUT/berth.log" 2>&1 ||
    { tail -n 40 "$OUT/berth.log"; exit 1; }
tail -n 1 "$OUT/berth.log"
$PY compare "$OUT/placement.json" "$OUT/berth.json" \
    --expected-failures "$DIR/expected-failures.txt" \
    --known-failures "$DIR/known-failures.txt" \
    --report "$OUT/report.txt" "${UPDATE[@]}"

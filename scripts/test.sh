#!/usr/bin/env bash
# Runs every test berth has: unit and property tests, the store conformance suite on SQLite and
# PostgreSQL, the end-to-end HTTP tests (including two replicas over PostgreSQL), the real
# OpenStack command-line clients against a running berth, and Placement's own gabbi suite
# against real Placement and berth (scripts/placement-gabbi.sh), and histories of three
# replicas checked under faults (crates/berth-history, with its own private PostgreSQL).
#
# PostgreSQL: uses BERTH_TEST_POSTGRES_URL when set; otherwise the local server on
# 127.0.0.1:5432 (user postgres), starting it, or installing it from Debian's packages, if
# needed. Under CI=true a missing PostgreSQL is an error; elsewhere its tests say they skipped.
#
# Chromium (for the dashboard's browser tests): uses BERTH_TEST_CHROMIUM when set; otherwise
# `chromium` on the PATH, installing Debian's package if needed (as root with apt-get). Under
# CI=true a missing Chromium is an error; elsewhere the browser tests say they skipped.
#
# Keystone (for the `--auth keystone` test and the clients' Keystone mode): uses
# BERTH_TEST_KEYSTONE_VENV when set; otherwise installs the pinned `keystone` from PyPI into
# target/keystone-venv with scripts/keystone.sh. Under CI=true a failed install is an error;
# elsewhere the Keystone test says it skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

pg_url_default="postgres://postgres@127.0.0.1:5432/postgres"

pg_ready() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h 127.0.0.1 -p 5432
  else
    (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null
  fi
}

ensure_postgres() {
  pg_ready && return 0
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing PostgreSQL from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  if command -v pg_ctlcluster >/dev/null 2>&1 && ls /etc/postgresql >/dev/null 2>&1; then
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    echo "test.sh: starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 30); do pg_ready && return 0; sleep 1; done
  fi
  return 1
}

if [ -z "${BERTH_TEST_POSTGRES_URL:-}" ] || [ "$BERTH_TEST_POSTGRES_URL" = "$pg_url_default" ]; then
  if ensure_postgres; then
    export BERTH_TEST_POSTGRES_URL="$pg_url_default"
  elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: PostgreSQL is not reachable on 127.0.0.1:5432 and CI needs it" >&2
    exit 1
  else
    echo "test.sh: WARNING: no PostgreSQL; its tests will report SKIPPED" >&2
    unset BERTH_TEST_POSTGRES_URL
  fi
fi
echo "test.sh: BERTH_TEST_POSTGRES_URL=${BERTH_TEST_POSTGRES_URL:-<unset>}"

ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing Chromium from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  command -v chromium >/dev/null 2>&1
}

if [ -z "${BERTH_TEST_CHROMIUM:-}" ]; then
  if ensure_chromium; then
    BERTH_TEST_CHROMIUM="$(command -v chromium)"
    export BERTH_TEST_CHROMIUM
  elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: Chromium is not installed and CI needs it for the dashboard tests" >&2
    exit 1
  else
    echo "test.sh: WARNING: no Chromium; the dashboard browser tests will report SKIPPED" >&2
  fi
fi
echo "test.sh: BERTH_TEST_CHROMIUM=${BERTH_TEST_CHROMIUM:-<unset>}"

if [ -z "${BERTH_TEST_KEYSTONE_VENV:-}" ]; then
  if bash scripts/keystone.sh install; then
    BERTH_TEST_KEYSTONE_VENV="$(pwd)/target/keystone-venv"
    export BERTH_TEST_KEYSTONE_VENV
  elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: Keystone could not be installed and CI needs it for the Keystone tests" >&2
    exit 1
  else
    echo "test.sh: WARNING: no Keystone; the Keystone test will report SKIPPED" >&2
  fi
fi
echo "test.sh: BERTH_TEST_KEYSTONE_VENV=${BERTH_TEST_KEYSTONE_VENV:-<unset>}"

# The negative control of the fault harness (crates/berth-history/tests/faults.rs) runs a berth
# with a planted defect: built apart with berth-server's `planted-defects`, kept as berth-planted
# beside berth (which the workspace build below rebuilds without it).
bin_dir="${CARGO_TARGET_DIR:-target}/debug"
cargo build --locked -p berth-server --features planted-defects --bin berth
cp "$bin_dir/berth" "$bin_dir/berth-planted"
cargo test --workspace --locked
bash scripts/simulate.sh
bash scripts/openstack-clients.sh
bash scripts/placement-gabbi.sh

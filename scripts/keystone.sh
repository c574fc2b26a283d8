#!/usr/bin/env bash
# A real Keystone (the `keystone` package from PyPI) on 127.0.0.1, for the tests of
# `--auth keystone` and the OpenStack clients' Keystone mode: SQLite, fernet tokens.
#
# Usage:
#   bash scripts/keystone.sh install          # the virtualenv, pinned by keystone.requirements.txt
#   bash scripts/keystone.sh setup DIR PORT   # configuration, database, keys, bootstrap in DIR
#   bash scripts/keystone.sh serve DIR PORT   # serves DIR's Keystone on 127.0.0.1:PORT; execs
#                                             # gunicorn, so the caller's child is its master
#                                             # process (SIGINT stops it and its worker at once)
#
# Environment:
#   BERTH_KEYSTONE_VENV            the virtualenv [default: BERTH_TEST_KEYSTONE_VENV, else
#                                  target/keystone-venv]
#   BERTH_KEYSTONE_ADMIN_PASSWORD  the bootstrapped admin's password [default: admin-secret]
#   BERTH_KEYSTONE_EXPIRATION      token lifetime in seconds [default: 3600]
#
# `setup` bootstraps user `admin` (role admin on project `admin` and on the system), region
# `RegionOne` and the identity service's endpoints at http://127.0.0.1:PORT/v3. Everything it
# writes is under DIR; `serve` reads Keystone's configuration from DIR/etc only.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${BERTH_KEYSTONE_VENV:-${BERTH_TEST_KEYSTONE_VENV:-$ROOT/target/keystone-venv}}
REQUIREMENTS=$ROOT/scripts/keystone.requirements.txt

die() {
    printf 'keystone.sh: %s\n' "$*" >&2
    exit 1
}

# Exits 0 when every `name==version` pin is installed in the virtualenv.
satisfied() {
    [[ -x $VENV/bin/python && -x $VENV/bin/keystone-manage && -x $VENV/bin/gunicorn ]] || return 1
    "$VENV/bin/python" "$ROOT/scripts/pins-installed.py" "$REQUIREMENTS"
}

install() {
    if satisfied; then
        printf 'keystone.sh: Keystone already installed in %s\n' "$VENV"
        return 0
    fi
    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
    satisfied || die "the virtualenv $VENV does not match $REQUIREMENTS after pip install"
    printf 'keystone.sh: Keystone installed in %s\n' "$VENV"
}

manage() {
    OS_KEYSTONE_CONFIG_DIR=$DIR/etc "$VENV/bin/keystone-manage" --config-file "$DIR/etc/keystone.conf" "$@" \
        >>"$DIR/manage.log" 2>&1 || die "keystone-manage $1 failed; see $DIR/manage.log"
}

setup() {
    satisfied || die "Keystone is not installed in $VENV (run: bash scripts/keystone.sh install)"
    mkdir -p "$DIR/etc" "$DIR/fernet" "$DIR/credential" "$DIR/wsgi"
    DIR=$(cd "$DIR" && pwd)
    cat >"$DIR/etc/keystone.conf" <<CONF
[DEFAULT]
log_file = $DIR/keystone.log
[database]
connection = sqlite:///$DIR/keystone.db
[token]
provider = fernet
expiration = ${BERTH_KEYSTONE_EXPIRATION:-3600}
[fernet_tokens]
key_repository = $DIR/fernet
[fernet_receipts]
key_repository = $DIR/fernet
[credential]
key_repository = $DIR/credential
CONF
    # Keystone's option parser reads the process's command line: give it none.
    cat >"$DIR/wsgi/berth_keystone_wsgi.py" <<'PY'
"""Keystone's public WSGI application, with a command line its option parser accepts."""
import sys

sys.argv = sys.argv[:1]
from keystone.server import wsgi  # noqa: E402

application = wsgi.initialize_public_application()
PY
    local url=http://127.0.0.1:$PORT/v3 user group
    user=$(id -un)
    group=$(id -gn)
    manage db_sync
    manage fernet_setup --keystone-user "$user" --keystone-group "$group"
    manage credential_setup --keystone-user "$user" --keystone-group "$group"
    manage bootstrap --bootstrap-password "${BERTH_KEYSTONE_ADMIN_PASSWORD:-admin-secret}" \
        --bootstrap-admin-url "$url" --bootstrap-public-url "$url" --bootstrap-internal-url "$url" \
        --bootstrap-region-id RegionOne
}

serve() {
    satisfied || die "Keystone is not installed in $VENV (run: bash scripts/keystone.sh install)"
    [[ -f $DIR/etc/keystone.conf ]] || die "no Keystone in $DIR (run: bash scripts/keystone.sh setup $DIR $PORT)"
    DIR=$(cd "$DIR" && pwd)
    export OS_KEYSTONE_CONFIG_DIR=$DIR/etc
    exec "$VENV/bin/gunicorn" --bind "127.0.0.1:$PORT" --workers 1 --timeout 60 \
        --chdir "$DIR/wsgi" --error-logfile "$DIR/gunicorn.log" berth_keystone_wsgi:application
}

case ${1:-} in
install) install ;;
setup | serve)
    (($# == 3)) || die "usage: $0 $1 DIR PORT"
    DIR=$2
    PORT=$3
    "$1"
    ;;
*) die "usage: $0 install | setup DIR PORT | serve DIR PORT" ;;
esac

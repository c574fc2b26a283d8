# Helpers the scripts share. Source it (`source "$(dirname "${BASH_SOURCE[0]}")/common.sh"`)
# after setting SCRIPT, the name die() prints.

# die MESSAGE...: prints "SCRIPT: MESSAGE" on stderr and exits 1.
die() {
    printf '%s: %s\n' "${SCRIPT:-berth}" "$*" >&2
    exit 1
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_ready URL PID LOGFILE [SECONDS [CURL_ARG...]]: waits (60 s unless told) until URL answers
# 2xx, or dies with the tail of LOGFILE when process PID has exited or the time is up.
wait_ready() {
    local url=$1 pid=$2 logfile=$3 deadline=$((SECONDS + ${4:-60}))
    shift $(($# < 4 ? $# : 4))
    while ((SECONDS < deadline)); do
        if curl -sf --noproxy '*' --max-time 2 "$@" "$url" >/dev/null; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 40 "$logfile" >&2 || true
    die "no answer from $url"
}

# psql_admin ARG...: psql on the `postgres` database of the server POSTGRES names (a server URL
# without a database), stopping at the first error, unaligned and quiet.
psql_admin() {
    psql "$POSTGRES/postgres" -v ON_ERROR_STOP=1 -qAt "$@"
}

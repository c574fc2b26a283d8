#!/usr/bin/env bash
# What junk requests and idle connections cost a running berth: its RSS and the size of
# /metrics before and after a flood of requests with random methods to random paths, and its RSS
# with many idle connections open and after the idle timeout closed them.
#
# Usage: bash scripts/flood-connections.sh
#
# What it does:
#   1. builds `berth` in release mode (unless BERTH_BIN is set) and serves it on 127.0.0.1 over a
#      fresh SQLite file, with `--idle-timeout-seconds 5`;
#   2. sends FLOOD_REQUESTS requests over one keep-alive connection, each with a random method of
#      4 to 11 letters, half to random unmatched paths and half to /healthz (405), and reports
#      the server's VmRSS and the /metrics size before and after (python3, standard library);
#   3. opens IDLE_CONNECTIONS connections that send nothing, reports VmRSS with them open (the
#      server holds at most --max-connections of them; the rest wait in the listen backlog), waits
#      for the idle timeout, and reports VmRSS again;
#   4. kills the server by PID and removes its temporary directory.
#
# Environment:
#   BERTH_BIN          the berth binary [default: target/release/berth, built first]
#   FLOOD_REQUESTS     junk requests [default: 30000]
#   IDLE_CONNECTIONS   idle connections [default: 1000]
#   FLOOD_MAX_SECONDS  deadline of each loop [default: 300]
set -euo pipefail
cd "$(dirname "$0")/.."

FLOOD_REQUESTS=${FLOOD_REQUESTS:-30000}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-1000}
FLOOD_MAX_SECONDS=${FLOOD_MAX_SECONDS:-300}
if [[ -z "${BERTH_BIN:-}" ]]; then
    cargo build --release -p berth-server --bin berth
    BERTH_BIN=target/release/berth
fi

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BERTH_BIN" serve --listen "127.0.0.1:$port" --data-dir "$work" --idle-timeout-seconds 5 \
    >"$work/berth.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done

PORT=$port PID=$pid FLOOD_REQUESTS=$FLOOD_REQUESTS IDLE_CONNECTIONS=$IDLE_CONNECTIONS \
    FLOOD_MAX_SECONDS=$FLOOD_MAX_SECONDS python3 - <<'EOF'
import http.client, os, random, socket, time

port, pid = int(os.environ["PORT"]), os.environ["PID"]
requests, idle = int(os.environ["FLOOD_REQUESTS"]), int(os.environ["IDLE_CONNECTIONS"])
deadline_s = float(os.environ["FLOOD_MAX_SECONDS"])
known = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}

def rss_mb():
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")

def metrics_bytes():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    size = len(conn.getresponse().read())
    conn.close()
    return size

def junk_method(rng):
    while True:
        word = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(4, 11)))
        if word not in known:
            return word

rng = random.Random(15)
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for _ in range(200):  # warm-up: every label combination the flood can produce exists
    conn.request(junk_method(rng), "/healthz")
    conn.getresponse().read()
    conn.request(junk_method(rng), f"/x{rng.getrandbits(64):x}")
    conn.getresponse().read()
metrics_bytes()  # the scrape's own series exists from now on
print(f"before the flood: rss {rss_mb():.1f} MB, /metrics {metrics_bytes()} bytes")
started, sent = time.monotonic(), 0
statuses = {}
while sent < requests and time.monotonic() - started < deadline_s:
    path = "/healthz" if sent % 2 else f"/{junk_method(rng).lower()}/{rng.getrandbits(64):x}"
    conn.request(junk_method(rng), path)
    response = conn.getresponse()
    response.read()
    statuses[response.status] = statuses.get(response.status, 0) + 1
    sent += 1
elapsed = time.monotonic() - started
conn.close()
print(f"flood: {sent} requests in {elapsed:.1f} s, statuses {dict(sorted(statuses.items()))}")
print(f"after the flood: rss {rss_mb():.1f} MB, /metrics {metrics_bytes()} bytes")

before = rss_mb()
sockets, started = [], time.monotonic()
for _ in range(idle):
    if time.monotonic() - started > deadline_s:
        break
    s = socket.socket()
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    sockets.append(s)
time.sleep(1)
print(f"idle connections: rss {before:.1f} MB before, {rss_mb():.1f} MB with {len(sockets)} open")
time.sleep(7)
closed = 0
for s in sockets:
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except ConnectionResetError:
        closed += 1
print(f"after the idle timeout: rss {rss_mb():.1f} MB, {closed} of {len(sockets)} closed by the server")
for s in sockets:
    s.close()
EOF

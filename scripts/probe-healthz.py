#!/usr/bin/env python3
"""Times GET /healthz (or another path) on a berth at 127.0.0.1:PORT from a process of its own.

Usage: scripts/probe-healthz.py PORT SECONDS [PATH]

One keep-alive connection asks every 10 ms for SECONDS seconds (bounded) and prints the count
and the latency percentiles in milliseconds. Used beside `berth-load attack` (see
docs/benchmarks.md, "Bounded work under attack") so that the probe does not share the load
tool's runtime or priority.
"""
import http.client
import sys
import time


def main() -> None:
    port, seconds = int(sys.argv[1]), min(float(sys.argv[2]), 600.0)
    path = sys.argv[3] if len(sys.argv) > 3 else "/healthz"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies = []
    end = time.time() + seconds
    while time.time() < end:
        started = time.perf_counter()
        connection.request("GET", path)
        connection.getresponse().read()
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(0.01)
    latencies.sort()
    n = len(latencies)
    print(
        f"{path} from a separate process: n={n} p50={latencies[n // 2]:.2f} "
        f"p90={latencies[int(n * 0.9)]:.2f} p99={latencies[int(n * 0.99)]:.2f} "
        f"max={latencies[-1]:.2f} ms"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Two builds of sweetspot side by side (run by benches/builds.sh): each architecture served by
build A and by build B in alternating rounds (A, B, B, A, ...), pinned to CPU 0 in a cgroup of
its own, driven by wrk pinned to CPU 1 on /hello at 50 keep-alive connections. The table gives
each build's median requests/s and server CPU per request, and the ratio B / A.

Usage: benches/builds.py BINARY_A BINARY_B SECONDS ROUNDS
"""

import re
import statistics
import subprocess
import sys
import time

from benchlib import Pinned, run_pinned

A, B = sys.argv[1], sys.argv[2]
SECONDS = int(sys.argv[3])
ROUNDS = int(sys.argv[4])
ARCHS = [
    ("epoll", []),
    ("poll", []),
    ("reactors", ["--workers", "2"]),
    ("hybrid", ["--workers", "2"]),
    ("uring", ["--workers", "1"]),
    ("async", ["--workers", "2"]),
    ("prethreaded", ["--workers", "8"]),
    ("preforked", ["--workers", "8"]),
]


def round_of(binary, arch, flags):
    """One round: (requests/s, server CPU microseconds per request)."""
    server = Pinned([binary, "serve", "--arch", arch, "--port", "0", *flags], 0,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = server.proc.stdout.readline().decode()
        port = int(re.search(r":(\d+) ", line).group(1))
        time.sleep(0.3)  # pools start their workers after the listener
        before = server.cpu()
        out, _, _ = run_pinned(["wrk", "-t1", "-c50", f"-d{SECONDS}s",
                                f"http://127.0.0.1:{port}/hello"], 1)
        used = server.cpu() - before
    finally:
        server.stop()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rps, used * 1e6 / max(requests, 1)


def main():
    print(f"A: {A}\nB: {B}\n{ROUNDS} rounds of {SECONDS} s each, alternating; medians\n")
    print(f"{'arch':<12} {'A req/s':>10} {'B req/s':>10} {'B/A':>6}   "
          f"{'A us/req':>9} {'B us/req':>9} {'B/A':>6}")
    for arch, flags in ARCHS:
        runs = {A: [], B: []}
        for r in range(ROUNDS):
            order = (A, B) if r % 2 == 0 else (B, A)
            for binary in order:
                runs[binary].append(round_of(binary, arch, flags))
        med = {b: (statistics.median(x[0] for x in runs[b]),
                   statistics.median(x[1] for x in runs[b])) for b in runs}
        label = arch + (f" {flags[1]}" if flags else "")
        print(f"{label:<12} {med[A][0]:>10.0f} {med[B][0]:>10.0f} {med[B][0] / med[A][0]:>6.3f}   "
              f"{med[A][1]:>9.2f} {med[B][1]:>9.2f} {med[B][1] / med[A][1]:>6.3f}", flush=True)


main()

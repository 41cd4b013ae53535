#!/usr/bin/env python3
"""Two builds of sweetspot side by side (run by benches/builds.sh): each architecture served by
build A and by build B in alternating rounds (A, B, B, A, ...), pinned to CPU 0 in a cgroup of
its own, driven by wrk pinned to CPU 1 on /hello at 50 keep-alive connections. The first table
gives each build's median requests/s and server CPU per request, and the ratio B / A. The
second turns it round: each build's load generator (each engine) on CPU 1 against one epoll
server of build B on CPU 0, with the generator's CPU per request.

Usage: benches/builds.py BINARY_A BINARY_B SECONDS ROUNDS
"""

import json
import re
import statistics
import subprocess
import sys
import time

from benchlib import Pinned, run_pinned, wrk_counts

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
    requests, rps = wrk_counts(out)
    return rps, used * 1e6 / max(requests, 1)


ENGINES = ["epoll", "uring"]


def generator_round(binary, engine, port):
    """One round of `binary load`: (requests/s, generator CPU microseconds per request)."""
    out, _, used = run_pinned([binary, "load", "-t1", "-c50", f"-d{SECONDS}s", "--engine", engine,
                               "--json", "-", f"http://127.0.0.1:{port}/hello"], 1)
    report = json.loads(out)
    return report["rps"], used * 1e6 / max(report["requests"], 1)


def generators():
    print(f"\nload generators (-t1 -c50) against build B's epoll; generator CPU per request\n")
    print(f"{'engine':<12} {'A req/s':>10} {'B req/s':>10} {'B/A':>6}   "
          f"{'A us/req':>9} {'B us/req':>9} {'B/A':>6}")
    server = Pinned([B, "serve", "--arch", "epoll", "--port", "0"], 0,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(re.search(r":(\d+) ", server.proc.stdout.readline().decode()).group(1))
        for engine in ENGINES:
            runs = {A: [], B: []}
            for r in range(ROUNDS):
                for binary in ((A, B) if r % 2 == 0 else (B, A)):
                    runs[binary].append(generator_round(binary, engine, port))
            med = {b: (statistics.median(x[0] for x in runs[b]),
                       statistics.median(x[1] for x in runs[b])) for b in runs}
            print(f"{engine:<12} {med[A][0]:>10.0f} {med[B][0]:>10.0f} "
                  f"{med[B][0] / med[A][0]:>6.3f}   {med[A][1]:>9.2f} {med[B][1]:>9.2f} "
                  f"{med[B][1] / med[A][1]:>6.3f}", flush=True)
    finally:
        server.stop()


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
generators()

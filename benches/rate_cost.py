#!/usr/bin/env python3
"""What a request costs sweetspot's generator in rate mode against its closed loop, with and
without the send slack, beside autocannon and h2load at the same rates (issue: "the rate mode
as cheap as the closed loop"). Run by benches/rate_cost.sh.

One nginx (1 worker, CPU 0) serves a 14-byte file; every tool runs on CPU 1 in a cgroup of its
own (its CPU time exact), 50 keep-alive connections, one thread. Each round runs, in a rotating
order: our closed loop (the reference), then at 20,000 req/s and at 80% of our closed loop's
throughput: ours with `--slack 0` (a timer per request, as before the slack), with
`--slack 250us`, with the default (1 ms), the uring driver with the default, autocannon and h2load. The table
gives medians over the rounds: req/s, CPU per request, its ratio to our closed loop and to
autocannon's, and our p50 (the slack's lateness is inside it; with the epoll driver a
response ends at the kernel's stamp of its arrival, and the thread naps a quarter of the slack
between polls, its sends late by at most that, measured).

Usage: benches/rate_cost.py SECONDS ROUNDS
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

from benchlib import run_pinned, start_static_nginx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
CONNS = 50
WORK = tempfile.mkdtemp(prefix="sweetspot-rate-cost-")


def ours(engine="epoll", slack=None):
    def argv(url, rate):
        a = [OURS, "load", url, "-t", "1", "-c", str(CONNS), "-d", f"{SECONDS}s",
             "--engine", engine, "-q", "--json", "-"]
        if rate is not None:
            a += ["-R", str(rate)]
        if slack is not None:
            a += ["--slack", slack]
        return a

    def read(out):
        r = json.loads(out)
        return r["requests"], r["duration_s"], r["latency_us"]["p50"]
    return argv, read


def autocannon():
    def argv(url, rate):
        return ["autocannon", "-c", str(CONNS), "-d", str(SECONDS), "-j", "-R", str(rate), url]

    def read(out):
        r = json.loads(out)
        return r["2xx"] + r["non2xx"], r["duration"], r["latency"]["p50"] * 1000.0
    return argv, read


def h2load():
    def argv(url, rate):
        return ["h2load", "--h1", "-t1", f"-c{CONNS}", "-D", str(SECONDS),
                f"--rps={rate / CONNS:.2f}", url]

    def read(out):
        done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
        secs = float(re.search(r"finished in ([\d.]+)s", out).group(1))
        return done, secs, float("nan")
    return argv, read


def measure(tool, url, rate):
    argv, read = tool
    out, err, cpu = run_pinned(argv(url, rate), 1)
    requests, seconds, p50 = read(out)
    return requests / seconds, cpu * 1e6 / requests, p50


def main():
    nginx, url = start_static_nginx(WORK)
    rated = [("ours, slack 0", ours(slack="0")), ("ours, slack 250us", ours(slack="250us")),
             ("ours, slack 1ms (default)", ours()), ("ours uring, default", ours("uring"))]
    if shutil.which("autocannon"):
        rated.append(("autocannon", autocannon()))
    if shutil.which("h2load"):
        rated.append(("h2load", h2load()))
    print(f"# rate mode's cost: nginx (1 worker, CPU 0), each tool on CPU 1, {CONNS} "
          f"connections, one thread, {SECONDS} s runs, {ROUNDS} rotating rounds, medians")
    print(f"# {os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; us/req = the tool's cgroup CPU "
          "time / the requests it completed; p50 from intended send times (ours, autocannon)")
    try:
        closed = [measure(ours(), url, None) for _ in range(ROUNDS)]
        closed_rps = statistics.median(c[0] for c in closed)
        closed_cpu = statistics.median(c[1] for c in closed)
        print(f"\n## closed loop: {closed_rps:.0f} req/s, {closed_cpu:.2f} us/req (epoll)")
        for rate in [20000, int(0.8 * closed_rps)]:
            results = {n: [] for n, _ in rated}
            for r in range(ROUNDS):
                order = rated[r % len(rated):] + rated[:r % len(rated)]
                for name, tool in order:
                    try:
                        results[name].append(measure(tool, url, rate))
                    except (ValueError, KeyError, AttributeError, ZeroDivisionError,
                            json.JSONDecodeError) as e:
                        print(f"# {name} at {rate}/s: unreadable output ({e})")
            med = {n: tuple(statistics.median(x[i] for x in v) for i in range(3))
                   for n, v in results.items() if v}
            print(f"\n## rate {rate} req/s ({rate / closed_rps:.0%} of our closed loop)")
            print(f"{'tool':<28} {'req/s':>8} {'us/req':>7} {'vs closed':>10} "
                  f"{'vs autocannon':>14} {'p50 us':>8}")
            ac = med.get("autocannon")
            for name, (rps, cpu, p50) in med.items():
                vs_ac = f"{cpu / ac[1]:.3f}" if ac else "-"
                print(f"{name:<28} {rps:>8.0f} {cpu:>7.2f} {cpu / closed_cpu:>10.3f} "
                      f"{vs_ac:>14} {p50:>8.0f}")
            goal = 2.0 if rate == 20000 else 1.5
            d = med.get("ours, slack 1ms (default)")
            if d:
                met = d[1] <= goal * closed_cpu and (ac is None or d[1] <= ac[1])
                print(f"goal: default slack <= {goal}x the closed loop's CPU per request and "
                      f"<= autocannon's: {'met' if met else 'NOT met'} "
                      f"({d[1] / closed_cpu:.3f}x closed"
                      f"{f', {d[1] / ac[1]:.3f}x autocannon' if ac else ''})")
            sys.stdout.flush()
    finally:
        nginx.stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)

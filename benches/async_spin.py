#!/usr/bin/env python3
"""What `serve --arch async --spin-us` buys and what it costs (run by benches/async_spin.sh).

Three servers, 2 tokio workers each, each pinned to CPU 0 in a cgroup of its own: hyper
(benches/peers), `async`, and `async --spin-us SPIN`. The load runs on CPU 1, in alternating
rounds (the order turns each round), and each round's figures are divided by hyper's of the
same round; the table gives the medians of those ratios and their range:
- closed loop: wrk, /hello, 50 keep-alive connections, with the whole of CPU 0 and with the
  servers held to half of it (a CFS quota): requests/s and server CPU per request;
- open loop: `sweetspot load -R RATE`, 50 connections, at rates below what any of them can
  serve: server CPU per request (cpuacct over the requests sent) and p99 (from each
  request's intended send time).

Usage: benches/async_spin.py SECONDS ROUNDS
"""

import json
import os
import statistics
import sys
import time

from benchlib import run_pinned, start_listening, wrk_counts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
HYPER = os.path.join(ROOT, "benches", "peers", "target", "release", "hyper_hello")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
SPIN = 15
CONNS = 50
RATES = [20_000, 50_000, 80_000, 110_000]
SERVERS = {
    "hyper": [HYPER, "0", "2"],
    "async": [OURS, "serve", "--arch", "async", "--workers", "2", "--port", "0"],
    f"async --spin-us {SPIN}": [OURS, "serve", "--arch", "async", "--workers", "2", "--port",
                                "0", "--spin-us", str(SPIN)],
}


def start(name, share):
    """A server from SERVERS, up on CPU 0: (its Pinned, its port)."""
    server, port = start_listening(name, SERVERS[name], 0, share)
    time.sleep(0.3)  # tokio starts its workers after the listener
    return server, port


def closed(server, port):
    """(req/s, server CPU us per request) of one wrk round."""
    url = f"http://127.0.0.1:{port}/hello"
    run_pinned(["wrk", "-t1", f"-c{CONNS}", "-d1s", url], 1)  # warm-up
    before = server.cpu()
    out, _, _ = run_pinned(["wrk", "-t1", f"-c{CONNS}", f"-d{SECONDS}s", url], 1)
    cpu = server.cpu() - before
    requests, rps = wrk_counts(out)
    return rps, cpu * 1e6 / max(requests, 1)


def opened(server, port, rate):
    """(server CPU us per request, p99 us, whether the rate held) of one open-loop round."""
    url = f"http://127.0.0.1:{port}/hello"
    run_pinned(["wrk", "-t1", f"-c{CONNS}", "-d1s", url], 1)  # warm-up
    before = server.cpu()
    out, _, _ = run_pinned([OURS, "load", "-t1", f"-c{CONNS}", f"-R{rate}", f"-d{SECONDS}s",
                            "--quiet", "--json", "-", url], 1)
    cpu = server.cpu() - before
    report = json.loads(out)
    return (cpu * 1e6 / max(report["requests_sent"], 1), report["latency_us"]["p99"],
            report["rate_held"])


def rounds(measure, share=None):
    """Each server's figures per round, the servers started afresh and in turning order."""
    names = list(SERVERS)
    runs = {n: [] for n in names}
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            server, port = start(name, share)
            try:
                runs[name].append(measure(server, port))
            finally:
                server.stop()
    return runs


def ratio_cell(runs, name, index):
    ratios = [x[index] / h[index] for x, h in zip(runs[name], runs["hyper"]) if h[index] > 0]
    return (f"{statistics.median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f})"
            if ratios else "-")


def main():
    print(f"# async_spin: 2 tokio workers each, server on CPU 0, load on CPU 1; {ROUNDS} rounds "
          f"of {SECONDS} s, order turning; ratios to hyper of the same round, median (range)")
    print(f"# {os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}")
    print(f"{'load':<34} {'server':<20} {'req/s':>9} {'us/req':>7} {'p99 us':>7}  "
          f"{'req/s x':<22} {'cpu x':<22} {'p99 x'}")
    cases = [("closed /hello c=50, whole CPU 0", closed, None),
             ("closed /hello c=50, half of CPU 0", closed, 0.5)]
    for title, measure, share in cases:
        runs = rounds(measure, share)
        for name in SERVERS:
            rps = statistics.median(x[0] for x in runs[name])
            cpu = statistics.median(x[1] for x in runs[name])
            ratios = "" if name == "hyper" else \
                f"  {ratio_cell(runs, name, 0):<22} {ratio_cell(runs, name, 1):<22}"
            print(f"{title:<34} {name:<20} {rps:>9.0f} {cpu:>7.2f} {'':>7}{ratios}")
            sys.stdout.flush()
    for rate in RATES:
        title = f"open -R {rate} c=50, whole CPU 0"
        runs = rounds(lambda s, port, rate=rate: opened(s, port, rate))
        for name in SERVERS:
            cpu = statistics.median(x[0] for x in runs[name])
            p99 = statistics.median(x[1] for x in runs[name])
            held = sum(x[2] for x in runs[name])
            ratios = "" if name == "hyper" else \
                f"  {'':<22} {ratio_cell(runs, name, 0):<22} {ratio_cell(runs, name, 1)}"
            print(f"{title:<34} {name:<20} {rate:>9} {cpu:>7.2f} {p99:>7.0f}{ratios}"
                  + ("" if held == ROUNDS else f"  (rate held in {held}/{ROUNDS} rounds)"))
            sys.stdout.flush()
    print("# req/s x, cpu x, p99 x: the server's / hyper's in the same round. Open loop: req/s "
          "is the rate asked for; us/req is server CPU over the requests sent; p99 from "
          "intended send times (sweetspot load's default 1 ms send slack included)")


if __name__ == "__main__":
    main()

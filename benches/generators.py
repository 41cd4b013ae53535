#!/usr/bin/env python3
"""sweetspot's load generator beside every generator here (run by benches/generators.sh).

One nginx (1 worker, pinned to CPU 0) serves a 14-byte static file; every tool runs pinned to
CPU 1 in a cgroup of its own, so its CPU time is exact; the tools take turns, the order rotating
each round, and the table gives each tool's median over the rounds. Four modes:
- closed: a closed loop, keep-alive, 50 connections;
- pipelined: 50 connections, 16 requests in flight on each (the server's cost per request
  drops, so a generator's own ceiling shows);
- per-request: a new connection for every request, 50 at a time;
- rate: a fixed rate of half what wrk reached in the closed mode, where every tool delivers the
  same throughput and CPU per request is the whole comparison.
sweetspot runs with both engine drivers (`epoll`, wrk's exact closed loop, and `uring`). A tool
that cannot do a mode is listed under it with why.

Usage: benches/generators.py SECONDS ROUNDS
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
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
CONNS = 50
DEPTH = 16
WORK = tempfile.mkdtemp(prefix="sweetspot-generators-")
# Go's runtime would start a thread per core; pinned to one CPU, one is what it gets.
GO_ENV = dict(os.environ, GOMAXPROCS="1")


def pipeline_script():
    path = os.path.join(WORK, "pipeline.lua")
    with open(path, "w") as f:
        f.write(f"""-- {DEPTH} requests written at once on each connection, as in wrk's own example
init = function(args)
   local r = {{}}
   for i = 1, {DEPTH} do r[i] = wrk.format(nil, nil) end
   req = table.concat(r)
end
request = function() return req end
""")
    return path


def number(pattern, text, group=1):
    m = re.search(pattern, text)
    if not m:
        raise ValueError(f"no match for {pattern!r} in: {text[-400:]!r}")
    return float(m.group(group))


# --- each tool: argv for a mode, and how to read (requests, seconds) from what it printed ---

def sweetspot(engine):
    def argv(mode, url, rate):
        a = [OURS, "load", url, "-t", "1", "-c", str(CONNS), "-d", f"{SECONDS}s",
             "--engine", engine, "-q", "--json", "-"]
        if mode == "pipelined":
            a += ["--pipeline", str(DEPTH)]
        elif mode == "per-request":
            a += ["--no-keepalive"]
        elif mode == "rate":
            a += ["-R", str(rate)]
        return a

    def read(out, err):
        r = json.loads(out)
        return r["requests"], r["duration_s"]
    return argv, read, None


def wrk():
    def argv(mode, url, rate):
        a = ["wrk", "-t1", f"-c{CONNS}", f"-d{SECONDS}s"]
        if mode == "pipelined":
            a += ["-s", pipeline_script()]
        elif mode == "per-request":
            a += ["-H", "Connection: close"]
        return a + [url]

    def read(out, err):
        return number(r"(\d+) requests in", out), number(r"requests in ([\d.]+)s", out)
    return argv, read, {"rate": "no fixed rate (that is wrk2, not in Debian)"}


def h2load():
    def argv(mode, url, rate):
        a = ["h2load", "--h1", "-t1", f"-c{CONNS}", "-D", str(SECONDS)]
        if mode == "pipelined":
            a += [f"-m{DEPTH}"]
        elif mode == "rate":
            # --rps is per client.
            a += [f"--rps={rate / CONNS:.2f}"]
        return a + [url]

    def read(out, err):
        done = number(r"requests: \d+ total, \d+ started, (\d+) done", out)
        return done, number(r"finished in ([\d.]+)s", out)
    return argv, read, {"per-request": "keeps its connections open (no option to close them)"}


def hey():
    def argv(mode, url, rate):
        a = ["hey", "-z", f"{SECONDS}s", "-c", str(CONNS)]
        if mode == "per-request":
            a += ["-disable-keepalive"]
        elif mode == "rate":
            a += ["-q", f"{rate / CONNS:.2f}"]  # per worker
        return a + [url]

    def read(out, err):
        answered = sum(int(n) for n in re.findall(r"\[\d+\]\s+(\d+) responses", out))
        return answered, number(r"Total:\s+([\d.]+) secs", out)
    return argv, read, {"pipelined": "no pipelining"}


def ab():
    def argv(mode, url, rate):
        a = ["ab", "-q", "-c", str(CONNS), "-t", str(SECONDS), "-n", "100000000"]
        if mode == "closed":
            a += ["-k"]
        return a + [url]

    def read(out, err):
        return (number(r"Complete requests:\s+(\d+)", out),
                number(r"Time taken for tests:\s+([\d.]+)", out))
    return argv, read, {"pipelined": "no pipelining", "rate": "no fixed rate"}


def autocannon():
    def argv(mode, url, rate):
        a = ["autocannon", "-c", str(CONNS), "-d", str(SECONDS), "-j"]
        if mode == "pipelined":
            a += ["-p", str(DEPTH)]
        elif mode == "rate":
            a += ["-R", str(rate)]
        return a + [url]

    def read(out, err):
        r = json.loads(out)
        return r["2xx"] + r["non2xx"], r["duration"]
    return argv, read, {"per-request": "keeps its connections open (no option to close them)"}


def available(name):
    return shutil.which(name) is not None


def main():
    tools = [("sweetspot (epoll)", sweetspot("epoll")), ("sweetspot (uring)", sweetspot("uring")),
             ("wrk", wrk()), ("h2load", h2load()), ("hey", hey()), ("ab", ab())]
    skipped = []
    if available("autocannon"):
        tools.append(("autocannon", autocannon()))
    else:
        skipped.append("autocannon: not installed (npm i -g autocannon)")
    for name, binary in [("h2load", "h2load"), ("hey", "hey"), ("ab", "ab")]:
        if not available(binary):
            tools = [t for t in tools if t[0] != name]
            skipped.append(f"{name}: not installed")
    nginx, url = start_static_nginx(WORK)
    print(f"# generators against nginx (1 worker, CPU 0), every tool on CPU 1: {CONNS} "
          f"connections, {SECONDS} s runs, {ROUNDS} rotating rounds, medians")
    print(f"# {os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; CPU per request = the tool's "
          "cgroup CPU time / the requests it completed")
    for note in skipped:
        print(f"# {note}")
    try:
        rate = None
        for mode in ["closed", "pipelined", "per-request", "rate"]:
            runnable = [(n, t) for n, t in tools if mode not in (t[2] or {})]
            results = {n: [] for n, _ in runnable}
            for r in range(ROUNDS):
                order = runnable[r % len(runnable):] + runnable[:r % len(runnable)]
                for name, (argv, read, _) in order:
                    env = GO_ENV if name == "hey" else None
                    out, err, cpu = run_pinned(argv(mode, url, rate), 1, env=env)
                    try:
                        requests, seconds = read(out, err)
                    except (ValueError, KeyError, json.JSONDecodeError) as e:
                        print(f"# {mode} {name}: unreadable output ({e})")
                        continue
                    if requests > 0:
                        results[name].append((requests / seconds, cpu * 1e6 / requests))
            medians = {n: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
                       for n, v in results.items() if v}
            if mode == "closed" and "wrk" in medians:
                rate = int(medians["wrk"][0] / 2)
            title = f"{mode}" + (f" at {rate} req/s" if mode == "rate" else "")
            print(f"\n## {title}")
            print(f"{'tool':<20} {'req/s':>10} {'us/req':>8} {'req/s vs best':>14} "
                  f"{'us/req vs ours (epoll)':>23}")
            best = max(v[0] for v in medians.values())
            ours = medians.get("sweetspot (epoll)")
            for name, (rps, cpu) in sorted(medians.items(), key=lambda kv: kv[1][1]):
                vs = f"{cpu / ours[1]:.3f}" if ours else "-"
                print(f"{name:<20} {rps:>10.0f} {cpu:>8.2f} {rps / best:>14.3f} {vs:>23}")
            for name, (_, _, cannot) in tools:
                if cannot and mode in cannot:
                    print(f"{name:<20} cannot: {cannot[mode]}")
            for driver in ["sweetspot (epoll)", "sweetspot (uring)"]:
                if driver not in medians:
                    continue
                rps, cpu = medians[driver]
                others = {n: v for n, v in medians.items() if not n.startswith("sweetspot")}
                lowest = min(others.items(), key=lambda kv: kv[1][1]) if others else None
                met = (lowest is None or cpu <= lowest[1][1]) and rps >= 0.97 * best
                print(f"goal, {driver}: lowest CPU per request at >= 0.97 of the best "
                      f"req/s: {'met' if met else 'NOT met'} (its cpu / the lowest other tool's "
                      f"({lowest[0] if lowest else '-'}) = "
                      f"{cpu / lowest[1][1] if lowest else 0:.3f}, req/s / best = "
                      f"{rps / best:.3f})")
            sys.stdout.flush()
    finally:
        nginx.stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)

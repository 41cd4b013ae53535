#!/usr/bin/env python3
"""What our HTTP/2 load costs beside h2load's (issue 61, item 4: "the client as cheap as h2load
everywhere"), and what HTTP/2 costs per request beside our HTTP/1.1 path. Run by
benches/h2_cost.sh.

Two servers, each alone on CPU 0 with one worker: nginx (HTTP/2 with prior knowledge, h2c, and
HTTP/1.1 on a second port) and h2o (h2c), both serving a 14-byte file. Each tool runs on CPU 1
in a cgroup of its own (its CPU time exact), one thread, for SECONDS: h2load and `sweetspot
load --h2c`, at 10 connections x 10 streams and at 1 connection x 100 streams; against nginx
also `sweetspot load` over HTTP/1.1 at 100 requests in flight (100 connections, and 10
pipelining 10 deep). Each round runs a server's tools in a rotating order; the table gives
medians over the rounds of req/s and CPU per request, and each one's ratio to h2load's in the
same round (the median of those ratios). The goal, for every server and shape: our CPU per
request at most h2load's, our req/s at least 0.97x.

Usage: benches/h2_cost.py SECONDS ROUNDS
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile

from benchlib import Pinned, free_port, run_pinned, wait_listening, write_nginx_conf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
WORK = tempfile.mkdtemp(prefix="sweetspot-h2-cost-")
os.chmod(WORK, 0o755)  # nginx's worker (nobody) reads www/ under it
WWW = os.path.join(WORK, "www")
SHAPES = [(10, 10), (1, 100)]


def start_nginx():
    """nginx on CPU 0: (process, {"h2": h2c URL, "h1": HTTP/1.1 URL})."""
    h2, h1 = free_port(), free_port()
    directory = os.path.join(WORK, "nginx")
    os.makedirs(directory, exist_ok=True)
    write_nginx_conf(directory, 1, f"listen 127.0.0.1:{h2} http2 backlog=4096; "
                                   f"listen 127.0.0.1:{h1} backlog=4096; root {WWW};")
    nginx = Pinned(["nginx", "-p", directory, "-c", f"{directory}/nginx.conf"], 0)
    for port in (h2, h1):
        wait_listening(port)
    return nginx, {"h2": f"http://127.0.0.1:{h2}/", "h1": f"http://127.0.0.1:{h1}/"}


def start_h2o():
    """h2o (one thread) on CPU 0: (process, {"h2": h2c URL})."""
    port = free_port()
    conf = os.path.join(WORK, "h2o.conf")
    with open(conf, "w") as f:
        f.write(f"listen:\n  host: 127.0.0.1\n  port: {port}\nnum-threads: 1\n"
                f"access-log: /dev/null\nerror-log: {WORK}/h2o-error.log\n"
                f"hosts:\n  default:\n    paths:\n      /:\n        file.dir: {WWW}\n")
    h2o = Pinned(["h2o", "-c", conf], 0)
    wait_listening(port)
    return h2o, {"h2": f"http://127.0.0.1:{port}/"}


def h2load(connections, streams):
    def make(urls):
        argv = ["h2load", "-t", "1", "-c", str(connections), "-m", str(streams),
                "-D", str(SECONDS), urls["h2"]]

        def read(out):
            done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
            failed = int(re.search(r"(\d+) failed", out).group(1))
            return done - failed, float(re.search(r"finished in ([\d.]+)s", out).group(1))
        return argv, read
    return make


def ours(url_key, extra):
    def make(urls):
        argv = [OURS, "load", urls[url_key], "-t", "1", "-d", f"{SECONDS}s", "-q",
                "--json", "-"] + extra

        def read(out):
            r = json.loads(out)
            bad = sum(r["errors"].values())
            if bad:
                raise RuntimeError(f"{extra}: {bad} errors")
            return r["requests"], r["duration_s"]
        return argv, read
    return make


def tools(server):
    """(shape label, tool name, make) of `server`, h2load first in each shape."""
    rows = []
    for c, m in SHAPES:
        shape = f"{c} x {m}"
        rows.append((shape, "h2load", h2load(c, m)))
        rows.append((shape, "ours --h2c", ours("h2", ["--h2c", "-c", str(c),
                                                      "--streams", str(m)])))
    if server == "nginx":
        rows.append(("100 in flight", "ours HTTP/1.1 -c 100", ours("h1", ["-c", "100"])))
        rows.append(("100 in flight", "ours HTTP/1.1 -c 10 --pipeline 10",
                     ours("h1", ["-c", "10", "--pipeline", "10"])))
    return rows


def measure(server, start):
    """{(shape, tool): [(req/s, us CPU/req)] a round} against `server`."""
    process, urls = start()
    rows = tools(server)
    runs = {(shape, name): [] for shape, name, _ in rows}
    try:
        for r in range(ROUNDS):
            for shape, name, make in rows[r % len(rows):] + rows[:r % len(rows)]:
                argv, read = make(urls)
                out, err, cpu = run_pinned(argv, 1)
                try:
                    requests, seconds = read(out)
                except Exception as e:
                    sys.exit(f"h2_cost: {server} {shape} {name}: {e}: {err.strip()[:300]}")
                if not requests:
                    sys.exit(f"h2_cost: {server} {shape} {name}: nothing answered: "
                             f"{err.strip()[:300]}")
                runs[(shape, name)].append((requests / seconds, cpu / requests * 1e6))
    finally:
        process.stop()
    return runs


def ratio(runs, base, at):
    return statistics.median(a[at] / b[at] for a, b in zip(runs, base))


def report(server, runs):
    print(f"\n{server} (1 worker on CPU 0)")
    print(f"{'shape':<15}{'tool':<36}{'req/s':>10}{'us CPU/req':>12}{'req/s vs h2load':>17}"
          f"{'CPU/req vs h2load':>19}")
    verdicts = []
    for (shape, name), rows in runs.items():
        base = runs.get((shape, "h2load"), runs[("10 x 10", "h2load")])
        rps = statistics.median(x for x, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{shape:<15}{name:<36}{rps:>10.0f}{cpu:>12.2f}{ratio(rows, base, 0):>16.2f}x"
              f"{ratio(rows, base, 1):>18.2f}x")
        if name == "ours --h2c":
            verdicts.append((shape, ratio(rows, base, 0), ratio(rows, base, 1)))
    for shape, rps, cpu in verdicts:
        met = "met" if rps >= 0.97 and cpu <= 1.0 else "NOT met"
        print(f"verdict {server} {shape}: our h2c at {rps:.2f}x h2load's req/s (goal >= 0.97) "
              f"and {cpu:.2f}x its CPU per request (goal <= 1.00): {met}")
    if server == "nginx":
        h2 = runs[("10 x 10", "ours --h2c")]
        h1 = runs[("100 in flight", "ours HTTP/1.1 -c 100")]
        extra = statistics.median(a[1] - b[1] for a, b in zip(h2, h1))
        print(f"HTTP/2 over our HTTP/1.1 path at 100 requests in flight: {extra:+.2f} us of "
              f"client CPU per request (h2c -c 10 --streams 10 minus HTTP/1.1 -c 100)")


def main():
    for tool in ("nginx", "h2o", "h2load"):
        if not shutil.which(tool):
            sys.exit(f"h2_cost: {tool} is needed (benches/h2_cost.sh installs it)")
    os.makedirs(WWW, exist_ok=True)
    with open(os.path.join(WWW, "index.html"), "w") as f:
        f.write("Hello, World!\n")
    try:
        results = [(server, measure(server, start))
                   for server, start in (("nginx", start_nginx), ("h2o", start_h2o))]
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"# HTTP/2 load: one tool thread on CPU 1, the server alone on CPU 0, {SECONDS} s a "
          f"run, {ROUNDS} rounds; medians, ratios to h2load's in the same round")
    for server, runs in results:
        report(server, runs)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What our HTTP/2 load costs beside h2load's (issue: "HTTP/2 in the generator"), and what
HTTP/2 costs per request beside our HTTP/1.1 path. Run by benches/h2_cost.sh.

nginx (1 worker, on CPU 0) serves a 14-byte file on two ports: HTTP/2 with prior knowledge
(h2c) and HTTP/1.1. Each tool runs on CPU 1 in a cgroup of its own (its CPU time exact), one
thread, for SECONDS: h2load and `sweetspot load --h2c` at 10 connections x 10 streams, and
`sweetspot load` over HTTP/1.1 at the same concurrency (100 connections, and 10 connections
pipelining 10 deep, HTTP/1.1's own way to put 10 requests on a connection). Each round runs
them in a rotating order; the table gives medians over the rounds of req/s and CPU per request,
and each one's ratio to h2load's in the same round (then the median of those ratios). The goal:
our h2c CPU per request at most h2load's, its req/s at least 0.97x.

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


def start_nginx():
    """nginx on CPU 0: (process, h2c URL, HTTP/1.1 URL)."""
    h2, h1 = free_port(), free_port()
    www = os.path.join(WORK, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("Hello, World!\n")
    write_nginx_conf(WORK, 1, f"listen 127.0.0.1:{h2} http2 backlog=4096; "
                              f"listen 127.0.0.1:{h1} backlog=4096; root {www};")
    nginx = Pinned(["nginx", "-p", WORK, "-c", f"{WORK}/nginx.conf"], 0)
    for port in (h2, h1):
        wait_listening(port)
    return nginx, f"http://127.0.0.1:{h2}/", f"http://127.0.0.1:{h1}/"


def h2load(urls):
    argv = ["h2load", "-t", "1", "-c", "10", "-m", "10", "-D", str(SECONDS), urls["h2"]]

    def read(out):
        done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
        failed = int(re.search(r"(\d+) failed", out).group(1))
        return done - failed, float(re.search(r"finished in ([\d.]+)s", out).group(1))
    return argv, read


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


TOOLS = [
    ("h2load -c 10 -m 10", h2load),
    ("ours --h2c -c 10 --streams 10", ours("h2", ["--h2c", "-c", "10", "--streams", "10"])),
    ("ours HTTP/1.1 -c 100", ours("h1", ["-c", "100"])),
    ("ours HTTP/1.1 -c 10 --pipeline 10", ours("h1", ["-c", "10", "--pipeline", "10"])),
]


def main():
    for tool in ("nginx", "h2load"):
        if not shutil.which(tool):
            sys.exit(f"h2_cost: {tool} is needed (benches/h2_cost.sh installs it)")
    nginx, h2_url, h1_url = start_nginx()
    urls = {"h2": h2_url, "h1": h1_url}
    rows = {name: [] for name, _ in TOOLS}
    try:
        for r in range(ROUNDS):
            order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
            for name, make in order:
                argv, read = make(urls)
                out, err, cpu = run_pinned(argv, 1)
                try:
                    requests, seconds = read(out)
                except Exception as e:
                    sys.exit(f"h2_cost: {name}: {e}: {err.strip()[:300]}")
                if not requests:
                    sys.exit(f"h2_cost: {name}: no requests answered: {err.strip()[:300]}")
                rows[name].append((requests / seconds, cpu / requests * 1e6))
    finally:
        nginx.stop()
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"# HTTP/2 load against nginx h2c (1 worker, CPU 0), one tool thread on CPU 1, "
          f"{SECONDS} s a run, {ROUNDS} rounds; medians")
    print(f"{'tool':<36}{'req/s':>10}{'us CPU/req':>12}{'req/s vs h2load':>17}"
          f"{'CPU/req vs h2load':>19}")
    base = rows[TOOLS[0][0]]
    for name, _ in TOOLS:
        runs = rows[name]
        rps = statistics.median(x for x, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        rps_ratio = statistics.median(a[0] / b[0] for a, b in zip(runs, base))
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(runs, base))
        print(f"{name:<36}{rps:>10.0f}{cpu:>12.2f}{rps_ratio:>16.2f}x{cpu_ratio:>18.2f}x")
    ours_h2 = rows[TOOLS[1][0]]
    rps_ratio = statistics.median(a[0] / b[0] for a, b in zip(ours_h2, base))
    cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(ours_h2, base))
    print(f"\nverdict: our h2c at {rps_ratio:.2f}x h2load's req/s (goal >= 0.97) and "
          f"{cpu_ratio:.2f}x its CPU per request (goal <= 1.00): "
          f"{'met' if rps_ratio >= 0.97 and cpu_ratio <= 1.0 else 'NOT met'}")
    h1 = rows[TOOLS[2][0]]
    extra = statistics.median(a[1] - b[1] for a, b in zip(ours_h2, h1))
    print(f"HTTP/2 over our HTTP/1.1 path at 100 requests in flight: {extra:+.2f} us of "
          f"client CPU per request (h2c -c 10 --streams 10 minus HTTP/1.1 -c 100)")


if __name__ == "__main__":
    main()

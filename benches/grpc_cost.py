#!/usr/bin/env python3
"""What `sweetspot load --grpc` costs a call beside h2load sending the same gRPC frames (issue
61: ghz cannot be installed here, so h2load is the anchor). Run by benches/grpc_cost.sh.

Our async server (1 worker, on CPU 0) serves the lab's method /sweetspot.Lab/Work; the
message asks no CPU and no wait (a WorkRequest of zeros, framed: 5 bytes), so the server
answers as fast as it can and the client's own cost shows. Each tool runs on CPU 1 in a cgroup
of its own (its CPU time exact), one thread, for SECONDS: h2load with the framed message as
its POST body (`-d`) and gRPC's headers (`content-type: application/grpc`, `te: trailers`),
and `sweetspot load --grpc`, at 10 channels x 10 streams and at 1 x 100. A call counts when it
was answered (h2load: its `succeeded`; ours: its calls whose grpc-status was OK, which must be
every one of its requests). Each round runs the tools in a rotating order; the table gives
medians over the rounds of calls/s and CPU per call, and each one's ratio to h2load's in the
same round. The goal: our CPU per call at most h2load's.

Usage: benches/grpc_cost.py SECONDS ROUNDS
"""

import json
import os
import re
import statistics
import sys
import tempfile

from benchlib import run_pinned, start_listening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
WORK = tempfile.mkdtemp(prefix="sweetspot-grpc-cost-")
MESSAGE = os.path.join(WORK, "work.bin")  # the empty WorkRequest: no CPU, no wait
FRAMED = os.path.join(WORK, "work.framed")  # the same as gRPC frames it, for h2load


def h2load(url, connections, streams):
    argv = ["h2load", "-t", "1", "-c", str(connections), "-m", str(streams), "-D", str(SECONDS),
            "-d", FRAMED, "-H", "content-type: application/grpc", "-H", "te: trailers", url]

    def read(out):
        succeeded = int(re.search(r"(\d+) succeeded", out).group(1))
        return succeeded, float(re.search(r"finished in ([\d.]+)s", out).group(1))
    return argv, read


def ours(url, connections, streams):
    argv = [OURS, "load", "--grpc", "--body", "@" + MESSAGE, "-c", str(connections),
            "--streams", str(streams), "-t", "1", "-d", f"{SECONDS}s", "-q", "--json", "-", url]

    def read(out):
        r = json.loads(out)
        ok = r["http2"]["grpc_status"].get("0", 0)
        if ok != r["requests"] or sum(r["errors"].values()):
            raise RuntimeError(f"{r['requests']} requests, {ok} OK, errors {r['errors']}")
        return ok, r["duration_s"]
    return argv, read


SHAPES = [(10, 10), (1, 100)]
TOOLS = [("h2load", h2load), ("ours --grpc", ours)]


def main():
    with open(MESSAGE, "wb"):
        pass
    with open(FRAMED, "wb") as f:
        f.write(b"\0\0\0\0\0")
    server, port = start_listening(
        "async", [OURS, "serve", "--arch", "async", "--workers", "1", "--port", "0"], 0)
    url = f"http://127.0.0.1:{port}/sweetspot.Lab/Work"
    rows = {(shape, name): [] for shape in SHAPES for name, _ in TOOLS}
    try:
        for r in range(ROUNDS):
            for shape in SHAPES:
                order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
                for name, make in order:
                    argv, read = make(url, *shape)
                    out, err, cpu = run_pinned(argv, 1)
                    try:
                        calls, seconds = read(out)
                    except Exception as e:
                        sys.exit(f"grpc_cost: {name} {shape}: {e}: {err.strip()[:300]}")
                    if not calls:
                        sys.exit(f"grpc_cost: {name} {shape}: no call answered")
                    rows[(shape, name)].append((calls / seconds, cpu / calls * 1e6))
    finally:
        server.stop()
    print(f"# gRPC unary calls (/sweetspot.Lab/Work, an empty message) against our async server "
          f"(1 worker, CPU 0), one tool thread on CPU 1, {SECONDS} s a run, {ROUNDS} rounds; "
          f"medians")
    print(f"{'channels x streams':<20}{'tool':<14}{'calls/s':>10}{'us CPU/call':>13}"
          f"{'calls/s vs h2load':>19}{'CPU/call vs h2load':>20}")
    verdicts = []
    for shape in SHAPES:
        base = rows[(shape, "h2load")]
        for name, _ in TOOLS:
            runs = rows[(shape, name)]
            rps = statistics.median(x for x, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            rps_ratio = statistics.median(a[0] / b[0] for a, b in zip(runs, base))
            cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(runs, base))
            print(f"{f'{shape[0]} x {shape[1]}':<20}{name:<14}{rps:>10.0f}{cpu:>13.2f}"
                  f"{rps_ratio:>18.2f}x{cpu_ratio:>19.2f}x")
            if name != "h2load":
                verdicts.append((shape, cpu_ratio))
    for shape, ratio in verdicts:
        print(f"verdict {shape[0]} x {shape[1]}: our CPU per call {ratio:.2f}x h2load's "
              f"(goal <= 1.00): {'met' if ratio <= 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()

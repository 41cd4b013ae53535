#!/usr/bin/env python3
"""Each architecture beside the best public server of its model (run by benches/peers.sh).

Every comparison starts our server and its peer with equal pool sizes, both pinned to CPU 0,
and drives them with wrk pinned to CPU 1, in alternating rounds (ours, peer, peer, ours, ...).
A round reports requests/s, errors and the server's CPU per request: the cpuacct usage of a
cgroup v1 group made for that server (every process and thread it ran, exited ones included),
or, where no cgroup can be made, utime + stime of its process tree plus its reaped children
from /proc. The table gives each side's median over the rounds, the ratio ours / peer and the
goal.

Usage: benches/peers.py SECONDS ROUNDS [ARCH] (the shell script installs and builds what it
needs; ARCH keeps only the comparisons of that architecture, or against that peer: `hyper`
keeps async's and the A/A control, hyper against itself).
"""

import glob
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import (Pinned, free_port, listening_port, run_pinned, wrk_counts,
                      write_nginx_conf)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "sweetspot")
PEERS = os.path.join(ROOT, "benches", "peers", "target", "release")
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
# Optional: only the comparisons whose architecture starts with this (e.g. "async").
ONLY = sys.argv[3] if len(sys.argv) > 3 else ""
WORK = tempfile.mkdtemp(prefix="sweetspot-peers-")


class Server:
    """A server pinned to CPU 0 in a cgroup of its own (when one can be made), up and
    answering on its port."""

    def __init__(self, name, argv, port=None, share=None):
        self.name = name
        self.out = open(os.path.join(WORK, re.sub(r"[^\w.-]", "_", name) + ".out"), "w+")
        self.pinned = Pinned(argv, 0, stdout=subprocess.PIPE if port is None else self.out,
                             stderr=self.out, share=share)
        self.proc = self.pinned.proc
        if port is None:
            port, line = listening_port(self.proc)
            if port is None:
                self.stop()
                raise RuntimeError(f"{name}: no ready line: {line!r}")
        self.port = port
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.out.seek(0)
                    logs = self.out.read()
                    for log in glob.glob(os.path.join(WORK, "*", "error.log")):
                        with open(log) as f:
                            logs += f.read()[-300:]
                    self.stop()
                    raise RuntimeError(f"{name} did not come up: {logs[-600:]}")
                time.sleep(0.05)
        time.sleep(0.3)  # pools start their workers after the listener

    def cpu(self):
        return self.pinned.cpu()

    def stop(self):
        self.pinned.stop()


def wrk(port, path, connections, seconds, close):
    """Runs wrk on CPU 1: (requests, req/s, errors, the share of CPU 1 wrk used)."""
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s"]
    if close:
        argv += ["-H", "Connection: close"]
    out, _, cpu = run_pinned(argv + [f"http://127.0.0.1:{port}{path}"], 1)
    requests, rps = wrk_counts(out)
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(m.group(1)) if m else 0
    return requests, rps, errors, cpu / seconds


def measure(server, path, connections, close):
    before = server.cpu()
    requests, rps, errors, wrk_busy = wrk(server.port, path, connections, SECONDS, close)
    after = server.cpu()
    return rps, (after - before) * 1e6 / max(requests, 1), errors, wrk_busy


# --- the peers' configurations ------------------------------------------------------------

def nginx(workers):
    d = os.path.join(WORK, f"nginx{workers}")
    os.makedirs(d, exist_ok=True)
    port = free_port()
    write_nginx_conf(d, workers, f"listen 127.0.0.1:{port}; location / {{ default_type "
                     'text/plain; return 200 "Hello, World!"; }')
    return ["nginx", "-c", f"{d}/nginx.conf", "-p", d], port


def apache(mpm, pool, www):
    d = os.path.join(WORK, f"apache-{mpm}")
    os.makedirs(d, exist_ok=True)
    shutil.chown(d, "www-data", "www-data")
    port = free_port()
    mods = "/usr/lib/apache2/modules"
    if mpm == "prefork":
        sizing = f"""StartServers {pool}
MinSpareServers {pool}
MaxSpareServers {pool}
ServerLimit {pool}
MaxRequestWorkers {pool}"""
    else:
        sizing = f"""StartServers 1
ServerLimit 1
ThreadLimit {pool}
ThreadsPerChild {pool}
MinSpareThreads 1
MaxSpareThreads {pool}
MaxRequestWorkers {pool}"""
    with open(os.path.join(d, "httpd.conf"), "w") as f:
        f.write(f"""ServerRoot {d}
ServerName localhost
Listen 127.0.0.1:{port}
PidFile {d}/httpd.pid
DefaultRuntimeDir {d}
Mutex file:{d} default
ErrorLog {d}/error.log
LogLevel warn
User www-data
Group www-data
LoadModule mpm_{mpm}_module {mods}/mod_mpm_{mpm}.so
LoadModule authz_core_module {mods}/mod_authz_core.so
LoadModule mime_module {mods}/mod_mime.so
TypesConfig /etc/mime.types
{sizing}
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 5
DocumentRoot {www}
<Directory {www}>
    Require all granted
</Directory>
""")
    return ["apache2", "-f", f"{d}/httpd.conf", "-DFOREGROUND"], port


def lighttpd(www):
    d = os.path.join(WORK, "lighttpd")
    os.makedirs(d, exist_ok=True)
    shutil.chown(d, "www-data", "www-data")  # it opens its log after dropping to www-data
    port = free_port()
    with open(os.path.join(d, "lighttpd.conf"), "w") as f:
        f.write(f"""server.document-root = "{www}"
server.bind = "127.0.0.1"
server.port = {port}
server.event-handler = "poll"
server.username = "www-data"
server.groupname = "www-data"
server.errorlog = "{d}/error.log"
server.max-keep-alive-requests = 1000000
server.max-keep-alive-idle = 5
mimetype.assign = (".txt" => "text/plain")
""")
    return ["lighttpd", "-D", "-f", f"{d}/lighttpd.conf"], port


def mini_httpd(www):
    port = free_port()
    return ["mini_httpd", "-D", "-h", "127.0.0.1", "-p", str(port), "-d", www, "-u", "www-data",
            "-l", "/dev/null", "-T", "utf-8"], port


def ours(arch, *flags):
    return [OURS, "serve", "--arch", arch, "--port", "0", *flags]


def version(argv, pattern=r"[\d.]+\d"):
    try:
        text = subprocess.run(argv, capture_output=True, text=True).stdout
        text += subprocess.run(argv, capture_output=True, text=True).stderr
    except OSError:
        return "not installed"
    m = re.search(pattern, text)
    return m.group(0) if m else "?"


def crate_version(name):
    with open(os.path.join(ROOT, "benches", "peers", "Cargo.lock")) as f:
        m = re.search(rf'name = "{name}"\nversion = "([^"]+)"', f.read())
    return m.group(1) if m else "?"


# --- the comparisons -------------------------------------------------------------------------

def main():
    www = os.path.join(WORK, "www")
    os.makedirs(www)
    with open(os.path.join(www, "hello.txt"), "w") as f:
        f.write("Hello, World!")
    os.chmod(WORK, 0o755)
    # (ours, ours' argv, peer, peer's (argv, port), path, connections, close, goals[, share]):
    # share, when given, holds both servers to that share of CPU 0 (a CFS quota).
    goals_cpu = [("cpu", 1.0)]
    comparisons = [
        ("epoll", ours("epoll"), "nginx 1 worker", lambda: nginx(1), "/hello", 50, False,
         goals_cpu),
        ("reactors 2", ours("reactors", "--workers", "2"), "nginx 2 workers", lambda: nginx(2),
         "/hello", 50, False, [("rps", 1.0), ("cpu", 1.0)]),
        ("uring 1", ours("uring", "--workers", "1"), "monoio 1 thread",
         lambda: ([os.path.join(PEERS, "monoio_hello"), "0"], None), "/hello", 50, False,
         goals_cpu),
    ]
    # async against hyper at every concurrency: one connection (every request a wakeup), 50,
    # 50 with both servers held to half of CPU 0 (there the server, not wrk, sets the pace:
    # at 50 connections with the whole CPU wrk's CPU is full, see benches/async_floor.sh),
    # and 1,000.
    def hyper():
        return [os.path.join(PEERS, "hyper_hello"), "0", "2"], None

    for conns, share in [(1, None), (50, None), (50, 0.5), (1000, None)]:
        comparisons.append(("async 2", ours("async", "--workers", "2"), "hyper, tokio 2 workers",
                            hyper, "/hello", conns, False, [("rps", 1.0), ("cpu", 1.0)], share))
    # The control: hyper against itself (A/A). Its ratios are how far a ratio strays from 1.0
    # by chance in this run, the yardstick for the rows above whose goals sit at 1.0.
    for conns in (1, 50):
        comparisons.append(("hyper (A/A)", hyper()[0], "hyper, tokio 2 workers", hyper,
                            "/hello", conns, False, []))
    comparisons += [
        # Many connections, each request waiting 5 ms: the event loops' own ground (the goal:
        # within 10% of reactors' CPU per request).
        ("async 2", ours("async", "--workers", "2"), "reactors 2 (ours)",
         lambda: (ours("reactors", "--workers", "2"), None), "/work?cpu_us=50&wait_ms=5", 1000,
         False, [("cpu", 1.1)]),
    ]
    for arch, mpm in [("prethreaded", "worker"), ("preforked", "prefork"), ("hybrid", "event")]:
        for close in (False, True):
            comparisons.append((
                f"{arch} 8", ours(arch, "--workers", "8", "--root", www),
                f"apache {mpm} 8", lambda mpm=mpm: apache(mpm, 8, www), "/hello.txt", 8, close,
                goals_cpu))
    comparisons.append(("poll", ours("poll", "--root", www), "lighttpd poll",
                        lambda: lighttpd(www), "/hello.txt", 50, False, goals_cpu))
    comparisons.append(("forking", ours("forking", "--root", www), "mini_httpd",
                        lambda: mini_httpd(www), "/hello.txt", 8, True, goals_cpu))

    print(f"# peers: wrk -t1 -d{SECONDS}s, {ROUNDS} alternating rounds, medians; server on CPU 0, "
          "wrk on CPU 1; CPU per request from a cgroup made for each server")
    print(f"# {os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}, "
          f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}")
    print(f"# nginx {version(['nginx', '-v'])}, apache {version(['apache2', '-v'])}, "
          f"lighttpd {version(['lighttpd', '-v'])}, mini_httpd {version(['mini_httpd', '-V'])}, "
          f"monoio {crate_version('monoio')}, hyper {crate_version('hyper')}, "
          f"tokio {crate_version('tokio')}, wrk {version(['wrk', '-v'], r'wrk [^ ]+')}")
    header = (f"{'ours':<14} {'peer':<24} {'load':<22} {'req/s ours':>11} {'req/s peer':>11} "
              f"{'us/req ours':>11} {'us/req peer':>11} {'err':>9} {'wrk cpu':>8} {'rps x':>6} "
              f"{'cpu x':>6}  goal")
    print(header)
    for name, argv, peer_name, peer, path, conns, close, goals, *held in comparisons:
        if not (name.startswith(ONLY) or peer_name.startswith(ONLY)):
            continue
        share = held[0] if held else None
        load = f"{path} c={conns} {'close' if close else 'keep-alive'}"
        if share:
            load += f", {share:.0%} of CPU 0"
        try:
            a = Server(name, argv, share=share)
        except (RuntimeError, OSError) as e:
            print(f"{name:<14} {peer_name:<24} {load:<22} ours did not start: {e}")
            continue
        try:
            # The peer's port is picked just before it starts: one picked minutes earlier may
            # be taken by then (wrk's own connections use the same range).
            peer_argv, peer_port = peer()
            b = Server(peer_name, peer_argv, port=peer_port, share=share)
        except (RuntimeError, OSError) as e:
            a.stop()
            print(f"{name:<14} {peer_name:<24} {load:<22} peer did not start: {e}")
            continue
        try:
            for s in (a, b):  # warm-up, not measured
                wrk(s.port, path, conns, 1, close)
            runs = {a: [], b: []}
            for r in range(ROUNDS):
                for s in ((a, b) if r % 2 == 0 else (b, a)):
                    runs[s].append(measure(s, path, conns, close))
        finally:
            a.stop()
            b.stop()
        med = {s: (statistics.median(x[0] for x in runs[s]),
                   statistics.median(x[1] for x in runs[s]),
                   sum(x[2] for x in runs[s]),
                   statistics.median(x[3] for x in runs[s])) for s in runs}
        if min(med[a][0], med[b][0], med[a][1], med[b][1]) <= 0:
            print(f"{name:<14} {peer_name:<24} {load:<22} no ratio: a side served nothing "
                  f"(ours {med[a]}, peer {med[b]})")
            continue
        rps_x = med[a][0] / med[b][0]
        cpu_x = med[a][1] / med[b][1]
        verdicts = []
        for kind, bound in goals:
            if kind == "cpu":
                verdicts.append(f"cpu <= {bound}: {'met' if cpu_x <= bound else 'NOT met'}")
            else:
                verdicts.append(f"req/s >= {bound}: {'met' if rps_x >= bound else 'NOT met'}")
        # Each round's own ratios (rounds pair ours and the peer run next to each other).
        per_round = [(x[0] / y[0], x[1] / y[1]) for x, y in zip(runs[a], runs[b])
                     if min(x[0], y[0], x[1], y[1]) > 0]
        if per_round:
            verdicts.append("rounds: req/s x {:.3f}..{:.3f}, cpu x {:.3f}..{:.3f}".format(
                min(r[0] for r in per_round), max(r[0] for r in per_round),
                min(r[1] for r in per_round), max(r[1] for r in per_round)))
        wrk_busy = f"{med[a][3] * 100:.0f}/{med[b][3] * 100:.0f}%"
        print(f"{name:<14} {peer_name:<24} {load:<22} {med[a][0]:>11.0f} {med[b][0]:>11.0f} "
              f"{med[a][1]:>11.2f} {med[b][1]:>11.2f} {med[a][2]:>4}/{med[b][2]:<4} "
              f"{wrk_busy:>8} {rps_x:>6.3f} {cpu_x:>6.3f}  {'; '.join(verdicts)}")
        sys.stdout.flush()
    print("# req/s and us/req: medians over the rounds; err: errors of all rounds, ours/peer; "
          "wrk cpu: how busy wrk kept CPU 1, ours/peer (near 100%: wrk, not the server, set "
          "the pace); rps x and cpu x: ours / peer (cpu x under 1: ours is cheaper per request); "
          "hyper (A/A): the peer against itself, the chance spread of a ratio in this run")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)

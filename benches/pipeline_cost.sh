#!/usr/bin/env bash
# Pipelining cost against backlog: CPU time the server spends per request
# when one connection pipelines 5,000 and then 40,000 `GET /hello` at once. Linear buffer
# handling keeps the two equal; draining the front of the input per request makes the
# larger backlog cost more per request (each request moves the whole backlog behind it).
# CPU is the server thread's time on CPU from /proc/PID/schedstat (ns), 3 rounds each.
# Usage: benches/pipeline_cost.sh [BINARY] [ARCHS...]   (default: target/release/sweetspot poll epoll)
set -euo pipefail
bin=${1:-target/release/sweetspot}
shift || true
archs=${*:-poll epoll}
python3 - "$bin" $archs <<'PY'
import socket, subprocess, sys, threading, signal
bin, archs = sys.argv[1], sys.argv[2:]
REQ = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"

def cpu_ns(pid):
    return int(open(f"/proc/{pid}/schedstat").read().split()[0])

def one_reply_len(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
    data = b""
    while b"Hello, World!" not in data:
        data += s.recv(4096)
    s.close()
    return len(data)

def pipeline(port, n, reply_len):
    s = socket.create_connection(("127.0.0.1", port))
    want = n * reply_len
    got = [0]
    def reader():
        while got[0] < want:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got[0] += len(chunk)
    t = threading.Thread(target=reader)
    t.start()
    s.sendall(REQ * n)
    t.join()
    s.close()
    assert got[0] == want, (got[0], want)

for arch in archs:
    p = subprocess.Popen([bin, "serve", "--arch", arch, "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(p.stdout.readline().decode().split()[2].rsplit(":", 1)[1])
    reply_len = one_reply_len(port)
    per = {}
    for n in (5000, 40000):
        before = cpu_ns(p.pid)
        for _ in range(3):
            pipeline(port, n, reply_len)
        per[n] = (cpu_ns(p.pid) - before) / (3 * n)
    print(f"{arch}: server CPU per request: {per[5000]/1000:.2f} us at 5,000 pipelined, "
          f"{per[40000]/1000:.2f} us at 40,000 (ratio {per[40000]/per[5000]:.2f})")
    p.send_signal(signal.SIGTERM)
    p.wait()
PY

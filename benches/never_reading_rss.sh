#!/usr/bin/env bash
# Memory of a server under a client that never reads.
# Starts `sweetspot serve --arch ARCH` (default epoll) on a free port, sends 12 MB of pipelined
# `GET /` and, on a second connection, 8,000,000 echo-sized lines to an echo server, never
# reading a byte, then prints the server's VmRSS. Usage: benches/never_reading_rss.sh [BINARY] [ARCH]
set -euo pipefail
bin=${1:-target/release/sweetspot}
arch=${2:-epoll}
python3 - "$bin" "$arch" <<'PY'
import os, socket, subprocess, sys, time, signal
bin, arch = sys.argv[1], sys.argv[2]

def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def run(protocol, payload, label):
    p = subprocess.Popen([bin, "serve", "--arch", arch, "--port", "0", "--protocol", protocol],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    port = int(line.split()[2].rsplit(":", 1)[1])
    base = rss(p.pid)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(3)
    sent = 0
    try:
        while sent < len(payload):
            sent += s.send(payload[sent:sent + 65536])
    except socket.timeout:
        pass
    time.sleep(3)
    peak = rss(p.pid)
    print(f"{arch} {label}: sent {sent} of {len(payload)} bytes, never read; "
          f"RSS {base} KiB idle -> {peak} KiB")
    s.close()
    p.send_signal(signal.SIGTERM)
    p.wait()

req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
run("http", req * (12_000_000 // len(req)), "12 MB of pipelined GET /")
run("echo", b"x\n" * 8_000_000, "8,000,000 echo lines")
PY

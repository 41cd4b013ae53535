"""An HTTP server from Python's standard library that misbehaves in one way, for the sweep's
tests of an external server that must not break a sweep: `faulty_server.py MODE PORT [TAG]`
(TAG, ignored, marks a test's processes on their command lines), where MODE is one of

  exit-mid        answers 20 requests, then exits with status 3 and a line on stderr
  no-port         runs but never opens its port
  ignore-term     ignores SIGTERM
  flood           writes to stdout without end, with no newline
  leave-children  starts a child in a session of its own that ignores SIGTERM and outlives it
  nest-cgroup     makes a cgroup inside the one it was started in, and moves itself into it
  daemonize       forks a daemon (a new session) that serves, and exits 0 at once

Every other GET is answered with 200 "ok"."""

import http.server
import os
import signal
import socketserver
import sys
import threading
import time

MODE, PORT = sys.argv[1], int(sys.argv[2])
ANSWERED = 0
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        global ANSWERED
        with LOCK:
            ANSWERED += 1
            if MODE == "exit-mid" and ANSWERED > 20:
                sys.stderr.write("faulty: exiting in the middle of a point\n")
                sys.stderr.flush()
                os._exit(3)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def flood():
    block = b"x" * 65536
    while True:
        os.write(1, block)


def sleeper():
    """A child in a session of its own that ignores SIGTERM and sleeps."""
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)


def nest_cgroup():
    """Moves this process into a cgroup `inner` made inside each hierarchy's own cgroup."""
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        roots = []
        if "cpuacct" in controllers.split(","):
            roots = ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"]
        elif controllers == "":
            roots = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        for root in roots:
            own = root + path
            if not os.path.exists(os.path.join(own, "cgroup.procs")):
                continue
            inner = os.path.join(own, "inner")
            os.makedirs(inner, exist_ok=True)
            with open(os.path.join(inner, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            break


def main():
    if MODE == "no-port":
        while True:
            time.sleep(1)
    if MODE == "daemonize":
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
    if MODE == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if MODE == "leave-children":
        sleeper()
    if MODE == "nest-cgroup":
        nest_cgroup()
    server = Server(("127.0.0.1", PORT), Handler)
    if MODE == "flood":
        threading.Thread(target=flood, daemon=True).start()
    server.serve_forever()


main()

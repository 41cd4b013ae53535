"""A small preforking HTTP server from Python's standard library, for the sweep's tests of an
external server's own pool: `prefork_server.py PORT WORKERS` binds PORT, forks WORKERS
processes that each accept on the shared socket and answer every GET with 200 "ok", and waits;
SIGTERM ends the parent and its workers."""

import http.server
import os
import signal
import socket
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    port, workers = int(sys.argv[1]), int(sys.argv[2])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            server = http.server.HTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
            server.socket = listener
            server.serve_forever()
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    for _ in children:
        os.wait()


main()

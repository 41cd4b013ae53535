"""A server with two knobs, for `sweetspot tune` (and its tests): --procs processes, each
listening on the port with SO_REUSEPORT (the kernel spreads connections over them, as
gunicorn's --reuse-port does) and each an event loop for its connections (selectors)
that hands every complete request to a pool of --threads threads, as Puma and gunicorn's
gthread workers do. CPython's global lock holds each process's threads to one core for
Python code: threads help waits, processes help CPU.

  GET /hello                      200 "Hello, World!"
  GET /work?cpu_us=C&wait_ms=W    waits W ms, then spins C us of this thread's own CPU time

--procs 0 starts one a CPU as os.cpu_count() counts them (the machine's, whatever CPU quota
the process runs under), as servers sized by "workers = CPUs" do.

HTTP/1.1 keep-alive, GET only; anything else is 404. Standard library only."""

import argparse
import os
import queue
import selectors
import signal
import socket
import threading
import time
from urllib.parse import parse_qs, urlsplit


def spin(cpu_us):
    end = time.thread_time() + cpu_us / 1e6
    while time.thread_time() < end:
        pass


def respond(target):
    url = urlsplit(target)
    if url.path == "/hello":
        return 200, b"Hello, World!"
    if url.path == "/work":
        q = parse_qs(url.query)
        try:
            cpu_us = int(q.get("cpu_us", ["0"])[0])
            wait_ms = int(q.get("wait_ms", ["0"])[0])
        except ValueError:
            return 400, b"bad number"
        if wait_ms > 0:
            time.sleep(wait_ms / 1000)
        spin(cpu_us)
        return 200, b"done"
    return 404, b"not found"


def worker(jobs, done, wake):
    while True:
        conn, target = jobs.get()
        status, body = respond(target)
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n\r\n"
        try:
            conn.sendall(head.encode() + body)
        except OSError:
            pass
        done.put(conn)
        os.write(wake, b"x")


def serve(listener, threads, parent):
    jobs, done = queue.Queue(), queue.Queue()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    for _ in range(threads):
        threading.Thread(target=worker, args=(jobs, done, wake_w), daemon=True).start()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    buffers = {}
    while os.getppid() == parent:
        for key, _ in sel.select(timeout=0.5):
            if key.data == "accept":
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                buffers[conn] = b""
                sel.register(conn, selectors.EVENT_READ, "conn")
            elif key.data == "wake":
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                while not done.empty():
                    conn = done.get()
                    if conn in buffers:
                        sel.register(conn, selectors.EVENT_READ, "conn")
                        dispatch(conn, buffers, sel, jobs)
            else:
                conn = key.fileobj
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(conn)
                    del buffers[conn]
                    conn.close()
                    continue
                buffers[conn] += data
                dispatch(conn, buffers, sel, jobs)


def dispatch(conn, buffers, sel, jobs):
    """Hands the connection's next complete request to the pool (one at a time a connection)."""
    buf = buffers[conn]
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return
    line = buf[: buf.find(b"\r\n")].decode("latin-1").split()
    buffers[conn] = buf[end + 4 :]
    sel.unregister(conn)
    jobs.put((conn, line[1] if len(line) > 1 else "/"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--procs", type=int, default=1, help="0: os.cpu_count()")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    parent = os.getpid()
    children = []
    procs = args.procs if args.procs > 0 else os.cpu_count()
    # Every process's listener is bound before any child runs, so the first connections
    # spread over all of them (a child that bound late would find them all taken by another).
    listeners = []
    for _ in range(procs):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(("127.0.0.1", args.port))
        listener.listen(1024)
        listener.setblocking(False)
        listeners.append(listener)
    for mine in listeners:
        pid = os.fork()
        if pid == 0:
            for other in listeners:
                if other is not mine:
                    other.close()
            serve(mine, args.threads, parent)
            os._exit(0)
        children.append(pid)
    for listener in listeners:
        listener.close()

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in children:
        os.wait()


if __name__ == "__main__":
    main()

"""sweetspot's routes in CPython's plain idiom, for the `gil` preset (study 002 for real):
`app` is a WSGI app (gunicorn's sync workers, processes; gunicorn's gthread workers, threads
in one process under the GIL) and `asgi` the same routes on an asyncio loop (uvicorn).

  GET /hello                  200 "Hello, World!"
  GET /fib?n=N                F(N) by naive recursion (N <= 35)
  GET /sleep?ms=M             waits M ms (time.sleep, or asyncio.sleep on the loop)
  GET /work?cpu_us=C&wait_ms=W
                              waits W ms, then spins C us of this thread's own CPU time
                              (time.thread_time: a thread waiting for the GIL does not count)

Anything else is 404; a bad number is 400. Standard library only."""

import asyncio
import time
from urllib.parse import parse_qs


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def spin(cpu_us):
    end = time.thread_time() + cpu_us / 1e6
    while time.thread_time() < end:
        pass


def number(query, name, top):
    value = int(parse_qs(query).get(name, ["0"])[0])
    if not 0 <= value <= top:
        raise ValueError(name)
    return value


def plan(path, query):
    """(status, body, wait_s, cpu_us, fib_n) for a request."""
    try:
        if path == "/hello":
            return 200, "Hello, World!", 0, 0, None
        if path == "/fib":
            return 200, None, 0, 0, number(query, "n", 35)
        if path == "/sleep":
            return 200, "slept", number(query, "ms", 60000) / 1e3, 0, None
        if path == "/work":
            wait = number(query, "wait_ms", 60000) / 1e3
            return 200, "worked", wait, number(query, "cpu_us", 10_000_000), None
    except ValueError as bad:
        return 400, f"bad {bad}\n", 0, 0, None
    return 404, "not found\n", 0, 0, None


def finish(status, body, cpu_us, fib_n):
    spin(cpu_us)
    if fib_n is not None:
        body = str(fib(fib_n))
    return body.encode()


REASONS = {200: "200 OK", 400: "400 Bad Request", 404: "404 Not Found"}


def app(environ, start_response):
    status, body, wait, cpu_us, fib_n = plan(environ["PATH_INFO"], environ.get("QUERY_STRING", ""))
    if wait:
        time.sleep(wait)
    data = finish(status, body, cpu_us, fib_n)
    start_response(REASONS[status], [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    query = scope.get("query_string", b"").decode()
    status, body, wait, cpu_us, fib_n = plan(scope["path"], query)
    if wait:
        await asyncio.sleep(wait)
    data = finish(status, body, cpu_us, fib_n)
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})

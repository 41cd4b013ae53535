"""grpcio's server (Debian's python3-grpcio, or PyPI's grpcio) for the `grpc` preset and the
tests: the lab's method /sweetspot.Lab/Work with /work's semantics, on a thread pool.

    grpc_server.py PORT WORKERS

It prints `listening on http://127.0.0.1:PORT workers=N` once it serves (PORT 0: a free one).

The messages are experiments/peers/lab.proto's, read and written here by hand (a few varints),
so nothing is generated: WorkRequest {cpu_us = 1, wait_us = 2, blocking = 3}, WorkReply
{cpu_us = 1, wait_us = 2}. A call waits wait_us (a sleep, which holds its pool thread, as a
synchronous handler does), then spends cpu_us of its thread's CPU time (under the GIL, as
Python code does); figures past /work's bounds are INVALID_ARGUMENT. WORKERS is the pool's
size (grpcio's max_workers). SIGTERM stops it.
"""

import signal
import sys
import threading
import time
from concurrent import futures

import grpc

MAX_CPU_US = 10_000_000
MAX_WAIT_US = 60_000_000


def varint(data, i):
    value, shift = 0, 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def decode(data):
    fields, i = {}, 0
    while i < len(data):
        key, i = varint(data, i)
        if key & 7 != 0:
            raise ValueError("only varint fields are expected")
        fields[key >> 3], i = varint(data, i)
    return fields.get(1, 0), fields.get(2, 0)


def encode_varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(cpu_us, wait_us):
    out = b""
    if cpu_us:
        out += b"\x08" + encode_varint(cpu_us)
    if wait_us:
        out += b"\x10" + encode_varint(wait_us)
    return out


def work(request, context):
    try:
        cpu_us, wait_us = decode(request)
    except (IndexError, ValueError) as e:
        context.abort(grpc.StatusCode.INTERNAL, f"not a WorkRequest: {e}")
    if cpu_us > MAX_CPU_US or wait_us > MAX_WAIT_US:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"cpu_us at most {MAX_CPU_US}, wait_us at most {MAX_WAIT_US}",
        )
    if wait_us:
        time.sleep(wait_us / 1e6)
    end = time.thread_time() + cpu_us / 1e6
    while time.thread_time() < end:
        pass
    return encode(cpu_us, wait_us)


def main():
    port, workers = int(sys.argv[1]), int(sys.argv[2])
    handler = grpc.method_handlers_generic_handler(
        "sweetspot.Lab", {"Work": grpc.unary_unary_rpc_method_handler(work)}
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers), handlers=[handler]
    )
    # Port 0 takes a free one; the ready line says which.
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    if port == 0:
        sys.exit(f"grpc_server.py: cannot listen on 127.0.0.1:{sys.argv[1]}")
    server.start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    print(f"listening on http://127.0.0.1:{port} workers={workers}", flush=True)
    stopped.wait()
    server.stop(0).wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# aborted-scrapes: scrapers that leave before their answer, as killed or cut-off clients do, for
# metrics-aborted-scrapes.test.sh: each connects over TLS, sends GET /metrics with a bearer token, waits a
# random moment, then closes without TLS close_notify: a FIN (shutdown) or an RST (SO_LINGER 0), alternating.
# Prints one JSON line: {"port", "aborted": left with no answer, "answered": had one before leaving,
# "failed": no TLS connection}.
import argparse
import json
import random
import select
import socket
import ssl
import struct
import threading


def one(args, index, ctx, counts, lock):
    rng = random.Random(args.seed * 100003 + index)
    token = f"{args.token_prefix}-{index % args.tokens}"
    req = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    try:
        raw = socket.create_connection(("127.0.0.1", args.port), timeout=30)
        s = ctx.wrap_socket(raw)
        s.sendall(req)
    except OSError:
        with lock:
            counts["failed"] += 1
        return
    # Bytes before the deadline mean the answer (or its start) came first: not an aborted scrape.
    ready, _, _ = select.select([s], [], [], rng.uniform(args.wait_min_ms, args.wait_max_ms) / 1000)
    kind = "answered" if ready or s.pending() else "aborted"
    if index % 2:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST; an SSLSocket sends no close_notify unless unwrapped
    else:
        s.shutdown(socket.SHUT_RDWR)  # drops the TLS state first: a bare FIN
        s.close()
    with lock:
        counts[kind] += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=30)
    p.add_argument("--tokens", type=int, default=16, help="distinct made-up tokens, shared round-robin")
    p.add_argument("--token-prefix", default="storm")
    p.add_argument("--wait-min-ms", type=float, default=20)
    p.add_argument("--wait-max-ms", type=float, default=300)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    counts = {"aborted": 0, "answered": 0, "failed": 0}
    lock = threading.Lock()
    next_index = iter(range(args.count))

    def worker():
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            one(args, i, ctx, counts, lock)

    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"port": args.port, **counts}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""conn_flood: opens COUNT TCP connections to HOST:PORT and holds them (idle, or after a partial
request head) until SIGTERM, from one source address or several; with --reopen, each one the server closes is opened again at once.
Prints "open N" once the connects are done, and on SIGTERM the number the server closed. Used by
e2e/limits.test.sh and bench/conn-flood.sh."""
import argparse
import errno
import resource
import selectors
import signal
import socket
import sys

PARTIAL = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--partial", action="store_true", help="send a partial request head")
    ap.add_argument("--reopen", action="store_true", help="reopen each closed connection")
    ap.add_argument("--sources", type=int, default=0,
                    help="spread the connections over this many loopback source addresses, "
                    "127.3.0.1 and up (a server's per-client cap counts each); 0: the default")
    a = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    sel = selectors.DefaultSelector()
    stats = {"closed": 0, "open": 0, "failed": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    opened = [0]

    def open_one():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if a.sources:
            i = opened[0] % a.sources
            s.bind((f"127.3.{i // 250}.{i % 250 + 1}", 0))
        opened[0] += 1
        s.setblocking(False)
        rc = s.connect_ex((a.host, a.port))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            stats["failed"] += 1
            return
        sel.register(s, selectors.EVENT_WRITE, "connecting")

    for _ in range(a.count):
        open_one()
    connecting = a.count - stats["failed"]
    reported = False
    while not stop:
        for key, ev in sel.select(timeout=0.2):
            s = key.fileobj
            if key.data == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                connecting -= 1
                if err:
                    sel.unregister(s)
                    s.close()
                    stats["failed"] += 1
                    continue
                stats["open"] += 1
                if a.partial:
                    try:
                        s.send(PARTIAL)
                    except OSError:
                        pass
                sel.modify(s, selectors.EVENT_READ, "open")
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue
            sel.unregister(s)
            s.close()
            stats["open"] -= 1
            stats["closed"] += 1
            if a.reopen:
                open_one()
                connecting += 1
        if not reported and connecting == 0:
            reported = True
            print(f"open {stats['open']} failed {stats['failed']}", flush=True)
    print(f"closed {stats['closed']} open {stats['open']} failed {stats['failed']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

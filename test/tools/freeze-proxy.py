#!/usr/bin/env python3
"""A TCP proxy that can freeze the connections open at a moment while new ones flow.

For a test that needs a client's long-lived streams (watches) to stop delivering while its new
requests still reach the server. SIGUSR1 freezes every connection open now: nothing more goes from
the server to the client on it (the bytes wait in the kernel), and one the client sends on (a new
request on a kept-alive connection) is closed, so the client opens a new one. SIGUSR2 thaws them.
Connections opened after the freeze are never frozen. Each freeze and thaw, once done, prints a
line to stdout ("frozen N", "thawed N"): a test waits for it, since the signal only sets a flag
that the loop acts on when its select returns. The listening port goes to --port-file.
"""
import argparse
import os
import selectors
import signal

import proxy_pair

ap = argparse.ArgumentParser()
ap.add_argument("--upstream", required=True, help="host:port")
ap.add_argument("--port-file", required=True)
args = ap.parse_args()
uhost, uport = args.upstream.rsplit(":", 1)

sel = selectors.DefaultSelector()
lsock = proxy_pair.listener(("127.0.0.1", 0), 128)
sel.register(lsock, selectors.EVENT_READ, None)
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(lsock.getsockname()[1]))
os.rename(args.port_file + ".tmp", args.port_file)


class Pair(proxy_pair.Pair):
    def __init__(self, c, s):
        super().__init__(sel, c, s)
        self.frozen = False

    def close(self):
        super().close()
        pairs.discard(self)

    def watch(self):
        if self.closed:
            return
        sel.modify(self.c, selectors.EVENT_READ, (self, "c"))
        if self.frozen:
            try:
                sel.unregister(self.s)
            except KeyError:
                pass
        else:
            try:
                sel.register(self.s, selectors.EVENT_READ, (self, "s"))
            except KeyError:
                pass


pairs = set()
flag = {"freeze": False, "thaw": False}
signal.signal(signal.SIGUSR1, lambda *a: flag.__setitem__("freeze", True))
signal.signal(signal.SIGUSR2, lambda *a: flag.__setitem__("thaw", True))

while True:
    try:
        events = sel.select(0.05)
    except InterruptedError:
        events = []
    for what, frozen in (("freeze", True), ("thaw", False)):
        if flag[what]:
            flag[what] = False
            for p in list(pairs):
                p.frozen = frozen
                p.watch()
            print("frozen" if frozen else "thawed", len(pairs), flush=True)
    for key, _ in events:
        if key.data is None:
            try:
                c, _ = lsock.accept()
            except BlockingIOError:
                continue
            s = proxy_pair.upstream_for(c, uhost, uport)
            if s is None:
                continue
            p = Pair(c, s)
            pairs.add(p)
            sel.register(c, selectors.EVENT_READ, (p, "c"))
            sel.register(s, selectors.EVENT_READ, (p, "s"))
            continue
        p, side = key.data
        if p.closed or (side == "s" and p.frozen):  # frozen in this round, after its select
            continue
        src, dst = (p.c, p.s) if side == "c" else (p.s, p.c)
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        if not data or (side == "c" and p.frozen):
            p.close()
            continue
        try:
            dst.sendall(data)
        except OSError:
            p.close()

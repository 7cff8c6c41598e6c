#!/usr/bin/env python3
"""A TCP proxy in front of a server that is slow to take connections: every connect completes late.

It stands where a member Pod listens (--listen, an address of the run's own block) and relays each
connection it accepts to --upstream. It is busy whenever a connect comes: its accept backlog is one
connection and holds one (a filler of its own), so the kernel drops each client's SYN, and the client
sends it again later (Linux: 1 s after the first). It stays busy until it sees such a client: a socket
in SYN-SENT to its address (/proc/net/tcp) in two reads a poll apart (a loopback connect whose SYN was
not dropped is established within the connect call). Then it catches up: the backlog goes to 128 and
it accepts everything, so the SYNs sent again complete their connects. Once no client waits on a
dropped SYN any more, it is busy again. So a connect never fails, but never completes before its SYN
was sent twice; a connection once made is served at once.

Lines on stdout: "listening IP:PORT" once, then "dropped N" (N connects wait on a dropped SYN; it
catches up) and "busy" each time it changes. IPv4 only.
"""
import argparse
import selectors
import socket
import struct

import proxy_pair

ap = argparse.ArgumentParser()
ap.add_argument("--listen", required=True, help="ip:port")
ap.add_argument("--upstream", required=True, help="ip:port")
args = ap.parse_args()
lhost, lport = args.listen.rsplit(":", 1)
uhost, uport = args.upstream.rsplit(":", 1)
laddr = (lhost, int(lport))

sel = selectors.DefaultSelector()
lsock = proxy_pair.listener(laddr, 0)  # one connection fits
fillers = {}  # our own connections that fill the backlog, by their end as /proc/net/tcp writes it


def key_of(addr):
    """An address as /proc/net/tcp writes it (the IPv4 address as the host's u32, the port, in hex)."""
    return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(addr[0]))[0], addr[1])


lkey = key_of(laddr)


def say(line):
    print(line, flush=True)


def syn_sent():
    """The clients' ends of connects to us that wait for an answer to their SYN (ours left out)."""
    out = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fld = line.split()
            if fld[3] == "02" and fld[2] == lkey and fld[1] not in fillers:  # SYN_SENT to us
                out.add(fld[1])
    return out


def accept_all():
    while True:
        try:
            c, peer = lsock.accept()
        except (BlockingIOError, InterruptedError):
            return
        f = fillers.pop(key_of(peer), None)
        if f is not None:
            f.close()
            c.close()
            continue
        s = proxy_pair.upstream_for(c, uhost, uport)
        if s is None:
            continue
        c.setblocking(False)
        s.setblocking(False)
        p = proxy_pair.Pair(sel, c, s)
        sel.register(c, selectors.EVENT_READ, (p, c, s))
        sel.register(s, selectors.EVENT_READ, (p, s, c))


def go_busy():
    """Takes what waits, then fills the backlog with a connection of our own."""
    accept_all()
    lsock.listen(0)
    f = socket.socket()
    f.setblocking(False)
    f.connect_ex(laddr)
    fillers[key_of(f.getsockname())] = f


def catch_up():
    lsock.listen(128)
    sel.register(lsock, selectors.EVENT_READ, None)


go_busy()
say("listening %s:%d" % laddr)
busy, seen = True, set()
while True:
    for key, _ in sel.select(0.05):
        if key.data is None:
            accept_all()
            continue
        p, src, dst = key.data
        if p.closed:
            continue
        try:
            data = src.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            p.close()
            continue
        try:
            dst.setblocking(True)
            dst.sendall(data)
            dst.setblocking(False)
        except OSError:
            p.close()
    waiting = syn_sent()
    if busy:
        if waiting & seen:  # the same connect waited a whole poll: its SYN was dropped
            busy = False
            catch_up()
            say("dropped %d" % len(waiting))
        seen = waiting
    elif not waiting:  # every SYN sent again went in
        sel.unregister(lsock)
        go_busy()
        busy, seen = True, set()
        say("busy")

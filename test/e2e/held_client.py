#!/usr/bin/env python3
"""held_client: one client of the router on a raw socket, so the way it leaves is exact. Sends a
complete POST for MODEL to 127.0.0.1:PORT as VARIANT says, prints "sent", waits for SIGUSR1 and
leaves as MODE says.

VARIANT (the request; every byte of it is sent before "sent"):
  plain    HTTP/1.1 with a Content-Length
  chunked  HTTP/1.1, Transfer-Encoding: chunked (the router reads until the model and holds the rest:
           the last chunk stays unread while the request is held)
  big      HTTP/1.1 with a Content-Length, the model first and 48 KiB after it (left unread while held)
  http10   HTTP/1.0 with a Content-Length
MODE:
  fin   close() (the kernel sends FIN: nothing was unread)
  rst   close() with SO_LINGER 0 (the kernel sends RST)
What the server sent before the client left is printed as "got <repr>".
Used by e2e/router-held-leave.test.sh."""
import signal
import socket
import struct
import sys


def request(model, variant):
    body = ('{"model":"%s","messages":[]' % model).encode()
    if variant == "big":
        body += b',"pad":"' + b"x" * (48 * 1024) + b'"'
    body += b"}"
    version = "HTTP/1.0" if variant == "http10" else "HTTP/1.1"
    head = "POST /v1/chat/completions %s\r\nHost: router\r\nContent-Type: application/json\r\n" % version
    if variant == "chunked":
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + \
            b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    return (head + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body


def main():
    port, model, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    variant = sys.argv[4] if len(sys.argv) > 4 else "plain"
    signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request(model, variant))
    print("sent", flush=True)
    signal.sigwait({signal.SIGUSR1})
    s.setblocking(False)
    try:
        got = s.recv(65536)
    except BlockingIOError:
        got = b""
    print("got", repr(got), flush=True)
    if mode == "rst":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print("left", mode, flush=True)


if __name__ == "__main__":
    main()

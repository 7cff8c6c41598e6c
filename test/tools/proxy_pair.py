"""What the test proxies (freeze-proxy.py, slow-accept-proxy.py) share: their listening socket, the
upstream connection made for each client they accept, and the pair of the two, closed together."""
import socket


def listener(addr, backlog):
    """A non-blocking listening TCP socket bound to addr (SO_REUSEADDR)."""
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(addr)
    lsock.listen(backlog)
    lsock.setblocking(False)
    return lsock


def upstream_for(c, host, port):
    """A connection to host:port for the accepted client c; None, with c closed, when none can be made."""
    try:
        return socket.create_connection((host, int(port)))
    except OSError:
        c.close()
        return None


class Pair:
    """A client's connection c and its upstream one s, both watched by the selector sel: closing the pair
    closes both and forgets them in sel."""

    def __init__(self, sel, c, s):
        self.sel, self.c, self.s = sel, c, s
        self.closed = False

    def close(self):
        if self.closed:
            return
        self.closed = True
        for k in (self.c, self.s):
            try:
                self.sel.unregister(k)
            except (KeyError, ValueError):
                pass
            k.close()

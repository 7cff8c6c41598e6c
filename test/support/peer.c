/* peer: a unit test's client socket on the event loop (peer.h). */
#include "peer.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

static void peer_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    test_peer *p = ud;
    ssize_t n = read(fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
    if (n > 0) {
        p->len += (size_t)n;
        p->buf[p->len] = 0;
        return;
    }
    if (n < 0 && errno == EAGAIN)
        return;
    p->closed = true;
    ev_fd_clear(loop, fd);
    if (p->stop)
        ev_stop(loop);
}

void test_peer_open(ev_loop *loop, test_peer *p, int port, const char *send)
{
    test_peer_open_from(loop, p, NULL, port, send);
}

void test_peer_open_from(ev_loop *loop, test_peer *p, const char *src, int port, const char *send)
{
    *p = (test_peer){.fd = test_connect_loopback_from(src, port)};
    if (send)
        assert_int_equal(write(p->fd, send, strlen(send)), (ssize_t)strlen(send));
    assert_int_equal(ev_fd_set(loop, p->fd, EV_READ, peer_on_read, p), 0);
}

void test_peer_close(ev_loop *loop, test_peer *p)
{
    ev_fd_clear(loop, p->fd);
    close(p->fd);
}

void test_peer_http(ev_loop *loop, test_peer *p, int port, const char *method, const char *path,
                    const char *auth)
{
    char req[512];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", method, path,
                     auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
    assert_true(n > 0 && (size_t)n < sizeof(req));
    test_peer_open(loop, p, port, req);
    p->stop = true;
}

/* loopback: the unit tests' sockets on 127.0.0.1, for the small HTTP responders and clients they
 * run on the event loop. Failures fail the test (cmocka asserts). */
#include "loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

/* A non-blocking listener on a port the kernel picks; *port is set to it. */
int test_listen_loopback(int backlog, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, backlog), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

int test_closed_port_loopback(void)
{
    int port;
    close(test_listen_loopback(1, &port));
    return port;
}

int test_accept_watch(ev_loop *loop, int lfd, ev_fd_fn fn, void *ud)
{
    int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c >= 0)
        assert_int_equal(ev_fd_set(loop, c, EV_READ, fn, ud), 0);
    return c;
}

/* A blocking client connected to 127.0.0.1:port. */
int test_connect_loopback(int port)
{
    return test_connect_loopback_from(NULL, port);
}

int test_connect_loopback_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (src) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

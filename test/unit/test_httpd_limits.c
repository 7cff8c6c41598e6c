/* Tests of httpd's connection limits over loopback, clients on the server's loop: a flood of idle
 * connections past the limit cannot keep a new request out (the connection waiting longest is
 * closed for it, a request in progress never is), a client past its per-client cap is closed at
 * accept, a request head that stalls is closed after the head timeout while a held request
 * outlives it, and the count of open connections follows. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

#include "httpd/httpd.h"
#include "loop/ev.h"

/* A client socket watched on the loop: what it read, and whether the server closed it. */
typedef struct peer {
    int fd;
    char buf[4096];
    size_t len;
    bool closed;
} peer;

static void peer_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    peer *p = ud;
    ssize_t n = read(fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
    if (n > 0) {
        p->len += (size_t)n;
        p->buf[p->len] = 0;
        return;
    }
    if (n < 0 && errno == EAGAIN)
        return;
    p->closed = true; /* end of stream, or reset */
    ev_fd_clear(loop, fd);
}

static void peer_open(ev_loop *loop, peer *p, int port, const char *send)
{
    *p = (peer){.fd = test_connect_loopback(port)};
    if (send)
        assert_int_equal(write(p->fd, send, strlen(send)), (ssize_t)strlen(send));
    assert_int_equal(ev_fd_set(loop, p->fd, EV_READ, peer_on_read, p), 0);
}

static void peer_close(ev_loop *loop, peer *p)
{
    ev_fd_clear(loop, p->fd);
    close(p->fd);
}

/* Runs the loop until pred holds (checked every millisecond); fails after 10 s. */
typedef struct waiter {
    ev_loop *loop;
    bool (*pred)(void *ud);
    void *ud;
    bool met, timed_out;
} waiter;

static void waiter_check(ev_loop *loop, void *ud)
{
    waiter *w = ud;
    if (w->pred(w->ud)) {
        w->met = true;
        ev_stop(loop);
    } else {
        assert_true(ev_timer_add(loop, 1, waiter_check, w) > 0);
    }
}

static void waiter_guard(ev_loop *loop, void *ud)
{
    waiter *w = ud;
    w->timed_out = true;
    ev_stop(loop);
}

static void run_until(ev_loop *loop, bool (*pred)(void *ud), void *ud)
{
    waiter w = {.loop = loop, .pred = pred, .ud = ud};
    uint64_t g = ev_timer_add(loop, 10000, waiter_guard, &w);
    uint64_t t = ev_timer_add(loop, 0, waiter_check, &w);
    while (!w.met && !w.timed_out)
        assert_int_equal(ev_run(loop), 0);
    ev_timer_cancel(loop, g);
    ev_timer_cancel(loop, t);
    assert_true(w.met);
}

static bool peer_done(void *ud)
{
    return ((peer *)ud)->closed;
}

static bool peer_answered(void *ud)
{
    return strstr(((peer *)ud)->buf, "\r\n\r\n") != NULL;
}

typedef struct count_at_least {
    httpd *h;
    size_t n;
} count_at_least;

static bool server_has(void *ud)
{
    count_at_least *c = ud;
    return httpd_connections(c->h) >= c->n;
}

/* Answers at once, or holds the request when its path is /hold. */
typedef struct server {
    httpd_req *held;
} server;

static void on_request(void *ud, httpd_req *r)
{
    server *s = ud;
    if (strcmp(httpd_req_path(r), "/hold") == 0) {
        s->held = r;
        return;
    }
    httpd_reply out = {.code = 200, .body = strdup("ok\n"), .len = 3};
    assert_non_null(out.body);
    httpd_req_reply(r, &out);
}

static bool server_holds(void *ud)
{
    return ((server *)ud)->held != NULL;
}

static void reply_held(server *s)
{
    httpd_reply out = {.code = 200, .body = strdup("held\n"), .len = 5};
    assert_non_null(out.body);
    httpd_req_reply(s->held, &out);
    s->held = NULL;
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: x\r\n\r\n"
#define FLOOD 80

/* The default limit (64): 80 idle connections, then a fresh request is answered; the request held
 * since before the flood is still answered after it. */
static void test_idle_flood(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    server s = {0};
    char err[200];
    httpd_config cfg = {.bind = "127.0.0.1:0", .request = on_request, .ud = &s};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    int port = httpd_port(h);

    peer held;
    peer_open(loop, &held, port, GET("/hold"));
    run_until(loop, server_holds, &s);

    static peer idle[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        peer_open(loop, &idle[i], port, NULL);
        count_at_least c = {h, (size_t)(i < 63 ? i + 2 : 64)};
        run_until(loop, server_has, &c); /* accepted, in order: the first is the oldest */
    }
    /* The first ones were closed to make room, unanswered. */
    run_until(loop, peer_done, &idle[0]);
    assert_int_equal(idle[0].len, 0);
    assert_true(httpd_connections(h) <= 64 + 16);

    peer fresh;
    peer_open(loop, &fresh, port, GET("/healthz"));
    run_until(loop, peer_answered, &fresh);
    assert_non_null(strstr(fresh.buf, "HTTP/1.1 200"));
    assert_false(held.closed);
    reply_held(&s);
    run_until(loop, peer_answered, &held);
    assert_non_null(strstr(held.buf, "held"));

    peer_close(loop, &fresh);
    peer_close(loop, &held);
    for (int i = 0; i < FLOOD; i++)
        peer_close(loop, &idle[i]);
    httpd_stop(h);
    ev_free(loop);
}

/* A request that arrived in a burst of newer connections is not the one evicted: a limit of 2, and
 * in the listen backlog before the server runs: an idle connection, a request, three idle ones.
 * Accepted in one run, each newcomer evicts the oldest waiting connection with nothing to read. */
static void test_burst_keeps_request(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    server s = {0};
    char err[200];
    httpd_config cfg = {
        .bind = "127.0.0.1:0", .request = on_request, .ud = &s, .max_connections = 2};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    int port = httpd_port(h);
    peer idle[4], req;
    peer_open(loop, &idle[0], port, NULL);
    peer_open(loop, &req, port, GET("/healthz"));
    for (int i = 1; i < 4; i++)
        peer_open(loop, &idle[i], port, NULL);
    run_until(loop, peer_answered, &req);
    assert_non_null(strstr(req.buf, "HTTP/1.1 200"));
    run_until(loop, peer_done, &idle[0]);
    peer_close(loop, &req);
    for (int i = 0; i < 4; i++)
        peer_close(loop, &idle[i]);
    httpd_stop(h);
    ev_free(loop);
}

/* A cap of 3 per client: the fourth connection from 127.0.0.1 is closed, unanswered; the first
 * three still work. */
static void test_per_client_cap(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    server s = {0};
    char err[200];
    httpd_config cfg = {
        .bind = "127.0.0.1:0", .request = on_request, .ud = &s, .max_per_client = 3};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    int port = httpd_port(h);
    peer p[4];
    for (int i = 0; i < 3; i++)
        peer_open(loop, &p[i], port, NULL);
    count_at_least c = {h, 3};
    run_until(loop, server_has, &c);
    peer_open(loop, &p[3], port, GET("/healthz"));
    run_until(loop, peer_done, &p[3]);
    assert_int_equal(p[3].len, 0);
    assert_int_equal(httpd_connections(h), 3);
    for (int i = 0; i < 3; i++) {
        assert_false(p[i].closed);
        assert_int_equal(write(p[i].fd, GET("/healthz"), strlen(GET("/healthz"))),
                         (ssize_t)strlen(GET("/healthz")));
        run_until(loop, peer_answered, &p[i]);
        assert_non_null(strstr(p[i].buf, "HTTP/1.1 200"));
    }
    for (int i = 0; i < 4; i++)
        peer_close(loop, &p[i]);
    httpd_stop(h);
    ev_free(loop);
}

static bool server_empty(void *ud)
{
    return httpd_connections(ud) == 0;
}

/* A head timeout of 50 ms: a partial head is closed unanswered; a request held since before it
 * is not (its head was complete), and is answered after. */
static void test_head_timeout(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    server s = {0};
    char err[200];
    httpd_config cfg = {
        .bind = "127.0.0.1:0", .request = on_request, .ud = &s, .head_timeout_ms = 50};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    int port = httpd_port(h);
    peer held, partial;
    peer_open(loop, &held, port, GET("/hold"));
    run_until(loop, server_holds, &s);
    peer_open(loop, &partial, port, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    run_until(loop, peer_done, &partial);
    assert_int_equal(partial.len, 0);
    assert_false(held.closed);
    reply_held(&s);
    run_until(loop, peer_answered, &held);
    assert_non_null(strstr(held.buf, "held"));
    /* Both gone, the count is back to 0. */
    run_until(loop, peer_done, &held);
    run_until(loop, server_empty, h);
    peer_close(loop, &held);
    peer_close(loop, &partial);
    httpd_stop(h);
    ev_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_flood),
        cmocka_unit_test(test_burst_keeps_request),
        cmocka_unit_test(test_per_client_cap),
        cmocka_unit_test(test_head_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

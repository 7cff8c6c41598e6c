/* Tests of httpd's connection limits over loopback, clients on the server's loop: a flood of idle
 * connections past the limit cannot keep a new request out (the connection waiting longest is
 * closed for it, a request in progress never is), a flood from one address closes only its own
 * connections and never another client's that has yet to send its head, a client past its
 * per-client cap is closed at accept, a request head that stalls is closed after the head timeout
 * while a held request outlives it, and the count of open connections follows. */
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

#include "test_main.h"

#include "loop_run.h"
#include "peer.h"

#include "httpd/httpd.h"
#include "loop/ev.h"

static bool peer_done(void *ud)
{
    return ((test_peer *)ud)->closed;
}

static bool peer_answered(void *ud)
{
    return strstr(((test_peer *)ud)->buf, "\r\n\r\n") != NULL;
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

/* A server on a loopback port the kernel picks, on a new loop, answering with on_request; cfg
 * gives the limits. */
static httpd *start(ev_loop **loop, server *s, httpd_config cfg)
{
    *loop = ev_new();
    assert_non_null(*loop);
    cfg.bind = "127.0.0.1:0";
    cfg.request = on_request;
    cfg.ud = s;
    char err[200];
    httpd *h = httpd_start_config(*loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    return h;
}

static void stop(ev_loop *loop, httpd *h)
{
    httpd_stop(h);
    ev_free(loop);
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: x\r\n\r\n"
#define FLOOD 80

/* The default limit (64): 80 idle connections, then a fresh request is answered; the request held
 * since before the flood is still answered after it. */
static void test_idle_flood(void **state)
{
    (void)state;
    ev_loop *loop;
    server s = {0};
    httpd *h = start(&loop, &s, (httpd_config){0});
    int port = httpd_port(h);

    test_peer held;
    test_peer_open(loop, &held, port, GET("/hold"));
    test_loop_run_until(loop, server_holds, &s, 10000);

    static test_peer idle[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        test_peer_open(loop, &idle[i], port, NULL);
        count_at_least c = {h, (size_t)(i < 63 ? i + 2 : 64)};
        test_loop_run_until(loop, server_has, &c,
                            10000); /* accepted, in order: the first is the oldest */
    }
    /* The first ones were closed to make room, unanswered. */
    test_loop_run_until(loop, peer_done, &idle[0], 10000);
    assert_int_equal(idle[0].len, 0);
    assert_true(httpd_connections(h) <= 64 + 16);

    test_peer fresh;
    test_peer_open(loop, &fresh, port, GET("/healthz"));
    test_loop_run_until(loop, peer_answered, &fresh, 10000);
    assert_non_null(strstr(fresh.buf, "HTTP/1.1 200"));
    assert_false(held.closed);
    reply_held(&s);
    test_loop_run_until(loop, peer_answered, &held, 10000);
    assert_non_null(strstr(held.buf, "held"));

    test_peer_close(loop, &fresh);
    test_peer_close(loop, &held);
    for (int i = 0; i < FLOOD; i++)
        test_peer_close(loop, &idle[i]);
    stop(loop, h);
}

/* A request that arrived in a burst of newer connections is not the one evicted: a limit of 2, and
 * in the listen backlog before the server runs: an idle connection, a request, three idle ones.
 * Accepted in one run, each newcomer evicts the oldest waiting connection with nothing to read. */
static void test_burst_keeps_request(void **state)
{
    (void)state;
    ev_loop *loop;
    server s = {0};
    httpd *h = start(&loop, &s, (httpd_config){.max_connections = 2});
    int port = httpd_port(h);
    test_peer idle[4], req;
    test_peer_open(loop, &idle[0], port, NULL);
    test_peer_open(loop, &req, port, GET("/healthz"));
    for (int i = 1; i < 4; i++)
        test_peer_open(loop, &idle[i], port, NULL);
    test_loop_run_until(loop, peer_answered, &req, 10000);
    assert_non_null(strstr(req.buf, "HTTP/1.1 200"));
    test_loop_run_until(loop, peer_done, &idle[0], 10000);
    test_peer_close(loop, &req);
    for (int i = 0; i < 4; i++)
        test_peer_close(loop, &idle[i]);
    stop(loop, h);
}

/* A cap of 3 per client: the fourth connection from 127.0.0.1 is closed, unanswered; the first
 * three still work. */
static void test_per_client_cap(void **state)
{
    (void)state;
    ev_loop *loop;
    server s = {0};
    httpd *h = start(&loop, &s, (httpd_config){.max_per_client = 3});
    int port = httpd_port(h);
    test_peer p[4];
    for (int i = 0; i < 3; i++)
        test_peer_open(loop, &p[i], port, NULL);
    count_at_least c = {h, 3};
    test_loop_run_until(loop, server_has, &c, 10000);
    test_peer_open(loop, &p[3], port, GET("/healthz"));
    test_loop_run_until(loop, peer_done, &p[3], 10000);
    assert_int_equal(p[3].len, 0);
    assert_int_equal(httpd_connections(h), 3);
    for (int i = 0; i < 3; i++) {
        assert_false(p[i].closed);
        assert_int_equal(write(p[i].fd, GET("/healthz"), strlen(GET("/healthz"))),
                         (ssize_t)strlen(GET("/healthz")));
        test_loop_run_until(loop, peer_answered, &p[i], 10000);
        assert_non_null(strstr(p[i].buf, "HTTP/1.1 200"));
    }
    for (int i = 0; i < 4; i++)
        test_peer_close(loop, &p[i]);
    stop(loop, h);
}

#define CHURN 20

/* The heaviest client pays: a limit of 4, filled by idle connections from 127.3.0.1; a probe from
 * 127.0.0.1 connects and has not sent its head yet; 20 more idle ones from 127.3.0.1 each close
 * one of their own client's (the oldest), never the probe, which then sends its head and is
 * answered. By age alone the probe would have been closed by the fourth newcomer. */
static void test_heaviest_client_pays(void **state)
{
    (void)state;
    ev_loop *loop;
    server s = {0};
    httpd *h = start(&loop, &s, (httpd_config){.max_connections = 4});
    int port = httpd_port(h);
    static test_peer flood[4 + CHURN];
    for (int i = 0; i < 4; i++)
        test_peer_open_from(loop, &flood[i], "127.3.0.1", port, NULL);
    count_at_least c = {h, 4};
    test_loop_run_until(loop, server_has, &c, 10000);
    test_peer probe;
    test_peer_open(loop, &probe, port, NULL);
    test_loop_run_until(loop, peer_done, &flood[0], 10000);
    for (int j = 0; j < CHURN; j++) {
        test_peer_open_from(loop, &flood[4 + j], "127.3.0.1", port, NULL);
        test_loop_run_until(loop, peer_done, &flood[1 + j], 10000);
        assert_int_equal(flood[1 + j].len, 0);
        assert_false(probe.closed);
    }
    assert_int_equal(write(probe.fd, GET("/healthz"), strlen(GET("/healthz"))),
                     (ssize_t)strlen(GET("/healthz")));
    test_loop_run_until(loop, peer_answered, &probe, 10000);
    assert_non_null(strstr(probe.buf, "HTTP/1.1 200"));
    test_peer_close(loop, &probe);
    for (int i = 0; i < 4 + CHURN; i++)
        test_peer_close(loop, &flood[i]);
    stop(loop, h);
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
    ev_loop *loop;
    server s = {0};
    httpd *h = start(&loop, &s, (httpd_config){.head_timeout_ms = 50});
    int port = httpd_port(h);
    test_peer held, partial;
    test_peer_open(loop, &held, port, GET("/hold"));
    test_loop_run_until(loop, server_holds, &s, 10000);
    test_peer_open(loop, &partial, port, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    test_loop_run_until(loop, peer_done, &partial, 10000);
    assert_int_equal(partial.len, 0);
    assert_false(held.closed);
    reply_held(&s);
    test_loop_run_until(loop, peer_answered, &held, 10000);
    assert_non_null(strstr(held.buf, "held"));
    /* Both gone, the count is back to 0. */
    test_loop_run_until(loop, peer_done, &held, 10000);
    test_loop_run_until(loop, server_empty, h, 10000);
    test_peer_close(loop, &held);
    test_peer_close(loop, &partial);
    stop(loop, h);
}

TEST_MAIN(cmocka_unit_test(test_idle_flood), cmocka_unit_test(test_burst_keeps_request),
          cmocka_unit_test(test_per_client_cap), cmocka_unit_test(test_heaviest_client_pays),
          cmocka_unit_test(test_head_timeout))

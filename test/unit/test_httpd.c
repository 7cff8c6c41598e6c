/* Tests of httpd's asynchronous answers over loopback, with the client on the same loop: a reply
 * given later from a timer reaches the client (its connection waited suspended), a reply given at
 * once works the same way, request headers are readable, a 401 names the Bearer scheme, and a
 * server stopped with a request still waiting frees it (ASan/valgrind would see a leak). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

typedef struct server {
    ev_loop *loop;
    httpd_req *held; /* a request waiting for its reply */
    char auth[128];  /* the Authorization header it carried */
    int calls;
    bool later; /* reply from a timer rather than at once */
    bool never; /* never reply: keep it for the test */
} server;

static void reply(httpd_req *r, unsigned code, const char *text)
{
    httpd_reply out = {.code = code, .body = strdup(text)};
    assert_non_null(out.body);
    out.len = strlen(text);
    httpd_req_reply(r, &out);
}

static void on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    server *s = ud;
    char text[200];
    snprintf(text, sizeof(text), "later for %s\n", s->auth);
    httpd_req *r = s->held;
    s->held = NULL;
    reply(r, strcmp(s->auth, "none") == 0 ? 401 : 200, text);
}

static void on_request(void *ud, httpd_req *r)
{
    server *s = ud;
    assert_ptr_equal(httpd_req_ud(r), s);
    s->calls++;
    const char *auth = httpd_req_header(r, "authorization"); /* any case */
    snprintf(s->auth, sizeof(s->auth), "%s", auth ? auth : "none");
    assert_string_equal(httpd_req_method(r), "GET");
    if (s->never) {
        s->held = r;
        ev_stop(s->loop);
    } else if (s->later) {
        s->held = r;
        assert_true(ev_timer_add(s->loop, 20, on_timer, s) > 0);
    } else {
        char *target = httpd_req_target(r); /* the path, and the query re-encoded */
        assert_non_null(target);
        reply(r, 200, target);
        free(target);
    }
}

static void test_async(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    server s = {.loop = loop};
    char err[200];
    httpd_config cfg = {.bind = "127.0.0.1:0", .request = on_request, .ud = &s};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    test_peer c;

    /* At once. */
    test_peer_http(loop, &c, httpd_port(h), "GET", "/now", NULL);
    test_loop_run(loop, 10000);
    close(c.fd);
    assert_true(c.closed);
    assert_non_null(strstr(c.buf, " 200 "));
    assert_non_null(strstr(c.buf, "\r\n\r\n/now"));
    test_peer_http(loop, &c, httpd_port(h), "GET", "/now?api-version=2024-02&x=a%20b%2F&flag",
                   NULL);
    test_loop_run(loop, 10000);
    close(c.fd);
    assert_non_null(strstr(c.buf, "\r\n\r\n/now?api-version=2024-02&x=a%20b%2F&flag"));

    /* Later, from a timer, after the connection was suspended; two in a row on fresh connections.
     */
    s.later = true;
    for (int i = 0; i < 2; i++) {
        test_peer_http(loop, &c, httpd_port(h), "GET", "/later", "Bearer abc");
        test_loop_run(loop, 10000);
        close(c.fd);
        assert_true(c.closed);
        assert_non_null(strstr(c.buf, " 200 "));
        assert_non_null(strstr(c.buf, "later for Bearer abc"));
    }
    test_peer_http(loop, &c, httpd_port(h), "GET", "/later", NULL);
    test_loop_run(loop, 10000);
    close(c.fd);
    assert_non_null(strstr(c.buf, " 401 "));
    assert_non_null(strstr(c.buf, "WWW-Authenticate: Bearer"));
    assert_int_equal(s.calls, 5);

    /* Stopped while a request waits: the request goes with its connection. */
    s.never = true;
    test_peer_http(loop, &c, httpd_port(h), "GET", "/held", NULL);
    test_loop_run(loop, 10000);
    assert_non_null(s.held);
    httpd_stop(h);
    s.held = NULL;
    test_loop_run(loop, 10000); /* the client sees the connection closed */
    close(c.fd);
    assert_true(c.closed);
    assert_null(strstr(c.buf, "HTTP/1."));
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_async))

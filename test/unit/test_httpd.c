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

#include "loopback.h"

#include "httpd/httpd.h"
#include "loop/ev.h"

typedef struct client {
    int fd;
    char resp[8192];
    size_t len;
    bool closed;
} client;

static void client_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    client *c = ud;
    ssize_t n = read(fd, c->resp + c->len, sizeof(c->resp) - 1 - c->len);
    if (n > 0) {
        c->len += (size_t)n;
        return;
    }
    if (n < 0 && errno == EAGAIN)
        return;
    c->resp[c->len] = 0;
    c->closed = true;
    ev_fd_clear(loop, fd);
    ev_stop(loop);
}

static void guard(ev_loop *loop, void *ud)
{
    (void)ud;
    ev_stop(loop);
}

/* Sends an HTTP/1.0 request (with an Authorization header when auth is set) without waiting. */
static void client_send(ev_loop *loop, client *c, int port, const char *path, const char *auth)
{
    *c = (client){0};
    c->fd = test_connect_loopback(port);
    char req[512];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", path,
                     auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
    assert_int_equal(write(c->fd, req, (size_t)n), n);
    assert_int_equal(ev_fd_set(loop, c->fd, EV_READ, client_on_read, c), 0);
}

/* Runs the loop until something stops it, or 10 s. */
static void run(ev_loop *loop)
{
    uint64_t t = ev_timer_add(loop, 10000, guard, NULL);
    assert_int_equal(ev_run(loop), 0);
    ev_timer_cancel(loop, t);
}

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
    client c;

    /* At once. */
    client_send(loop, &c, httpd_port(h), "/now", NULL);
    run(loop);
    close(c.fd);
    assert_true(c.closed);
    assert_non_null(strstr(c.resp, " 200 "));
    assert_non_null(strstr(c.resp, "\r\n\r\n/now"));
    client_send(loop, &c, httpd_port(h), "/now?api-version=2024-02&x=a%20b%2F&flag", NULL);
    run(loop);
    close(c.fd);
    assert_non_null(strstr(c.resp, "\r\n\r\n/now?api-version=2024-02&x=a%20b%2F&flag"));

    /* Later, from a timer, after the connection was suspended; two in a row on fresh connections.
     */
    s.later = true;
    for (int i = 0; i < 2; i++) {
        client_send(loop, &c, httpd_port(h), "/later", "Bearer abc");
        run(loop);
        close(c.fd);
        assert_true(c.closed);
        assert_non_null(strstr(c.resp, " 200 "));
        assert_non_null(strstr(c.resp, "later for Bearer abc"));
    }
    client_send(loop, &c, httpd_port(h), "/later", NULL);
    run(loop);
    close(c.fd);
    assert_non_null(strstr(c.resp, " 401 "));
    assert_non_null(strstr(c.resp, "WWW-Authenticate: Bearer"));
    assert_int_equal(s.calls, 5);

    /* Stopped while a request waits: the request goes with its connection. */
    s.never = true;
    client_send(loop, &c, httpd_port(h), "/held", NULL);
    run(loop);
    assert_non_null(s.held);
    httpd_stop(h);
    s.held = NULL;
    run(loop); /* the client sees the connection closed */
    close(c.fd);
    assert_true(c.closed);
    assert_null(strstr(c.resp, "HTTP/1."));
    ev_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

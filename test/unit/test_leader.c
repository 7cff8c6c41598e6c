/* Tests of the election loop against a tiny scripted API server on loopback, with a fake monotonic
 * clock: leader_may_write turns false once the renew deadline has passed on the clock, before the
 * loop's deadline timer has had a chance to run; a Lease the process may not read is reported
 * (leader_problem) until a request succeeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "loop_run.h"
#include "loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "leader/leader.h"

/* ---- a one-request-per-connection HTTP responder ---- */

typedef struct {
    ev_loop *loop;
    int lfd, port;
    int fd;
    char in[8192];
    size_t inlen;
    bool forbid; /* answer GET with 403 instead of 404 */
    int requests;
} srv;

static const char lease_json[] =
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"lock\","
    "\"namespace\":\"ns\",\"resourceVersion\":\"7\"},\"spec\":{\"holderIdentity\":\"me\","
    "\"leaseDurationSeconds\":2,\"leaseTransitions\":0,\"acquireTime\":"
    "\"2026-01-01T00:00:00.000000Z\",\"renewTime\":\"2026-01-01T00:00:00.000000Z\"}}";
static const char forbidden_json[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"leases is "
    "forbidden: User cannot get resource\",\"reason\":\"Forbidden\",\"code\":403}";
static const char notfound_json[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                                    "\"Failure\",\"reason\":\"NotFound\",\"code\":404}";

static void srv_answer(srv *s)
{
    const char *status = "201 Created", *body = lease_json;
    if (strncmp(s->in, "GET ", 4) == 0) {
        status = s->forbid ? "403 Forbidden" : "404 Not Found";
        body = s->forbid ? forbidden_json : notfound_json;
    }
    char out[2048];
    int n = snprintf(out, sizeof(out),
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, strlen(body), body);
    assert_int_equal(send(s->fd, out, (size_t)n, MSG_NOSIGNAL), n);
    s->requests++;
    ev_fd_clear(s->loop, s->fd);
    close(s->fd);
    s->fd = -1;
    s->inlen = 0;
}

static void srv_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)events;
    srv *s = ud;
    ssize_t n = recv(fd, s->in + s->inlen, sizeof(s->in) - 1 - s->inlen, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        ev_fd_clear(s->loop, fd);
        close(fd);
        s->fd = -1;
        s->inlen = 0;
        return;
    }
    s->inlen += (size_t)n;
    s->in[s->inlen] = '\0';
    char *end = strstr(s->in, "\r\n\r\n");
    if (!end)
        return;
    size_t body = 0;
    const char *cl = strcasestr(s->in, "\r\nContent-Length:");
    if (cl && cl < end)
        body = strtoul(cl + 17, NULL, 10);
    if (s->inlen >= (size_t)(end - s->in) + 4 + body)
        srv_answer(s);
}

static void srv_on_accept(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    srv *s = ud;
    assert_true(s->fd < 0); /* one request at a time: the leader never has two in flight */
    s->fd = test_accept_watch(loop, fd, srv_on_read, s);
}

static void srv_start(srv *s, ev_loop *loop)
{
    *s = (srv){.loop = loop, .fd = -1};
    s->lfd = test_listen_loopback(16, &s->port);
    assert_int_equal(ev_fd_set(loop, s->lfd, EV_READ, srv_on_accept, s), 0);
}

static void srv_stop(srv *s)
{
    if (s->fd >= 0) {
        ev_fd_clear(s->loop, s->fd);
        close(s->fd);
    }
    ev_fd_clear(s->loop, s->lfd);
    close(s->lfd);
}

/* ---- the leader under test ---- */

static uint64_t fake_now = 1000;

static uint64_t fake_clock(void)
{
    return fake_now;
}

typedef struct {
    ev_loop *loop;
    srv s;
    kube_client *client;
    leader *l;
    int started;
} tl;

static void tl_started(void *ud)
{
    tl *t = ud;
    t->started++;
    ev_stop(t->loop);
}

static void tl_lost(void *ud, const char *why)
{
    (void)ud;
    fail_msg("lost: %s", why);
}

/* Polls for a reported problem; a deadline bounds the wait. */
static void tl_poll_problem(ev_loop *loop, void *ud)
{
    tl *t = ud;
    if (leader_problem(t->l))
        ev_stop(loop);
    else
        ev_timer_add(loop, 5, tl_poll_problem, t);
}

static void tl_run(tl *t)
{
    test_loop_run(t->loop, 10000);
}

/* A new loop with t->s on it, and the leader under test, through a client of t->s. */
static leader *tl_new(tl *t)
{
    *t = (tl){.loop = test_loop_new()};
    srv_start(&t->s, t->loop);
    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", t->s.port) > 0);
    cfg.token = strdup("test-token");
    t->client = kube_client_new(t->loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(t->client);
    leader_config lc = {.namespace_ = "ns",
                        .name = "lock",
                        .identity = "me",
                        .lease_ms = 2000,
                        .renew_deadline_ms = 1000,
                        .retry_ms = 50,
                        .clock_ms = fake_clock};
    leader_callbacks cb = {.started = tl_started, .lost = tl_lost, .ud = t};
    char why[160];
    t->l = leader_new(t->loop, t->client, &lc, &cb, why, sizeof(why));
    assert_non_null(t->l);
    return t->l;
}

static void tl_free(tl *t)
{
    leader_free(t->l);
    kube_client_free(t->client);
    srv_stop(&t->s);
    ev_free(t->loop);
}

static void test_may_write_by_the_clock(void **state)
{
    (void)state;
    tl t;
    leader *l = tl_new(&t);
    assert_false(leader_may_write(l)); /* not leading yet */

    fake_now = 1000;
    leader_start(l);
    tl_run(&t); /* GET 404, POST 201: leading */
    assert_int_equal(t.started, 1);
    assert_true(leader_is_leading(l));
    assert_null(leader_problem(l));
    assert_true(leader_may_write(l));
    /* The create was sent at 1000: writes are allowed until 1000 + renew deadline, and refused
     * from then on, though the loop has not run the deadline timer (leading still says true). */
    fake_now = 1999;
    assert_true(leader_may_write(l));
    fake_now = 2000;
    assert_false(leader_may_write(l));
    assert_true(leader_is_leading(l));

    tl_free(&t);
}

static void test_problem_reported_until_success(void **state)
{
    (void)state;
    tl t;
    leader *l = tl_new(&t);
    t.s.forbid = true;
    fake_now = 1000;
    leader_start(l);
    ev_timer_add(t.loop, 5, tl_poll_problem, &t);
    tl_run(&t);
    const char *p = leader_problem(l);
    assert_non_null(p);
    assert_non_null(strstr(p, "leader election: cannot read the Lease ns/lock: "));
    assert_non_null(strstr(p, "leases is forbidden: User cannot get resource"));
    assert_false(leader_is_leading(l));
    assert_false(leader_may_write(l));

    /* Rights granted: the next attempt creates the Lease and the problem is over. */
    t.s.forbid = false;
    tl_run(&t);
    assert_int_equal(t.started, 1);
    assert_null(leader_problem(l));
    assert_true(leader_may_write(l));

    tl_free(&t);
}

TEST_MAIN(cmocka_unit_test(test_may_write_by_the_clock),
          cmocka_unit_test(test_problem_reported_until_success))

/* Tests of fwd against a small HTTP/1.1 upstream on loopback, both on one ev loop: plain and
 * streamed bodies both ways, backpressure both ways, hop-by-hop headers, the second target, the
 * failure outcomes, cancel and connection reuse. Waits end on conditions, each under a deadline
 * that fails the test; no timing is asserted. */
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

#include "loopback.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "router/forward.h"

/* ---- the upstream: parses requests (Content-Length or chunked), answers as its mode says ---- */

typedef enum {
    UP_OK,               /* 200 with hop-by-hop headers and "ok <method> <body bytes>" */
    UP_STREAM,           /* chunked SSE, one event per up_stream_next() */
    UP_BULK,             /* 200 with up.bulk pattern bytes, written as fast as the socket takes */
    UP_RESET_BEFORE,     /* reset the connection once the request is in */
    UP_RESET_AFTER_HEAD, /* a head promising 100 bytes, 10 of them, then up_reset() */
    UP_SILENT,           /* never answer */
    UP_EARLY_HINTS,      /* a 103 before the 200 */
    UP_BAD_HEAD,         /* a header name with a space */
} up_mode;

#define UP_CONNS 8
#define UP_EVENTS 50

typedef struct up up;

typedef struct {
    up *u;
    int fd;
    char head[8192];
    size_t hlen;
    bool in_body;
    bool chunked;
    uint64_t rem; /* Content-Length bytes left, or of the current chunk */
    int cstate;   /* chunked: 0 size line, 1 data, 2 CRLF after data, 3 trailer */
    size_t linelen;
    char *out;
    size_t outlen, outoff;
    bool held; /* not read while up.hold */
} up_conn;

struct up {
    ev_loop *loop;
    int lfd, port;
    up_mode mode;
    int naccepts, nrequests, ncloses;
    bool stop_on_close;
    bool hold;     /* after a request head, stop reading until up_release */
    int reset_nth; /* reset the connection instead of answering the request of this number */
    size_t bulk;   /* UP_BULK's body size */
    char last_head[8192];
    uint64_t body_len; /* of the last request */
    bool body_pattern; /* check every body byte against t_pattern */
    bool body_bad;     /* a byte was not the expected one */
    char body[4096];   /* its start */
    up_conn conns[UP_CONNS];
    up_conn *stream; /* UP_STREAM's connection */
    int stream_sent;
    void (*on_body)(void *ud); /* after each read of body bytes */
    void *on_body_ud;
};

static unsigned char t_pattern(uint64_t i)
{
    return (unsigned char)((i * 7) ^ (i >> 9));
}

static void up_close(up_conn *k)
{
    if (k->fd < 0)
        return;
    ev_fd_clear(k->u->loop, k->fd);
    close(k->fd);
    k->fd = -1;
    free(k->out);
    k->out = NULL;
    k->outlen = k->outoff = 0;
    k->hlen = 0;
    k->in_body = false;
    k->u->ncloses++;
    if (k->u->stream == k)
        k->u->stream = NULL;
    if (k->u->stop_on_close)
        ev_stop(k->u->loop);
}

static void up_on_io(ev_loop *loop, int fd, int events, void *ud);

static void up_watch(up_conn *k)
{
    int ev = (k->held ? 0 : EV_READ) | (k->outoff < k->outlen ? EV_WRITE : 0);
    if (ev)
        assert_int_equal(ev_fd_set(k->u->loop, k->fd, ev, up_on_io, k), 0);
    else
        ev_fd_clear(k->u->loop, k->fd);
}

static void up_flush(up_conn *k)
{
    while (k->outoff < k->outlen) {
        ssize_t n = send(k->fd, k->out + k->outoff, k->outlen - k->outoff, MSG_NOSIGNAL);
        if (n < 0) {
            assert_true(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
            break;
        }
        k->outoff += (size_t)n;
    }
    if (k->outoff == k->outlen)
        k->outoff = k->outlen = 0;
    up_watch(k);
}

static void up_send(up_conn *k, const char *p, size_t n)
{
    k->out = realloc(k->out, k->outlen + n);
    assert_non_null(k->out);
    memcpy(k->out + k->outlen, p, n);
    k->outlen += n;
    up_flush(k);
}

static void up_sends(up_conn *k, const char *s)
{
    up_send(k, s, strlen(s));
}

/* An RST instead of a FIN: SO_LINGER with a zero timeout. */
static void up_reset_conn(up_conn *k)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
    up_close(k);
}

static void up_reset(up *u)
{
    for (int i = 0; i < UP_CONNS; i++)
        if (u->conns[i].fd >= 0)
            up_reset_conn(&u->conns[i]);
}

static void up_release(up *u)
{
    u->hold = false;
    for (int i = 0; i < UP_CONNS; i++)
        if (u->conns[i].fd >= 0 && u->conns[i].held) {
            u->conns[i].held = false;
            up_watch(&u->conns[i]);
        }
}

static void up_stream_next(up *u)
{
    assert_non_null(u->stream);
    char b[64];
    if (u->stream_sent < UP_EVENTS) {
        char ev[32];
        int n = snprintf(ev, sizeof(ev), "data: %d\n\n", u->stream_sent);
        snprintf(b, sizeof(b), "%x\r\n%s\r\n", n, ev);
    } else {
        snprintf(b, sizeof(b), "0\r\n\r\n");
    }
    u->stream_sent++;
    up_sends(u->stream, b);
}

static void up_answer(up_conn *k)
{
    up *u = k->u;
    char b[512];
    switch (u->mode) {
    case UP_OK: {
        char body[128];
        char method[16] = "";
        sscanf(u->last_head, "%15s", method);
        snprintf(body, sizeof(body), "ok %s %llu", method, (unsigned long long)u->body_len);
        snprintf(b, sizeof(b),
                 "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                 "Keep-Alive: timeout=5\r\nProxy-Agent: up\r\nX-End: yes\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
        up_sends(k, b);
        break;
    }
    case UP_STREAM:
        up_sends(k, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n");
        u->stream = k;
        u->stream_sent = 0;
        up_stream_next(u);
        break;
    case UP_BULK: {
        snprintf(b, sizeof(b), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", u->bulk);
        up_sends(k, b);
        char *p = malloc(u->bulk);
        assert_non_null(p);
        for (size_t i = 0; i < u->bulk; i++)
            p[i] = (char)t_pattern(i);
        up_send(k, p, u->bulk);
        free(p);
        break;
    }
    case UP_RESET_BEFORE:
        up_reset_conn(k);
        break;
    case UP_RESET_AFTER_HEAD:
        up_sends(k, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        break;
    case UP_SILENT:
        break;
    case UP_EARLY_HINTS:
        up_sends(k, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                    "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Final: 1\r\n\r\nok");
        break;
    case UP_BAD_HEAD:
        up_sends(k, "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok");
        break;
    }
}

static void up_body_byte(up *u, unsigned char ch)
{
    if (u->body_len < sizeof(u->body) - 1) {
        u->body[u->body_len] = (char)ch;
        u->body[u->body_len + 1] = '\0';
    }
    if (u->body_pattern && ch != t_pattern(u->body_len))
        u->body_bad = true;
    u->body_len++;
}

static void up_request_done(up_conn *k)
{
    k->hlen = 0;
    k->in_body = false;
    k->u->nrequests++;
    if (k->u->nrequests == k->u->reset_nth)
        up_reset_conn(k);
    else
        up_answer(k);
}

static void up_head_done(up_conn *k)
{
    up *u = k->u;
    k->head[k->hlen] = '\0';
    memcpy(u->last_head, k->head, k->hlen + 1);
    u->body_len = 0;
    u->body[0] = '\0';
    u->body_bad = false;
    k->chunked = strcasestr(k->head, "\r\ntransfer-encoding: chunked") != NULL;
    const char *cl = strcasestr(k->head, "\r\ncontent-length:");
    k->rem = cl ? strtoull(cl + 17, NULL, 10) : 0;
    k->cstate = 0;
    k->linelen = 0;
    k->rem = k->chunked ? 0 : k->rem;
    if (!k->chunked && !k->rem) {
        up_request_done(k);
        return;
    }
    k->in_body = true;
    if (u->hold)
        k->held = true;
}

/* One byte of a request: the head up to its blank line, then the body as it is framed. */
static void up_feed(up_conn *k, unsigned char ch)
{
    if (!k->in_body) {
        assert_true(k->hlen < sizeof(k->head) - 1);
        k->head[k->hlen++] = (char)ch;
        if (k->hlen >= 4 && memcmp(k->head + k->hlen - 4, "\r\n\r\n", 4) == 0)
            up_head_done(k);
        return;
    }
    if (!k->chunked) {
        up_body_byte(k->u, ch);
        if (--k->rem == 0)
            up_request_done(k);
        return;
    }
    switch (k->cstate) {
    case 0: /* chunk size line */
        if (ch == '\n') {
            k->cstate = k->rem ? 1 : 3;
            k->linelen = 0;
        } else if (ch != '\r' && k->linelen++ < 16) {
            assert_true((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                        (ch >= 'A' && ch <= 'F'));
            k->rem = k->rem * 16 + (uint64_t)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
        }
        break;
    case 1:
        up_body_byte(k->u, ch);
        if (--k->rem == 0)
            k->cstate = 2;
        break;
    case 2:
        if (ch == '\n')
            k->cstate = 0;
        break;
    case 3: /* trailer lines, up to the blank one */
        if (ch == '\n') {
            if (k->linelen == 0)
                up_request_done(k);
            k->linelen = 0;
        } else if (ch != '\r') {
            k->linelen++;
        }
        break;
    }
}

static void up_on_io(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    up_conn *k = ud;
    if (events & EV_WRITE)
        up_flush(k);
    if (!(events & EV_READ) || k->fd < 0 || k->held)
        return;
    char buf[65536];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        up_close(k);
        return;
    }
    for (ssize_t i = 0; i < n && k->fd >= 0; i++)
        up_feed(k, (unsigned char)buf[i]);
    if (k->fd >= 0)
        up_watch(k);
    if (k->u->on_body)
        k->u->on_body(k->u->on_body_ud);
}

static void up_on_accept(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)events;
    up *u = ud;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    for (int i = 0; i < UP_CONNS; i++) {
        up_conn *k = &u->conns[i];
        if (k->fd < 0) {
            *k = (up_conn){.u = u, .fd = c};
            u->naccepts++;
            up_watch(k);
            return;
        }
    }
    fail_msg("too many upstream connections");
}

static void up_start(up *u, ev_loop *loop, up_mode mode)
{
    memset(u, 0, sizeof(*u));
    u->loop = loop;
    u->mode = mode;
    for (int i = 0; i < UP_CONNS; i++)
        u->conns[i] = (up_conn){.u = u, .fd = -1};
    u->lfd = test_listen_loopback(16, &u->port);
    assert_int_equal(ev_fd_set(loop, u->lfd, EV_READ, up_on_accept, u), 0);
}

static void up_stop(up *u)
{
    u->stop_on_close = false;
    for (int i = 0; i < UP_CONNS; i++)
        up_close(&u->conns[i]);
    ev_fd_clear(u->loop, u->lfd);
    close(u->lfd);
}

/* A port nothing listens on: bound, then closed. */
static int t_closed_port(void)
{
    int port;
    int fd = test_listen_loopback(1, &port);
    close(fd);
    return port;
}

/* ---- the client side ---- */

typedef struct t_cli t_cli;
struct t_cli {
    ev_loop *loop;
    fwd *f;
    fwd_call *call;
    up *u;
    bool timed_out;
    int heads, status;
    char hdrs[4096]; /* "name: value\n" each */
    char *body;
    size_t blen;
    int dones;
    fwd_result r;
    char err[256];
    bool stop_on_done;
    int want_dones; /* stop at this many done() */
    /* response backpressure */
    bool full_always;
    bool paused;
    int pauses;
    /* streaming */
    bool ping_pong;
    int events;
    int cancel_at;            /* cancel at this event (from inside data(), or from a timer) */
    int stall_at;             /* ping_pong: the upstream sends nothing after this event */
    uint64_t pace_ms;         /* ping_pong: the next event this long after one arrived */
    uint64_t resume_after_ms; /* full_always: fwd_resume this long after "full" */
    bool cancel_by_timer;
    /* reset after head */
    bool reset_on_head;
    /* request body pusher */
    uint64_t to_push, pushed;
    size_t piece;
    bool push_paused;
    bool push_one; /* one piece per t_push, the caller says when the next one goes */
    int fulls, drains;
    /* calls to run one after the other */
    int again;
    bool again_on_head; /* start the next call from head() rather than done() */
    fwd_call *second;
    fwd_request *req;
    /* connected(): asked at all; confirmed from a timer, refused with this reason when set */
    bool confirm;
    const char *refuse;
    int connects;
    int requests_at_connect;   /* the upstream's request count when connected() came */
    uint64_t confirm_after_ms; /* connected(): fwd_confirm this long after (default 1) */
    uint64_t confirm_timer;
};

static void t_guard(ev_loop *loop, void *ud)
{
    t_cli *t = ud;
    t->timed_out = true;
    ev_stop(loop);
}

static void t_run(t_cli *t)
{
    uint64_t g = ev_timer_add(t->loop, 20000, t_guard, t);
    assert_int_equal(ev_run(t->loop), 0);
    ev_timer_cancel(t->loop, g);
    assert_false(t->timed_out);
}

static const fwd_client t_client, t_client_confirm;

static const fwd_client *t_cl(const t_cli *t)
{
    return t->confirm ? &t_client_confirm : &t_client;
}

static void t_head(void *ud, int status, const fwd_header *h, size_t n)
{
    t_cli *t = ud;
    t->heads++;
    t->status = status;
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(t->hdrs + off, sizeof(t->hdrs) - off, "%s: %s\n", h[i].name,
                                h[i].value);
    if (t->reset_on_head)
        up_reset(t->u);
    if (t->again_on_head && t->again > 0) {
        /* Inside curl's header callback: the new call starts on the next loop turn. */
        t->again--;
        assert_int_equal(fwd_start(t->f, t->req, &t_client, t, &t->second), 0);
    }
}

static void t_resume_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    t->paused = false;
    fwd_resume(t->call);
}

static void t_next_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    up_stream_next(t->u);
}

static void t_cancel_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    fwd_cancel(t->call);
    t->call = NULL;
}

static int t_data(void *ud, const char *p, size_t n)
{
    t_cli *t = ud;
    assert_false(t->paused); /* no data() between "full" and fwd_resume */
    t->body = realloc(t->body, t->blen + n + 1);
    assert_non_null(t->body);
    memcpy(t->body + t->blen, p, n);
    t->blen += n;
    t->body[t->blen] = '\0';
    if (t->ping_pong) {
        /* The upstream writes the next event only once this one arrived: a forwarder that
         * waited for more before handing data over would stall here until the deadline. */
        char want[32];
        int wn = snprintf(want, sizeof(want), "data: %d\n\n", t->events);
        if (t->blen < (size_t)wn)
            return 0;
        assert_int_equal(t->blen, wn);
        assert_memory_equal(t->body, want, (size_t)wn);
        t->blen = 0;
        t->events++;
        if (t->cancel_at && t->events == t->cancel_at) {
            if (t->cancel_by_timer) {
                assert_true(ev_timer_add(t->loop, 0, t_cancel_timer, t) > 0);
            } else {
                fwd_cancel(t->call);
                t->call = NULL;
            }
            return 0;
        }
        if (t->stall_at && t->events == t->stall_at)
            return 0;
        if (t->pace_ms)
            assert_true(ev_timer_add(t->loop, t->pace_ms, t_next_timer, t) > 0);
        else
            up_stream_next(t->u);
    }
    if (t->full_always) {
        t->paused = true;
        t->pauses++;
        assert_true(ev_timer_add(t->loop, t->resume_after_ms, t_resume_timer, t) > 0);
        return 1;
    }
    return 0;
}

static void t_push(t_cli *t);

static void t_push_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_push(ud);
}

/* One piece per loop turn, so that curl sometimes finds the body empty and pauses. */
static void t_push(t_cli *t)
{
    if (t->push_paused || t->pushed == t->to_push)
        return;
    size_t n = t->piece;
    if (t->to_push - t->pushed < n)
        n = (size_t)(t->to_push - t->pushed);
    char *p = malloc(n);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)t_pattern(t->pushed + i);
    t->pushed += n;
    int r = fwd_body(t->call, p, n, t->pushed == t->to_push);
    free(p);
    assert_true(r == 0 || r == 1);
    if (r == 1) {
        t->fulls++;
        t->push_paused = true;
        up_release(t->u); /* the member reads from now on */
        return;
    }
    if (t->pushed < t->to_push && !t->push_one)
        assert_true(ev_timer_add(t->loop, 0, t_push_timer, t) > 0);
}

static void t_drained(void *ud)
{
    t_cli *t = ud;
    assert_true(t->push_paused);
    t->drains++;
    t->push_paused = false;
    assert_true(ev_timer_add(t->loop, 0, t_push_timer, t) > 0);
}

static void t_done(void *ud, const fwd_result *r)
{
    t_cli *t = ud;
    t->dones++;
    t->r = *r;
    if (r->error)
        snprintf(t->err, sizeof(t->err), "%s", r->error);
    t->r.error = r->error ? t->err : NULL;
    t->call = NULL;
    if (t->again > 0 && !t->again_on_head) {
        t->again--;
        t->blen = 0;
        assert_int_equal(fwd_start(t->f, t->req, t_cl(t), t, &t->call), 0);
        return;
    }
    if (t->stop_on_done && t->dones >= t->want_dones)
        ev_stop(t->loop);
}

static void t_confirm_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    t->confirm_timer = 0;
    fwd_confirm(t->call, t->refuse);
}

static void t_connected(void *ud, int target)
{
    t_cli *t = ud;
    (void)target;
    t->connects++;
    t->requests_at_connect = t->u->nrequests;
    /* Later, from the loop, as a read from the API server would answer. */
    t->confirm_timer =
        ev_timer_add(t->loop, t->confirm_after_ms ? t->confirm_after_ms : 1, t_confirm_timer, t);
    assert_true(t->confirm_timer != 0);
}

static const fwd_client t_client = {
    .head = t_head, .data = t_data, .body_drained = t_drained, .done = t_done};
static const fwd_client t_client_confirm = {.head = t_head,
                                            .data = t_data,
                                            .body_drained = t_drained,
                                            .done = t_done,
                                            .connected = t_connected};

static void t_setup(t_cli *t, ev_loop **loop, up *u, up_mode mode, const fwd_config *cfg)
{
    *loop = ev_new();
    assert_non_null(*loop);
    up_start(u, *loop, mode);
    memset(t, 0, sizeof(*t));
    t->loop = *loop;
    t->u = u;
    t->stop_on_done = true;
    t->f = fwd_new(*loop, cfg);
    assert_non_null(t->f);
}

static void t_teardown(t_cli *t, ev_loop *loop, up *u)
{
    fwd_free(t->f);
    up_stop(u);
    free(t->body);
    ev_free(loop);
}

static void t_start(t_cli *t, const fwd_request *req)
{
    assert_int_equal(fwd_start(t->f, req, t_cl(t), t, &t->call), 0);
}

/* ---- the tests ---- */

static void test_get(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {
        .method = "GET", .path = "/v1/models?x=1&y=%20", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_null(t.r.error);
    assert_int_equal(t.r.status, 200);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(t.heads, 1);
    assert_string_equal(t.body, "ok GET 0");
    assert_int_equal(t.r.bytes_down, 8);
    assert_int_equal(t.r.bytes_up, 0);
    assert_non_null(strstr(u.last_head, "GET /v1/models?x=1&y=%20 HTTP/1.1\r\n"));
    /* curl's own defaults are not added to what the client sent. */
    assert_null(strcasestr(u.last_head, "\r\nAccept:"));
    assert_null(strcasestr(u.last_head, "\r\nExpect:"));
    assert_null(strcasestr(u.last_head, "\r\nContent-Length:"));
    t_teardown(&t, loop, &u);
}

static void test_post(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    const char *body = "{\"model\":\"a\",\"prompt\":\"hi\"}";
    fwd_header h[] = {{"Content-Type", "application/json"}, {"Content-Length", "999"}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .headers = h,
                       .nheaders = 2,
                       .targets = &tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = 12,
                       .more = true,
                       .content_length = (int64_t)strlen(body)};
    t_start(&t, &req);
    /* The rest of the body arrives later, in two pieces. */
    assert_int_equal(fwd_body(t.call, body + 12, 5, false), 0);
    assert_int_equal(fwd_body(t.call, body + 17, strlen(body) - 17, false), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    char want[64];
    snprintf(want, sizeof(want), "ok POST %zu", strlen(body));
    assert_string_equal(t.body, want);
    assert_string_equal(u.body, body);
    assert_int_equal(t.r.bytes_up, strlen(body));
    assert_non_null(strstr(u.last_head, "POST /v1/completions HTTP/1.1\r\n"));
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
    assert_non_null(strcasestr(u.last_head, cl));
    assert_non_null(strcasestr(u.last_head, "\r\nContent-Type: application/json\r\n"));
    assert_null(strcasestr(u.last_head, "\r\nTransfer-Encoding:"));
    assert_null(strcasestr(u.last_head, "Content-Length: 999")); /* the client's, not sent */
    t_teardown(&t, loop, &u);
}

/* A body all here at the start, as the router has it once the model is read (more, with the
 * whole Content-Length): it goes out with the head (one write), curl adds no Content-Type of its
 * own, and the caller's empty end-of-body push afterwards is a no-op. */
static void test_post_whole_body(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    const char *body = "{\"model\":\"a\",\"prompt\":\"hi\"}";
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = strlen(body),
                       .more = true,
                       .content_length = (int64_t)strlen(body)};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "", 0, false), 0);
    assert_int_equal(fwd_body(t.call, NULL, 0, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    assert_string_equal(u.body, body);
    assert_int_equal(t.r.bytes_up, strlen(body));
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
    assert_non_null(strcasestr(u.last_head, cl));
    assert_null(strcasestr(u.last_head, "\r\nContent-Type:"));
    assert_null(strcasestr(u.last_head, "\r\nExpect:"));
    assert_null(strcasestr(u.last_head, "\r\nTransfer-Encoding:"));
    t_teardown(&t, loop, &u);
}

/* 5 MiB of unknown length (chunked up), pushed a piece per loop turn; the member does not read
 * until fwd_body says "full", so the high-water mark and body_drained are crossed for sure. */
static void test_big_body_streamed_up(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    u.hold = true;
    u.body_pattern = true;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/embeddings",
                       .targets = &tg,
                       .ntargets = 1,
                       .more = true,
                       .content_length = -1};
    t_start(&t, &req);
    t.to_push = 5u << 20;
    t.piece = 48 << 10;
    t_push(&t);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.pushed, t.to_push);
    assert_int_equal(u.body_len, t.to_push);
    assert_false(u.body_bad);
    assert_int_equal(t.r.bytes_up, t.to_push);
    assert_true(t.fulls >= 1);
    assert_int_equal(t.drains, t.fulls);
    assert_non_null(strcasestr(u.last_head, "\r\nTransfer-Encoding: chunked\r\n"));
    char want[64];
    snprintf(want, sizeof(want), "ok POST %llu", (unsigned long long)t.to_push);
    assert_string_equal(t.body, want);
    t_teardown(&t, loop, &u);
}

/* The next piece goes only once the member has every byte before it. */
static void t_push_when_received(void *ud)
{
    t_cli *t = ud;
    if (t->u->body_len == t->pushed && t->pushed < t->to_push)
        t_push(t);
}

/* A body that trickles in: curl finds it empty between pieces, pauses the upload and is woken
 * by the next fwd_body. */
static void test_body_trickles_up(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    u.body_pattern = true;
    u.on_body = t_push_when_received;
    u.on_body_ud = &t;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/embeddings",
                       .targets = &tg,
                       .ntargets = 1,
                       .more = true,
                       .content_length = 20 * 1000};
    t_start(&t, &req);
    t.to_push = 20 * 1000;
    t.piece = 1000;
    t.push_one = true;
    t_push(&t);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.body_len, t.to_push);
    assert_false(u.body_bad);
    assert_string_equal(t.body, "ok POST 20000");
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %d\r\n", 20 * 1000);
    assert_non_null(strcasestr(u.last_head, cl));
    t_teardown(&t, loop, &u);
}

static void test_sse_ping_pong(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_STREAM, NULL);
    t.ping_pong = true;
    fwd_target tg = {"127.0.0.1", u.port};
    const char *body = "{\"model\":\"a\",\"stream\":true}";
    fwd_request req = {.method = "POST",
                       .path = "/v1/chat/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = strlen(body)};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.events, UP_EVENTS);
    assert_int_equal(u.stream_sent, UP_EVENTS + 1);
    assert_non_null(strstr(t.hdrs, "Content-Type: text/event-stream\n"));
    assert_null(strcasestr(t.hdrs, "Transfer-Encoding"));
    t_teardown(&t, loop, &u);
}

/* data() says "full" every time: nothing more arrives until fwd_resume, and every byte arrives
 * once and in order. */
static void test_response_backpressure(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_BULK, NULL);
    u.bulk = 3u << 20;
    t.full_always = true;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/big", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.blen, u.bulk);
    assert_int_equal(t.r.bytes_down, u.bulk);
    for (size_t i = 0; i < u.bulk; i++)
        if ((unsigned char)t.body[i] != t_pattern(i))
            fail_msg("byte %zu differs", i);
    assert_true(t.pauses >= 2);
    t_teardown(&t, loop, &u);
}

static void test_hop_by_hop_and_xff(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_header h[] = {
        {"Host", "client.example"},
        {"Connection", "keep-alive, X-Secret"},
        {"X-Secret", "s"},
        {"Keep-Alive", "300"},
        {"TE", "trailers"},
        {"Proxy-Authorization", "Basic eA=="},
        {"Upgrade", "h2c"},
        {"X-Forwarded-For", "10.0.0.1"},
        {"X-Keep", "yes"},
        {"Accept", "text/event-stream"},
        {"X-Forwarded-For", "10.0.0.2"},
        {"X-Empty", ""},
    };
    fwd_request req = {.method = "GET",
                       .path = "/",
                       .headers = h,
                       .nheaders = sizeof(h) / sizeof(h[0]),
                       .client_addr = "192.0.2.7",
                       .targets = &tg,
                       .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    const char *gone[] = {"client.example", "\r\nConnection:", "X-Secret", "Keep-Alive",
                          "\r\nTE:",        "Proxy-",          "Upgrade"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        if (strcasestr(u.last_head, gone[i]))
            fail_msg("%s reached the member:\n%s", gone[i], u.last_head);
    assert_non_null(strstr(u.last_head, "\r\nX-Keep: yes\r\n"));
    assert_non_null(strstr(u.last_head, "\r\nAccept: text/event-stream\r\n"));
    assert_non_null(strstr(u.last_head, "\r\nX-Empty:"));
    assert_non_null(strstr(u.last_head, "\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2, 192.0.2.7\r\n"));
    int nxff = 0; /* the client's two lines are merged into the one above */
    for (const char *p = u.last_head; (p = strcasestr(p, "\r\nX-Forwarded-For:")); p++)
        nxff++;
    assert_int_equal(nxff, 1);
    char port[32];
    snprintf(port, sizeof(port), "\r\nHost: 127.0.0.1:%d\r\n", u.port);
    assert_non_null(strstr(u.last_head, port));
    /* The answer's hop-by-hop headers, and the one its Connection names, stay behind. */
    assert_non_null(strstr(t.hdrs, "X-End: yes\n"));
    assert_non_null(strstr(t.hdrs, "Content-Length: 8\n"));
    assert_null(strcasestr(t.hdrs, "Connection"));
    assert_null(strcasestr(t.hdrs, "Keep-Alive"));
    assert_null(strcasestr(t.hdrs, "X-Hop"));
    assert_null(strcasestr(t.hdrs, "Proxy-"));
    t_teardown(&t, loop, &u);
}

/* The first target refuses; the second gets the request, body included, from the start. */
static void test_second_target_after_refusal(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg[] = {{"127.0.0.1", t_closed_port()}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = tg,
                       .ntargets = 2,
                       .body = "hello",
                       .body_len = 3,
                       .more = true,
                       .content_length = -1};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "lo", 2, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 1);
    assert_string_equal(u.body, "hello");
    assert_string_equal(t.body, "ok POST 5");
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t, loop, &u);
}

/* The first target takes the connection and resets it without an answer: the second answers. */
static void test_second_target_after_reset(void **state)
{
    (void)state;
    ev_loop *loop;
    up u, bad;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    up_start(&bad, loop, UP_RESET_BEFORE);
    fwd_target tg[] = {{"127.0.0.1", bad.port}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = tg,
                       .ntargets = 2,
                       .body = "hello",
                       .body_len = 5};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 1);
    assert_int_equal(bad.nrequests, 1);
    assert_int_equal(u.nrequests, 1);
    assert_string_equal(u.body, "hello");
    up_stop(&bad);
    t_teardown(&t, loop, &u);
}

/* The member resets a kept-alive connection when the second request arrives on it: curl itself
 * tries a fresh connection, which needs the body from the start (fwd's seek callback). */
static void test_dead_kept_alive_connection(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    u.reset_nth = 2;
    u.body_pattern = true;
    fwd_target tg = {"127.0.0.1", u.port};
    char body[3000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)t_pattern(i);
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = sizeof(body)};
    t.req = &req;
    t.again = 1;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 2);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 2);
    assert_int_equal(u.body_len, sizeof(body));
    assert_false(u.body_bad);
    assert_int_equal(t.r.bytes_up, sizeof(body));
    assert_string_equal(t.body, "ok POST 3000");
    t_teardown(&t, loop, &u);
}

/* A body past the replay cap is not kept, so a failure before the answer is not retried. */
static void test_no_retry_past_replay_cap(void **state)
{
    (void)state;
    ev_loop *loop;
    up u, bad;
    t_cli t;
    fwd_config cfg = {.replay_cap = 1000};
    t_setup(&t, &loop, &u, UP_OK, &cfg);
    up_start(&bad, loop, UP_RESET_BEFORE);
    fwd_target tg[] = {{"127.0.0.1", bad.port}, {"127.0.0.1", u.port}};
    char body[3000];
    memset(body, 'x', sizeof(body));
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = tg,
                       .ntargets = 2,
                       .body = body,
                       .body_len = 500,
                       .more = true,
                       .content_length = sizeof(body)};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, body + 500, sizeof(body) - 500, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(bad.nrequests, 1);
    assert_non_null(strstr(t.r.error, "replay cap"));
    assert_int_equal(u.naccepts, 0);
    up_stop(&bad);
    t_teardown(&t, loop, &u);
}

static void test_both_refuse(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg[] = {{"127.0.0.1", t_closed_port()},
                       {"127.0.0.1", t_closed_port()},
                       {"127.0.0.1", u.port}}; /* a third is never tried */
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 3};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.status, 0);
    assert_int_equal(t.r.target, 1);
    assert_non_null(t.r.error);
    assert_int_equal(u.naccepts, 0);
    t_teardown(&t, loop, &u);
}

/* The drain fence's send deadline: past it, an attempt fails once connected, before any byte of
 * the request goes out (the router puts such a request back); before it, nothing changes. */
static void test_send_deadline(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "{}",
                       .body_len = 2,
                       .send_by_ms = ev_now_ms() - 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.bytes_up, 0);
    assert_non_null(t.r.error);
    assert_non_null(strstr(t.r.error, "drain fence"));
    assert_int_equal(u.nrequests, 0); /* the member saw no request */

    memset(&t.r, 0, sizeof(t.r));
    t.dones = 0;
    req.send_by_ms = ev_now_ms() + 60000;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    assert_int_equal(u.nrequests, 1);
    t_teardown(&t, loop, &u);
}

static void test_reset_after_head(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_RESET_AFTER_HEAD, NULL);
    t.reset_on_head = true;
    fwd_target tg[] = {{"127.0.0.1", u.port}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 2};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.heads, 1);
    assert_int_equal(t.r.outcome, FWD_FAILED_AFTER_RESPONSE);
    assert_int_equal(t.r.status, 200);
    assert_non_null(t.r.error);
    assert_int_equal(u.nrequests, 1); /* a response had started: no second attempt */
    t_teardown(&t, loop, &u);
}

static void test_interim_response(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_EARLY_HINTS, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.heads, 1);
    assert_int_equal(t.status, 201);
    assert_int_equal(t.r.status, 201);
    assert_string_equal(t.hdrs, "Content-Length: 2\nX-Final: 1\n");
    assert_string_equal(t.body, "ok");
    t_teardown(&t, loop, &u);
}

static void test_malformed_response_head(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_BAD_HEAD, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "malformed"));
    t_teardown(&t, loop, &u);
}

static void test_silent_before_head(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 50};
    t_setup(&t, &loop, &u, UP_SILENT, &cfg);
    fwd_target tg[] = {{"127.0.0.1", u.port}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 2};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "upstream timeout"));
    assert_int_equal(u.nrequests, 1); /* not retried */
    t_teardown(&t, loop, &u);
}

/* The upstream timeout counts silence after the head too: a stream that stops is cut. */
static void test_silent_after_head(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 100};
    t_setup(&t, &loop, &u, UP_STREAM, &cfg);
    t.ping_pong = true;
    t.stall_at = 3;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/stream", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.events, 3);
    assert_int_equal(t.r.outcome, FWD_FAILED_AFTER_RESPONSE);
    assert_int_equal(t.r.status, 200);
    assert_non_null(strstr(t.r.error, "upstream timeout"));
    t_teardown(&t, loop, &u);
}

/* ...but not the whole answer's length: events 20 ms apart go on past the timeout in all. */
static void test_paced_stream_not_timed_out(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 300};
    t_setup(&t, &loop, &u, UP_STREAM, &cfg);
    t.ping_pong = true;
    t.pace_ms = 20; /* 50 events: about 1 s */
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/stream", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.events, UP_EVENTS);
    t_teardown(&t, loop, &u);
}

/* ...nor the time the caller held the answer back (a slow client is not a silent member). */
static void test_paused_client_not_timed_out(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 50};
    t_setup(&t, &loop, &u, UP_BULK, &cfg);
    u.bulk = 256u << 10;
    t.full_always = true;
    t.resume_after_ms = 150;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/big", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.blen, u.bulk);
    assert_true(t.pauses >= 2);
    t_teardown(&t, loop, &u);
}

/* Cancelled mid-stream: done never runs and the member sees its connection closed. */
static void t_cancel_mid_stream(bool by_timer)
{
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_STREAM, NULL);
    t.ping_pong = true;
    t.cancel_at = 3;
    t.cancel_by_timer = by_timer;
    u.stop_on_close = true;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/stream", .targets = &tg, .ntargets = 1};
    t_start(&t, &req);
    t_run(&t);
    assert_null(t.call);
    assert_int_equal(t.events, 3);
    assert_int_equal(u.ncloses, 1);
    assert_int_equal(t.dones, 0);
    t_teardown(&t, loop, &u);
}

static void test_cancel_inside_data(void **state)
{
    (void)state;
    t_cancel_mid_stream(false);
}

static void test_cancel_from_loop(void **state)
{
    (void)state;
    t_cancel_mid_stream(true);
}

static void t_stop_at_request(void *ud)
{
    t_cli *t = ud;
    if (t->u->nrequests == 1)
        ev_stop(t->loop);
}

/* fwd_free with a call waiting for its answer: no done, the connection closed, nothing leaked. */
static void test_free_with_call_in_flight(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_SILENT, NULL);
    u.on_body = t_stop_at_request;
    u.on_body_ud = &t;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "x",
                       .body_len = 1,
                       .more = true,
                       .content_length = -1};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "y", 1, true), 0);
    t_run(&t);
    assert_int_equal(u.nrequests, 1);
    fwd_free(t.f);
    t.f = NULL;
    u.on_body = NULL;
    u.stop_on_close = true;
    t_run(&t);
    assert_int_equal(u.ncloses, 1);
    assert_int_equal(t.dones, 0);
    t_teardown(&t, loop, &u);
}

static void test_connection_reuse(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "abc",
                       .body_len = 3};
    t.req = &req;
    t.again = 2; /* the next call starts from done() */
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 3);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t, loop, &u);
}

/* With connected(): a new connection is confirmed before its first byte, once; the calls after
 * it reuse it without asking. */
static void test_connection_confirmed_once(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    t.confirm = true;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "abc",
                       .body_len = 3};
    t.req = &req;
    t.again = 2;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 3);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_string_equal(t.body, "ok POST 3");
    assert_int_equal(t.connects, 1);
    assert_int_equal(t.requests_at_connect, 0);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t, loop, &u);
}

/* A connection the caller refuses carries no byte: the call fails before any, with the reason. */
static void test_connection_refused_by_caller(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    t.confirm = true;
    t.refuse = "the Pod at this address is not the member's";
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_header h[] = {{"Authorization", "Bearer secret"}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .headers = h,
                       .nheaders = 1,
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "abc",
                       .body_len = 3};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.connects, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.bytes_up, 0);
    assert_string_equal(t.r.error, "the Pod at this address is not the member's");
    assert_int_equal(u.nrequests, 0);
    assert_int_equal(u.last_head[0], '\0');
    t_teardown(&t, loop, &u);
}

/* A kept connection that died is replaced by a new one, confirmed again. */
static void test_dead_connection_confirmed_again(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    t.confirm = true;
    u.reset_nth = 2;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "abc",
                       .body_len = 3};
    t.req = &req;
    t.again = 1;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 2);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.naccepts, 2);
    assert_int_equal(t.connects, 2);
    t_teardown(&t, loop, &u);
}

/* Confirmed after send_by_ms: nothing sent, the result says late, and the connection is kept for
 * the next call to that address, which sends on it without connecting again. */
static void test_late_connection_kept_for_next_call(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    t.confirm = true;
    t.confirm_after_ms = 30;
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "abc",
                       .body_len = 3,
                       .send_by_ms = ev_now_ms() + 5};
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_true(t.r.late);
    assert_int_equal(t.r.bytes_up, 0);
    assert_int_equal(u.nrequests, 0);
    assert_int_equal(t.connects, 1);

    req.send_by_ms = ev_now_ms() + 10000;
    t.dones = 0;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_false(t.r.late);
    assert_string_equal(t.body, "ok POST 3");
    assert_int_equal(t.connects, 1); /* the kept connection, not a new one */
    assert_int_equal(u.naccepts, 1);
    assert_int_equal(u.nrequests, 1);
    t_teardown(&t, loop, &u);
}

static void test_start_inside_callback(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "GET", .path = "/", .targets = &tg, .ntargets = 1};
    t.req = &req;
    t.again = 1;
    t.again_on_head = true;
    t.want_dones = 2;
    t_start(&t, &req);
    t_run(&t);
    assert_int_equal(t.dones, 2);
    assert_int_equal(t.heads, 2);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.nrequests, 2);
    assert_string_equal(t.body, "ok GET 0ok GET 0");
    t_teardown(&t, loop, &u);
}

static void test_bad_input(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    fwd *f = fwd_new(loop, NULL);
    assert_non_null(f);
    fwd_target good = {"127.0.0.1", 80}, name = {"localhost", 80}, port = {"127.0.0.1", 0};
    fwd_header crlf[] = {{"X-A", "a\r\nX-Injected: 1"}};
    fwd_header space[] = {{"X A", "a"}};
    struct {
        fwd_request req;
        const char *why;
    } cases[] = {
        {{.method = "GET", .path = "/", .targets = &name, .ntargets = 1}, "numeric IP"},
        {{.method = "GET", .path = "/", .targets = &port, .ntargets = 1}, "port"},
        {{.method = "GET", .path = "/", .ntargets = 0}, "no target"},
        {{.method = "G T", .path = "/", .targets = &good, .ntargets = 1}, "method"},
        {{.method = "GET", .path = "/a b", .targets = &good, .ntargets = 1}, "path"},
        {{.method = "GET", .path = "x", .targets = &good, .ntargets = 1}, "path"},
        {{.method = "GET",
          .path = "/",
          .headers = crlf,
          .nheaders = 1,
          .targets = &good,
          .ntargets = 1},
         "header"},
        {{.method = "GET",
          .path = "/",
          .headers = space,
          .nheaders = 1,
          .targets = &good,
          .ntargets = 1},
         "header"},
        {{.method = "HEAD",
          .path = "/",
          .targets = &good,
          .ntargets = 1,
          .body = "x",
          .body_len = 1},
         "body"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fwd_call *c = NULL;
        assert_int_equal(fwd_start(f, &cases[i].req, &t_client, NULL, &c), -EINVAL);
        assert_null(c);
        const char *err = fwd_start_error(&cases[i].req, &t_client, -EINVAL);
        assert_ptr_equal(err, fwd_request_invalid(&cases[i].req, &t_client));
        if (!strstr(err, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say %s", i, err, cases[i].why);
    }
    fwd_free(f);
    ev_free(loop);
}

/* A body longer than its Content-Length is refused and fails the call. */
static void test_body_overrun(void **state)
{
    (void)state;
    ev_loop *loop;
    up u;
    t_cli t;
    t_setup(&t, &loop, &u, UP_OK, NULL);
    fwd_target tg = {"127.0.0.1", u.port};
    fwd_request req = {.method = "POST",
                       .path = "/",
                       .targets = &tg,
                       .ntargets = 1,
                       .body = "ab",
                       .body_len = 2,
                       .more = true,
                       .content_length = 4};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "cde", 3, true), -EINVAL);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "Content-Length"));
    t_teardown(&t, loop, &u);
}

TEST_MAIN(cmocka_unit_test(test_get), cmocka_unit_test(test_post),
          cmocka_unit_test(test_post_whole_body), cmocka_unit_test(test_big_body_streamed_up),
          cmocka_unit_test(test_body_trickles_up), cmocka_unit_test(test_sse_ping_pong),
          cmocka_unit_test(test_response_backpressure), cmocka_unit_test(test_hop_by_hop_and_xff),
          cmocka_unit_test(test_second_target_after_refusal),
          cmocka_unit_test(test_second_target_after_reset),
          cmocka_unit_test(test_dead_kept_alive_connection),
          cmocka_unit_test(test_no_retry_past_replay_cap), cmocka_unit_test(test_both_refuse),
          cmocka_unit_test(test_send_deadline), cmocka_unit_test(test_reset_after_head),
          cmocka_unit_test(test_interim_response), cmocka_unit_test(test_malformed_response_head),
          cmocka_unit_test(test_silent_before_head), cmocka_unit_test(test_silent_after_head),
          cmocka_unit_test(test_paced_stream_not_timed_out),
          cmocka_unit_test(test_paused_client_not_timed_out),
          cmocka_unit_test(test_cancel_inside_data), cmocka_unit_test(test_cancel_from_loop),
          cmocka_unit_test(test_free_with_call_in_flight), cmocka_unit_test(test_connection_reuse),
          cmocka_unit_test(test_connection_confirmed_once),
          cmocka_unit_test(test_connection_refused_by_caller),
          cmocka_unit_test(test_dead_connection_confirmed_again),
          cmocka_unit_test(test_late_connection_kept_for_next_call),
          cmocka_unit_test(test_start_inside_callback), cmocka_unit_test(test_bad_input),
          cmocka_unit_test(test_body_overrun))

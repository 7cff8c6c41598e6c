/* scripted_http: a tiny HTTP/1.1 responder on loopback for the unit tests of the kube client, the
 * informer and the controller, for what a real API server cannot be made to do on demand (503 with
 * Retry-After, 429, a reset connection, a chunked watch cut at odd points, a Pod its watch has not
 * delivered). Each reply is picked by a substring of the request line and written in pieces;
 * header-only (each test is one translation unit), included after cmocka.h, whose asserts it uses.
 */
#ifndef MP_TEST_SCRIPTED_HTTP_H
#define MP_TEST_SCRIPTED_HTTP_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/ev.h"
#include "loopback.h"

#define SRV_GAP_MS 30 /* between pieces, so each reaches the client on its own */
#define SRV_MAX 48

typedef enum { SRV_KEEP, SRV_CLOSE, SRV_RESET } srv_then;

typedef struct {
    const char *match;      /* substring of the request line that picks this reply */
    const char *pieces[12]; /* raw bytes written in turn; NULL ends */
    srv_then then;          /* after the last piece */
    int delay_ms;           /* before the first piece */
    bool stop;              /* the loop stops when a request picks this reply */
    bool used;
} srv_reply;

typedef struct srv srv;

typedef struct {
    srv *s;
    int fd;
    char *in;
    size_t inlen;
    srv_reply *reply; /* being written */
    int piece;
    uint64_t timer;
} srv_conn;

struct srv {
    ev_loop *loop;
    int lfd, port;
    srv_reply *replies;
    size_t nreplies;
    char *requests[SRV_MAX];
    int nrequests, naccepts;
    int stop_at; /* when set, the loop stops once this many requests came in */
    srv_conn conns[SRV_MAX];
    char *owned[SRV_MAX]; /* strings built for replies */
    int nowned;
};

static inline void srv_close(srv_conn *k, bool reset)
{
    if (k->fd < 0)
        return;
    if (reset) {
        struct linger lg = {1, 0}; /* close with RST */
        setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    ev_fd_clear(k->s->loop, k->fd);
    ev_timer_cancel(k->s->loop, k->timer);
    close(k->fd);
    free(k->in);
    *k = (srv_conn){.s = k->s, .fd = -1};
}

static inline void srv_try_request(srv_conn *k);

static inline void srv_write_next(ev_loop *loop, void *ud)
{
    srv_conn *k = ud;
    k->timer = 0;
    const char *p = k->reply->pieces[k->piece];
    if (p) {
        size_t len = strlen(p);
        assert_int_equal(send(k->fd, p, len, MSG_NOSIGNAL), (ssize_t)len);
        k->piece++;
    }
    if (k->reply->pieces[k->piece]) {
        k->timer = ev_timer_add(loop, SRV_GAP_MS, srv_write_next, k);
        return;
    }
    srv_then then = k->reply->then;
    k->reply = NULL;
    if (then == SRV_KEEP)
        srv_try_request(k);
    else
        srv_close(k, then == SRV_RESET);
}

/* Answers the next complete request in the connection's buffer, if any. */
static inline void srv_try_request(srv_conn *k)
{
    srv *s = k->s;
    if (!k->in)
        return;
    char *end = strstr(k->in, "\r\n\r\n");
    if (!end)
        return;
    size_t head = (size_t)(end - k->in) + 4, body = 0;
    const char *cl = strcasestr(k->in, "\r\nContent-Length:");
    if (cl && cl < end)
        body = strtoul(cl + 17, NULL, 10);
    if (k->inlen < head + body)
        return;
    assert_true(s->nrequests < SRV_MAX);
    char *req = strndup(k->in, head + body);
    s->requests[s->nrequests++] = req;
    if (s->nrequests == s->stop_at)
        ev_stop(s->loop);
    memmove(k->in, k->in + head + body, k->inlen - head - body + 1);
    k->inlen -= head + body;
    size_t line = strcspn(req, "\r");
    for (size_t i = 0; i < s->nreplies && !k->reply; i++) {
        srv_reply *r = &s->replies[i];
        char *hit = strstr(req, r->match);
        if (!r->used && hit && (size_t)(hit - req) < line) {
            r->used = true;
            k->reply = r;
        }
    }
    if (!k->reply)
        fail_msg("no scripted reply for %.*s", (int)line, req);
    if (k->reply->stop)
        ev_stop(s->loop);
    k->piece = 0;
    k->timer = ev_timer_add(s->loop, (uint64_t)k->reply->delay_ms, srv_write_next, k);
}

static inline void srv_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    srv_conn *k = ud;
    char tmp[4096];
    ssize_t n = recv(k->fd, tmp, sizeof(tmp), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        srv_close(k, false);
        return;
    }
    k->in = realloc(k->in, k->inlen + (size_t)n + 1);
    assert_non_null(k->in);
    memcpy(k->in + k->inlen, tmp, (size_t)n);
    k->inlen += (size_t)n;
    k->in[k->inlen] = '\0';
    if (!k->reply)
        srv_try_request(k);
}

static inline void srv_on_accept(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    srv *s = ud;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int i = 0; i < SRV_MAX; i++) {
        if (s->conns[i].fd < 0) {
            s->conns[i] = (srv_conn){.s = s, .fd = c};
            s->naccepts++;
            assert_int_equal(ev_fd_set(loop, c, EV_READ, srv_on_read, &s->conns[i]), 0);
            return;
        }
    }
    fail_msg("too many connections");
}

static inline void srv_start(srv *s, ev_loop *loop, srv_reply *replies, size_t n)
{
    *s = (srv){.loop = loop, .replies = replies, .nreplies = n};
    for (int i = 0; i < SRV_MAX; i++)
        s->conns[i] = (srv_conn){.s = s, .fd = -1};
    s->lfd = test_listen_loopback(16, &s->port);
    assert_int_equal(ev_fd_set(loop, s->lfd, EV_READ, srv_on_accept, s), 0);
}

static inline void srv_stop(srv *s)
{
    for (int i = 0; i < SRV_MAX; i++)
        srv_close(&s->conns[i], false);
    ev_fd_clear(s->loop, s->lfd);
    close(s->lfd);
    for (int i = 0; i < s->nrequests; i++)
        free(s->requests[i]);
    for (int i = 0; i < s->nowned; i++)
        free(s->owned[i]);
}

static inline const char *srv_own(srv *s, char *str)
{
    assert_non_null(str);
    assert_true(s->nowned < SRV_MAX);
    s->owned[s->nowned++] = str;
    return str;
}

/* A whole HTTP/1.1 answer with its Content-Length. */
static inline char *srv_http(const char *status, const char *headers, const char *body)
{
    char *r;
    assert_true(asprintf(&r,
                         "HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: "
                         "%zu\r\n\r\n%s",
                         status, headers, strlen(body), body) > 0);
    return r;
}

static inline char *srv_chunk(const char *data, size_t len)
{
    char *r;
    assert_true(asprintf(&r, "%zx\r\n%.*s\r\n", len, (int)len, data) > 0);
    return r;
}

#endif

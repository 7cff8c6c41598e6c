/* scripted_http: the scripted HTTP/1.1 responder of scripted_http.h: accepts, reads whole requests,
 * picks each one's reply by a substring of its request line and writes it piece by piece. */
#include "scripted_http.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

static void srv_close(srv_conn *k, bool reset)
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

static void srv_try_request(srv_conn *k);

static void srv_write_next(ev_loop *loop, void *ud)
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
static void srv_try_request(srv_conn *k)
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

static void srv_on_read(ev_loop *loop, int fd, int events, void *ud)
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

static void srv_on_accept(ev_loop *loop, int fd, int events, void *ud)
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

void srv_start(srv *s, ev_loop *loop, srv_reply *replies, size_t n)
{
    *s = (srv){.loop = loop, .replies = replies, .nreplies = n};
    for (int i = 0; i < SRV_MAX; i++)
        s->conns[i] = (srv_conn){.s = s, .fd = -1};
    s->lfd = test_listen_loopback(16, &s->port);
    assert_int_equal(ev_fd_set(loop, s->lfd, EV_READ, srv_on_accept, s), 0);
}

void srv_stop(srv *s)
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

const char *srv_own(srv *s, char *str)
{
    assert_non_null(str);
    assert_true(s->nowned < SRV_MAX);
    s->owned[s->nowned++] = str;
    return str;
}

char *srv_http(const char *status, const char *headers, const char *body)
{
    char *r;
    assert_true(asprintf(&r,
                         "HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: "
                         "%zu\r\n\r\n%s",
                         status, headers, strlen(body), body) > 0);
    return r;
}

char *srv_chunk(const char *data, size_t len)
{
    char *r;
    assert_true(asprintf(&r, "%zx\r\n%.*s\r\n", len, (int)len, data) > 0);
    return r;
}

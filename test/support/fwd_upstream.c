/* fwd_upstream: the forwarder tests' loopback member (fwd_upstream.h). Requests are read a byte at
 * a time through a small state machine (head, then a Content-Length or chunked body with its
 * trailer); answers are queued and flushed as the socket takes them, so backpressure is real. */
#include "fwd_upstream.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

unsigned char up_pattern(uint64_t i)
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

void up_reset(up *u)
{
    for (int i = 0; i < UP_CONNS; i++)
        if (u->conns[i].fd >= 0)
            up_reset_conn(&u->conns[i]);
}

void up_release(up *u)
{
    u->hold = false;
    for (int i = 0; i < UP_CONNS; i++)
        if (u->conns[i].fd >= 0 && u->conns[i].held) {
            u->conns[i].held = false;
            up_watch(&u->conns[i]);
        }
}

void up_stream_next(up *u)
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
            p[i] = (char)up_pattern(i);
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
    if (u->body_pattern && ch != up_pattern(u->body_len))
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

void up_start(up *u, ev_loop *loop, up_mode mode)
{
    memset(u, 0, sizeof(*u));
    u->loop = loop;
    u->mode = mode;
    for (int i = 0; i < UP_CONNS; i++)
        u->conns[i] = (up_conn){.u = u, .fd = -1};
    u->lfd = test_listen_loopback(16, &u->port);
    assert_int_equal(ev_fd_set(loop, u->lfd, EV_READ, up_on_accept, u), 0);
}

void up_stop(up *u)
{
    u->stop_on_close = false;
    for (int i = 0; i < UP_CONNS; i++)
        up_close(&u->conns[i]);
    ev_fd_clear(u->loop, u->lfd);
    close(u->lfd);
}

/* fwd_conn: new connections confirmed before their first byte. With a connected() callback, fwd
 * makes every new connection itself: curl's open-socket callback refuses to open one (the call's
 * want_conn), the attempt ends, and fwd_conn_start connects a non-blocking socket, watched until
 * writable under the connect timeout. Once connected the caller is asked (connected(), the call
 * confirming) whether the address is still the member's; fwd_confirm starts the attempt again,
 * and curl takes the socket through the same callback, or the call fails with the caller's
 * reason. A connection confirmed too late for the call's drain fence is not used but parked: kept
 * (oldest first, as many as idle connections) for the next call to that address, which takes it
 * while it is open, silent and younger than the idle age. A failed connect tries the next target
 * as curl's own would (fwd_retry). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fwd_internal.h"

void fwd_conn_close(fwd_call *c)
{
    ev_timer_cancel(c->f->loop, c->conn_timer);
    c->conn_timer = 0;
    if (c->conn_fd >= 0) {
        ev_fd_clear(c->f->loop, c->conn_fd);
        close(c->conn_fd);
        c->conn_fd = -1;
    }
}

/* The attempt's connection failed (err an errno, or timed out): the next target, or the end. */
static void fwd_conn_failed(fwd_call *c, CURLcode rc, int err)
{
    fwd *f = c->f;
    const fwd_target *t = &c->targets[c->attempt];
    fwd_conn_close(c);
    c->finished = true;
    c->result = rc;
    snprintf(c->errbuf, sizeof(c->errbuf), "forward: cannot connect to %s port %d: %s", t->ip,
             t->port, err ? strerror(err) : "timed out");
    f->depth++;
    if (!fwd_retry(c))
        fwd_finish(c);
    f->depth--;
    fwd_reap(f);
}

/* Connected, nothing sent: the caller's turn to confirm the address (fwd_confirm). */
static void fwd_conn_up(fwd_call *c)
{
    fwd *f = c->f;
    ev_fd_clear(f->loop, c->conn_fd);
    ev_timer_cancel(f->loop, c->conn_timer);
    c->conn_timer = 0;
    c->confirming = true;
    f->depth++;
    c->cl.connected(c->ud, c->attempt);
    f->depth--;
    fwd_reap(f);
}

static void fwd_on_conn_io(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop, (void)events;
    fwd_call *c = ud;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err)
        fwd_conn_failed(c, CURLE_COULDNT_CONNECT, err);
    else
        fwd_conn_up(c);
}

static void fwd_on_conn_timeout(ev_loop *loop, void *ud)
{
    (void)loop;
    fwd_call *c = ud;
    c->conn_timer = 0;
    fwd_conn_failed(c, CURLE_OPERATION_TIMEDOUT, 0);
}

/* An attempt that ended because curl wanted a new connection: fwd makes it. true: it took the
 * attempt over (connecting, or already ended it); false: the caller ends it as it stands. */
bool fwd_conn_start(fwd_call *c)
{
    fwd *f = c->f;
    /* A body partly sent on a kept connection that died and already dropped cannot go again. */
    if (!c->want_conn || c->failed || c->resp_started || c->base != 0)
        return false;
    if (c->in_multi)
        curl_multi_remove_handle(evcurl_multi(f->ec), c->easy);
    c->in_multi = false;
    fwd_attempt_reset(c);
    const fwd_target *t = &c->targets[c->attempt];
    struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)t->port)};
    bool v6 = inet_pton(AF_INET, t->ip, &in4.sin_addr) != 1;
    if (v6 && inet_pton(AF_INET6, t->ip, &in6.sin6_addr) != 1)
        return false; /* fwd_request_invalid let only numeric addresses in */
    c->conn_fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->conn_fd < 0) {
        fwd_conn_failed(c, CURLE_COULDNT_CONNECT, errno);
        return true;
    }
    int rc = v6 ? connect(c->conn_fd, (struct sockaddr *)&in6, sizeof(in6))
                : connect(c->conn_fd, (struct sockaddr *)&in4, sizeof(in4));
    if (rc == 0) {
        fwd_conn_up(c);
        return true;
    }
    if (errno != EINPROGRESS) {
        fwd_conn_failed(c, CURLE_COULDNT_CONNECT, errno);
        return true;
    }
    if (ev_fd_set(f->loop, c->conn_fd, EV_WRITE, fwd_on_conn_io, c) < 0 ||
        !(c->conn_timer =
              ev_timer_add(f->loop, (uint64_t)f->cfg.connect_timeout_ms, fwd_on_conn_timeout, c))) {
        fwd_conn_close(c);
        c->failed = true;
        c->error = "out of memory";
        return false;
    }
    return true;
}

static void fwd_park_drop(fwd *f, size_t i)
{
    close(f->parked[i].fd);
    memmove(&f->parked[i], &f->parked[i + 1], (f->nparked - i - 1) * sizeof(f->parked[0]));
    f->nparked--;
}

static void fwd_park(fwd *f, const fwd_target *t, int fd)
{
    if (f->nparked == (size_t)f->cfg.max_idle_connections)
        fwd_park_drop(f, 0);
    fwd_parked *p = &f->parked[f->nparked++];
    snprintf(p->ip, sizeof(p->ip), "%s", t->ip);
    p->port = t->port;
    p->fd = fd;
    p->at_ms = ev_now_ms();
}

/* A parked connection to t that is still open and silent (as curl checks a kept one before its
 * reuse): its fd, or -ENOENT when there is none; those past the idle age, closed or readable are
 * dropped on the way. */
int fwd_unpark(fwd *f, const fwd_target *t)
{
    uint64_t now = ev_now_ms();
    for (size_t i = 0; i < f->nparked;) {
        fwd_parked *p = &f->parked[i];
        char b;
        if (now - p->at_ms >= (uint64_t)f->cfg.max_idle_age_ms ||
            (strcmp(p->ip, t->ip) == 0 && p->port == t->port &&
             !(recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
               (errno == EAGAIN || errno == EWOULDBLOCK)))) {
            fwd_park_drop(f, i);
            continue;
        }
        if (strcmp(p->ip, t->ip) == 0 && p->port == t->port) {
            int fd = p->fd;
            memmove(&f->parked[i], &f->parked[i + 1], (f->nparked - i - 1) * sizeof(f->parked[0]));
            f->nparked--;
            return fd;
        }
        i++;
    }
    return -ENOENT;
}

void fwd_confirm(fwd_call *c, const char *refused)
{
    if (c->dead || !c->confirming)
        return;
    c->confirming = false;
    if (!refused && c->send_by_ms && ev_now_ms() > c->send_by_ms) {
        /* Confirmed, but too late for the drain fence: nothing is sent; the connection waits
         * for the caller's next try, which need not connect again. */
        fwd_park(c->f, &c->targets[c->attempt], c->conn_fd);
        c->conn_fd = -1;
        c->late = true;
        c->failed = true;
        c->error = "forward: not sent within the drain fence's window (connected too late)";
        fwd_kick(c);
        return;
    }
    if (refused) {
        fwd_conn_close(c);
        snprintf(c->msg, sizeof(c->msg), "%s", refused);
        c->failed = true;
        c->error = c->msg;
    } else {
        c->add_pending = true; /* curl takes the socket from fwd_on_opensocket */
        if (!c->upload || (c->body_end && c->len == 0))
            fwd_body_out(c);
    }
    fwd_kick(c);
}

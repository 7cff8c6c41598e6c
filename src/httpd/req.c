/* req: one request's life on the server: MHD's calls for it (headers, body chunks, the end) as
 * steps, its connection put to sleep while it waits for its owner and woken when the owner acts,
 * a sleeping client watched for leaving, the owner's answer (a reply, a body read, an abort), the
 * work registered with it and cancelled if it ends unanswered, and what the owner may read of it
 * (method, path, headers, target, client address). Streamed answers are stream.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "httpd_internal.h"

/* The body left unread behind an early answer that is read and dropped rather than closing. */
#define HTTPD_DISCARD_MAX (1u << 20)

void httpd_req_unwatch(httpd_req *r)
{
    if (!r->watching)
        return;
    r->watching = false;
    ev_fd_clear(r->h->loop, r->fd);
}

static void httpd_work_unlink(httpd_work *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        w->r->work = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->r = NULL;
}

/* r ended under its owner: every piece of work registered for it is cancelled, once, newest
 * first. Each leaves the list before its cancel runs, so a cancel may end the others. */
void httpd_req_gone(httpd_req *r)
{
    bool finished = r->replied || (r->stream && r->stream->ended);
    if (finished || r->closed)
        return;
    r->closed = true; /* calls from inside a cancel do not touch the connection */
    if (r->stream) {  /* nor does a drain call come after: its owner may be gone */
        r->stream->drain = NULL;
        ev_timer_cancel(r->h->loop, r->stream->drain_timer);
        r->stream->drain_timer = 0;
    }
    while (r->work) {
        httpd_work *w = r->work;
        httpd_work_unlink(w);
        w->cancel(w->ud);
        free(w);
    }
}

static bool httpd_req_raw_ok(httpd_req *r, bool plain);
static bool httpd_req_send_raw(httpd_req *r, const char *bytes, size_t len);

/* Writes a probe to r's client, which sent its end of file: a peer that closed answers it with a
 * reset, one that only half-closed takes it quietly. A plain HTTP/1.1 request gets an interim
 * "100 Continue" (clients must accept an unexpected 1xx, RFC 9110 section 15.2); HTTP/1.0, which
 * must get no 1xx, one byte of TCP urgent data, which the client's kernel keeps out of the bytes
 * it reads (SO_OOBINLINE off, as every HTTP client leaves it: the byte is seen by no read). Under
 * TLS nothing is written. False when the write failed: the client is gone. */
static bool httpd_req_probe(httpd_req *r)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (r->h->tls_cert)
        return true;
    if (r->http11)
        return httpd_req_send_raw(r, cont, sizeof(cont) - 1);
    return send(r->fd, "!", 1, MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

/* A sleeping req's client sent its end of file, or its socket has an error; nothing else wakes
 * the watch (bytes it sends, a body left unread while the req waits, are MHD's to read), and the
 * kernel tells the end of file once every byte before it has arrived, read or not. An error (a
 * reset) means it left: its owner is told now, and MHD, woken, drops the connection
 * (httpd_req_step, httpd_stream_read). End of file is a client that closed, or one that only
 * half-closed (shutdown(SHUT_WR)) and still reads: TCP tells them apart only when something is
 * written. So with no response begun the client is probed once (httpd_req_probe) and the watch,
 * now on errors and hang-ups only, sees a closed peer's reset at once; a half-closed one stays
 * quiet and gets its answer. Under TLS, with no probe, the request stays and a gone client fails
 * at the write. Once its response has begun (a stream waiting for bytes), end of file means gone,
 * as a client stopping a stream would. */
static void httpd_on_peer(ev_loop *loop, int fd, int events, void *ud)
{
    httpd_req *r = ud;
    if (!(events & EV_ERROR) && !r->eof_seen && httpd_req_raw_ok(r, false)) {
        r->eof_seen = true;
        if (httpd_req_probe(r) && ev_fd_set(loop, fd, EV_ERROR, httpd_on_peer, r) == 0)
            return;
    }
    httpd_req_unwatch(r);
    r->peer_gone = true;
    httpd_req_gone(r);
    r->suspended = false;
    MHD_resume_connection(r->conn);
    httpd_kick(r->h);
}

/* MHD allows suspending only from inside its callbacks; a req sleeps there when it has nothing
 * to do until its owner acts (answers, resumes the body, writes stream bytes). MHD does not poll
 * a suspended socket, so its client is watched here for leaving (httpd_on_peer), whatever it
 * waits for: its answer, stream bytes, or its owner to read a body paused part way. */
void httpd_req_sleep(httpd_req *r)
{
    if (r->suspended)
        return;
    r->suspended = true;
    MHD_suspend_connection(r->conn);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci && ev_fd_set(r->h->loop, ci->connect_fd, r->eof_seen ? EV_ERROR : EV_HANGUP,
                        httpd_on_peer, r) == 0) {
        r->fd = ci->connect_fd;
        r->watching = true;
    }
}

/* MHD picks a resumed connection up on its next run; run it from the loop, not from inside the
 * caller (which may be any callback). A req whose connection is closing stays asleep. */
void httpd_req_wake(httpd_req *r)
{
    if (!r->suspended || r->closed)
        return;
    httpd_req_unwatch(r);
    r->suspended = false;
    MHD_resume_connection(r->conn);
    httpd_kick(r->h);
}

enum MHD_Result httpd_queue(struct MHD_Connection *conn, httpd_reply *r)
{
    struct MHD_Response *resp =
        r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        r->body = NULL;
        return MHD_NO;
    }
    r->body = NULL; /* the response owns it now */
    enum MHD_Result ret = MHD_add_response_header(
        resp, "Content-Type", r->content_type ? r->content_type : "text/plain; charset=utf-8");
    if (ret == MHD_YES && r->code == 401)
        ret = MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (ret == MHD_YES)
        ret = MHD_queue_response(conn, r->code ? r->code : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* Hands the answer to MHD, once; MHD may only take it while the request is complete or its
 * body not yet begun, which is when the callers run. */
static enum MHD_Result httpd_req_queue(httpd_req *r)
{
    if (r->queued)
        return MHD_YES;
    r->queued = true;
    return r->stream ? httpd_stream_queue(r) : httpd_queue(r->conn, &r->reply);
}

static void httpd_req_unlink(httpd_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        r->h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

void httpd_req_free(httpd_req *r)
{
    httpd_req_unwatch(r);
    httpd_req_unlink(r);
    while (r->work) { /* a finished request's: never cancelled */
        httpd_work *w = r->work;
        httpd_work_unlink(w);
        free(w);
    }
    free(r->reply.body);
    if (r->stream)
        httpd_stream_free(r->h->loop, r->stream);
    free(r);
}

bool httpd_req_answered(const httpd_req *r)
{
    return r->replied || r->stream;
}

/* One step of a request's life, each time MHD calls for it: headers in, body chunks, body
 * complete, and again after every resume (MHD repeats the call it was suspended in). */
enum MHD_Result httpd_req_step(httpd_req *r, const char *upload, size_t *upload_size)
{
    if (r->peer_gone)
        return MHD_NO;
    if (*upload_size) {
        if (httpd_req_answered(r)) { /* answered early: drop the rest, within a bound */
            r->discarded += *upload_size;
            *upload_size = 0;
            return r->discarded <= HTTPD_DISCARD_MAX ? MHD_YES : MHD_NO;
        }
        if (r->body_paused || !r->body) { /* left in MHD's buffer: MHD stops reading */
            httpd_req_sleep(r);
            return MHD_YES;
        }
        size_t n = *upload_size;
        *upload_size = 0;
        r->body(r->body_ud, upload, n, false);
        if (r->body_paused && !httpd_req_answered(r))
            httpd_req_sleep(r);
        return MHD_YES;
    }
    if (!r->past_headers) { /* MHD waits for a word on the body before reading it */
        if (httpd_req_answered(r))
            return httpd_req_queue(r);
        if (!r->body) { /* the answer comes first (or the body is asked for later) */
            httpd_req_sleep(r);
            return MHD_YES;
        }
        r->past_headers = true;
        return MHD_YES;
    }
    /* The whole body is in. */
    if (!httpd_req_answered(r) && r->body && !r->body_ended) {
        if (r->body_paused) {
            httpd_req_sleep(r);
            return MHD_YES;
        }
        r->body_ended = true;
        r->body(r->body_ud, NULL, 0, true);
    }
    if (httpd_req_answered(r))
        return httpd_req_queue(r);
    httpd_req_sleep(r);
    return MHD_YES;
}

const char *httpd_req_method(const httpd_req *r)
{
    return r->method;
}

const char *httpd_req_path(const httpd_req *r)
{
    return r->path;
}

const char *httpd_req_header(const httpd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

typedef struct httpd_header_walk {
    httpd_header_fn fn;
    void *ud;
} httpd_header_walk;

static enum MHD_Result httpd_on_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    (void)kind;
    httpd_header_walk *w = cls;
    return w->fn(w->ud, key, value ? value : "") ? MHD_YES : MHD_NO;
}

void httpd_req_headers(const httpd_req *r, httpd_header_fn fn, void *ud)
{
    httpd_header_walk w = {fn, ud};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, httpd_on_header, &w);
}

/* The query, rebuilt: MHD hands out its arguments decoded, so each is percent-encoded again
 * (RFC 3986 unreserved characters kept), in the order received. */
typedef struct httpd_target {
    char *s;
    size_t len, cap;
    bool oom;
} httpd_target;

static void httpd_target_add(httpd_target *t, const char *p, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 128;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *b = realloc(t->s, cap);
        if (!b) {
            t->oom = true;
            return;
        }
        t->s = b;
        t->cap = cap;
    }
    memcpy(t->s + t->len, p, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* Appends v percent-encoded: RFC 3986's unreserved characters and those in keep stay. */
static void httpd_target_escaped(httpd_target *t, const char *v, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~' || strchr(keep, *c)) {
            httpd_target_add(t, (const char *)c, 1);
        } else {
            char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
            httpd_target_add(t, e, 3);
        }
    }
}

static enum MHD_Result httpd_on_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                         const char *value)
{
    (void)kind;
    httpd_target *t = cls;
    httpd_target_add(t, strchr(t->s, '?') ? "&" : "?", 1);
    httpd_target_escaped(t, key, "");
    if (value) {
        httpd_target_add(t, "=", 1);
        httpd_target_escaped(t, value, "");
    }
    return MHD_YES;
}

char *httpd_req_target(const httpd_req *r)
{
    httpd_target t = {0};
    httpd_target_escaped(&t, r->path, "/:@!$&'()*+,;=");
    if (!t.oom)
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, httpd_on_argument, &t);
    if (t.oom) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

int httpd_req_client_addr(const httpd_req *r, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    const void *addr = NULL;
    if (sa && sa->sa_family == AF_INET)
        addr = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa && sa->sa_family == AF_INET6)
        addr = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!addr)
        return -ENOENT;
    if (len > (size_t)(socklen_t)-1 || !inet_ntop(sa->sa_family, addr, buf, (socklen_t)len))
        return -ENOSPC;
    return 0;
}

void *httpd_req_ud(const httpd_req *r)
{
    return r->h->ud;
}

void httpd_req_reply(httpd_req *r, httpd_reply *reply)
{
    if (httpd_req_answered(r)) { /* a second answer is the owner's bug: keep the first */
        free(reply->body);
        *reply = (httpd_reply){0};
        return;
    }
    r->reply = *reply;
    *reply = (httpd_reply){0};
    r->replied = true;
    httpd_req_wake(r); /* answered inside the request callback: httpd_req_step queues it */
}

int httpd_req_body(httpd_req *r, httpd_body_fn fn, void *ud)
{
    if (!fn || httpd_req_answered(r))
        return -EINVAL;
    if (r->body)
        return -EALREADY;
    r->body = fn;
    r->body_ud = ud;
    httpd_req_wake(r);
    return 0;
}

void httpd_req_body_pause(httpd_req *r)
{
    if (r->body && !r->body_ended)
        r->body_paused = true; /* the connection sleeps at MHD's next call for it */
}

void httpd_req_body_resume(httpd_req *r)
{
    if (!r->body_paused)
        return;
    r->body_paused = false;
    httpd_req_wake(r);
}

/* MHD has no response for r, so it has sent nothing of one (a 100 Continue of its own is
 * complete by the time r waits or its body is read); with plain, also an HTTP/1.1 connection
 * without TLS: bytes may be written straight to its socket, beside MHD. */
static bool httpd_req_raw_ok(httpd_req *r, bool plain)
{
    return (!plain || (r->http11 && !r->h->tls_cert)) && !r->queued &&
           !MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_HTTP_STATUS);
}

/* Writes bytes to r's socket if httpd_req_raw_ok: true when all of them went out. */
static bool httpd_req_send_raw(httpd_req *r, const char *bytes, size_t len)
{
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return fd && httpd_req_raw_ok(r, true) &&
           send(fd->connect_fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len;
}

void httpd_req_abort(httpd_req *r, unsigned code, const httpd_header *headers, size_t n,
                     const char *body, size_t len)
{
    if (httpd_req_answered(r) || r->closed)
        return;
    const char *reason = MHD_get_reason_phrase_for(code);
    size_t cap = 128 + strlen(reason) + len;
    for (size_t i = 0; i < n; i++)
        cap += strlen(headers[i].name) + strlen(headers[i].value) + 4;
    char *msg = malloc(cap);
    if (msg) {
        int at =
            snprintf(msg, cap, "HTTP/1.1 %u %s\r\nConnection: close\r\nContent-Length: %zu\r\n",
                     code, reason, len);
        for (size_t i = 0; i < n; i++)
            at += snprintf(msg + at, cap - (size_t)at, "%s: %s\r\n", headers[i].name,
                           headers[i].value);
        at += snprintf(msg + at, cap - (size_t)at, "\r\n");
        memcpy(msg + at, body, len);
        httpd_req_send_raw(r, msg, (size_t)at + len);
        free(msg);
    }
    r->replied = true; /* finished for its owner: no cancel runs */
    r->peer_gone = true;
    /* MHD closes the connection at its next look: resumed if asleep, else the socket's shutdown
     * wakes its poll (the reply sent goes out before the FIN). */
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (r->suspended) {
        httpd_req_unwatch(r);
        r->suspended = false;
        MHD_resume_connection(r->conn);
        httpd_kick(r->h);
    } else if (fd) {
        shutdown(fd->connect_fd, SHUT_RDWR);
    }
}

httpd_work *httpd_req_work(httpd_req *r, void (*cancel)(void *ud), void *ud)
{
    httpd_work *w = r->closed ? NULL : calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    *w = (httpd_work){.r = r, .cancel = cancel, .ud = ud, .next = r->work};
    if (r->work)
        r->work->prev = w;
    r->work = w;
    return w;
}

void httpd_work_done(httpd_work *w)
{
    if (!w || !w->r) /* from inside its own cancel: freed when that returns */
        return;
    httpd_work_unlink(w);
    free(w);
}

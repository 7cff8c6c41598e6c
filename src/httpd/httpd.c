/* httpd: libmicrohttpd in "external epoll" mode. MHD keeps its own epoll set; its fd becomes
 * readable whenever a listener or connection needs work, and MHD_get_timeout says when idle
 * connections must be looked at, so one ev fd and one ev timer drive the whole server. Waiting
 * (for an answer, a paused body's reader, a stream's next bytes) is a suspended connection: MHD
 * neither polls nor times it out, and nothing spins; resuming it schedules a run from the loop. */
#include "httpd/httpd.h"
#include "conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "httpd/intake.h"

/* Idle keep-alive connections (a scraper's, a prober's) are closed after this. */
#define HTTPD_IDLE_TIMEOUT_S 30u
/* Scrapers and probes are few; a flood of connections must not exhaust our fds. */
#define HTTPD_MAX_CONNECTIONS 64u
/* MHD's own cap is this far above ours: connections evicted (shut down) in one run are closed by
 * MHD in a later one, and a newcomer must not find MHD full meanwhile. Past it, MHD stops
 * accepting (new connections wait in the listen backlog) until one closes. */
#define HTTPD_EVICT_SLACK 16u
/* The body left unread behind an early answer that is read and dropped rather than closing. */
#define HTTPD_DISCARD_MAX (1u << 20)
/* Stream bytes buffered here past which the producer is asked to pause. */
#define HTTPD_STREAM_HIGH (256u << 10)
/* The most MHD asks a stream for at once. MHD callocs this block with each response, so a
 * response of a known smaller length gets a block of its length (and at least the minimum). */
#define HTTPD_STREAM_BLOCK (16u << 10)
#define HTTPD_STREAM_BLOCK_MIN 256u

/* TLS 1.2 and 1.3 only, as Go servers (kubebuilder's metrics endpoint) accept by default. */
#define HTTPD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

typedef struct httpd_stream {
    unsigned code;
    uint64_t size; /* MHD_SIZE_UNKNOWN unless a Content-Length was given */
    httpd_header *headers;
    size_t nheaders;
    char *buf; /* bytes written and not yet handed to MHD: buf[off, len) */
    size_t off, len, cap;
    bool queued;     /* the MHD response exists */
    bool ended, ok;  /* httpd_req_stream_end called */
    bool want_drain; /* a write returned 1 */
    void (*drain)(void *ud);
    void *drain_ud;
    uint64_t drain_timer;
} httpd_stream;

struct httpd_req {
    httpd *h;
    struct MHD_Connection *conn;
    const char *method, *path; /* MHD's, valid for the request's life */
    httpd_reply reply;
    bool replied; /* httpd_req_reply called */
    bool queued;  /* the reply is MHD's */
    bool suspended;
    bool past_headers; /* MHD was let past the headers: a call with no data now means the end */
    bool closed;       /* ended under its owner: its work is cancelled (or being cancelled) */
    bool peer_gone;    /* the client closed while the req waited: MHD must drop it */
    bool watching;     /* fd is in the loop, watched for the client's close while asleep */
    bool eof_seen;     /* the client sent its end of file: only an error or hang-up is watched */
    bool http11;       /* the request line says HTTP/1.1 (an interim 1xx may be sent) */
    int fd;
    httpd_body_fn body;
    void *body_ud;
    bool body_paused, body_ended;
    size_t discarded; /* body bytes dropped after an early answer */
    httpd_stream *stream;
    httpd_work *work;       /* registered work, newest first */
    httpd_req *prev, *next; /* the server's list of requests being answered asynchronously */
};

/* One piece of work started for a request: its cancel runs if the request ends unfinished. */
struct httpd_work {
    httpd_req *r; /* NULL once unlinked (its cancel runs, or it is done) */
    void (*cancel)(void *ud);
    void *ud;
    httpd_work *prev, *next;
};

struct httpd {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    int port;
    uint64_t timer;
    httpd_answer_fn answer;
    httpd_request_fn request;
    void *ud;
    char *tls_cert, *tls_key; /* kept until MHD stops: it may read them after the start */
    httpd_req *reqs;
    httpd_conns *conns; /* the limits MHD lacks, and the count of open connections */
    bool stopping;      /* inside httpd_stop: nothing is scheduled on the loop any more */
    char lasterr[160];  /* MHD's last log line: the reason a start failed */
};

/* The first call for a request only announces it; MHD expects the answer on a later call. */
static char httpd_seen;
/* What the URI callback hands the first call for a request whose raw path httpd refuses. */
static char httpd_odd_path;

static void httpd_on_timer(ev_loop *loop, void *ud);

int httpd_parse_bind(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
                     size_t errlen)
{
    if (!s || !*s) {
        snprintf(err, errlen, "empty bind address (want HOST:PORT, :PORT, or 0 to disable)");
        return -1;
    }
    if (strcmp(s, "0") == 0)
        return 1;
    const char *colon = strrchr(s, ':');
    if (!colon) {
        snprintf(err, errlen, "bind address %s has no port (want HOST:PORT, :PORT, or 0)", s);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || port < 0 || port > 65535) {
        snprintf(err, errlen, "bind address %s: bad port", s);
        return -1;
    }
    size_t hl = (size_t)(colon - s);
    char host[64];
    bool v6 = hl >= 2 && s[0] == '[' && s[hl - 1] == ']';
    if (v6) {
        s++;
        hl -= 2;
    }
    if (hl >= sizeof(host)) {
        snprintf(err, errlen, "bind address %s: bad host", s);
        return -1;
    }
    memcpy(host, s, hl);
    host[hl] = 0;
    memset(ss, 0, sizeof(*ss));
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            snprintf(err, errlen, "bind address [%s]: not an IPv6 address", host);
            return -1;
        }
        *len = sizeof(*a);
        return 0;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    if (hl && inet_pton(AF_INET, host, &a->sin_addr) != 1) {
        snprintf(err, errlen,
                 "bind address %s: host %s is not an IPv4 address (names are not "
                 "resolved; use [v6] for IPv6)",
                 s, host);
        return -1;
    }
    *len = sizeof(*a);
    return 0;
}

__attribute__((format(printf, 2, 0))) static void httpd_on_log(void *cls, const char *fmt,
                                                               va_list ap)
{
    httpd *h = cls;
    vsnprintf(h->lasterr, sizeof(h->lasterr), fmt, ap);
    h->lasterr[strcspn(h->lasterr, "\n")] = 0;
}

static void httpd_kick(httpd *h)
{
    if (h->stopping) /* a cancel answering another request: MHD is not run again */
        return;
    ev_timer_cancel(h->loop, h->timer);
    h->timer = ev_timer_add(h->loop, 0, httpd_on_timer, h);
}

static void httpd_req_unwatch(httpd_req *r)
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
static void httpd_req_gone(httpd_req *r)
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

/* A sleeping req's socket became readable. Nothing is expected from a client waiting for its
 * answer. An error means it left: its owner is told now, and MHD, woken, drops the connection
 * (httpd_req_step, httpd_stream_read). End of file is a client that closed, or one that only
 * half-closed (shutdown(SHUT_WR)) and still reads: TCP tells them apart only when something is
 * written. So a plain HTTP/1.1 request with no response begun gets an interim "100 Continue"
 * (clients must accept unexpected 1xx, RFC 9110 section 15.2): a closed peer answers it with a
 * reset, which the watch, now on errors and hang-ups only (end of file stays readable), sees at
 * once; a half-closed one stays quiet and gets its answer. Where nothing may be written (TLS,
 * HTTP/1.0) the request stays, and a gone client fails at the write. Once its response has begun
 * (a stream waiting for bytes), end of file means gone, as a client stopping a stream would. Bytes
 * instead (a pipelined request) cannot be told from a close without reading them, which is
 * MHD's job: the watch ends there. */
static void httpd_on_peer(ev_loop *loop, int fd, int events, void *ud)
{
    httpd_req *r = ud;
    char c;
    ssize_t n = r->eof_seen ? -1 : recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && !r->eof_seen && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        httpd_req_unwatch(r);
        return;
    }
    if (n == 0 && !(events & EV_ERROR) && httpd_req_raw_ok(r, false)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        r->eof_seen = true;
        bool kept = !httpd_req_raw_ok(r, true) ||
                    httpd_req_send_raw(r, cont, sizeof(cont) - 1); /* else it reset already */
        if (kept && ev_fd_set(loop, fd, EV_ERROR, httpd_on_peer, r) == 0)
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
 * a suspended socket, so one waiting for its answer or stream bytes (watch) is watched here. */
static void httpd_req_sleep(httpd_req *r, bool watch)
{
    if (r->suspended)
        return;
    r->suspended = true;
    MHD_suspend_connection(r->conn);
    const union MHD_ConnectionInfo *ci =
        watch ? MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
    if (ci && ev_fd_set(r->h->loop, ci->connect_fd, r->eof_seen ? EV_ERROR : EV_READ, httpd_on_peer,
                        r) == 0) {
        r->fd = ci->connect_fd;
        r->watching = true;
    }
}

/* MHD picks a resumed connection up on its next run; run it from the loop, not from inside the
 * caller (which may be any callback). A req whose connection is closing stays asleep. */
static void httpd_req_wake(httpd_req *r)
{
    if (!r->suspended || r->closed)
        return;
    httpd_req_unwatch(r);
    r->suspended = false;
    MHD_resume_connection(r->conn);
    httpd_kick(r->h);
}

static enum MHD_Result httpd_queue(struct MHD_Connection *conn, httpd_reply *r)
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

static void httpd_stream_on_drain_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    httpd_stream *st = ud;
    st->drain_timer = 0;
    st->want_drain = false;
    if (st->drain)
        st->drain(st->drain_ud);
}

/* MHD asks for the next bytes when it can send them. With none buffered the connection sleeps
 * until a write or the end wakes it: returning 0 without suspending would make MHD ask again at
 * once, a busy loop. */
static ssize_t httpd_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    httpd_req *r = cls;
    httpd_stream *st = r->stream;
    if (r->peer_gone)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = st->len - st->off;
    if (n) {
        if (n > max)
            n = max;
        memcpy(buf, st->buf + st->off, n);
        st->off += n;
        if (st->off == st->len) {
            st->off = st->len = 0;
            if (st->want_drain && st->drain && !st->drain_timer)
                st->drain_timer = ev_timer_add(r->h->loop, 0, httpd_stream_on_drain_timer, st);
        }
        return (ssize_t)n;
    }
    if (st->ended)
        return st->ok ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    httpd_req_sleep(r, true);
    return 0;
}

/* A stream that ended whole, with its announced length, before MHD took it (a small answer whose
 * head, body and end came in one read from upstream) goes as a buffer response, which MHD writes
 * with its head at once; a callback response's head and body take a write each. NULL otherwise. */
static struct MHD_Response *httpd_stream_whole(httpd_stream *st)
{
    if (!st->ended || !st->ok || st->size == MHD_SIZE_UNKNOWN || st->size != st->len - st->off)
        return NULL;
    if (st->size == 0)
        return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (st->off)
        return MHD_create_response_from_buffer(st->len - st->off, st->buf + st->off,
                                               MHD_RESPMEM_MUST_COPY);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(st->len, st->buf, MHD_RESPMEM_MUST_FREE);
    if (resp) { /* MHD frees it */
        st->buf = NULL;
        st->len = st->cap = 0;
    }
    return resp;
}

static enum MHD_Result httpd_stream_queue(httpd_req *r)
{
    httpd_stream *st = r->stream;
    size_t block = HTTPD_STREAM_BLOCK;
    if (st->size != MHD_SIZE_UNKNOWN && st->size < block)
        block = st->size > HTTPD_STREAM_BLOCK_MIN ? (size_t)st->size : HTTPD_STREAM_BLOCK_MIN;
    struct MHD_Response *resp = httpd_stream_whole(st);
    if (!resp)
        resp = MHD_create_response_from_callback(st->size, block, httpd_stream_read, r, NULL);
    if (!resp)
        return MHD_NO;
    enum MHD_Result ret = MHD_YES;
    for (size_t i = 0; i < st->nheaders && ret == MHD_YES; i++)
        ret = MHD_add_response_header(resp, st->headers[i].name, st->headers[i].value);
    if (ret == MHD_YES)
        ret = MHD_queue_response(r->conn, st->code ? st->code : 500, resp);
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

static void httpd_headers_free(httpd_stream *st)
{
    for (size_t i = 0; i < st->nheaders; i++) {
        free((char *)st->headers[i].name);
        free((char *)st->headers[i].value);
    }
    free(st->headers);
    st->headers = NULL;
    st->nheaders = 0;
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

static void httpd_req_free(httpd_req *r)
{
    httpd_req_unwatch(r);
    httpd_req_unlink(r);
    while (r->work) { /* a finished request's: never cancelled */
        httpd_work *w = r->work;
        httpd_work_unlink(w);
        free(w);
    }
    free(r->reply.body);
    if (r->stream) {
        ev_timer_cancel(r->h->loop, r->stream->drain_timer);
        httpd_headers_free(r->stream);
        free(r->stream->buf);
        free(r->stream);
    }
    free(r);
}

static bool httpd_req_answered(const httpd_req *r)
{
    return r->replied || r->stream;
}

/* One step of a request's life, each time MHD calls for it: headers in, body chunks, body
 * complete, and again after every resume (MHD repeats the call it was suspended in). */
static enum MHD_Result httpd_req_step(httpd_req *r, const char *upload, size_t *upload_size)
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
            httpd_req_sleep(r, false);
            return MHD_YES;
        }
        size_t n = *upload_size;
        *upload_size = 0;
        r->body(r->body_ud, upload, n, false);
        if (r->body_paused && !httpd_req_answered(r))
            httpd_req_sleep(r, false);
        return MHD_YES;
    }
    if (!r->past_headers) { /* MHD waits for a word on the body before reading it */
        if (httpd_req_answered(r))
            return httpd_req_queue(r);
        if (!r->body) { /* the answer comes first (or the body is asked for later) */
            httpd_req_sleep(r, true);
            return MHD_YES;
        }
        r->past_headers = true;
        return MHD_YES;
    }
    /* The whole body is in. */
    if (!httpd_req_answered(r) && r->body && !r->body_ended) {
        if (r->body_paused) {
            httpd_req_sleep(r, false);
            return MHD_YES;
        }
        r->body_ended = true;
        r->body(r->body_ud, NULL, 0, true);
    }
    if (httpd_req_answered(r))
        return httpd_req_queue(r);
    httpd_req_sleep(r, true);
    return MHD_YES;
}

/* MHD hands the raw request target here before it decodes the path; what this returns is the
 * request's first *req_cls. */
static void *httpd_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    return httpd_intake_raw_path(uri) ? &httpd_odd_path : NULL;
}

static enum MHD_Result httpd_on_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                        const char *value)
{
    (void)kind;
    httpd_framing_add(cls, key, value ? value : "");
    return MHD_YES;
}

/* Why a new request is refused (400) before its owner sees it, or NULL. */
static const char *httpd_intake(struct MHD_Connection *conn, const char *url, bool odd_path)
{
    httpd_framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, httpd_on_framing, &f);
    const char *why = httpd_framing_check(&f);
    if (!why && odd_path)
        why = "the path's percent-encoding is ambiguous (an encoded reserved character, "
              "backslash or control character, or a bad escape)";
    return why ? why : httpd_intake_path(url);
}

static httpd_reply httpd_refusal(const char *why)
{
    char *body = NULL;
    int n = asprintf(&body, "bad request: %s\n", why);
    return (httpd_reply){.code = 400, .body = n < 0 ? NULL : body, .len = n < 0 ? 0 : (size_t)n};
}

static enum MHD_Result httpd_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                        const char *method, const char *version, const char *upload,
                                        size_t *upload_size, void **req_cls)
{
    httpd *h = cls;
    httpd_conns_busy(conn);
    bool odd_path = *req_cls == &httpd_odd_path;
    if (odd_path)
        *req_cls = NULL;
    if (h->answer) { /* the immediate form: no body wanted */
        if (!*req_cls) {
            *req_cls = &httpd_seen;
            const char *why = httpd_intake(conn, url, odd_path);
            if (why) {
                httpd_reply rep = httpd_refusal(why);
                return httpd_queue(conn, &rep);
            }
            return MHD_YES;
        }
        if (*upload_size) {
            *upload_size = 0;
            return MHD_YES;
        }
        httpd_reply r = {0};
        h->answer(h->ud, method, url, &r);
        return httpd_queue(conn, &r);
    }
    httpd_req *r = *req_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof(*r))))
            return MHD_NO;
        *r = (httpd_req){.h = h, .conn = conn, .method = method, .path = url, .next = h->reqs};
        r->http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        if (h->reqs)
            h->reqs->prev = r;
        h->reqs = r;
        *req_cls = r; /* freed when MHD says the request is over (httpd_on_completed) */
        const char *why = httpd_intake(conn, url, odd_path);
        if (why) {
            httpd_reply rep = httpd_refusal(why);
            httpd_req_reply(r, &rep);
        } else {
            h->request(h->ud, r);
        }
    }
    return httpd_req_step(r, upload, upload_size);
}

static void httpd_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    httpd_conns_waiting(conn);
    httpd_req *r = *req_cls;
    *req_cls = NULL;
    if (!r || r == (void *)&httpd_seen || r == (void *)&httpd_odd_path)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        httpd_req_gone(r);
    httpd_req_free(r);
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

/* A Content-Length value: digits only, no sign or space, no overflow. */
static int httpd_parse_length(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v == MHD_SIZE_UNKNOWN)
        return -1;
    *out = v;
    return 0;
}

int httpd_req_stream_begin(httpd_req *r, unsigned code, const httpd_header *headers, size_t n)
{
    if (httpd_req_answered(r))
        return -EALREADY;
    httpd_stream *st = calloc(1, sizeof(*st));
    if (!st || (n && !(st->headers = calloc(n, sizeof(*st->headers))))) {
        free(st);
        return -ENOMEM;
    }
    st->code = code;
    st->size = MHD_SIZE_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(headers[i].name, "Content-Length") == 0) {
            if (httpd_parse_length(headers[i].value, &st->size) < 0) {
                httpd_headers_free(st);
                free(st);
                return -EINVAL;
            }
            continue; /* MHD writes it from the size */
        }
        if (strcasecmp(headers[i].name, "Transfer-Encoding") == 0)
            continue; /* MHD's choice, from the size and the client's version */
        /* MHD refuses a header with an empty value, and that would fail the whole answer (the
         * client's connection closed with no reply): llama-server sends one on every answer. */
        if (!*headers[i].value)
            continue;
        httpd_header *hd = &st->headers[st->nheaders++];
        hd->name = strdup(headers[i].name);
        hd->value = strdup(headers[i].value);
        if (!hd->name || !hd->value) {
            httpd_headers_free(st);
            free(st);
            return -ENOMEM;
        }
    }
    r->stream = st;
    httpd_req_wake(r);
    return 0;
}

int httpd_req_stream_write(httpd_req *r, const char *data, size_t len)
{
    httpd_stream *st = r->stream;
    if (!st || st->ended)
        return -EINVAL;
    if (st->len + len > st->cap && st->off) { /* reuse the space already sent */
        memmove(st->buf, st->buf + st->off, st->len - st->off);
        st->len -= st->off;
        st->off = 0;
    }
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 4096;
        while (cap < st->len + len)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return -ENOMEM;
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
    httpd_req_wake(r);
    if (st->len - st->off > HTTPD_STREAM_HIGH) {
        st->want_drain = true;
        return 1;
    }
    return 0;
}

void httpd_req_stream_on_drain(httpd_req *r, void (*fn)(void *ud), void *ud)
{
    if (!r->stream)
        return;
    r->stream->drain = fn;
    r->stream->drain_ud = ud;
}

void httpd_req_stream_end(httpd_req *r, bool ok)
{
    httpd_stream *st = r->stream;
    if (!st || st->ended)
        return;
    st->ended = true;
    st->ok = ok;
    st->drain = NULL; /* the owner is gone */
    ev_timer_cancel(r->h->loop, st->drain_timer);
    st->drain_timer = 0;
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

/* After every run MHD may have work queued that no fd will announce (a connection whose request
 * is complete, one that timed out); its timeout says so, 0 meaning "run again now". */
static void httpd_run(httpd *h)
{
    MHD_run(h->d);
    ev_timer_cancel(h->loop, h->timer);
    h->timer = 0;
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) == MHD_YES)
        h->timer = ev_timer_add(h->loop, ms, httpd_on_timer, h);
}

static void httpd_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    httpd *h = ud;
    h->timer = 0;
    httpd_run(h);
}

static void httpd_on_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    httpd_run(ud);
}

httpd *httpd_start(ev_loop *loop, const char *bind, httpd_answer_fn answer, void *ud, char *err,
                   size_t errlen)
{
    httpd_config cfg = {.bind = bind, .answer = answer, .ud = ud};
    return httpd_start_config(loop, &cfg, err, errlen);
}

httpd *httpd_start_config(ev_loop *loop, const httpd_config *cfg, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    const char *bind = cfg->bind;
    int rc = httpd_parse_bind(bind, &ss, &sl, err, errlen);
    if (rc != 0) {
        if (rc > 0)
            snprintf(err, errlen, "bind address 0 means no server");
        return NULL;
    }
    bool tls = cfg->tls_cert_pem || cfg->tls_key_pem;
    if (tls && (!cfg->tls_cert_pem || !cfg->tls_key_pem)) {
        snprintf(err, errlen, "TLS needs both a certificate and a key");
        return NULL;
    }
    if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "libmicrohttpd was built without TLS support");
        return NULL;
    }
    httpd *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->answer = cfg->answer;
    h->request = cfg->request;
    h->ud = cfg->ud;
    h->epfd = -1;
    unsigned limit = cfg->max_connections ? cfg->max_connections : HTTPD_MAX_CONNECTIONS;
    if (!(h->conns = httpd_conns_new(loop, limit, cfg->head_timeout_ms))) {
        snprintf(err, errlen, "out of memory");
        httpd_stop(h);
        return NULL;
    }
    if (tls &&
        (!(h->tls_cert = strdup(cfg->tls_cert_pem)) || !(h->tls_key = strdup(cfg->tls_key_pem)))) {
        snprintf(err, errlen, "out of memory");
        httpd_stop(h);
        return NULL;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (h->request)
        flags |= MHD_ALLOW_SUSPEND_RESUME; /* its wake-up fd sits in MHD's epoll set */
    if (tls)
        flags |= MHD_USE_TLS;
    uint16_t port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)HTTPD_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    if (!tls)
        tls_opts[0].option = MHD_OPTION_END;
    /* MHD sets SO_REUSEADDR by default (a restarted server need not wait out TIME_WAIT) but not
     * SO_REUSEPORT, so a port another process holds is an error, not a shared listener. */
    h->d = MHD_start_daemon(
        flags, port, NULL, NULL, httpd_on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s ? cfg->idle_timeout_s : HTTPD_IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, limit + HTTPD_EVICT_SLACK, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        cfg->max_per_client, MHD_OPTION_NOTIFY_CONNECTION, httpd_conns_notify, h->conns,
        MHD_OPTION_URI_LOG_CALLBACK, httpd_on_uri, h, MHD_OPTION_EXTERNAL_LOGGER, httpd_on_log, h,
        MHD_OPTION_NOTIFY_COMPLETED, httpd_on_completed, h, MHD_OPTION_ARRAY, tls_opts,
        MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info)
        h->epfd = info->epoll_fd;
    info = h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    h->port = info ? info->port : port;
    if (h->epfd < 0 || ev_fd_set(loop, h->epfd, EV_READ, httpd_on_fd, h) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", bind,
                 h->lasterr[0] ? h->lasterr : "MHD could not start");
        h->epfd = -1;
        httpd_stop(h);
        return NULL;
    }
    return h;
}

size_t httpd_pending(const httpd *h)
{
    size_t n = 0;
    for (const httpd_req *r = h ? h->reqs : NULL; r; r = r->next)
        n++;
    return n;
}

size_t httpd_connections(const httpd *h)
{
    return h ? httpd_conns_open(h->conns) : 0;
}

int httpd_port(const httpd *h)
{
    return h->port;
}

void httpd_stop(httpd *h)
{
    if (!h)
        return;
    if (h->epfd >= 0)
        ev_fd_clear(h->loop, h->epfd);
    ev_timer_cancel(h->loop, h->timer);
    h->timer = 0;
    h->stopping = true;
    /* Work started for requests not finished ends first, while every request is still here; no
     * cancel can free one (only MHD does, and it does not run from a cancel). */
    for (httpd_req *r = h->reqs; r; r = r->next)
        httpd_req_gone(r);
    /* MHD refuses to stop with suspended connections: resumed unanswered, they are closed. */
    for (httpd_req *r = h->reqs; r; r = r->next)
        if (r->suspended) {
            httpd_req_unwatch(r); /* before MHD closes the fd */
            r->suspended = false;
            MHD_resume_connection(r->conn);
        }
    if (h->d)
        MHD_stop_daemon(h->d);
    httpd_conns_free(h->conns);
    /* Requests MHD dropped without telling (suspended ones, at shutdown), cancelled above. */
    while (h->reqs)
        httpd_req_free(h->reqs);
    if (h->tls_key)
        explicit_bzero(h->tls_key, strlen(h->tls_key)); /* no private key left in freed memory */
    free(h->tls_key);
    free(h->tls_cert);
    free(h);
}

/* fwd: forwards requests to members with libcurl on the loop (evcurl). The request body is a
 * byte queue fed by fwd_body() and drained by curl's read callback; the response goes to the
 * caller from curl's header and write callbacks as it arrives. Pausing and unpausing curl, and
 * finishing a call, run from the loop (a 0 ms timer or evcurl's progress callback), never from
 * inside curl, which must not be re-entered; a call cancelled inside a callback is only marked
 * and freed once curl has returned. With a connected() callback fwd makes each new connection
 * itself, so that the caller can confirm the address before curl sends a byte on it. */
#include "router/forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loop/evcurl.h"

#define FWD_DEF_CONNECT_TIMEOUT_MS 2000L
#define FWD_DEF_MAX_IDLE 64L
#define FWD_DEF_IDLE_AGE_MS 4000L
#define FWD_DEF_HIGH_WATER ((size_t)256 << 10)
#define FWD_DEF_REPLAY_CAP ((size_t)1 << 20)
/* A caller that ignores fwd_body()'s 1 and pushes on is failed past this many times the mark. */
#define FWD_OVERRUN_FACTOR 8
/* curl hands over what one recv() returned, up to this: small enough for many calls at once,
 * large enough for a bulk response. SSE events go out as they come, whatever the size. */
#define FWD_BUFFER_SIZE (32L << 10)
#define FWD_MAX_ATTEMPTS 2
/* The response head as kept until head(): beyond these the member is broken or hostile. */
#define FWD_MAX_HEADERS 128
/* Connection headers a request may carry (each names hop-by-hop headers to drop). */
#define FWD_MAX_CONNECTION_HEADERS 16
#define FWD_MAX_HEADER_BYTES ((size_t)64 << 10)
#define FWD_KEEPALIVE_S 30L

/* A confirmed connection whose call was too late to send on it (see fwd_confirm): kept for the
 * next call to the same address, which then need not connect (and be late) again. */
typedef struct fwd_parked {
    char ip[64];
    int port;
    int fd;
    uint64_t at_ms;
} fwd_parked;

struct fwd {
    ev_loop *loop;
    evcurl *ec;
    fwd_config cfg;
    fwd_call *calls;
    int depth; /* > 0 while a caller's callback runs: fwd_cancel only marks */
    /* Easy handles of ended calls kept for the next ones (curl_easy_reset between):
     * curl_easy_init's allocations and the receive buffer are made once, not per request. As many
     * as the idle connections kept, each of which the next call may use. */
    CURL **idle_easy;
    size_t nidle_easy;
    fwd_parked *parked; /* as many as idle connections, oldest first */
    size_t nparked;
};

typedef struct fwd_hdr {
    char *name, *value;
} fwd_hdr;

struct fwd_call {
    fwd *f;
    fwd_call *prev, *next;
    CURL *easy;
    bool in_multi;
    fwd_client cl;
    void *ud;
    fwd_target *targets; /* ips owned */
    size_t ntargets;
    int attempt;         /* index into targets of the one being tried */
    uint64_t send_by_ms; /* fwd_request.send_by_ms */
    struct curl_slist *headers;
    char *path;
    char *method;
    uint64_t t0_us;

    /* Request body: buf[sent..len) waits to go out; buf[0..sent) went out and is kept while
     * replayable (then base is 0). pushed counts every byte the caller gave. */
    char *buf;
    size_t len, cap, sent;
    uint64_t base, pushed;
    int64_t total; /* -1: unknown */
    bool upload;
    bool body_end;
    bool replayable;
    bool told_full;
    bool send_paused;

    /* Response. */
    bool resp_started; /* any byte of it in this attempt */
    bool head_done;
    int status;
    fwd_hdr *rh;
    size_t nrh;
    size_t rh_bytes;
    bool want_recv_pause;
    bool recv_paused;
    bool resume_pending;

    uint64_t kick_timer;
    /* The member's silence: idle_timer runs once the body is out; last_rx_ms is when a byte of
     * the answer last came (or the clock started, or the receive side was resumed). */
    uint64_t idle_timer, last_rx_ms;
    bool dead;        /* cancelled: freed without done */
    bool failed;      /* ended by fwd itself; error says why */
    bool finished;    /* curl is done with the attempt; result says how */
    bool add_pending; /* started inside a curl callback: added from the loop */
    bool in_done;
    bool late; /* not sent by send_by_ms (fwd_result.late) */
    /* With a connected() callback, every new connection is fwd's own: curl's open-socket
     * callback refuses to open one (want_conn), the attempt ends, fwd connects (conn_fd, watched
     * until writable, conn_timer), asks the caller (confirming), and on fwd_confirm hands the
     * socket to curl through the same callback when the attempt is started again. */
    bool want_conn;
    bool confirming;
    int conn_fd; /* -1: none */
    uint64_t conn_timer;
    CURLcode result;
    const char *error;
    uint64_t first_byte_us, bytes_up, bytes_down;
    char errbuf[CURL_ERROR_SIZE];
    char msg[CURL_ERROR_SIZE + 96];
};

static void fwd_progress(void *ud);

fwd *fwd_new(ev_loop *loop, const fwd_config *cfg)
{
    fwd *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->loop = loop;
    if (cfg)
        f->cfg = *cfg;
    fwd_config *c = &f->cfg;
    if (c->connect_timeout_ms <= 0)
        c->connect_timeout_ms = FWD_DEF_CONNECT_TIMEOUT_MS;
    if (c->max_idle_connections <= 0)
        c->max_idle_connections = FWD_DEF_MAX_IDLE;
    if (c->max_idle_age_ms <= 0)
        c->max_idle_age_ms = FWD_DEF_IDLE_AGE_MS;
    if (!c->body_high_water)
        c->body_high_water = FWD_DEF_HIGH_WATER;
    if (!c->replay_cap)
        c->replay_cap = FWD_DEF_REPLAY_CAP;
    f->idle_easy = calloc((size_t)c->max_idle_connections, sizeof(*f->idle_easy));
    f->parked = calloc((size_t)c->max_idle_connections, sizeof(*f->parked));
    if (!f->idle_easy || !f->parked || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(f->parked);
        free(f->idle_easy);
        free(f);
        return NULL;
    }
    f->ec = evcurl_new(loop, fwd_progress, f);
    CURLM *m = f->ec ? evcurl_multi(f->ec) : NULL;
    if (!m || curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, c->max_idle_connections) ||
        curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS,
                          c->max_host_connections > 0 ? c->max_host_connections : 0L) ||
        curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING)) {
        evcurl_free(f->ec);
        curl_global_cleanup();
        free(f->parked);
        free(f->idle_easy);
        free(f);
        return NULL;
    }
    return f;
}

/* ---- small helpers ---- */

static void fwd_unlink(fwd_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        c->f->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void fwd_rh_clear(fwd_call *c)
{
    for (size_t i = 0; i < c->nrh; i++) {
        free(c->rh[i].name);
        free(c->rh[i].value);
    }
    free(c->rh);
    c->rh = NULL;
    c->nrh = 0;
    c->rh_bytes = 0;
}

static CURL *fwd_easy_get(fwd *f)
{
    return f->nidle_easy ? f->idle_easy[--f->nidle_easy] : curl_easy_init();
}

/* Only for a handle out of the multi: curl_easy_reset forgets its options and transfer state
 * and keeps its buffers; the connection went back to the multi's cache. */
static void fwd_easy_put(fwd *f, CURL *e)
{
    if (f->nidle_easy == (size_t)f->cfg.max_idle_connections) {
        curl_easy_cleanup(e);
        return;
    }
    curl_easy_reset(e);
    f->idle_easy[f->nidle_easy++] = e;
}

static void fwd_conn_close(fwd_call *c)
{
    ev_timer_cancel(c->f->loop, c->conn_timer);
    c->conn_timer = 0;
    if (c->conn_fd >= 0) {
        ev_fd_clear(c->f->loop, c->conn_fd);
        close(c->conn_fd);
        c->conn_fd = -1;
    }
}

static void fwd_call_free(fwd_call *c)
{
    ev_timer_cancel(c->f->loop, c->kick_timer);
    ev_timer_cancel(c->f->loop, c->idle_timer);
    fwd_conn_close(c);
    if (c->in_multi)
        curl_multi_remove_handle(evcurl_multi(c->f->ec), c->easy);
    if (c->easy)
        fwd_easy_put(c->f, c->easy);
    curl_slist_free_all(c->headers);
    for (size_t i = 0; i < c->ntargets; i++)
        free((char *)c->targets[i].ip);
    free(c->targets);
    free(c->path);
    free(c->method);
    free(c->buf);
    fwd_rh_clear(c);
    free(c);
}

static void fwd_reap(fwd *f)
{
    if (f->depth)
        return;
    fwd_call *next;
    for (fwd_call *c = f->calls; c; c = next) {
        next = c->next;
        if (c->dead) {
            fwd_unlink(c);
            fwd_call_free(c);
        }
    }
}

void fwd_free(fwd *f)
{
    if (!f)
        return;
    while (f->calls) {
        fwd_call *c = f->calls;
        fwd_unlink(c);
        fwd_call_free(c);
    }
    while (f->nidle_easy)
        curl_easy_cleanup(f->idle_easy[--f->nidle_easy]);
    free(f->idle_easy);
    while (f->nparked)
        close(f->parked[--f->nparked].fd);
    free(f->parked);
    evcurl_free(f->ec);
    curl_global_cleanup();
    free(f);
}

static bool fwd_is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool fwd_is_token(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!fwd_is_tchar((unsigned char)*s))
            return false;
    return true;
}

/* A header value must not end the line it is on. */
static bool fwd_is_value(const char *s)
{
    if (!s)
        return false;
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return false;
    return true;
}

/* Is name among the comma-separated tokens of list? */
static bool fwd_in_list(const char *list, const char *name, size_t namelen)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',')
            p++;
        const char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - s) == namelen && strncasecmp(s, name, namelen) == 0)
            return true;
    }
    return false;
}

/* RFC 9110 7.6.1: these describe one connection, not the message, and a proxy drops them, and
 * every header the Connection header names. */
static bool fwd_hop_by_hop(const char *name, const char *const *conn_values, size_t nconn)
{
    static const char *const hop[] = {"connection", "keep-alive",        "te",      "trailer",
                                      "trailers",   "transfer-encoding", "upgrade", NULL};
    for (const char *const *h = hop; *h; h++)
        if (strcasecmp(name, *h) == 0)
            return true;
    if (strncasecmp(name, "proxy-", 6) == 0)
        return true;
    for (size_t i = 0; i < nconn; i++)
        if (fwd_in_list(conn_values[i], name, strlen(name)))
            return true;
    return false;
}

/* ---- the request ---- */

static int fwd_buf_append(fwd_call *c, const char *p, size_t n)
{
    if (!n)
        return 0;
    if (c->cap - c->len < n) {
        size_t want = c->len + n;
        size_t cap = c->cap ? c->cap : 16384;
        while (cap < want)
            cap *= 2;
        char *b = realloc(c->buf, cap);
        if (!b)
            return -1;
        c->buf = b;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    return 0;
}

/* Drops what went out, once it cannot be needed again. */
static void fwd_buf_compact(fwd_call *c)
{
    if (c->replayable || !c->sent)
        return;
    memmove(c->buf, c->buf + c->sent, c->len - c->sent);
    c->base += c->sent;
    c->len -= c->sent;
    c->sent = 0;
}

static void fwd_not_replayable(fwd_call *c)
{
    c->replayable = false;
    fwd_buf_compact(c);
}

static int fwd_add_header(struct curl_slist **l, const char *name, const char *value)
{
    /* "Name;" is curl's way to send a header with an empty value ("Name:" would remove it). */
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line)
        return -1;
    if (*value)
        snprintf(line, n, "%s: %s", name, value);
    else
        snprintf(line, n, "%s;", name);
    struct curl_slist *nl = curl_slist_append(*l, line);
    free(line);
    if (!nl)
        return -1;
    *l = nl;
    return 0;
}

/* The client's headers minus hop-by-hop ones and those curl writes itself, X-Forwarded-For with
 * the client appended, and curl's own defaults (Accept, Expect: 100-continue) switched off. */
/* The headers to send (req passed fwd_check). 0 or -ENOMEM. */
static int fwd_build_headers(fwd_call *c, const fwd_request *req)
{
    const char *conn[FWD_MAX_CONNECTION_HEADERS];
    size_t nconn = 0;
    size_t xff_len = 0;
    bool accept = false;
    for (size_t i = 0; i < req->nheaders; i++) {
        const fwd_header *h = &req->headers[i];
        if (strcasecmp(h->name, "connection") == 0)
            conn[nconn++] = h->value;
        if (strcasecmp(h->name, "x-forwarded-for") == 0)
            xff_len += strlen(h->value) + 2;
        if (strcasecmp(h->name, "accept") == 0)
            accept = true;
    }
    for (size_t i = 0; i < req->nheaders; i++) {
        const fwd_header *h = &req->headers[i];
        if (fwd_hop_by_hop(h->name, conn, nconn) || strcasecmp(h->name, "host") == 0 ||
            strcasecmp(h->name, "content-length") == 0 || strcasecmp(h->name, "expect") == 0 ||
            strcasecmp(h->name, "x-forwarded-for") == 0)
            continue;
        if (fwd_add_header(&c->headers, h->name, h->value) < 0)
            return -ENOMEM;
    }
    if (xff_len || req->client_addr) {
        size_t cap = xff_len + (req->client_addr ? strlen(req->client_addr) : 0) + 1;
        char *xff = malloc(cap);
        if (!xff)
            return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < req->nheaders; i++) {
            const fwd_header *h = &req->headers[i];
            if (strcasecmp(h->name, "x-forwarded-for") != 0 || !*h->value)
                continue;
            n += (size_t)snprintf(xff + n, cap - n, "%s%s", n ? ", " : "", h->value);
        }
        if (req->client_addr && *req->client_addr)
            n += (size_t)snprintf(xff + n, cap - n, "%s%s", n ? ", " : "", req->client_addr);
        int rc = n ? fwd_add_header(&c->headers, "X-Forwarded-For", xff) : 0;
        free(xff);
        if (rc < 0)
            return -ENOMEM;
    }
    struct curl_slist *l = curl_slist_append(c->headers, "Expect:");
    if (l)
        c->headers = l;
    if (l && !accept && (l = curl_slist_append(c->headers, "Accept:")))
        c->headers = l;
    return l ? 0 : -ENOMEM;
}

static bool fwd_path_ok(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    for (; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
            return false;
    return true;
}

/* Points the easy handle at targets[attempt]. */
static int fwd_set_url(fwd_call *c)
{
    const fwd_target *t = &c->targets[c->attempt];
    bool v6 = strchr(t->ip, ':') != NULL;
    size_t n = strlen(t->ip) + strlen(c->path) + 32;
    char *url = malloc(n);
    if (!url)
        return -1;
    snprintf(url, n, "http://%s%s%s:%d%s", v6 ? "[" : "", t->ip, v6 ? "]" : "", t->port, c->path);
    CURLcode rc = curl_easy_setopt(c->easy, CURLOPT_URL, url);
    free(url);
    return rc == CURLE_OK ? 0 : -1;
}

/* ---- curl's callbacks: only bookkeeping and the caller's callbacks, never a multi call ---- */

static void fwd_kick(fwd_call *c);
static void fwd_on_idle_timeout(ev_loop *loop, void *ud);

/* The whole body went out: the member's turn, and the clock of its silence starts. */
static void fwd_body_out(fwd_call *c)
{
    if (c->f->cfg.idle_timeout_ms <= 0 || c->idle_timer)
        return;
    c->last_rx_ms = ev_now_ms();
    c->idle_timer =
        ev_timer_add(c->f->loop, (uint64_t)c->f->cfg.idle_timeout_ms, fwd_on_idle_timeout, c);
}

static size_t fwd_on_read(char *p, size_t size, size_t nitems, void *ud)
{
    fwd_call *c = ud;
    if (c->dead || c->failed)
        return CURL_READFUNC_ABORT;
    size_t avail = c->len - c->sent;
    if (!avail) {
        if (c->body_end) {
            fwd_body_out(c);
            return 0;
        }
        c->send_paused = true;
        return CURL_READFUNC_PAUSE;
    }
    size_t n = size * nitems < avail ? size * nitems : avail;
    memcpy(p, c->buf + c->sent, n);
    c->sent += n;
    c->bytes_up += n;
    fwd_buf_compact(c);
    if (c->body_end && c->sent == c->len && c->total >= 0)
        fwd_body_out(c); /* curl reads no further than Content-Length: no 0 return comes */
    if (c->told_full && c->len - c->sent <= c->f->cfg.body_high_water / 2) {
        c->told_full = false;
        if (c->cl.body_drained) {
            c->f->depth++;
            c->cl.body_drained(c->ud);
            c->f->depth--;
        }
    }
    return n;
}

static int fwd_on_seek(void *ud, curl_off_t offset, int origin)
{
    fwd_call *c = ud;
    /* curl rewinds when a reused connection turns out dead before the answer: the body must
     * start over, possible only while all of it is kept. */
    if (origin != SEEK_SET || offset != 0 || !c->replayable)
        return CURL_SEEKFUNC_CANTSEEK;
    c->sent = 0;
    c->bytes_up = 0;
    ev_timer_cancel(c->f->loop, c->idle_timer); /* it starts again when the body is out again */
    c->idle_timer = 0;
    return CURL_SEEKFUNC_OK;
}

static void fwd_deliver_head(fwd_call *c)
{
    const char *conn[16];
    size_t nconn = 0;
    for (size_t i = 0; i < c->nrh && nconn < sizeof(conn) / sizeof(conn[0]); i++)
        if (strcasecmp(c->rh[i].name, "connection") == 0)
            conn[nconn++] = c->rh[i].value;
    fwd_header *out = calloc(c->nrh ? c->nrh : 1, sizeof(*out));
    if (!out) {
        c->failed = true;
        c->error = "out of memory";
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < c->nrh; i++)
        if (!fwd_hop_by_hop(c->rh[i].name, conn, nconn))
            out[n++] = (fwd_header){c->rh[i].name, c->rh[i].value};
    c->head_done = true;
    c->f->depth++;
    c->cl.head(c->ud, c->status, out, n);
    c->f->depth--;
    free(out);
    fwd_rh_clear(c);
}

/* One line of the response head (curl hands them over one by one, CRLF included). */
static int fwd_head_line(fwd_call *c, const char *p, size_t n)
{
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        const char *sp = memchr(p, ' ', n);
        if (!sp || (size_t)(p + n - sp) < 4)
            return -1;
        int code = 0;
        for (int i = 1; i <= 3; i++) {
            if (sp[i] < '0' || sp[i] > '9')
                return -1;
            code = code * 10 + (sp[i] - '0');
        }
        c->status = code;
        fwd_rh_clear(c);
        return 0;
    }
    if (!c->status)
        return -1;
    if (!n) {
        if (c->status >= 100 && c->status < 200)
            c->status = 0; /* an interim answer (103 Early Hints): the final one follows */
        else
            fwd_deliver_head(c);
        return 0;
    }
    c->rh_bytes += n;
    if (c->rh_bytes > FWD_MAX_HEADER_BYTES)
        return -1;
    if (p[0] == ' ' || p[0] == '\t') { /* obsolete line folding: part of the previous value */
        if (!c->nrh)
            return -1;
        fwd_hdr *h = &c->rh[c->nrh - 1];
        size_t old = strlen(h->value);
        char *v = realloc(h->value, old + n + 1);
        if (!v)
            return -1;
        v[old] = ' ';
        size_t i = 0;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        memcpy(v + old + 1, p + i, n - i);
        v[old + 1 + n - i] = '\0';
        h->value = v;
        return 0;
    }
    const char *colon = memchr(p, ':', n);
    if (!colon || colon == p || c->nrh == FWD_MAX_HEADERS)
        return -1;
    for (const char *q = p; q < colon; q++)
        if (!fwd_is_tchar((unsigned char)*q))
            return -1; /* "Name : v" and the like: RFC 9112 5.1 has a proxy refuse them */
    fwd_hdr *rh = realloc(c->rh, (c->nrh + 1) * sizeof(*rh));
    if (!rh)
        return -1;
    c->rh = rh;
    const char *v = colon + 1, *e = p + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    fwd_hdr *h = &rh[c->nrh];
    h->name = strndup(p, (size_t)(colon - p));
    h->value = strndup(v, (size_t)(e - v));
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        return -1;
    }
    c->nrh++;
    return 0;
}

static size_t fwd_on_header(char *p, size_t size, size_t nitems, void *ud)
{
    fwd_call *c = ud;
    size_t n = size * nitems;
    if (c->dead || c->failed)
        return 0;
    c->last_rx_ms = ev_now_ms();
    if (!c->resp_started) {
        c->resp_started = true;
        c->first_byte_us = ev_now_us() - c->t0_us;
        fwd_not_replayable(c);
    }
    if (c->head_done) /* trailers of a chunked answer: not passed on */
        return n;
    if (fwd_head_line(c, p, n) < 0) {
        if (!c->failed) {
            c->failed = true;
            c->error = "forward: the member's response head is malformed or too large";
        }
        return 0;
    }
    return c->dead || c->failed ? 0 : n;
}

static size_t fwd_on_write(char *p, size_t size, size_t nitems, void *ud)
{
    fwd_call *c = ud;
    size_t n = size * nitems;
    if (c->dead || c->failed || !c->head_done)
        return n ? 0 : 1;
    if (c->want_recv_pause) {
        /* data() said "full" after the previous piece: curl keeps this one until fwd_resume. */
        c->want_recv_pause = false;
        c->recv_paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    c->bytes_down += n;
    c->last_rx_ms = ev_now_ms();
    c->f->depth++;
    int full = c->cl.data(c->ud, p, n);
    c->f->depth--;
    if (c->dead)
        return 0;
    if (full == 1)
        c->want_recv_pause = true;
    return n;
}

/* ---- finishing ---- */

static bool fwd_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: /* only connecting can time out: there is no overall limit */
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
        return true;
    default:
        return false;
    }
}

static void fwd_finish(fwd_call *c)
{
    fwd *f = c->f;
    if (c->in_multi) {
        curl_multi_remove_handle(evcurl_multi(f->ec), c->easy);
        c->in_multi = false;
    }
    ev_timer_cancel(f->loop, c->idle_timer);
    c->idle_timer = 0;
    fwd_result r = {
        .status = c->head_done ? c->status : 0,
        .target = c->attempt,
        .first_byte_us = c->resp_started ? c->first_byte_us : 0,
        .bytes_up = c->bytes_up,
        .bytes_down = c->bytes_down,
        .late = c->late,
    };
    if (!c->failed && c->finished && c->result == CURLE_OK && c->head_done) {
        r.outcome = FWD_OK;
    } else {
        r.outcome = c->head_done ? FWD_FAILED_AFTER_RESPONSE : FWD_UPSTREAM_FAILED_BEFORE_RESPONSE;
        r.error = c->failed      ? c->error
                  : c->errbuf[0] ? c->errbuf
                  : c->result != CURLE_OK
                      ? curl_easy_strerror(c->result)
                      : "forward: the member closed the connection without an answer";
        if (!c->resp_started && !c->failed && fwd_retryable(c->result) && !c->replayable &&
            c->attempt + 1 < (int)c->ntargets && c->attempt + 1 < FWD_MAX_ATTEMPTS) {
            snprintf(c->msg, sizeof(c->msg), "%s (not retried: the body was over the replay cap)",
                     r.error);
            r.error = c->msg;
        }
    }
    c->in_done = true;
    f->depth++;
    c->cl.done(c->ud, &r);
    f->depth--;
    c->dead = true; /* freed by the reap that follows */
}

/* Back to the start of the attempt at targets[attempt], its handle out of the multi: nothing of
 * a response came, and the body goes again from its start. */
static void fwd_attempt_reset(fwd_call *c)
{
    fwd_conn_close(c);
    c->want_conn = c->confirming = false;
    c->sent = 0;
    c->bytes_up = 0;
    c->send_paused = c->recv_paused = c->want_recv_pause = c->resume_pending = false;
    ev_timer_cancel(c->f->loop, c->idle_timer);
    c->idle_timer = 0;
    c->finished = false;
    c->result = CURLE_OK;
    c->status = 0;
    c->errbuf[0] = '\0';
    fwd_rh_clear(c);
}

/* Tries the next target when this attempt failed before any response byte. true: it does. */
static bool fwd_retry(fwd_call *c)
{
    if (c->failed || c->result == CURLE_OK || c->resp_started || !fwd_retryable(c->result) ||
        c->attempt + 1 >= (int)c->ntargets || c->attempt + 1 >= FWD_MAX_ATTEMPTS || !c->replayable)
        return false;
    if (c->in_multi)
        curl_multi_remove_handle(evcurl_multi(c->f->ec), c->easy);
    c->in_multi = false;
    c->attempt++;
    fwd_attempt_reset(c);
    if (fwd_set_url(c) < 0 || curl_multi_add_handle(evcurl_multi(c->f->ec), c->easy)) {
        c->failed = true;
        c->error = "forward: cannot start the second attempt";
        return false;
    }
    c->in_multi = true;
    if (!c->upload || (c->body_end && c->len == 0))
        fwd_body_out(c);
    return true;
}

/* ---- new connections, confirmed before their first byte ---- */

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
static bool fwd_conn_start(fwd_call *c)
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
        return false; /* fwd_check let only numeric addresses in */
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
 * reuse), or -1; those past the idle age, closed or readable are dropped on the way. */
static int fwd_unpark(fwd *f, const fwd_target *t)
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
    return -1;
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

/* evcurl's progress callback: outside curl, so handles may be removed and added. */
static void fwd_progress(void *ud)
{
    fwd *f = ud;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(evcurl_multi(f->ec), &left))) {
        char *priv = NULL;
        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        fwd_call *c = (fwd_call *)priv;
        c->finished = true;
        c->result = m->data.result;
    }
    /* Calls started from done() go to the head of the list and wait for their own progress;
     * finished ones stay linked until the reap, so next pointers stay valid. */
    f->depth++;
    for (fwd_call *c = f->calls; c; c = c->next)
        if (!c->dead && c->finished && !fwd_conn_start(c) && !fwd_retry(c))
            fwd_finish(c);
    f->depth--;
    fwd_reap(f);
}

/* Checked lazily: bytes only move last_rx_ms, and the timer, when it fires, waits out what is
 * left of the silence since then (no timer work per piece of the answer). */
static void fwd_on_idle_timeout(ev_loop *loop, void *ud)
{
    fwd_call *c = ud;
    c->idle_timer = 0;
    if (c->dead || c->finished || c->failed)
        return;
    uint64_t limit = (uint64_t)c->f->cfg.idle_timeout_ms, now = ev_now_ms();
    if (c->recv_paused || c->want_recv_pause) /* the caller's pause, not the member's silence */
        c->last_rx_ms = now;
    if (now - c->last_rx_ms < limit) {
        c->idle_timer = ev_timer_add(loop, limit - (now - c->last_rx_ms), fwd_on_idle_timeout, c);
        if (c->idle_timer)
            return;
    }
    c->failed = true;
    c->error = c->head_done ? "forward: the member's answer stopped: nothing more within the "
                              "upstream timeout"
                            : "forward: the member sent nothing within the upstream timeout";
    fwd_finish(c);
    fwd_reap(c->f);
}

/* The 0 ms timer of fwd_kick: applies unpauses and ends failed calls, from the loop. */
static void fwd_on_kick(ev_loop *loop, void *ud)
{
    (void)loop;
    fwd_call *c = ud;
    fwd *f = c->f;
    c->kick_timer = 0;
    if (c->dead)
        return;
    if (c->failed) {
        fwd_finish(c);
        fwd_reap(f);
        return;
    }
    if (c->add_pending) {
        c->add_pending = false;
        if (curl_multi_add_handle(evcurl_multi(f->ec), c->easy) != CURLM_OK) {
            c->failed = true;
            c->error = "forward: cannot start the transfer";
            fwd_finish(c);
            fwd_reap(f);
            return;
        }
        c->in_multi = true;
    }
    if (!c->in_multi || c->finished)
        return;
    bool change = false;
    if (c->send_paused && (c->sent < c->len || c->body_end)) {
        c->send_paused = false;
        change = true;
    }
    if (c->recv_paused && c->resume_pending) {
        c->recv_paused = false;
        change = true;
    }
    c->resume_pending = false;
    if (!change)
        return;
    /* Unpausing the receive side hands curl's held piece to the write callback right here. */
    f->depth++;
    CURLcode rc = curl_easy_pause(c->easy, (c->recv_paused ? CURLPAUSE_RECV : 0) |
                                               (c->send_paused ? CURLPAUSE_SEND : 0));
    f->depth--;
    if (rc != CURLE_OK && !c->dead && !c->failed) {
        c->failed = true;
        c->error = "forward: cannot resume the transfer";
        fwd_kick(c);
    }
    fwd_reap(f);
}

static void fwd_kick(fwd_call *c)
{
    if (c->kick_timer)
        return;
    c->kick_timer = ev_timer_add(c->f->loop, 0, fwd_on_kick, c);
    if (!c->kick_timer && !c->failed) {
        /* Without a timer the call would hang: fail it where it can be finished. */
        c->failed = true;
        c->error = "out of memory";
    }
}

/* ---- the calls ---- */

/* Connected, about to send: too late for the drain fence is failed here, before any byte. */
static int fwd_on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port,
                         int local_port)
{
    (void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
    fwd_call *c = ud;
    if (ev_now_ms() <= c->send_by_ms)
        return CURL_PREREQFUNC_OK;
    c->late = true;
    c->failed = true;
    c->error = "forward: not sent within the drain fence's window (connected too late)";
    return CURL_PREREQFUNC_ABORT;
}

/* curl wants a new connection: the confirmed one fwd made, or none (fwd makes one, see
 * fwd_conn_start). A connection curl keeps is reused without coming here. */
static curl_socket_t fwd_on_opensocket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr)
{
    (void)purpose, (void)addr;
    fwd_call *c = ud;
    if (c->conn_fd < 0 && !c->confirming)
        c->conn_fd = fwd_unpark(c->f, &c->targets[c->attempt]);
    if (c->conn_fd < 0 || c->confirming) {
        c->want_conn = true;
        return CURL_SOCKET_BAD;
    }
    int fd = c->conn_fd;
    c->conn_fd = -1;
    return fd;
}

static int fwd_on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)ud, (void)fd, (void)purpose;
    return CURL_SOCKOPT_ALREADY_CONNECTED; /* every socket fwd hands over is */
}

/* Sets the easy handle up for c. 0, or -EIO when curl refuses an option. */
static int fwd_setup(fwd_call *c, const fwd_request *req)
{
    fwd *f = c->f;
    CURL *e = c->easy;
    CURLcode rc = CURLE_OK;
#define FWD_SET(opt, val) rc = rc ? rc : curl_easy_setopt(e, opt, val)
    FWD_SET(CURLOPT_PRIVATE, c);
    FWD_SET(CURLOPT_PROTOCOLS_STR, "http");
    FWD_SET(CURLOPT_PROXY, ""); /* never through a proxy from the environment */
    FWD_SET(CURLOPT_NOSIGNAL, 1L);
    FWD_SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    FWD_SET(CURLOPT_PATH_AS_IS, 1L); /* the client's path, not curl's normalised one */
    FWD_SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
    FWD_SET(CURLOPT_CONNECTTIMEOUT_MS, f->cfg.connect_timeout_ms);
    FWD_SET(CURLOPT_MAXAGE_CONN, (f->cfg.max_idle_age_ms + 999) / 1000);
    FWD_SET(CURLOPT_TCP_KEEPALIVE, 1L);
    FWD_SET(CURLOPT_TCP_KEEPIDLE, FWD_KEEPALIVE_S);
    FWD_SET(CURLOPT_TCP_KEEPINTVL, FWD_KEEPALIVE_S);
    FWD_SET(CURLOPT_BUFFERSIZE, FWD_BUFFER_SIZE);
    FWD_SET(CURLOPT_HTTPHEADER, c->headers);
    FWD_SET(CURLOPT_HEADERFUNCTION, fwd_on_header);
    FWD_SET(CURLOPT_HEADERDATA, c);
    FWD_SET(CURLOPT_WRITEFUNCTION, fwd_on_write);
    FWD_SET(CURLOPT_WRITEDATA, c);
    FWD_SET(CURLOPT_ERRORBUFFER, c->errbuf);
    if (c->cl.connected) {
        FWD_SET(CURLOPT_OPENSOCKETFUNCTION, fwd_on_opensocket);
        FWD_SET(CURLOPT_OPENSOCKETDATA, c);
        FWD_SET(CURLOPT_SOCKOPTFUNCTION, fwd_on_sockopt);
        FWD_SET(CURLOPT_SOCKOPTDATA, c);
    }
    if (c->send_by_ms) {
        FWD_SET(CURLOPT_PREREQFUNCTION, fwd_on_prereq);
        FWD_SET(CURLOPT_PREREQDATA, c);
    }
    if (strcmp(req->method, "HEAD") == 0) {
        FWD_SET(CURLOPT_NOBODY, 1L);
    } else if (c->upload) {
        /* UPLOAD streams from the read callback; the method is the client's (curl would say
         * PUT), and a body of unknown length goes chunked. */
        FWD_SET(CURLOPT_UPLOAD, 1L);
        FWD_SET(CURLOPT_CUSTOMREQUEST, c->method);
        FWD_SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->total);
        FWD_SET(CURLOPT_READFUNCTION, fwd_on_read);
        FWD_SET(CURLOPT_READDATA, c);
        FWD_SET(CURLOPT_SEEKFUNCTION, fwd_on_seek);
        FWD_SET(CURLOPT_SEEKDATA, c);
    } else if (strcmp(req->method, "GET") != 0) {
        FWD_SET(CURLOPT_CUSTOMREQUEST, c->method);
    }
#undef FWD_SET
    if (rc != CURLE_OK || fwd_set_url(c) < 0)
        return -EIO;
    return 0;
}

const char *fwd_request_invalid(const fwd_request *req, const fwd_client *cl)
{
    if (!cl || !cl->head || !cl->data || !cl->done)
        return "forward: head, data and done callbacks are required";
    if (!fwd_is_token(req->method))
        return "forward: bad method";
    if (!fwd_path_ok(req->path))
        return "forward: bad path";
    if (!req->ntargets || !req->targets)
        return "forward: no target";
    for (size_t i = 0; i < req->ntargets; i++) {
        unsigned char a[16];
        const fwd_target *t = &req->targets[i];
        if (!t->ip || (inet_pton(AF_INET, t->ip, a) != 1 && inet_pton(AF_INET6, t->ip, a) != 1))
            return "forward: a target's address is not a numeric IP";
        if (t->port <= 0 || t->port > 65535)
            return "forward: a target's port is out of range";
    }
    if (req->body_len && !req->body)
        return "forward: body length without a body";
    if (req->more && req->content_length >= 0 && (uint64_t)req->content_length < req->body_len)
        return "forward: body longer than its Content-Length";
    if (strcmp(req->method, "HEAD") == 0 && req->body_len)
        return "forward: a HEAD request cannot carry a body";
    size_t nconn = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const fwd_header *h = &req->headers[i];
        if (!fwd_is_token(h->name) || !fwd_is_value(h->value))
            return "forward: a request header cannot be sent as it is";
        if (strcasecmp(h->name, "connection") == 0 && ++nconn > FWD_MAX_CONNECTION_HEADERS)
            return "forward: too many Connection headers";
    }
    if (req->client_addr && !fwd_is_value(req->client_addr))
        return "forward: bad client address";
    return NULL;
}

int fwd_start(fwd *f, const fwd_request *req, const fwd_client *cl, void *ud, fwd_call **out)
{
    if (fwd_request_invalid(req, cl))
        return -EINVAL;
    int rc = -ENOMEM;
    fwd_call *c = calloc(1, sizeof(*c));
    if (!c)
        goto fail;
    c->f = f;
    c->conn_fd = -1;
    c->cl = *cl;
    c->ud = ud;
    c->attempt = 0;
    c->send_by_ms = req->send_by_ms;
    c->t0_us = ev_now_us();
    c->replayable = true;
    c->total = req->more ? req->content_length : (int64_t)req->body_len;
    bool bodied_method = strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0 ||
                         strcmp(req->method, "PATCH") == 0;
    c->upload = strcmp(req->method, "HEAD") != 0 && (c->total != 0 || bodied_method);
    c->body_end = !req->more || c->total == 0;
    c->method = strdup(req->method);
    c->path = strdup(req->path);
    c->targets = calloc(req->ntargets, sizeof(*c->targets));
    if (!c->method || !c->path || !c->targets)
        goto fail;
    for (size_t i = 0; i < req->ntargets; i++) {
        c->targets[i].port = req->targets[i].port;
        if (!(c->targets[i].ip = strdup(req->targets[i].ip)))
            goto fail;
        c->ntargets++;
    }
    if (fwd_buf_append(c, req->body, req->body_len) < 0)
        goto fail;
    c->pushed = req->body_len;
    if (c->pushed > f->cfg.replay_cap)
        c->replayable = false;
    if ((rc = fwd_build_headers(c, req)) < 0)
        goto fail;
    rc = -EIO;
    if (!(c->easy = fwd_easy_get(f)) || (rc = fwd_setup(c, req)) < 0)
        goto fail;
    rc = -EIO;
    CURLMcode mc = curl_multi_add_handle(evcurl_multi(f->ec), c->easy);
    if (mc == CURLM_RECURSIVE_API_CALL) { /* from inside a callback: the loop adds it */
        c->add_pending = true;
        fwd_kick(c);
        if (c->failed)
            goto fail;
    } else if (mc != CURLM_OK) {
        goto fail;
    } else {
        c->in_multi = true;
    }
    c->next = f->calls;
    if (f->calls)
        f->calls->prev = c;
    f->calls = c;
    if (!c->upload || (c->body_end && c->len == 0))
        fwd_body_out(c);
    *out = c;
    return 0;
fail:
    if (c)
        fwd_call_free(c);
    return rc;
}

const char *fwd_start_error(const fwd_request *req, const fwd_client *cl, int rc)
{
    const char *invalid = rc == -EINVAL ? fwd_request_invalid(req, cl) : NULL;
    if (invalid)
        return invalid;
    return rc == -ENOMEM ? "out of memory" : "forward: cannot start the transfer";
}

/* Fails c with why (done says it); returns rc. */
static int fwd_body_fail(fwd_call *c, const char *why, int rc)
{
    if (!c->failed) {
        c->failed = true;
        c->error = why;
    }
    fwd_kick(c);
    return rc;
}

int fwd_body(fwd_call *c, const char *data, size_t len, bool end)
{
    if (c->dead || c->in_done || c->failed)
        return -EPIPE;
    if (c->finished) /* the member answered without waiting for the rest */
        return 0;
    if (c->body_end)
        return len || !end ? fwd_body_fail(c, "forward: request body after its end", -EINVAL) : 0;
    if (!c->upload && len)
        return fwd_body_fail(c, "forward: a HEAD request cannot carry a body", -EINVAL);
    if (c->total >= 0 && c->pushed + len > (uint64_t)c->total)
        return fwd_body_fail(c, "forward: request body longer than its Content-Length", -EINVAL);
    size_t hwm = c->f->cfg.body_high_water;
    if (c->len - c->sent > FWD_OVERRUN_FACTOR * hwm)
        return fwd_body_fail(c, "forward: request body pushed past the high-water mark", -EINVAL);
    if (fwd_buf_append(c, data, len) < 0)
        return fwd_body_fail(c, "out of memory", -ENOMEM);
    c->pushed += len;
    if (c->replayable && c->pushed > c->f->cfg.replay_cap)
        fwd_not_replayable(c);
    if (end || (c->total >= 0 && c->pushed == (uint64_t)c->total)) {
        if (c->total >= 0 && c->pushed < (uint64_t)c->total)
            return fwd_body_fail(c, "forward: request body shorter than its Content-Length",
                                 -EINVAL);
        c->body_end = true;
    }
    if (c->send_paused)
        fwd_kick(c);
    if (c->len - c->sent > hwm) {
        c->told_full = true;
        return 1;
    }
    return 0;
}

void fwd_resume(fwd_call *c)
{
    if (c->dead || c->in_done)
        return;
    c->last_rx_ms = ev_now_ms(); /* the member could not send while paused */
    c->want_recv_pause = false;
    if (c->recv_paused) {
        c->resume_pending = true;
        fwd_kick(c);
    }
}

void fwd_cancel(fwd_call *c)
{
    if (c->dead || c->in_done)
        return;
    c->dead = true;
    fwd_reap(c->f);
}

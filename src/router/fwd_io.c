/* fwd_io: a call's transfer as curl runs it. fwd_setup sets the easy handle's options; then curl
 * calls back: the read callback drains the request body's queue (buf[sent..len), paused when it is
 * empty and the body is not over), the seek callback rewinds it while it is replayable, the header
 * callback keeps the response head line by line and hands it to the caller's head() once complete
 * (hop-by-hop headers dropped, interim 1xx answers skipped), the write callback hands the body to
 * data() and pauses when the caller said full. The callbacks only keep books and call the caller:
 * they never call the multi (curl must not be re-entered); what must happen outside curl is marked
 * on the call and done by fwd_kick or the progress callback (forward.c). With a connected()
 * callback, the open-socket callback hands curl only connections fwd made and the caller confirmed
 * (fwd_conn.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fwd_internal.h"

void fwd_rh_clear(fwd_call *c)
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

int fwd_buf_append(fwd_call *c, const char *p, size_t n)
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
            return -ENOMEM;
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

void fwd_not_replayable(fwd_call *c)
{
    c->replayable = false;
    fwd_buf_compact(c);
}

int fwd_set_url(fwd_call *c)
{
    const fwd_target *t = &c->targets[c->attempt];
    bool v6 = strchr(t->ip, ':') != NULL;
    size_t n = strlen(t->ip) + strlen(c->path) + 32;
    char *url = malloc(n);
    if (!url)
        return -ENOMEM;
    snprintf(url, n, "http://%s%s%s:%d%s", v6 ? "[" : "", t->ip, v6 ? "]" : "", t->port, c->path);
    CURLcode rc = curl_easy_setopt(c->easy, CURLOPT_URL, url);
    free(url);
    return rc == CURLE_OK ? 0 : -EIO;
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

/* One line of the response head (curl hands them over one by one, CRLF included). 0; -EPROTO when
 * the line is not one of a well-formed head (or follows none); -EMSGSIZE past FWD_MAX_HEADERS or
 * FWD_MAX_HEADER_BYTES; -ENOMEM. */
static int fwd_head_line(fwd_call *c, const char *p, size_t n)
{
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        const char *sp = memchr(p, ' ', n);
        if (!sp || (size_t)(p + n - sp) < 4)
            return -EPROTO;
        int code = 0;
        for (int i = 1; i <= 3; i++) {
            if (sp[i] < '0' || sp[i] > '9')
                return -EPROTO;
            code = code * 10 + (sp[i] - '0');
        }
        c->status = code;
        fwd_rh_clear(c);
        return 0;
    }
    if (!c->status)
        return -EPROTO;
    if (!n) {
        if (c->status >= 100 && c->status < 200)
            c->status = 0; /* an interim answer (103 Early Hints): the final one follows */
        else
            fwd_deliver_head(c);
        return 0;
    }
    c->rh_bytes += n;
    if (c->rh_bytes > FWD_MAX_HEADER_BYTES)
        return -EMSGSIZE;
    if (p[0] == ' ' || p[0] == '\t') { /* obsolete line folding: part of the previous value */
        if (!c->nrh)
            return -EPROTO;
        fwd_hdr *h = &c->rh[c->nrh - 1];
        size_t old = strlen(h->value);
        char *v = realloc(h->value, old + n + 1);
        if (!v)
            return -ENOMEM;
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
    if (!colon || colon == p)
        return -EPROTO;
    if (c->nrh == FWD_MAX_HEADERS)
        return -EMSGSIZE;
    for (const char *q = p; q < colon; q++)
        if (!fwd_is_tchar((unsigned char)*q))
            return -EPROTO; /* "Name : v" and the like: RFC 9112 5.1 has a proxy refuse them */
    fwd_hdr *rh = realloc(c->rh, (c->nrh + 1) * sizeof(*rh));
    if (!rh)
        return -ENOMEM;
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
        return -ENOMEM;
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
    if (fwd_head_line(c, p, n) < 0) { /* whichever the errno: the head cannot be passed on */
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

/* Connected, about to send: too late for the drain fence is failed here, before any byte. */
static int fwd_on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port,
                         int local_port)
{
    (void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
    fwd_call *c = ud;
    if (!c->send_by_ms || ev_now_ms() <= c->send_by_ms) {
        if (c->whole) { /* the request goes out with this write: the member's silence counts */
            c->bytes_up = c->len;
            fwd_body_out(c);
        }
        return CURL_PREREQFUNC_OK;
    }
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
    if (c->conn_fd < 0 && !c->confirming) {
        int fd = fwd_unpark(c->f, &c->targets[c->attempt]);
        c->conn_fd = fd >= 0 ? fd : -1; /* -ENOENT: none parked, fwd connects (want_conn) */
    }
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

int fwd_setup(fwd_call *c, const fwd_request *req)
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
    /* A small body that is all here goes out in the request's own write (curl's POSTFIELDS),
     * not in a second one after it from the read callback: one segment, no poll between. */
    c->whole = c->upload && c->body_end && c->len > 0 && c->len <= FWD_WHOLE_MAX && c->replayable &&
               rc == CURLE_OK;
    if (c->whole) {
        struct curl_slist *l = curl_slist_append(c->headers, "Content-Type:"); /* no default */
        if (!l)
            return -ENOMEM;
        c->headers = l;
    }
    FWD_SET(CURLOPT_HTTPHEADER, c->headers);
    if (c->send_by_ms || c->whole) {
        FWD_SET(CURLOPT_PREREQFUNCTION, fwd_on_prereq);
        FWD_SET(CURLOPT_PREREQDATA, c);
    }
    if (strcmp(req->method, "HEAD") == 0) {
        FWD_SET(CURLOPT_NOBODY, 1L);
    } else if (c->whole) {
        /* The bytes stay in c->buf, untouched until the call is freed (no read callback). */
        FWD_SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->len);
        FWD_SET(CURLOPT_POSTFIELDS, c->buf);
        FWD_SET(CURLOPT_CUSTOMREQUEST, c->method);
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
    if (rc != CURLE_OK)
        return -EIO;
    return fwd_set_url(c);
}

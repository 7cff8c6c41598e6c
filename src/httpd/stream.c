/* stream: an answer written as a stream (httpd_req_stream_begin, _write, _end): its head kept
 * until MHD takes the response, its bytes buffered until MHD asks for them (the connection sleeps
 * meanwhile, never spinning), and backpressure to the producer past a high mark, with a drain call
 * once the buffer is empty again. */
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpd_internal.h"

/* Stream bytes buffered here past which the producer is asked to pause. */
#define HTTPD_STREAM_HIGH (256u << 10)
/* The most MHD asks a stream for at once. MHD callocs this block with each response, so a
 * response of a known smaller length gets a block of its length (and at least the minimum). */
#define HTTPD_STREAM_BLOCK (16u << 10)
#define HTTPD_STREAM_BLOCK_MIN 256u

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
    httpd_req_sleep(r);
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

enum MHD_Result httpd_stream_queue(httpd_req *r)
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

void httpd_stream_free(ev_loop *loop, httpd_stream *st)
{
    ev_timer_cancel(loop, st->drain_timer);
    httpd_headers_free(st);
    free(st->buf);
    free(st);
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

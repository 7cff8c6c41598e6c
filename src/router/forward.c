/* fwd: forwards requests to members with libcurl on the loop (evcurl); the contract is
 * router/forward.h. This file holds the public calls and a call's lifecycle: fwd_start sets a call
 * up (its headers by fwd_headers.c's rules, its easy handle by fwd_io.c) and adds it to the multi;
 * the request body is a byte queue fed by fwd_body() and drained by curl's read callback; the
 * response goes to the caller from curl's header and write callbacks (fwd_io.c) as it arrives.
 * Pausing and unpausing curl, and finishing a call, run from the loop (fwd_kick's 0 ms timer or
 * evcurl's progress callback), never from inside curl, which must not be re-entered; a call
 * cancelled inside a callback is only marked and freed once curl has returned (fwd_reap). An
 * attempt that fails before any byte of the answer goes to the next target while the body is
 * replayable (fwd_retry); the member's silence ends a call after the upstream timeout. With a
 * connected() callback fwd makes each new connection itself (fwd_conn.c), so that the caller can
 * confirm the address before curl sends a byte on it. Shared state: fwd_internal.h. */
#include "router/forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fwd_internal.h"

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

void fwd_reap(fwd *f)
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

/* ---- from the loop: kicks, the member's silence ---- */

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

void fwd_kick(fwd_call *c)
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

/* The whole body went out: the member's turn, and the clock of its silence starts. */
void fwd_body_out(fwd_call *c)
{
    if (c->f->cfg.idle_timeout_ms <= 0 || c->idle_timer)
        return;
    c->last_rx_ms = ev_now_ms();
    c->idle_timer =
        ev_timer_add(c->f->loop, (uint64_t)c->f->cfg.idle_timeout_ms, fwd_on_idle_timeout, c);
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

void fwd_finish(fwd_call *c)
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
void fwd_attempt_reset(fwd_call *c)
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
bool fwd_retry(fwd_call *c)
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

/* ---- the calls ---- */

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
    /* All of a Content-Length body here already: its end is known, whatever the caller's more
     * says (its end-of-body push, empty, is then a no-op). */
    c->body_end =
        !req->more || c->total == 0 || (c->total > 0 && req->body_len == (uint64_t)c->total);
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
    if ((rc = fwd_buf_append(c, req->body, req->body_len)) < 0)
        goto fail;
    c->pushed = req->body_len;
    if (c->pushed > f->cfg.replay_cap)
        c->replayable = false;
    if ((rc = fwd_build_headers(&c->headers, req)) < 0)
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
        return len ? fwd_body_fail(c, "forward: request body after its end", -EINVAL) : 0;
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

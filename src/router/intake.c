/* intake: a request's way in. httpd hands over a request once its headers are in; its
 * Content-Length is checked against the limits, its body is read only until the model is known
 * (rt_model) and kept in memory out of one budget for all requests, then the model's member is
 * found and the request queued in its pool. Also the answers the router writes itself (OpenAI
 * errors) and GET /v1/models.
 * Memory: the bytes of bodies kept before their forward (until the model is known, and while
 * held) come out of one budget for all requests (rt_reserve): a body of known length reserves it
 * whole when it arrives, so a request that cannot fit is refused before its body is read; an
 * upload that stalls before its model is known is ended (408) after body_idle_ms. */
#include "router/intake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/view.h"
#include "rt_state.h"

int rt_intake_length(const char *header, long long max_body, long long budget, int64_t *out,
                     char *msg, size_t len)
{
    *out = -1;
    if (!header)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(header, &end, 10);
    if (errno || end == header || *end || v < 0) {
        snprintf(msg, len, "bad Content-Length");
        return -EINVAL;
    }
    /* What the budget can ever hold for one large body is its limit too. */
    long long room = budget - budget / 8;
    if (v > max_body || v > room) {
        snprintf(msg, len, "request body larger than %lld bytes",
                 max_body < room ? max_body : room);
        return -EFBIG;
    }
    *out = v;
    return 0;
}

int rt_intake_fits(uint64_t buffered, uint64_t budget, size_t reserved, size_t want)
{
    if (want <= reserved)
        return 0;
    uint64_t limit = want > RT_MODEL_BODY_EXACT_MAX ? budget - budget / 8 : budget;
    return buffered + (want - reserved) > limit ? -ENOSPC : 0;
}

/* Reserves room for q's kept body to grow to want bytes (rt_intake_fits). 0, or -ENOSPC when it
 * does not fit. */
static int rt_reserve(rt_req *q, size_t want)
{
    rt_router *rt = q->rt;
    if (want <= q->reserved)
        return 0;
    if (rt_intake_fits(rt->buffered, (uint64_t)rt->o.body_budget_bytes, q->reserved, want) < 0)
        return -ENOSPC;
    rt->buffered += want - q->reserved;
    q->reserved = want;
    rt_metrics_buffered(&rt->m, rt->buffered);
    return 0;
}

/* Gives back what q reserved beyond keep bytes. */
static void rt_unreserve(rt_req *q, size_t keep)
{
    if (q->reserved <= keep)
        return;
    q->rt->buffered -= q->reserved - keep;
    q->reserved = keep;
    rt_metrics_buffered(&q->rt->m, q->rt->buffered);
}

void rt_buf_drop(rt_req *q)
{
    free(q->buf);
    q->buf = NULL;
    q->len = q->cap = 0;
    rt_unreserve(q, 0);
}

void rt_req_free(rt_req *q)
{
    rt_podcheck_cancel(q->check);
    for (size_t i = 0; i < RT_MAX_TARGETS; i++)
        rt_podref_clear(&q->to[i]);
    if (q->budget_timer)
        ev_timer_cancel(q->rt->loop, q->budget_timer);
    if (q->idle_timer)
        ev_timer_cancel(q->rt->loop, q->idle_timer);
    rt_buf_drop(q);
    free(q);
}

/* Answers hr with an OpenAI error, with Retry-After when retry_s > 0 (a streamed reply: a plain
 * reply has no headers of its own), falling back to a plain reply if the stream cannot begin. */
static void rt_reply_error(httpd_req *hr, rt_oai_err err, const char *message, uint32_t retry_s)
{
    unsigned code = rt_oai_status(err);
    char *body = rt_oai_error(err, message);
    if (retry_s > 0 && body) {
        char ra[16], cl[24];
        snprintf(ra, sizeof(ra), "%u", retry_s);
        snprintf(cl, sizeof(cl), "%zu", strlen(body));
        httpd_header h[] = {
            {"Content-Type", "application/json"}, {"Retry-After", ra}, {"Content-Length", cl}};
        if (httpd_req_stream_begin(hr, code, h, 3) == 0) {
            httpd_req_stream_write(hr, body, strlen(body));
            httpd_req_stream_end(hr, true);
            free(body);
            return;
        }
    }
    httpd_reply rep = {.code = body ? code : 500,
                       .content_type = "application/json",
                       .body = body,
                       .len = body ? strlen(body) : 0};
    httpd_req_reply(hr, &rep);
}

void rt_answer(rt_req *q, rt_oai_err err, const char *message, uint32_t retry_s)
{
    const char *ns = q->pool ? q->pool->ns : "", *pool = q->pool ? q->pool->name : "";
    rt_metrics_request(&q->rt->m, ns, pool, q->mq ? q->mq->member : "", rt_oai_status(err));
    rt_reply_error(q->hr, err, message, retry_s);
    rt_req_free(q);
}

/* The model is known: find its member and queue the request; the decision does the rest. */
static void rt_enqueue(rt_req *q)
{
    rt_router *rt = q->rt;
    rt_route r;
    const char *other = NULL;
    int rc = rt_routes_lookup(rt->routes, q->scan.name, &r, &other);
    char msg[768];
    if (rc == -ENOENT) {
        if (strchr(q->scan.name, '/'))
            snprintf(msg, sizeof(msg), "The model '%s' does not exist", q->scan.name);
        else
            snprintf(msg, sizeof(msg),
                     "The model '%s' does not exist in namespace %s (a model of another namespace "
                     "is named '<namespace>/<model>')",
                     q->scan.name, rt->o.home_namespace);
        rt_answer(q, RT_OAI_MODEL_NOT_FOUND, msg, 0);
        return;
    }
    if (rc == -EEXIST) {
        snprintf(msg, sizeof(msg), "The model '%s' is ambiguous: served by pools %s and %s",
                 q->scan.name, r.pool, other);
        rt_answer(q, RT_OAI_BAD_REQUEST, msg, 0);
        return;
    }
    if (rt->stopping) {
        rt_answer(q, RT_OAI_POOL_UNAVAILABLE,
                  "the router is shutting down; another replica can take the request", 1);
        return;
    }
    q->name_at = rc == 0 ? (size_t)(r.name - q->scan.name) : 0;
    rt_pool *p = rc == 0 ? rt_pool_get(rt, r.ns, r.pool) : NULL;
    rt_mq *m = p ? rt_mq_get(p, r.member) : NULL;
    if (!m) {
        rt_answer(q, RT_OAI_BAD_GATEWAY, "out of memory", 0);
        return;
    }
    const api_pool *o = rt_pool_rec(p);
    q->pool = p;
    q->mq = m;
    q->state = RQ_HELD;
    q->arrived_ms = ev_now_ms();
    if (o && (m->waiting > 0 || rt_str_eq(o->status.pending_member, m->member) ||
              rt_str_eq(o->requested, m->member)))
        rt_metrics_coalesced(&rt->m, p->ns, p->name, m->member);
    rt_mq_insert(q);
    q->budget_timer = ev_timer_add(rt->loop, rt_view_budget_ms(o), rt_budget_over, q);
    /* Decide now: a request for the resident goes out without waiting for a loop turn. q may be
     * gone afterwards; the pool is marked so its state is freed once nothing refers to it. */
    rt->arriving = q;
    rt_decide(p);
    rt->arriving = NULL;
    rt_mark(p);
}

/* Keeps len more body bytes: 0, -ENOSPC (over the body budget) or -ENOMEM. */
static int rt_buf_add(rt_req *q, const char *data, size_t len)
{
    if (len == 0)
        return 0;
    if (q->len + len > q->cap) {
        size_t c = rt_model_buf_cap(q->cap, q->content_length, q->len + len);
        if (rt_reserve(q, c) < 0)
            return -ENOSPC;
        char *b = realloc(q->buf, c);
        if (!b)
            return -ENOMEM;
        q->buf = b;
        q->cap = c;
    }
    memcpy(q->buf + q->len, data, len);
    q->len += len;
    return 0;
}

/* Ends q, which is READING, HELD or FORWARDING, with err: a forward is cut. */
static void rt_refuse(rt_req *q, rt_oai_err err, const char *msg, uint32_t retry_s)
{
    if (q->state == RQ_FORWARDING) {
        rt_forward_abort(q, err, msg);
        return;
    }
    if (q->state == RQ_HELD) {
        rt_mq_unlink(q);
        rt_mark(q->pool);
    }
    rt_answer(q, err, msg, retry_s);
}

static void rt_overloaded(rt_router *rt, char *msg, size_t len)
{
    snprintf(msg, len,
             "the router holds %llu bytes of request bodies, its --body-buffer-budget (%lld): "
             "retry shortly",
             (unsigned long long)rt->buffered, rt->o.body_budget_bytes);
}

/* An upload still looking for its model that sent nothing for body_idle_ms: 408, and its bytes
 * go back to the budget. Its body is partly read, so the answer ends the connection. */
static void rt_body_idle(ev_loop *loop, void *ud)
{
    rt_req *q = ud;
    rt_router *rt = q->rt;
    q->idle_timer = 0;
    uint64_t now = ev_now_ms(), idle = (uint64_t)rt->o.body_idle_ms;
    if (now - q->last_byte_ms < idle) {
        q->idle_timer = ev_timer_add(loop, q->last_byte_ms + idle - now, rt_body_idle, q);
        return;
    }
    char msg[160];
    snprintf(msg, sizeof(msg),
             "the request body stalled: nothing received for %ld ms (--body-idle-timeout)",
             rt->o.body_idle_ms);
    char *body = rt_oai_error(RT_OAI_TIMEOUT, msg);
    httpd_header h[] = {{"Content-Type", "application/json"}};
    rt_metrics_request(&rt->m, "", "", "", rt_oai_status(RT_OAI_TIMEOUT));
    httpd_req_abort(q->hr, rt_oai_status(RT_OAI_TIMEOUT), h, 1, body, body ? strlen(body) : 0);
    free(body);
    rt_req_free(q);
}

static void rt_body(void *ud, const char *data, size_t len, bool end)
{
    rt_req *q = ud;
    rt_router *rt = q->rt;
    q->body_total += len;
    if (q->body_total > (uint64_t)rt->o.max_body_bytes) {
        char msg[128];
        snprintf(msg, sizeof(msg), "request body larger than %lld bytes", rt->o.max_body_bytes);
        rt_refuse(q, RT_OAI_TOO_LARGE, msg, 0);
        return;
    }
    if (end)
        q->body_end = true;
    /* Every byte is scanned before it is kept or sent on: a second "model" key, or invalid JSON
     * after the model, stops the request before the member has the whole body. */
    rt_model_status st = rt_model_feed(&q->scan, data, len);
    if (end && (st == RT_MODEL_MORE || st == RT_MODEL_FOUND))
        st = rt_model_finish(&q->scan);
    if (st == RT_MODEL_NONE || st == RT_MODEL_BAD) {
        rt_refuse(q, RT_OAI_BAD_REQUEST,
                  q->scan.reason ? q->scan.reason : "the body names no model", 0);
        return;
    }
    if (q->state == RQ_FORWARDING) {
        int frc = fwd_body(q->call, data, len, end);
        if (frc < 0) /* the call fails (done() answers the client), or already had (-EPIPE) */
            return;
        if (frc == 1 && !end) {
            q->body_paused = true;
            httpd_req_body_pause(q->hr);
        }
        return;
    }
    int rc = rt_buf_add(q, data, len);
    if (rc < 0) {
        char msg[192];
        if (rc == -ENOSPC)
            rt_overloaded(rt, msg, sizeof(msg));
        else
            snprintf(msg, sizeof(msg), "out of memory");
        rt_refuse(q, rc == -ENOSPC ? RT_OAI_OVERLOADED : RT_OAI_BAD_GATEWAY, msg,
                  rc == -ENOSPC ? 1 : 0);
        return;
    }
    if (q->state == RQ_HELD)
        return; /* bytes that came with the pause: kept for the forward */
    q->last_byte_ms = ev_now_ms();
    if (st == RT_MODEL_MORE)
        return;
    ev_timer_cancel(rt->loop, q->idle_timer);
    q->idle_timer = 0;
    rt_unreserve(q, q->cap); /* the rest streams to the member: only what is kept stays */
    /* Hold the rest of the body until the request goes out; httpd watches a paused request's
     * client as any waiting one, so a client that leaves while held is seen at once, its body
     * read whole or not (#26: its request is withdrawn; #27). */
    if (!end && (q->content_length < 0 || q->body_total < (uint64_t)q->content_length)) {
        q->body_paused = true;
        httpd_req_body_pause(q->hr);
    }
    rt_enqueue(q);
}

static void rt_closed(void *ud)
{
    rt_req *q = ud;
    rt_router *rt = q->rt;
    if (q->state == RQ_HELD) {
        rt_pool *p = q->pool;
        if (p->asked && q->mq && strcmp(q->mq->member, p->asked) == 0)
            p->asked_left = true; /* its request is withdrawn once no other waits (#26) */
        rt_mq_unlink(q);
        rt_mark(p);
    } else if (q->state == RQ_FORWARDING && q->call) {
        rt_forward_cancel(q);
    }
    if (q->pool)
        rt_metrics_request(&rt->m, q->pool->ns, q->pool->name, q->mq ? q->mq->member : "", 499);
    rt_req_free(q);
}

static void rt_models(rt_router *rt, httpd_req *hr)
{
    rt_oai_model *v = NULL;
    size_t n = 0;
    char *body = rt_routes_models(rt->routes, &v, &n) == 0 ? rt_oai_models(v, n) : NULL;
    free(v);
    httpd_reply rep = {.code = body ? 200 : 500,
                       .content_type = "application/json",
                       .body = body,
                       .len = body ? strlen(body) : 0};
    httpd_req_reply(hr, &rep);
}

void rt_request(void *ud, httpd_req *hr)
{
    rt_router *rt = ud;
    const char *method = httpd_req_method(hr), *path = httpd_req_path(hr);
    if (strcmp(path, "/v1/models") == 0) {
        if (strcmp(method, "GET") != 0)
            rt_reply_error(hr, RT_OAI_METHOD_NOT_ALLOWED, "use GET for /v1/models", 0);
        else
            rt_models(rt, hr);
        return;
    }
    if (strncmp(path, "/v1/", 4) != 0) {
        rt_reply_error(hr, RT_OAI_NOT_FOUND, "no such path: the router serves /v1/...", 0);
        return;
    }
    if (strcmp(method, "POST") != 0) {
        rt_reply_error(hr, RT_OAI_METHOD_NOT_ALLOWED, "use POST with a JSON body naming a model",
                       0);
        return;
    }
    if (rt->stopping || !rt_router_synced(rt)) {
        rt_reply_error(hr, RT_OAI_POOL_UNAVAILABLE,
                       rt->stopping ? "the router is shutting down" : "the router is starting", 1);
        return;
    }
    int64_t cl;
    char msg[192];
    int rc = rt_intake_length(httpd_req_header(hr, "Content-Length"), rt->o.max_body_bytes,
                              rt->o.body_budget_bytes, &cl, msg, sizeof(msg));
    if (rc < 0) {
        rt_reply_error(hr, rc == -EFBIG ? RT_OAI_TOO_LARGE : RT_OAI_BAD_REQUEST, msg, 0);
        return;
    }
    rt_req *q = calloc(1, sizeof(*q));
    if (!q) {
        rt_reply_error(hr, RT_OAI_BAD_GATEWAY, "out of memory", 0);
        return;
    }
    q->rt = rt;
    q->hr = hr;
    q->content_length = cl;
    if (cl > 0 && rt_reserve(q, (size_t)cl) < 0) { /* refused before its body is read */
        rt_overloaded(rt, msg, sizeof(msg));
        free(q);
        rt_metrics_request(&rt->m, "", "", "", rt_oai_status(RT_OAI_OVERLOADED));
        rt_reply_error(hr, RT_OAI_OVERLOADED, msg, 1);
        return;
    }
    rt_model_init(&q->scan);
    /* q and everything it starts (its forward, its timers) end with the connection. */
    if (!httpd_req_work(hr, rt_closed, q)) {
        rt_answer(q, RT_OAI_BAD_GATEWAY, "out of memory", 0);
        return;
    }
    q->last_byte_ms = ev_now_ms();
    q->idle_timer = ev_timer_add(rt->loop, (uint64_t)rt->o.body_idle_ms, rt_body_idle, q);
    if (httpd_req_body(hr, rt_body, q) < 0)
        rt_answer(q, RT_OAI_BAD_REQUEST, "cannot read the body", 0);
}

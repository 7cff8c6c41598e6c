/* relay: a held request on its way to a ready Pod of its member. The forwarder (fwd) streams the
 * body up and the answer down with backpressure both ways; the answer's head and bytes go to the
 * client as they come. A forward refused before any byte reached a member (the Pod went away before
 * the caches said so) puts the request back in its queue, in its place, a few times; one that
 * reached a member is never sent again (it may have been worked on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "router/view.h"
#include "rt_state.h"

/* A forward refused before any response byte (the Pod went away before the caches said so) puts
 * the request back in its queue this many times, then it is answered 502. */
#define RT_MAX_REFUSED 5
#define RT_REFUSED_WAIT_MS 250
#define RT_MAX_HEADERS 128

/* A forward ended. One that had no answer's head may have left bytes on their way to the member
 * (a client that left, a member that failed mid-request): for the fence's transit bound it still
 * counts as outstanding, so no acknowledgement of a swap (api/fence.h) and no release of the
 * registration comes before they have arrived or are lost. */
static void rt_forward_ended(rt_req *q)
{
    rt_router *rt = q->rt;
    if (!q->answered) {
        uint64_t until = ev_now_ms() + rt_fence_window_ms(rt);
        if (until > q->mq->linger_until)
            q->mq->linger_until = until;
        if (until > rt->linger_until)
            rt->linger_until = until;
        rt_wake_at(q->pool, until); /* its acknowledgement is decided again then */
    }
    q->mq->in_flight--;
    rt->in_flight--;
    rt_mark(q->pool);
}

void rt_forward_cancel(rt_req *q)
{
    rt_podcheck_cancel(q->check);
    q->check = NULL;
    fwd_cancel(q->call);
    q->call = NULL;
    rt_forward_ended(q);
}

void rt_forward_abort(rt_req *q, rt_oai_err err, const char *msg)
{
    rt_forward_cancel(q);
    if (!q->head_sent) {
        rt_answer(q, err, msg, 0);
        return;
    }
    rt_metrics_request(&q->rt->m, q->pool->ns, q->pool->name, q->mq->member, rt_oai_status(err));
    httpd_req_stream_end(q->hr, false);
    rt_req_free(q);
}

static void rt_fwd_head(void *ud, int status, const fwd_header *headers, size_t n)
{
    rt_req *q = ud;
    rt_buf_drop(q); /* answered: never put back */
    q->answered = true;
    httpd_header h[RT_MAX_HEADERS];
    if (n > RT_MAX_HEADERS) {
        rt_forward_abort(q, RT_OAI_BAD_GATEWAY, "the member answered with too many headers");
        return;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (httpd_header){headers[i].name, headers[i].value};
    if (httpd_req_stream_begin(q->hr, (unsigned)status, h, n) < 0) {
        rt_forward_abort(q, RT_OAI_BAD_GATEWAY, "the member's answer cannot be relayed");
        return;
    }
    q->head_sent = true;
}

static void rt_fwd_client_drained(void *ud)
{
    rt_req *q = ud;
    if (q->call)
        fwd_resume(q->call);
}

static int rt_fwd_data(void *ud, const char *bytes, size_t len)
{
    rt_req *q = ud;
    int rc = httpd_req_stream_write(q->hr, bytes, len);
    if (rc < 0) {
        rt_forward_abort(q, RT_OAI_BAD_GATEWAY, "the member's answer cannot be relayed");
        return 1;
    }
    if (rc == 1) {
        httpd_req_stream_on_drain(q->hr, rt_fwd_client_drained, q);
        return 1;
    }
    return 0;
}

static void rt_fwd_body_drained(void *ud)
{
    rt_req *q = ud;
    if (q->body_paused) {
        q->body_paused = false;
        httpd_req_body_resume(q->hr);
    }
}

/* A forward that failed before any response byte, with the whole body still here: the request
 * was never taken, so it waits in its queue again (in its place, with what is left of its budget)
 * and the pool is decided again a little later, once the caches have caught up. False when its
 * budget is over. */
static bool rt_rehold(rt_req *q)
{
    rt_router *rt = q->rt;
    rt_pool *p = q->pool;
    uint64_t budget = rt_view_budget_ms(rt_pool_rec(p)), now = ev_now_ms();
    if (now >= q->arrived_ms + budget || rt->stopping)
        return false;
    q->state = RQ_HELD;
    rt_mq_insert(q);
    q->budget_timer = ev_timer_add(rt->loop, q->arrived_ms + budget - now, rt_budget_over, q);
    q->retry_at = now + RT_REFUSED_WAIT_MS;
    return true;
}

static void rt_fwd_done(void *ud, const fwd_result *r)
{
    rt_req *q = ud;
    rt_router *rt = q->rt;
    q->call = NULL;
    rt_forward_ended(q);
    if (r->first_byte_us)
        rt_metrics_upstream(&rt->m, q->pool->ns, q->pool->name, q->mq->member, r->first_byte_us);
    /* Put back only when no byte of it reached a member (refused, reset on connect): one that
     * took the request may have worked on it, and a request that crashes members must not go
     * round them all. */
    if (r->outcome == FWD_UPSTREAM_FAILED_BEFORE_RESPONSE && r->bytes_up == 0 && q->buf &&
        q->body_end && (r->late || ++q->refused < RT_MAX_REFUSED) && rt_rehold(q)) {
        /* One too late for the fence (a slow connect or Pod read) is no refusal: it waits again. */
        if (r->late)
            log_kv(LOG_INFO,
                   "a forward was not sent within the drain fence's window; it waits again", "pool",
                   q->pool->key, "member", q->mq->member, NULL);
        return;
    }
    if (r->outcome == FWD_UPSTREAM_FAILED_BEFORE_RESPONSE) {
        char msg[512];
        snprintf(msg, sizeof(msg), "member %s of pool %s/%s failed before answering: %s",
                 q->mq->member, q->pool->ns, q->pool->name, r->error ? r->error : "");
        log_kv(LOG_INFO, "upstream failed", "pool", q->pool->key, "member", q->mq->member, "error",
               r->error ? r->error : "", NULL);
        rt_answer(q, RT_OAI_BAD_GATEWAY, msg, 0);
        return;
    }
    rt_metrics_request(&rt->m, q->pool->ns, q->pool->name, q->mq->member,
                       r->status > 0 ? (unsigned)r->status : 502);
    httpd_req_stream_end(q->hr, r->outcome == FWD_OK);
    rt_req_free(q);
}

static void rt_fwd_checked(void *ud, const char *refused)
{
    rt_req *q = ud;
    q->check = NULL;
    if (refused)
        log_kv(LOG_INFO, "a member Pod's address is not confirmed; the request waits again", "pool",
               q->pool->key, "member", q->mq->member, "reason", refused, NULL);
    fwd_confirm(q->call, refused);
}

/* A new connection to a member Pod, nothing sent on it yet: the Pod is read first (the address
 * may be another Pod's, of another pool, since the cache last heard of it). */
static void rt_fwd_connected(void *ud, int target)
{
    rt_req *q = ud;
    rt_podcheck_cancel(q->check);
    q->check = target >= 0 && target < RT_MAX_TARGETS && q->to[target].name
                   ? rt_podcheck_start(q->rt->podcheck, &q->to[target], rt_fwd_checked, q)
                   : NULL;
    if (!q->check)
        fwd_confirm(q->call, "the member's Pod could not be read from the API server");
}

static const fwd_client rt_fwd_client = {.head = rt_fwd_head,
                                         .data = rt_fwd_data,
                                         .body_drained = rt_fwd_body_drained,
                                         .done = rt_fwd_done,
                                         .connected = rt_fwd_connected};

typedef struct rt_hdrs {
    fwd_header v[128];
    size_t n;
} rt_hdrs;

static bool rt_copy_header(void *ud, const char *name, const char *value)
{
    rt_hdrs *h = ud;
    if (h->n < sizeof(h->v) / sizeof(h->v[0]))
        h->v[h->n++] = (fwd_header){name, value};
    return true;
}

void rt_forward(rt_req *q, uint64_t send_by_ms)
{
    rt_router *rt = q->rt;
    rt_view_targets t;
    rt_view_ready_pods(informer_store(rt->caches.isvcs), informer_store(rt->caches.pods),
                       rt->podcheck, q->pool->ns, q->mq->member, &t);
    if (t.n == 0) { /* the decision saw one; the cache cannot have changed since, but be sure */
        rt_answer(q, RT_OAI_BAD_GATEWAY, "no ready Pod of the member", 0);
        return;
    }
    char ips[RT_MAX_TARGETS][64];
    fwd_target tg[RT_MAX_TARGETS];
    size_t nt = t.n < RT_MAX_TARGETS ? t.n : RT_MAX_TARGETS;
    for (size_t i = 0; i < nt; i++) {
        const api_pod *pod = t.pods[(q->mq->rr + i) % t.n];
        if (rt_podref_set(&q->to[i], pod) < 0) {
            rt_answer(q, RT_OAI_BAD_GATEWAY, "out of memory", 0);
            return;
        }
        snprintf(ips[i], sizeof(ips[i]), "%s", pod->ip);
        tg[i] = (fwd_target){ips[i], rt_view_pod_port(pod, t.isvc)};
    }
    q->mq->rr++;

    /* The member's server may answer only to its own name, and never sees a namespace qualifier:
     * rewrite the body's model. */
    char *body = q->buf;
    size_t blen = q->len;
    char *rewritten = NULL;
    const char *served = t.isvc ? t.isvc->served_model : NULL;
    if (!served || !*served)
        served = q->scan.name + q->name_at;
    if (strcmp(served, q->scan.name) != 0) {
        if (rt_model_rewrite(q->buf, q->len, q->scan.tok_start, q->scan.tok_end, served,
                             strlen(served), &rewritten, &blen) < 0) {
            rt_answer(q, RT_OAI_BAD_REQUEST, "cannot rewrite the model name", 0);
            return;
        }
        body = rewritten;
    }
    rt_hdrs h = {.n = 0};
    httpd_req_headers(q->hr, rt_copy_header, &h);
    char addr[64];
    int64_t cl = q->content_length >= 0 ? q->content_length - (int64_t)q->len + (int64_t)blen : -1;
    char *target = httpd_req_target(q->hr);
    fwd_request fr = {.method = httpd_req_method(q->hr),
                      .path = target ? target : httpd_req_path(q->hr),
                      .headers = h.v,
                      .nheaders = h.n,
                      .client_addr =
                          httpd_req_client_addr(q->hr, addr, sizeof(addr)) == 0 ? addr : NULL,
                      .targets = tg,
                      .ntargets = nt,
                      .body = body,
                      .body_len = blen,
                      .more = !q->body_end,
                      .content_length = cl,
                      .send_by_ms = send_by_ms};
    q->state = RQ_FORWARDING;
    q->answered = false;
    q->mq->in_flight++;
    rt->in_flight++;
    q->call = NULL;
    int rc = fwd_start(rt->fwd, &fr, &rt_fwd_client, q, &q->call);
    const char *why = rc < 0 ? fwd_start_error(&fr, &rt_fwd_client, rc) : NULL;
    free(rewritten);
    free(target);
    if (rc < 0) {
        rt_forward_ended(q);
        rt_answer(q, RT_OAI_BAD_GATEWAY, why, 0);
        return;
    }
    if (!q->body_end) /* the rest streams: the start is the forwarder's to replay now */
        rt_buf_drop(q);
    if (!q->body_end && q->body_paused) {
        q->body_paused = false;
        httpd_req_body_resume(q->hr);
    }
}

/* router: the request's life. httpd hands over a request once its headers are in; the body is
 * read only until the model is known (rt_model), and the request waits in its pool's queue for
 * its member (one queue a member, in arrival order). The pool's decision (rt_hold, from the
 * caches) then forwards it (fwd, streaming both ways with backpressure), answers it, or keeps it
 * held until the cache changes, a grace ends or its swapBudget runs out. Cache events mark pools
 * dirty; one zero-delay timer decides for every dirty pool, so a burst of events costs one pass.
 * The only write is the pool's request annotation, once per swap: the write's resourceVersion is
 * remembered until the cache shows it, so no second request goes out meanwhile.
 * The drain fence: the operator unloads a swap's resident only on an idle probe sent
 * drain_fence_ms after the swap was written, so a request goes to the resident only within half
 * of that after a read of the pool from the API server (not the cache, which may lag by a relist's
 * backoff) showed it resident with no swap. Such a request has reached the Pod before the probe
 * that could unload it is sent.
 * Memory: the bytes of bodies kept before their forward (until the model is known, and while
 * held) come out of one budget for all requests (rt_reserve): a body of known length reserves it
 * whole when it arrives, so a request that cannot fit is refused before its body is read; an
 * upload that stalls before its model is known is ended (408) after body_idle_ms. */
#include "router/router.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/log.h"
#include "httpd/httpd.h"
#include "informer/expect.h"
#include "informer/informer.h"
#include "pool/plan.h"
#include "pool/probe.h"
#include "pool/records.h"
#include "router/forward.h"
#include "router/hold.h"
#include "router/model.h"
#include "router/oai.h"
#include "router/podcheck.h"
#include "router/router_metrics.h"
#include "router/routes.h"
#include "util/backoff.h"
#include "util/rng.h"
#include "util/strmap.h"

#define RT_MAX_TARGETS 2
/* A forward refused before any response byte (the Pod went away before the caches said so) puts
 * the request back in its queue this many times, then it is answered 502. */
#define RT_MAX_REFUSED 5
#define RT_REFUSED_WAIT_MS 250
/* The request write: short, and not retried by the client (the decision retries it). */
#define RT_PATCH_TIMEOUT_MS 5000
/* A failed read for the drain fence is tried again after this, doubling up to the max. */
#define RT_VERIFY_BACKOFF_MS 250
#define RT_VERIFY_BACKOFF_MAX_MS 4000
/* The read that confirms a member's Pod on a new connection (router/podcheck.h). */
#define RT_PODCHECK_TIMEOUT_MS 2000

typedef struct rt_pool rt_pool;
typedef struct rt_mq rt_mq;

typedef enum { RQ_READING, RQ_HELD, RQ_FORWARDING } rq_state;

typedef struct rt_req {
    rt_router *rt;
    httpd_req *hr;
    rq_state state;
    rt_model_scan scan;
    size_t name_at; /* scan.name + name_at: the model's name in its namespace (no qualifier) */
    char *buf;      /* the body read so far, until it is handed to the forwarder */
    size_t len, cap;
    bool body_end;
    bool body_paused;
    int64_t content_length; /* the client's, -1 when it sent none */
    uint64_t body_total;    /* bytes of body received */
    bool head_sent;         /* the member's status and headers went to the client */
    bool was_held;          /* it waited (not forwarded when it arrived) */
    rt_pool *pool;          /* HELD, FORWARDING */
    rt_mq *mq;
    struct rt_req *prev, *next; /* in mq's queue while HELD */
    uint64_t arrived_ms;
    uint64_t budget_timer;
    size_t reserved;       /* of the body budget: at least cap */
    uint64_t idle_timer;   /* while READING: the upload's silence is timed */
    uint64_t last_byte_ms; /* when its last body bytes came */
    unsigned refused;      /* forwards that failed before any response byte */
    uint64_t retry_at;     /* put back after one: not forwarded again before this */
    fwd_call *call;
    /* The Pods the forward's targets are (their cached UID and address), and the read that
     * confirms one on a new connection before any byte goes to it. */
    rt_podref to[RT_MAX_TARGETS];
    rt_podcheck_call *check;
} rt_req;

/* One member's requests in a pool. */
struct rt_mq {
    char *member;
    rt_req *head, *tail;
    size_t waiting;
    size_t in_flight;
    unsigned rr; /* round-robin over its ready Pods */
};

struct rt_pool {
    strmap_node node;
    char *key; /* "namespace/name" */
    char *ns, *name;
    rt_router *rt;
    rt_mq **mqs; /* each its own allocation: requests point at theirs */
    size_t nmq;
    bool dirty;
    rt_pool *next_dirty;
    /* Our request write: in flight, then its answer's version until the cache shows it. */
    kube_call *patch;
    char *patch_member;
    unsigned patch_failures;   /* refused writes in a row */
    uint64_t patch_not_before; /* after a refused write */
    /* After a write (done or refused as a conflict): the version it was made at and the one it
     * answered (NULL after a conflict: any newer version); asked nothing more until the cache
     * shows it. */
    bool awaiting;
    char *request_rv, *request_old_rv;
    /* The member this router's last request asked for, while the pool shows that request or its
     * swap (NULL otherwise); whether a client waiting for it left; the withdrawal in flight,
     * and the pool's version it was sent at (kept after a 409: no withdrawal goes out again at
     * that version, so a lagging cache costs one write, not one per round trip). */
    char *asked;
    bool asked_left;
    kube_call *withdraw;
    char *withdraw_rv;
    uint64_t wake_timer;
    uint64_t wake_at;
    /* Swap timing from the status as this router saw it change (monotonic ms). */
    uint64_t swap_seen_ms;
    uint64_t swap_estimate_ms;
    /* The drain fence's read of the pool: in flight (sent at verify_sent_ms), then the member the
     * last good read showed resident with no swap (NULL: none) and when that read was sent. */
    kube_call *verify;
    uint64_t verify_sent_ms;
    char *verified_member;
    uint64_t verified_ms;
    unsigned verify_failures;   /* failed reads in a row */
    uint64_t verify_not_before; /* after a failed read */
    /* The last fence read was refused (401/403): why, naming the missing right; NULL otherwise.
     * Its requests are answered 503 with it at once, /readyz names it, and the read is tried again
     * (after its backoff) until one succeeds. */
    char *refused;
};

struct rt_router {
    ev_loop *loop;
    kube_client *client;
    rt_router_opts o;
    char *ns_copy, *selector_copy, *home_copy;
    informer *pools, *isvcs, *pods;
    rt_routes *routes;
    fwd *fwd;
    rt_podcheck *podcheck;
    httpd *front;
    rt_metrics m;
    strmap pool_map;
    rt_pool *dirty;
    uint64_t tick;
    rt_req *arriving; /* the request rt_enqueue decides for: forwarded at once, not held */
    bool stopping;
    size_t in_flight;  /* forwards running, all pools */
    uint64_t buffered; /* body bytes reserved by every request, at most o.body_budget_bytes */
    void (*stopped)(void *ud);
    void *stopped_ud;
    uint64_t stop_deadline, stop_timer;
};

/* ---- small helpers ---- */

static bool rt_str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Equal strings, or both absent. */
static bool rt_same(const char *a, const char *b)
{
    return (!a && !b) || rt_str_eq(a, b);
}

/* How long after a read of the pool requests may go to the resident it showed: half the fence. */
static uint64_t rt_fence_window_ms(const rt_router *rt)
{
    return (uint64_t)rt->o.drain_fence_ms / 2;
}

static const pool_obj *rt_pool_rec(const rt_pool *p)
{
    return store_get(informer_store(p->rt->pools), p->key);
}

static uint64_t rt_budget_ms(const pool_obj *o)
{
    int64_t ms = PLAN_DEFAULT_SWAP_BUDGET_MS;
    if (o && o->swap_budget && *o->swap_budget &&
        (plan_parse_duration_ms(o->swap_budget, &ms) < 0 || ms < 1))
        ms = PLAN_DEFAULT_SWAP_BUDGET_MS;
    return (uint64_t)ms;
}

/* The message of the pool's condition that says why it cannot serve: SlotAllocated when False,
 * else the phase. */
static void rt_pool_reason(const pool_obj *o, char *buf, size_t len)
{
    const char *msg = NULL;
    for (size_t i = 0; o && i < o->status.n_conditions; i++) {
        const plan_condition *c = &o->status.conditions[i];
        if (rt_str_eq(c->type, "SlotAllocated") && rt_str_eq(c->status, "False") && c->message)
            msg = c->message;
    }
    snprintf(buf, len, "pool %s/%s is %s%s%s", o && o->ns ? o->ns : "", o ? o->name : "",
             o && o->status.phase ? o->status.phase : "unavailable", msg ? ": " : "",
             msg ? msg : "");
}

/* ---- the body budget ---- */

/* Reserves room for q's kept body to grow to want bytes. Reservations larger than one small body
 * (RT_MODEL_BODY_EXACT_MAX) stay out of the budget's last eighth, so large uploads alone cannot
 * refuse a small request. 0, or -ENOSPC when it does not fit. */
static int rt_reserve(rt_req *q, size_t want)
{
    rt_router *rt = q->rt;
    if (want <= q->reserved)
        return 0;
    uint64_t budget = (uint64_t)rt->o.body_budget_bytes;
    uint64_t limit = want > RT_MODEL_BODY_EXACT_MAX ? budget - budget / 8 : budget;
    if (rt->buffered + (want - q->reserved) > limit)
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

/* Frees q's kept body and its reservation. */
static void rt_buf_drop(rt_req *q)
{
    free(q->buf);
    q->buf = NULL;
    q->len = q->cap = 0;
    rt_unreserve(q, 0);
}

/* The pool dropped its last request (Swapping False/RequestDropped): true, with why in buf (the
 * SwapDeferred message, which names the resident's probe error). */
static bool rt_pool_dropped(const pool_obj *o, char *buf, size_t len)
{
    const char *msg = NULL;
    bool dropped = false;
    for (size_t i = 0; o && i < o->status.n_conditions; i++) {
        const plan_condition *c = &o->status.conditions[i];
        if (rt_str_eq(c->type, "Swapping"))
            dropped = rt_str_eq(c->status, "False") && rt_str_eq(c->reason, "RequestDropped");
        else if (rt_str_eq(c->type, "SwapDeferred") && rt_str_eq(c->status, "True"))
            msg = c->message;
    }
    if (dropped)
        snprintf(buf, len, "pool %s/%s cannot swap away from its resident %s: %s",
                 o->ns ? o->ns : "", o->name,
                 o->status.resident_member ? o->status.resident_member : "",
                 msg ? msg : "its idle probe cannot decide");
    return dropped;
}

/* ---- answers the router writes itself ---- */

static void rt_req_free(rt_req *q)
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

/* Answers q with an OpenAI error (and Retry-After when retry_s > 0), counts it, and frees q. */
static void rt_answer(rt_req *q, rt_oai_err err, const char *message, uint32_t retry_s)
{
    const char *ns = q->pool ? q->pool->ns : "", *pool = q->pool ? q->pool->name : "";
    rt_metrics_request(&q->rt->m, ns, pool, q->mq ? q->mq->member : "", rt_oai_status(err));
    rt_reply_error(q->hr, err, message, retry_s);
    rt_req_free(q);
}

/* ---- pools and their member queues ---- */

static void rt_mark(rt_pool *p);

static rt_pool *rt_pool_find(rt_router *rt, const char *key)
{
    strmap_node *n = strmap_get(&rt->pool_map, key);
    return n ? STRMAP_OWNER(n, rt_pool, node) : NULL;
}

static rt_pool *rt_pool_get(rt_router *rt, const char *ns, const char *name)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns ? ns : "", name) < 0)
        return NULL;
    rt_pool *p = rt_pool_find(rt, key);
    if (p) {
        free(key);
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (!p || !(p->ns = strdup(ns ? ns : "")) || !(p->name = strdup(name))) {
        if (p) {
            free(p->ns);
            free(p);
        }
        free(key);
        return NULL;
    }
    p->key = key;
    p->rt = rt;
    strmap_insert(&rt->pool_map, &p->node, p->key);
    return p;
}

static rt_mq *rt_mq_get(rt_pool *p, const char *member)
{
    for (size_t i = 0; i < p->nmq; i++)
        if (strcmp(p->mqs[i]->member, member) == 0)
            return p->mqs[i];
    rt_mq **v = realloc(p->mqs, (p->nmq + 1) * sizeof(*v));
    if (!v)
        return NULL;
    p->mqs = v;
    rt_mq *m = calloc(1, sizeof(*m));
    if (!m || !(m->member = strdup(member))) {
        free(m);
        return NULL;
    }
    v[p->nmq++] = m;
    return m;
}

static void rt_mq_free_all(rt_pool *p)
{
    for (size_t i = 0; i < p->nmq; i++) {
        free(p->mqs[i]->member);
        free(p->mqs[i]);
    }
    free(p->mqs);
    p->mqs = NULL;
    p->nmq = 0;
}

/* Queues q in its member's queue by arrival (new requests go last; one put back goes where it
 * arrived, usually first). */
static void rt_mq_insert(rt_req *q)
{
    rt_mq *m = q->mq;
    rt_req *after = m->tail;
    while (after && after->arrived_ms > q->arrived_ms)
        after = after->prev;
    q->prev = after;
    q->next = after ? after->next : m->head;
    if (q->next)
        q->next->prev = q;
    else
        m->tail = q;
    if (after)
        after->next = q;
    else
        m->head = q;
    m->waiting++;
    rt_metrics_held(&q->rt->m, q->pool->ns, q->pool->name, 1);
}

static void rt_mq_unlink(rt_req *q)
{
    rt_mq *m = q->mq;
    if (q->prev)
        q->prev->next = q->next;
    else
        m->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        m->tail = q->prev;
    q->prev = q->next = NULL;
    m->waiting--;
    rt_metrics_held(&q->rt->m, q->pool->ns, q->pool->name, -1);
    if (q != q->rt->arriving)
        rt_metrics_hold_ended(&q->rt->m, q->pool->ns, q->pool->name, ev_now_ms() - q->arrived_ms);
}

static void rt_pool_free(rt_pool *p)
{
    if (p->patch)
        kube_call_cancel(p->patch);
    if (p->withdraw)
        kube_call_cancel(p->withdraw);
    free(p->asked);
    free(p->withdraw_rv);
    if (p->verify)
        kube_call_cancel(p->verify);
    free(p->verified_member);
    free(p->refused);
    if (p->wake_timer)
        ev_timer_cancel(p->rt->loop, p->wake_timer);
    strmap_remove(&p->rt->pool_map, &p->node);
    rt_mq_free_all(p);
    free(p->patch_member);
    free(p->request_rv);
    free(p->request_old_rv);
    free(p->key);
    free(p->ns);
    free(p->name);
    free(p);
}

/* Frees a pool's state once nothing refers to it: no request, no write, no timer, and nothing
 * learnt of a pool that still exists. */
static void rt_pool_maybe_free(rt_pool *p)
{
    if (p->dirty || p->patch || p->verify || p->wake_timer || p->awaiting || p->asked ||
        p->withdraw || p->refused)
        return;
    for (size_t i = 0; i < p->nmq; i++)
        if (p->mqs[i]->waiting || p->mqs[i]->in_flight)
            return;
    if (rt_pool_rec(p) && (p->swap_estimate_ms || p->swap_seen_ms || p->patch_not_before))
        return;
    rt_pool_free(p);
}

/* ---- forwarding ---- */

static void rt_forward_ended(rt_req *q)
{
    rt_router *rt = q->rt;
    q->mq->in_flight--;
    rt->in_flight--;
    rt_mark(q->pool);
}

/* Gives up a forward: the call ends without done; the client gets err (502 or 413) if nothing of
 * the answer went out yet, else a cut reply. */
static void rt_forward_abort(rt_req *q, rt_oai_err err, const char *msg)
{
    rt_podcheck_cancel(q->check);
    q->check = NULL;
    fwd_cancel(q->call);
    q->call = NULL;
    rt_forward_ended(q);
    if (!q->head_sent) {
        rt_answer(q, err, msg, 0);
        return;
    }
    rt_metrics_request(&q->rt->m, q->pool->ns, q->pool->name, q->mq->member, rt_oai_status(err));
    httpd_req_stream_end(q->hr, false);
    rt_req_free(q);
}

#define RT_MAX_HEADERS 128

static void rt_fwd_head(void *ud, int status, const fwd_header *headers, size_t n)
{
    rt_req *q = ud;
    rt_buf_drop(q); /* answered: never put back */
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

static void rt_budget_over(ev_loop *loop, void *ud);

/* A forward that failed before any response byte, with the whole body still here: the request
 * was never taken, so it waits in its queue again (in its place, with what is left of its budget)
 * and the pool is decided again a little later, once the caches have caught up. False when its
 * budget is over. */
static bool rt_rehold(rt_req *q)
{
    rt_router *rt = q->rt;
    rt_pool *p = q->pool;
    uint64_t budget = rt_budget_ms(rt_pool_rec(p)), now = ev_now_ms();
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

typedef struct rt_targets {
    const rt_podcheck *podcheck;
    const pool_isvc *isvc;
    const pool_pod *pods[64];
    size_t n;
} rt_targets;

static int rt_pod_port(const pool_pod *pod, const pool_isvc *isvc)
{
    if (pod->port > 0)
        return pod->port;
    return isvc ? probe_port(isvc->runtime, isvc->endpoint_port, isvc->container_port) : 0;
}

static bool rt_pod_ready(const pool_pod *pod, const pool_isvc *isvc)
{
    return pod->ready && pod->running && !pod->terminating && pod->ip && *pod->ip &&
           rt_pod_port(pod, isvc) > 0;
}

static bool rt_collect_pod(const char *key, const void *rec, void *ud)
{
    (void)key;
    rt_targets *t = ud;
    const pool_pod *pod = rec;
    /* A Pod a read refuted is not ready whatever the cache says: requests wait for another. */
    if (rt_pod_ready(pod, t->isvc) && !rt_podcheck_refuted(t->podcheck, pod) &&
        t->n < sizeof(t->pods) / sizeof(t->pods[0]))
        t->pods[t->n++] = pod;
    return true;
}

static int rt_pod_cmp(const void *a, const void *b)
{
    return strcmp((*(const pool_pod *const *)a)->name, (*(const pool_pod *const *)b)->name);
}

/* The member's ready Pods, in name order (so round-robin is stable across events). */
static void rt_ready_pods(rt_router *rt, const char *ns, const char *member, rt_targets *t)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, member);
    t->isvc = store_get(informer_store(rt->isvcs), key);
    t->podcheck = rt->podcheck;
    t->n = 0;
    store_index_each(informer_store(rt->pods), POOL_INDEX_SERVICE, key, rt_collect_pod, t);
    qsort(t->pods, t->n, sizeof(t->pods[0]), rt_pod_cmp);
}

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

static void rt_forward(rt_req *q)
{
    rt_router *rt = q->rt;
    rt_targets t;
    rt_ready_pods(rt, q->pool->ns, q->mq->member, &t);
    if (t.n == 0) { /* the decision saw one; the cache cannot have changed since, but be sure */
        rt_answer(q, RT_OAI_BAD_GATEWAY, "no ready Pod of the member", 0);
        return;
    }
    char ips[RT_MAX_TARGETS][64];
    fwd_target tg[RT_MAX_TARGETS];
    size_t nt = t.n < RT_MAX_TARGETS ? t.n : RT_MAX_TARGETS;
    for (size_t i = 0; i < nt; i++) {
        const pool_pod *pod = t.pods[(q->mq->rr + i) % t.n];
        if (rt_podref_set(&q->to[i], pod) < 0) {
            rt_answer(q, RT_OAI_BAD_GATEWAY, "out of memory", 0);
            return;
        }
        snprintf(ips[i], sizeof(ips[i]), "%s", pod->ip);
        tg[i] = (fwd_target){ips[i], rt_pod_port(pod, t.isvc)};
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
                      /* rt_decide forwards only while the fence is open */
                      .send_by_ms = q->pool->verified_ms + rt_fence_window_ms(rt)};
    q->state = RQ_FORWARDING;
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

/* ---- the request through the pool ---- */

static void rt_wake(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_pool *p = ud;
    p->wake_timer = 0;
    p->wake_at = 0;
    rt_mark(p);
}

/* Decides the pool again at time t (monotonic ms) at the latest: one timer a pool, moved only
 * earlier, so no reason to decide again is lost to another. */
static void rt_wake_at(rt_pool *p, uint64_t t)
{
    if (p->wake_timer && p->wake_at <= t)
        return;
    if (p->wake_timer)
        ev_timer_cancel(p->rt->loop, p->wake_timer);
    uint64_t now = ev_now_ms();
    p->wake_at = t;
    p->wake_timer = ev_timer_add(p->rt->loop, t > now ? t - now : 0, rt_wake, p);
}

/* The next try after a failure: util_backoff_ms from first up to max, counting *failures; the pool
 * is decided again then. Returns when (monotonic ms). */
static uint64_t rt_backoff(rt_pool *p, unsigned *failures, uint64_t first, uint64_t max)
{
    uint64_t at = ev_now_ms() + util_backoff_ms(first, max, *failures, util_rng_next());
    if (util_backoff_step_ms(first, max, *failures) < max)
        (*failures)++;
    rt_wake_at(p, at);
    return at;
}

static void rt_patch_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_pool *p = ud;
    p->patch = NULL;
    free(p->request_rv);
    p->request_rv = NULL;
    if (err->kind == KUBE_OK || code == 409) {
        /* 409: the pool changed since this router's cache saw it (another replica asked, the
         * operator wrote its status): nothing is asked until the cache has caught up, and then
         * only if it still needs asking. */
        const char *rv = err->kind == KUBE_OK ? pool_answer_version(body) : NULL;
        p->request_rv = rv ? strdup(rv) : NULL;
        p->awaiting = true;
        p->patch_failures = 0;
        p->patch_not_before = 0;
        if (err->kind == KUBE_OK) {
            log_kv(LOG_INFO, "requested member through the pool", "pool", p->key, "member",
                   p->patch_member, NULL);
            free(p->asked);
            p->asked = strdup(p->patch_member);
            p->asked_left = false;
            rt_metrics_activation(&p->rt->m, p->ns, p->name, p->patch_member);
        } else {
            log_kv(LOG_DEBUG, "request through the pool lost a race; waiting for the cache", "pool",
                   p->key, "member", p->patch_member, NULL);
        }
    } else {
        /* Not again before a backoff (RBAC missing would otherwise be a write a turn). */
        p->patch_not_before = rt_backoff(p, &p->patch_failures, 500, 30000);
        char c[8];
        snprintf(c, sizeof(c), "%ld", code);
        log_kv(LOG_ERROR, "request through the pool failed", "pool", p->key, "member",
               p->patch_member, "code", c, "error", err->message ? err->message : "", NULL);
    }
    rt_mark(p);
}

/* Starts a merge patch of p's pool with body (taken): this router's writes, the request and the
 * withdrawal annotations. Not retried by the client: the decision retries. NULL when it cannot
 * start (why in err, or out of memory with err empty). */
static kube_call *rt_pool_patch(rt_pool *p, char *body, kube_done_fn done, kube_error *err)
{
    char *path = kube_path(POOL_GROUP, POOL_VERSION, p->ns, "modelpools", p->name, NULL);
    kube_request req = {.method = KUBE_PATCH_MERGE,
                        .path = path,
                        .body = body,
                        .timeout_ms = RT_PATCH_TIMEOUT_MS,
                        .max_retries = 0};
    kube_call *c = path && body ? kube_call_start(p->rt->client, &req, done, p, err) : NULL;
    free(path);
    free(body);
    return c;
}

static void rt_activate(rt_pool *p, const pool_obj *o, const char *member)
{
    free(p->patch_member);
    p->patch_member = strdup(member);
    free(p->request_old_rv);
    p->request_old_rv = o->rv ? strdup(o->rv) : NULL;
    kube_error err = {0};
    char *body = p->patch_member ? pool_request_set_patch(member, o->rv) : NULL;
    p->patch = rt_pool_patch(p, body, rt_patch_done, &err);
    if (!p->patch) {
        log_kv(LOG_ERROR, "cannot request member through the pool", "pool", p->key, "member",
               member, "error", err.message ? err.message : "out of memory", NULL);
        p->patch_not_before = ev_now_ms() + 1000;
        rt_wake_at(p, p->patch_not_before);
    }
    kube_error_clear(&err);
}

/* ---- withdrawal (#26) ---- */

static void rt_withdraw_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)body;
    rt_pool *p = ud;
    p->withdraw = NULL;
    if (err->kind == KUBE_OK || code != 409) {
        /* Done, or refused for good (rights, a bad answer): the swap then goes on, as it would
         * have without the withdrawal. */
        log_kv(err->kind == KUBE_OK ? LOG_INFO : LOG_ERROR,
               err->kind == KUBE_OK ? "withdrew the request: its clients left"
                                    : "could not withdraw the request",
               "pool", p->key, "member", p->asked, "error", err->message ? err->message : "", NULL);
        free(p->asked);
        p->asked = NULL;
        free(p->withdraw_rv);
        p->withdraw_rv = NULL;
    } else
        log_kv(LOG_DEBUG, "withdrawal lost a race; waiting for the cache", "pool", p->key, NULL);
    /* 409: the pool moved since this cache saw it; decided again from the cache's next view. */
    rt_mark(p);
}

/* This router's request, once no client waits for its member here any more (one of them left):
 * withdrawn, with the pool's resourceVersion as the precondition, so only the request or swap
 * this cache shows as this router's is withdrawn. Untaken: the annotation is removed; taken (its
 * swap is pending): the withdraw annotation names the member and the operator cancels the swap if
 * it has unloaded nothing. Forgotten once the pool shows neither. */
static void rt_withdraw_check(rt_pool *p, const pool_obj *o, const rt_mq *mq)
{
    if (!p->asked || p->withdraw || p->patch || p->awaiting)
        return;
    bool untaken = rt_str_eq(o->requested, p->asked);
    if (!untaken && !rt_str_eq(o->status.pending_member, p->asked)) {
        free(p->asked);
        p->asked = NULL;
        return;
    }
    if (!p->asked_left || (mq && (mq->waiting || mq->in_flight)) ||
        rt_str_eq(o->withdrawn, p->asked) || rt_str_eq(p->withdraw_rv, o->rv))
        return;
    free(p->withdraw_rv);
    p->withdraw_rv = o->rv ? strdup(o->rv) : NULL;
    kube_error err = {0};
    char *body = p->withdraw_rv ? pool_withdraw_patch(p->asked, untaken, o->rv) : NULL;
    p->withdraw = rt_pool_patch(p, body, rt_withdraw_done, &err);
    kube_error_clear(&err);
}

/* ---- the drain fence ---- */

/* A request may go to member now: a read sent less than half the fence ago showed it resident. */
static bool rt_fence_open(const rt_pool *p, const char *member, uint64_t now)
{
    return rt_str_eq(p->verified_member, member) &&
           now - p->verified_ms < rt_fence_window_ms(p->rt);
}

static void rt_verify_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_pool *p = ud;
    p->verify = NULL;
    int derr = 0;
    pool_obj *o = err->kind == KUBE_OK ? pool_obj_decode(body, &derr) : NULL;
    const char *res = o ? o->status.resident_member : NULL;
    const char *pend = o ? o->status.pending_member : NULL;
    bool decoded = o != NULL, swapping = pend && *pend, settled = res && *res && !swapping;
    const pool_obj *cached = rt_pool_rec(p);
    bool agrees = settled && cached && rt_str_eq(cached->status.resident_member, res);
    rt_metrics_fence_read(&p->rt->m, p->ns, p->name,
                          !o       ? "failed"
                          : agrees ? "confirmed"
                                   : "not_confirmed");
    char why[256];
    if (rt_hold_fence_refused(code, p->ns, why, sizeof(why))) {
        if (!p->refused) /* once, not once a read: it is tried again every few seconds */
            log_kv(LOG_ERROR,
                   "the drain fence's read of the pool was refused; its requests get 503", "pool",
                   p->key, "reason", why, "error", err->message ? err->message : "", NULL);
        if (!p->refused || strcmp(p->refused, why) != 0) {
            free(p->refused);
            p->refused = strdup(why);
        }
    } else if (o && p->refused) {
        log_kv(LOG_INFO, "the drain fence's read of the pool is allowed again", "pool", p->key,
               NULL);
        free(p->refused);
        p->refused = NULL;
    }
    if (o) { /* a failed read leaves the last good one to its age */
        free(p->verified_member);
        p->verified_member = settled ? strdup(res) : NULL;
        p->verified_ms = p->verify_sent_ms;
        free(o);
    }
    if (agrees && p->verified_member) {
        p->verify_failures = 0;
        p->verify_not_before = 0;
    } else {
        /* Failed, or the pool is not what this cache says: asked again after a backoff (a
         * cache catching up marks the pool anyway). */
        p->verify_not_before =
            rt_backoff(p, &p->verify_failures, RT_VERIFY_BACKOFF_MS, RT_VERIFY_BACKOFF_MAX_MS);
        char c[8];
        snprintf(c, sizeof(c), "%ld", code);
        log_kv(LOG_DEBUG,
               "the pool's read for the drain fence does not confirm this cache's resident; "
               "its requests wait",
               "pool", p->key, "code", c, "error",
               err->kind != KUBE_OK ? (err->message ? err->message : "")
               : !decoded           ? "an answer that is not a ModelPool"
               : swapping           ? "swapping"
               : settled            ? "another resident"
                                    : "no resident",
               NULL);
    }
    rt_mark(p);
}

/* Reads the pool from the API server, unless a read is in flight or waits out its backoff. */
static void rt_verify(rt_pool *p, uint64_t now)
{
    if (p->verify)
        return;
    if (now < p->verify_not_before) {
        /* Asked again: the wake set when the backoff began may have been folded into an earlier
         * one (one timer a pool), which has fired by now; the requests waiting for this read
         * would otherwise wait for another event, or their budget. */
        rt_wake_at(p, p->verify_not_before);
        return;
    }
    char *path = kube_path(POOL_GROUP, POOL_VERSION, p->ns, "modelpools", p->name, NULL);
    /* An answer later than the window is of no use; the client does not retry (the decision
     * does, with its backoff). */
    kube_request req = {.method = KUBE_GET,
                        .path = path,
                        .timeout_ms =
                            (long)(rt_fence_window_ms(p->rt) ? rt_fence_window_ms(p->rt) : 1),
                        .max_retries = 0,
                        .scratch = true};
    kube_error err = {0};
    p->verify_sent_ms = now;
    if (path)
        p->verify = kube_call_start(p->rt->client, &req, rt_verify_done, p, &err);
    if (!p->verify) {
        p->verify_not_before = now + RT_VERIFY_BACKOFF_MS;
        rt_wake_at(p, p->verify_not_before);
    }
    kube_error_clear(&err);
    free(path);
}

/* ---- the decision ---- */

static void rt_reject_all(rt_mq *m, rt_oai_err err, const char *msg, const char *reason)
{
    while (m->head) {
        rt_req *q = m->head;
        rt_mq_unlink(q);
        if (reason)
            rt_metrics_unavailable(&q->rt->m, q->pool->ns, q->pool->name, reason);
        rt_answer(q, err, msg, 0);
    }
}

static size_t rt_count_ready(rt_router *rt, const char *ns, const char *member)
{
    rt_targets t;
    rt_ready_pods(rt, ns, member, &t);
    return t.n;
}

/* Learns how long this pool's swaps take, from its status as seen here. */
static void rt_swap_clock(rt_pool *p, const pool_obj *o)
{
    bool swapping = o && o->status.pending_member && *o->status.pending_member;
    uint64_t now = ev_now_ms();
    if (swapping && !p->swap_seen_ms)
        p->swap_seen_ms = now;
    else if (!swapping && p->swap_seen_ms) {
        uint64_t d = now - p->swap_seen_ms;
        p->swap_estimate_ms = p->swap_estimate_ms ? (p->swap_estimate_ms + d) / 2 : d;
        p->swap_seen_ms = 0;
    }
}

static void rt_decide(rt_pool *p)
{
    rt_router *rt = p->rt;
    const pool_obj *o = rt_pool_rec(p);
    if (!o) { /* deleted: its requests are answered, its series and its wait forgotten */
        for (size_t i = 0; i < p->nmq; i++)
            rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the model's pool was deleted", NULL);
        rt_metrics_forget_pool(rt->o.metrics, p->ns, p->name);
        free(p->refused);
        p->refused = NULL;
        free(p->request_rv);
        p->request_rv = NULL;
        free(p->asked);
        p->asked = NULL;
        p->awaiting = false;
        p->patch_not_before = 0;
        return;
    }
    rt_swap_clock(p, o);
    if (p->refused) {
        /* No request can go without the fence's read, and no retry mends a missing right: its
         * requests are answered now, not after swapBudget, and nothing is asked of the pool. The
         * read is tried again after its backoff, requests or not, to see the right granted. */
        for (size_t i = 0; i < p->nmq; i++)
            rt_reject_all(p->mqs[i], RT_OAI_POOL_UNAVAILABLE, p->refused, "fence_refused");
        rt_verify(p, ev_now_ms());
        return;
    }
    if (p->awaiting && expect_rv_shows(o->rv, p->request_old_rv, p->request_rv)) {
        free(p->request_rv);
        p->request_rv = NULL;
        p->awaiting = false;
    }
    /* Queues of names no longer in the pool: their model is gone. */
    for (size_t i = 0; i < p->nmq; i++) {
        bool listed = false;
        for (size_t k = 0; k < o->n_members; k++)
            listed |= rt_str_eq(o->members[k], p->mqs[i]->member);
        if (!listed)
            rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the member is no longer in its pool",
                          NULL);
    }

    size_t n = o->n_members;
    rt_hold_member *hm = calloc(n ? n : 1, sizeof(*hm));
    rt_hold_verdict *v = calloc(n ? n : 1, sizeof(*v));
    rt_hold_reject *why = calloc(n ? n : 1, sizeof(*why));
    rt_mq **mq = calloc(n ? n : 1, sizeof(*mq));
    if (!hm || !v || !why || !mq) {
        free(hm), free(v), free(why), free(mq);
        rt_mark(p); /* try again on the next turn */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = o->members[i] ? o->members[i] : "";
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", p->ns, name);
        const pool_isvc *isvc = store_get(informer_store(rt->isvcs), key);
        for (size_t k = 0; k < p->nmq; k++)
            if (strcmp(p->mqs[k]->member, name) == 0)
                mq[i] = p->mqs[k];
        hm[i] = (rt_hold_member){
            .name = name,
            .exists = isvc != NULL,
            .absence_unsure =
                !isvc && !expect_rv_at_least(informer_resource_version(rt->isvcs), o->rv),
            .phase = isvc ? isvc->phase : NULL,
            .up = isvc && pool_isvc_replicas(isvc) >= 1,
            .ready_pods = isvc ? rt_count_ready(rt, p->ns, name) : 0,
            .waiting = mq[i] ? mq[i]->waiting : 0,
            .first_wait_ms = mq[i] && mq[i]->head ? mq[i]->head->arrived_ms : 0,
            .in_flight = mq[i] ? mq[i]->in_flight : 0,
        };
    }
    char dropped[768];
    rt_hold_pool hp = {.phase = o->status.phase,
                       .dropped = rt_pool_dropped(o, dropped, sizeof(dropped)),
                       .resident = o->status.resident_member,
                       .pending = o->status.pending_member,
                       .requested = o->requested,
                       .request_unseen =
                           p->patch != NULL || p->awaiting || ev_now_ms() < p->patch_not_before,
                       .members = hm,
                       .n_members = n,
                       .grace_ms = (uint64_t)rt->o.resident_grace_ms,
                       .now_ms = ev_now_ms()};
    rt_hold_decision d;
    rt_hold_decide(&hp, v, why, &d);
    uint64_t wake = 0; /* the first request put back that waits for its retry */

    char reason[768];
    for (size_t i = 0; i < n; i++) {
        if (!mq[i])
            continue;
        if (v[i] == RT_HOLD_REJECT) {
            if (why[i] == RT_REJECT_DEGRADED)
                rt_pool_reason(o, reason, sizeof(reason));
            else if (why[i] == RT_REJECT_DROPPED)
                snprintf(reason, sizeof(reason), "%s", dropped);
            else
                snprintf(reason, sizeof(reason), "member %s of pool %s is %s", hm[i].name, p->key,
                         !hm[i].exists ? "missing" : hm[i].phase);
            rt_reject_all(mq[i], RT_OAI_POOL_UNAVAILABLE, reason,
                          why[i] == RT_REJECT_DEGRADED ? "degraded" : "member_unavailable");
        } else if (v[i] == RT_HOLD_SERVE) {
            /* The drain fence: none goes without a young read; one is asked for ahead of time
             * while requests flow, so a steady stream does not stop for it. */
            if (mq[i]->head && !rt_fence_open(p, hm[i].name, hp.now_ms)) {
                rt_verify(p, hp.now_ms);
                continue;
            }
            if (mq[i]->head && hp.now_ms - p->verified_ms >= rt_fence_window_ms(rt) / 2)
                rt_verify(p, hp.now_ms);
            while (mq[i]->head &&
                   (d.serve_before_ms == 0 || mq[i]->head->arrived_ms < d.serve_before_ms)) {
                rt_req *q = mq[i]->head;
                if (q->retry_at > hp.now_ms) { /* put back: its turn comes a little later */
                    if (!wake || q->retry_at < wake)
                        wake = q->retry_at;
                    break;
                }
                rt_mq_unlink(q);
                if (q->budget_timer) {
                    ev_timer_cancel(rt->loop, q->budget_timer);
                    q->budget_timer = 0;
                }
                rt_forward(q);
            }
        }
    }
    if (d.activate >= 0 && !rt->stopping) /* a stopping router asks nothing more */
        rt_activate(p, o, hm[d.activate].name);
    const rt_mq *asked_mq = NULL;
    for (size_t i = 0; p->asked && i < p->nmq; i++)
        if (strcmp(p->mqs[i]->member, p->asked) == 0)
            asked_mq = p->mqs[i];
    rt_withdraw_check(p, o, asked_mq);
    if (d.wake_at_ms)
        rt_wake_at(p, d.wake_at_ms);
    if (wake)
        rt_wake_at(p, wake);
    if (p->patch_not_before > hp.now_ms)
        rt_wake_at(p, p->patch_not_before);
    free(hm), free(v), free(why), free(mq);
}

static void rt_tick(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_router *rt = ud;
    rt->tick = 0;
    /* Decisions may mark pools again (a forward ending): those wait for the next tick. */
    rt_pool *list = rt->dirty;
    rt->dirty = NULL;
    while (list) {
        rt_pool *p = list;
        list = p->next_dirty;
        p->dirty = false;
        p->next_dirty = NULL;
        rt_decide(p);
        rt_pool_maybe_free(p);
    }
}

static void rt_mark(rt_pool *p)
{
    rt_router *rt = p->rt;
    if (p->dirty)
        return;
    p->dirty = true;
    p->next_dirty = rt->dirty;
    rt->dirty = p;
    if (!rt->tick)
        rt->tick = ev_timer_add(rt->loop, 0, rt_tick, rt);
}

/* ---- requests ---- */

static void rt_budget_over(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_req *q = ud;
    q->budget_timer = 0;
    rt_pool *p = q->pool;
    const pool_obj *o = rt_pool_rec(p);
    uint64_t budget = rt_budget_ms(o);
    rt_mq_unlink(q);
    uint32_t retry =
        rt_hold_retry_after_s(p->swap_estimate_ms, p->swap_seen_ms, ev_now_ms(), budget);
    /* Resident in this cache all along: what it lacked was the drain fence's read. */
    bool unconfirmed = o && rt_str_eq(o->status.resident_member, q->mq->member) &&
                       !(o->status.pending_member && *o->status.pending_member) &&
                       rt_count_ready(p->rt, p->ns, q->mq->member) > 0;
    char msg[512];
    if (unconfirmed)
        snprintf(msg, sizeof(msg),
                 "model %s (member %s of pool %s) could not be confirmed resident with the API "
                 "server within the pool's swapBudget (%llu ms); retry in %u s",
                 q->scan.name, q->mq->member, p->key, (unsigned long long)budget, retry);
    else
        snprintf(msg, sizeof(msg),
                 "model %s (member %s of pool %s) is still loading: not resident within the "
                 "pool's swapBudget (%llu ms); retry in %u s",
                 q->scan.name, q->mq->member, p->key, (unsigned long long)budget, retry);
    rt_metrics_unavailable(&q->rt->m, p->ns, p->name, unconfirmed ? "unconfirmed" : "swap_budget");
    rt_answer(q, RT_OAI_MODEL_LOADING, msg, retry);
    rt_mark(p);
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
    const pool_obj *o = rt_pool_rec(p);
    q->pool = p;
    q->mq = m;
    q->state = RQ_HELD;
    q->arrived_ms = ev_now_ms();
    if (o && (m->waiting > 0 || rt_str_eq(o->status.pending_member, m->member) ||
              rt_str_eq(o->requested, m->member)))
        rt_metrics_coalesced(&rt->m, p->ns, p->name, m->member);
    rt_mq_insert(q);
    q->budget_timer = ev_timer_add(rt->loop, rt_budget_ms(o), rt_budget_over, q);
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
        if (fwd_body(q->call, data, len, end) == 1 && !end) {
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
    /* Hold the rest of the body until the request goes out; a body all here is not paused, so
     * its end is read and a client that leaves while held is seen at once (#26: its request is
     * withdrawn). */
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
        rt_podcheck_cancel(q->check);
        q->check = NULL;
        fwd_cancel(q->call);
        q->call = NULL;
        rt_forward_ended(q);
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

static void rt_request(void *ud, httpd_req *hr)
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
    int64_t cl = -1;
    const char *cls = httpd_req_header(hr, "Content-Length");
    if (cls) {
        char *end;
        errno = 0;
        long long v = strtoll(cls, &end, 10);
        if (errno || end == cls || *end || v < 0) {
            rt_reply_error(hr, RT_OAI_BAD_REQUEST, "bad Content-Length", 0);
            return;
        }
        cl = v;
        /* What the budget can ever hold for one large body is its limit too. */
        long long most = rt->o.max_body_bytes, room = rt->o.body_budget_bytes;
        room -= room / 8;
        if (v > most || v > room) {
            char msg[128];
            snprintf(msg, sizeof(msg), "request body larger than %lld bytes",
                     most < room ? most : room);
            rt_reply_error(hr, RT_OAI_TOO_LARGE, msg, 0);
            return;
        }
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
        char msg[192];
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

/* ---- caches ---- */

/* The state of pool ns/name, if this router keeps one. */
static rt_pool *rt_pool_find_named(rt_router *rt, const char *ns, const char *name)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
    return rt_pool_find(rt, key);
}

static void rt_mark_key(rt_router *rt, const char *ns, const char *name)
{
    rt_pool *p = rt_pool_find_named(rt, ns, name);
    if (p)
        rt_mark(p);
}

typedef struct rt_mark_ctx {
    rt_router *rt;
} rt_mark_ctx;

static bool rt_mark_pool_rec(const char *key, const void *rec, void *ud)
{
    (void)key;
    rt_mark_ctx *c = ud;
    const pool_obj *o = rec;
    rt_mark_key(c->rt, o->ns, o->name);
    return true;
}

/* Marks the pools listing member ns/name. */
static void rt_mark_member(rt_router *rt, const char *ns, const char *name)
{
    if (!name)
        return;
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
    rt_mark_ctx c = {rt};
    store_index_each(informer_store(rt->pools), POOL_INDEX_MEMBER, key, rt_mark_pool_rec, &c);
}

static void rt_pool_changed(void *ud, const void *old_rec, const void *rec)
{
    rt_router *rt = ud;
    const pool_obj *o = rec ? rec : old_rec;
    rt_routes_invalidate(rt->routes);
    rt_pool *p = rt_pool_find_named(rt, o->ns, o->name);
    if (!p)
        return;
    /* The cache moved: a fence read that disagreed with it may agree now, so no backoff. */
    p->verify_failures = 0;
    p->verify_not_before = 0;
    rt_mark(p);
}

static void rt_pool_added(void *ud, const void *rec)
{
    rt_pool_changed(ud, NULL, rec);
}

static void rt_pool_deleted(void *ud, const void *rec)
{
    rt_router *rt = ud;
    const pool_obj *o = rec;
    rt_routes_invalidate(rt->routes);
    rt_mark_key(rt, o->ns, o->name);
    rt_metrics_forget_pool(rt->o.metrics, o->ns ? o->ns : "", o->name);
}

static void rt_isvc_changed(void *ud, const void *old_rec, const void *rec)
{
    rt_router *rt = ud;
    const pool_isvc *a = old_rec, *b = rec ? rec : old_rec;
    if (!a || !rec || !rt_same(a->served_model, b->served_model) ||
        !rt_same(a->aliases, b->aliases))
        rt_routes_invalidate(rt->routes);
    rt_mark_member(rt, b->ns, b->name);
}

static void rt_isvc_added(void *ud, const void *rec)
{
    rt_isvc_changed(ud, NULL, rec);
}

static void rt_isvc_deleted(void *ud, const void *rec)
{
    rt_isvc_changed(ud, rec, NULL);
}

static void rt_pod_changed(void *ud, const void *old_rec, const void *rec)
{
    rt_router *rt = ud;
    const pool_pod *p = rec ? rec : old_rec;
    rt_mark_member(rt, p->ns, p->member);
}

static void rt_pod_added(void *ud, const void *rec)
{
    rt_pod_changed(ud, NULL, rec);
}

static void rt_pod_deleted(void *ud, const void *rec)
{
    rt_pod_changed(ud, rec, NULL);
}

static void rt_cache_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "watch failed, retrying", "error", err->message ? err->message : "", NULL);
}

static informer *rt_informer(rt_router *rt, const char *group, const char *resource,
                             const char *selector, const store_codec *codec,
                             const informer_handlers *h)
{
    informer_config cfg = {.group = group,
                           .version = *group ? POOL_VERSION : "v1",
                           .resource = resource,
                           .namespace_ = rt->ns_copy,
                           .label_selector = selector,
                           .codec = codec};
    return informer_new(rt->loop, rt->client, &cfg, h);
}

rt_router *rt_router_new(ev_loop *loop, kube_client *client, const rt_router_opts *o, char *err,
                         size_t errlen)
{
    rt_router *rt = calloc(1, sizeof(*rt));
    if (!rt)
        goto oom;
    rt->loop = loop;
    rt->client = client;
    rt->o = *o;
    if (rt->o.drain_fence_ms <= 0)
        rt->o.drain_fence_ms = 2000;
    if (rt->o.body_budget_bytes <= 0)
        rt->o.body_budget_bytes = 128LL << 20;
    if (rt->o.body_idle_ms <= 0)
        rt->o.body_idle_ms = 30000;
    if (strmap_init(&rt->pool_map) < 0)
        goto oom;
    if (!o->home_namespace || !*o->home_namespace) {
        snprintf(err, errlen, "no home namespace for unqualified model names");
        rt_router_free(rt);
        return NULL;
    }
    if (!(rt->home_copy = strdup(o->home_namespace)))
        goto oom;
    rt->o.home_namespace = rt->home_copy;
    if ((o->namespace_ && !(rt->ns_copy = strdup(o->namespace_))) ||
        (o->label_selector && !(rt->selector_copy = strdup(o->label_selector))))
        goto oom;
    informer_handlers hp = {.on_add = rt_pool_added,
                            .on_update = rt_pool_changed,
                            .on_delete = rt_pool_deleted,
                            .on_error = rt_cache_error,
                            .ud = rt};
    informer_handlers hi = {.on_add = rt_isvc_added,
                            .on_update = rt_isvc_changed,
                            .on_delete = rt_isvc_deleted,
                            .on_error = rt_cache_error,
                            .ud = rt};
    informer_handlers hd = {.on_add = rt_pod_added,
                            .on_update = rt_pod_changed,
                            .on_delete = rt_pod_deleted,
                            .on_error = rt_cache_error,
                            .ud = rt};
    rt->pools = rt_informer(rt, POOL_GROUP, "modelpools", rt->selector_copy, &pool_obj_codec, &hp);
    rt->isvcs = rt_informer(rt, POOL_GROUP, "inferenceservices", NULL, &pool_isvc_codec, &hi);
    rt->pods = rt_informer(rt, "", "pods", POOL_SERVICE_LABEL, &pool_pod_codec, &hd);
    if (!rt->pools || !rt->isvcs || !rt->pods ||
        store_add_index(informer_store(rt->pools), POOL_INDEX_MEMBER, pool_index_pool_members,
                        NULL) < 0 ||
        store_add_index(informer_store(rt->pods), POOL_INDEX_SERVICE, pool_index_pod_service,
                        NULL) < 0)
        goto oom;
    if (!(rt->routes =
              rt_routes_new(informer_store(rt->pools), informer_store(rt->isvcs), rt->home_copy)) ||
        !(rt->fwd = fwd_new(loop, &(fwd_config){.idle_timeout_ms = o->upstream_timeout_ms})) ||
        !(rt->podcheck =
              rt_podcheck_new(rt->client, informer_store(rt->pods), RT_PODCHECK_TIMEOUT_MS)) ||
        rt_metrics_init(&rt->m, o->metrics) < 0)
        goto oom;
    rt_metrics_buffered(&rt->m, 0);
    return rt;
oom:
    snprintf(err, errlen, "out of memory");
    rt_router_free(rt);
    return NULL;
}

int rt_router_start(rt_router *rt, char *err, size_t errlen)
{
    httpd_config hc = {.bind = rt->o.bind,
                       .request = rt_request,
                       .ud = rt,
                       .max_connections = rt->o.max_connections,
                       .max_per_client = rt->o.max_per_client,
                       .head_timeout_ms = (unsigned)rt->o.header_timeout_ms,
                       .idle_timeout_s = 300};
    if (!(rt->front = httpd_start_config(rt->loop, &hc, err, errlen)))
        return -1;
    if (informer_start(rt->pools) < 0 || informer_start(rt->isvcs) < 0 ||
        informer_start(rt->pods) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int rt_router_port(const rt_router *rt)
{
    return rt->front ? httpd_port(rt->front) : 0;
}

const httpd *rt_router_front(const rt_router *rt)
{
    return rt->front;
}

bool rt_router_synced(const rt_router *rt)
{
    return informer_synced(rt->pools) && informer_synced(rt->isvcs) && informer_synced(rt->pods);
}

bool rt_router_refused(const rt_router *rt, char *buf, size_t len)
{
    const char *first = NULL;
    size_t n = 0;
    for (strmap_node *x = strmap_first(&rt->pool_map); x; x = strmap_next(&rt->pool_map, x)) {
        const rt_pool *p = STRMAP_OWNER(x, rt_pool, node);
        if (p->refused && !n++)
            first = p->refused;
    }
    if (n == 1)
        snprintf(buf, len, "%s", first);
    else if (n > 1)
        snprintf(buf, len, "%s (and %zu more pools refused)", first, n - 1);
    return n > 0;
}

void rt_router_waiting(const rt_router *rt, char *buf, size_t len)
{
    const informer *v[] = {rt->pools, rt->isvcs, rt->pods};
    informer_waiting(v, 3, buf, len);
}

static void rt_stop_check(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_router *rt = ud;
    rt->stop_timer = 0;
    /* Done once no forward runs and every answer given has been sent. */
    if ((rt->in_flight == 0 && httpd_pending(rt->front) == 0) || ev_now_ms() >= rt->stop_deadline) {
        if (rt->stopped)
            rt->stopped(rt->stopped_ud);
        return;
    }
    rt->stop_timer = ev_timer_add(rt->loop, 50, rt_stop_check, rt);
}

void rt_router_shutdown(rt_router *rt, uint64_t grace_ms, void (*done)(void *ud), void *ud)
{
    rt->stopping = true;
    rt->stopped = done;
    rt->stopped_ud = ud;
    rt->stop_deadline = ev_now_ms() + grace_ms;
    for (strmap_node *n = strmap_first(&rt->pool_map); n; n = strmap_next(&rt->pool_map, n)) {
        rt_pool *p = STRMAP_OWNER(n, rt_pool, node);
        for (size_t i = 0; i < p->nmq; i++)
            while (p->mqs[i]->head) {
                rt_req *q = p->mqs[i]->head;
                rt_mq_unlink(q);
                rt_metrics_unavailable(&rt->m, p->ns, p->name, "shutdown");
                rt_answer(q, RT_OAI_POOL_UNAVAILABLE,
                          "the router is shutting down; another replica can take the request", 1);
            }
    }
    rt->stop_timer = ev_timer_add(rt->loop, 0, rt_stop_check, rt);
}

void rt_router_free(rt_router *rt)
{
    if (!rt)
        return;
    /* Connections go first: httpd_stop ends every request still here (rt_closed cancels its
     * forward), then the forwarder (fwd_free calls nothing) and the pools. */
    httpd_stop(rt->front);
    fwd_free(rt->fwd);
    rt_podcheck_free(rt->podcheck);
    strmap_node *n = strmap_first(&rt->pool_map);
    while (n) {
        rt_pool *p = STRMAP_OWNER(n, rt_pool, node);
        n = strmap_next(&rt->pool_map, n);
        rt_pool_free(p);
    }
    if (rt->tick)
        ev_timer_cancel(rt->loop, rt->tick);
    if (rt->stop_timer)
        ev_timer_cancel(rt->loop, rt->stop_timer);
    rt_routes_free(rt->routes);
    informer_free(rt->pools);
    informer_free(rt->isvcs);
    informer_free(rt->pods);
    strmap_fini(&rt->pool_map);
    free(rt->ns_copy);
    free(rt->selector_copy);
    free(rt->home_copy);
    free(rt);
}

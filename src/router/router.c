/* router: modelpool-router's wiring. Three informers (ModelPools, their member
 * InferenceServices, the members' Pods) mark the pools an event concerns; one zero-delay timer
 * decides for every marked pool, so a burst of events costs one pass. A decision reads the pool
 * from the caches (view.c) and the drain fence's last read (fence.c), asks rt_hold (hold.c) what
 * each member's queue gets, and applies the answer: forwards (relay.c), 503s, a request or a
 * withdrawal written to the pool (activate.c), a wake-up. Requests come in through intake.c and
 * wait in their pool's queue for their member (one queue a member, in arrival order) until the
 * cache changes, a grace ends or their swapBudget runs out. Everything it decides comes from the
 * watch caches, so several replicas agree without talking to each other. */
#include "router/router.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/log.h"
#include "informer/expect.h"
#include "pool/plan.h"
#include "router/hold.h"
#include "router/view.h"
#include "rt_state.h"
#include "util/backoff.h"
#include "util/rng.h"

/* ---- small helpers ---- */

bool rt_str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Equal strings, or both absent. */
static bool rt_same(const char *a, const char *b)
{
    return (!a && !b) || rt_str_eq(a, b);
}

const pool_obj *rt_pool_rec(const rt_pool *p)
{
    return store_get(informer_store(p->rt->pools), p->key);
}

/* ---- pools and their member queues ---- */

static rt_pool *rt_pool_find(rt_router *rt, const char *key)
{
    strmap_node *n = strmap_get(&rt->pool_map, key);
    return n ? STRMAP_OWNER(n, rt_pool, node) : NULL;
}

rt_pool *rt_pool_get(rt_router *rt, const char *ns, const char *name)
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

rt_mq *rt_mq_get(rt_pool *p, const char *member)
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

void rt_mq_insert(rt_req *q)
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

void rt_mq_unlink(rt_req *q)
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

/* ---- when to decide again ---- */

static void rt_wake(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_pool *p = ud;
    p->wake_timer = 0;
    p->wake_at = 0;
    rt_mark(p);
}

/* One timer a pool, moved only earlier, so no reason to decide again is lost to another. */
void rt_wake_at(rt_pool *p, uint64_t t)
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
uint64_t rt_backoff(rt_pool *p, unsigned *failures, uint64_t first, uint64_t max)
{
    uint64_t at = ev_now_ms() + util_backoff_ms(first, max, *failures, util_rng_next());
    if (util_backoff_step_ms(first, max, *failures) < max)
        (*failures)++;
    rt_wake_at(p, at);
    return at;
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

/* The pool left the cache (deleted): its requests are answered, its series and its wait
 * forgotten. */
static void rt_pool_gone(rt_pool *p)
{
    for (size_t i = 0; i < p->nmq; i++)
        rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the model's pool was deleted", NULL);
    rt_metrics_forget_pool(p->rt->o.metrics, p->ns, p->name);
    free(p->refused);
    p->refused = NULL;
    free(p->request_rv);
    p->request_rv = NULL;
    free(p->asked);
    p->asked = NULL;
    p->awaiting = false;
    p->patch_not_before = 0;
}

/* Queues of names no longer in the pool: their model is gone (while the fence's read is refused,
 * every request gets that refusal). */
static void rt_reject_unlisted(rt_pool *p, const pool_obj *o)
{
    for (size_t i = 0; i < p->nmq; i++) {
        bool listed = false;
        for (size_t k = 0; k < o->n_members; k++)
            listed |= rt_str_eq(o->members[k], p->mqs[i]->member);
        if (listed)
            continue;
        if (p->refused)
            rt_reject_all(p->mqs[i], RT_OAI_POOL_UNAVAILABLE, p->refused, "fence_refused");
        else
            rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the member is no longer in its pool",
                          NULL);
    }
}

/* One decision of a pool: its members as the caches show them with this router's queues, and
 * what rt_hold made of them. */
typedef struct rt_pass {
    size_t n;
    rt_hold_member *hm;
    rt_hold_verdict *v;
    rt_hold_reject *why;
    rt_mq **mq;
    char dropped[768];
    rt_hold_decision d;
} rt_pass;

static void rt_pass_free(rt_pass *x)
{
    free(x->hm), free(x->v), free(x->why), free(x->mq);
}

/* Reads the pool and decides. -ENOMEM. */
static int rt_pass_run(rt_pass *x, rt_pool *p, const pool_obj *o, uint64_t now)
{
    rt_router *rt = p->rt;
    size_t n = x->n = o->n_members;
    x->hm = calloc(n ? n : 1, sizeof(*x->hm));
    x->v = calloc(n ? n : 1, sizeof(*x->v));
    x->why = calloc(n ? n : 1, sizeof(*x->why));
    x->mq = calloc(n ? n : 1, sizeof(*x->mq));
    if (!x->hm || !x->v || !x->why || !x->mq)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *name = o->members[i] ? o->members[i] : "";
        x->hm[i] = rt_view_member(informer_store(rt->isvcs), informer_store(rt->pods),
                                  informer_resource_version(rt->isvcs), o, name);
        for (size_t k = 0; k < p->nmq; k++)
            if (strcmp(p->mqs[k]->member, name) == 0)
                x->mq[i] = p->mqs[k];
        if (x->mq[i]) {
            x->hm[i].waiting = x->mq[i]->waiting;
            x->hm[i].first_wait_ms = x->mq[i]->head ? x->mq[i]->head->arrived_ms : 0;
            x->hm[i].in_flight = x->mq[i]->in_flight;
        }
    }
    rt_hold_pool hp = {.phase = o->status.phase,
                       .dropped = rt_view_dropped(o, x->dropped, sizeof(x->dropped)),
                       .resident = o->status.resident_member,
                       .pending = o->status.pending_member,
                       .requested = o->requested,
                       .awaiting_probe = plan_awaits_probe(&o->status),
                       .request_unseen =
                           p->patch != NULL || p->awaiting || now < p->patch_not_before,
                       .members = x->hm,
                       .n_members = n,
                       .grace_ms = (uint64_t)rt->o.resident_grace_ms,
                       .now_ms = now,
                       .fence_member = p->verified_member,
                       .fence_read_ms = p->verified_ms,
                       .fence_window_ms = rt_fence_window_ms(rt),
                       .fence_refused = p->refused != NULL};
    rt_hold_decide(&hp, x->v, x->why, &x->d);
    return 0;
}

/* Forwards m's requests that arrived before `before` (0: all). Returns when the first one put
 * back after a refused forward may go again, if it stopped there (0 otherwise). */
static uint64_t rt_serve(rt_mq *m, uint64_t before, uint64_t send_by, uint64_t now)
{
    while (m->head && (before == 0 || m->head->arrived_ms < before)) {
        rt_req *q = m->head;
        if (q->retry_at > now) /* put back: its turn comes a little later */
            return q->retry_at;
        rt_mq_unlink(q);
        if (q->budget_timer) {
            ev_timer_cancel(q->rt->loop, q->budget_timer);
            q->budget_timer = 0;
        }
        rt_forward(q, send_by);
    }
    return 0;
}

/* Answers member i's held requests 503 with why rt_hold refused them. */
static void rt_reject_member(rt_pool *p, const pool_obj *o, const rt_pass *x, size_t i)
{
    char msg[768];
    rt_hold_reject why = x->why[i];
    if (why == RT_REJECT_FENCE_REFUSED)
        snprintf(msg, sizeof(msg), "%s", p->refused);
    else
        rt_view_reject_message(o, &x->hm[i], why, x->dropped, msg, sizeof(msg));
    rt_reject_all(x->mq[i], RT_OAI_POOL_UNAVAILABLE, msg,
                  why == RT_REJECT_FENCE_REFUSED ? "fence_refused"
                  : why == RT_REJECT_DEGRADED    ? "degraded"
                                                 : "member_unavailable");
}

void rt_decide(rt_pool *p)
{
    rt_router *rt = p->rt;
    const pool_obj *o = rt_pool_rec(p);
    if (!o) {
        rt_pool_gone(p);
        return;
    }
    rt_swap_clock(p, o);
    if (p->awaiting && expect_rv_shows(o->rv, p->request_old_rv, p->request_rv)) {
        free(p->request_rv);
        p->request_rv = NULL;
        p->awaiting = false;
    }
    rt_reject_unlisted(p, o);
    uint64_t now = ev_now_ms();
    rt_pass x = {0};
    if (rt_pass_run(&x, p, o, now) < 0) {
        rt_pass_free(&x);
        rt_mark(p); /* try again on the next turn */
        return;
    }
    uint64_t wake = 0; /* the first request put back that waits for its retry */
    for (size_t i = 0; i < x.n; i++) {
        if (!x.mq[i])
            continue;
        if (x.v[i] == RT_HOLD_REJECT)
            rt_reject_member(p, o, &x, i);
        else if (x.v[i] == RT_HOLD_SERVE) {
            uint64_t at = rt_serve(x.mq[i], x.d.serve_before_ms, x.d.send_by_ms, now);
            if (at && (!wake || at < wake))
                wake = at;
        }
    }
    if (x.d.fence_read)
        rt_verify(p, now);
    if (x.d.activate >= 0 && !rt->stopping) /* a stopping router asks nothing more */
        rt_activate(p, o, x.hm[x.d.activate].name);
    const rt_mq *asked_mq = NULL;
    for (size_t i = 0; p->asked && i < p->nmq; i++)
        if (strcmp(p->mqs[i]->member, p->asked) == 0)
            asked_mq = p->mqs[i];
    if (!p->refused)
        rt_withdraw_check(p, o, asked_mq);
    if (x.d.wake_at_ms)
        rt_wake_at(p, x.d.wake_at_ms);
    if (wake)
        rt_wake_at(p, wake);
    if (p->patch_not_before > now)
        rt_wake_at(p, p->patch_not_before);
    rt_pass_free(&x);
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

void rt_mark(rt_pool *p)
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

void rt_budget_over(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_req *q = ud;
    q->budget_timer = 0;
    rt_pool *p = q->pool;
    const pool_obj *o = rt_pool_rec(p);
    uint64_t budget = rt_view_budget_ms(o);
    rt_mq_unlink(q);
    uint32_t retry =
        rt_hold_retry_after_s(p->swap_estimate_ms, p->swap_seen_ms, ev_now_ms(), budget);
    /* Resident in this cache all along: what it lacked was the drain fence's read. */
    bool unconfirmed = rt_view_unconfirmed(informer_store(p->rt->isvcs),
                                           informer_store(p->rt->pods), o, q->mq->member);
    char msg[512];
    snprintf(msg, sizeof(msg),
             unconfirmed ? "model %s (member %s of pool %s) could not be confirmed resident with "
                           "the API server within the pool's swapBudget (%llu ms); retry in %u s"
                         : "model %s (member %s of pool %s) is still loading: not resident within "
                           "the pool's swapBudget (%llu ms); retry in %u s",
             q->scan.name, q->mq->member, p->key, (unsigned long long)budget, retry);
    rt_metrics_unavailable(&q->rt->m, p->ns, p->name, unconfirmed ? "unconfirmed" : "swap_budget");
    rt_answer(q, RT_OAI_MODEL_LOADING, msg, retry);
    rt_mark(p);
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
        !(rt->fwd =
              fwd_new(loop, &(fwd_config){.first_byte_timeout_ms = o->upstream_timeout_ms})) ||
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

/* router: modelpool-router's wiring. Three informers (ModelPools, their member
 * InferenceServices, the members' Pods) mark the pools an event concerns; one zero-delay timer
 * decides for every marked pool (decide.c), so a burst of events costs one pass. Requests come in
 * through intake.c and wait in their pool's queue for their member (one queue a member, in arrival
 * order) until the cache changes, a grace ends or their swapBudget runs out. This file keeps the
 * pools and their queues, the timers that decide them again, the caches and the router's life
 * (start, shutdown, free). Everything decided comes from the watch caches, so several replicas
 * agree without talking to each other. */
#include "router/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/caches.h"
#include "api/fence.h"
#include "log/log.h"
#include "rt_state.h"
#include "util/backoff.h"
#include "util/rng.h"

/* The read that confirms a member Pod on a new connection (router/podcheck.h). */
#define RT_PODCHECK_TIMEOUT_MS 2000
/* The delete of this replica's Lease at shutdown, at most. */
#define RT_RELEASE_TIMEOUT_MS 2000

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

const api_pool *rt_pool_rec(const rt_pool *p)
{
    return store_get(informer_store(p->rt->caches.pools), p->key);
}

/* ---- pools and their member queues ---- */

static rt_pool *rt_pool_find(rt_router *rt, const char *key)
{
    return STRMAP_FIND(&rt->pool_map, key, rt_pool, node);
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
    free(p->advertised);
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

/* Frees a pool's state once nothing refers to it: no request, no write, no timer, no read for
 * the drain fence still young enough to let a request go (kept to its window's end, so requests
 * one after another do not each wait for a read of their own: the next read is asked ahead while
 * they flow), and nothing learnt of a pool that still exists. */
static void rt_pool_maybe_free(rt_pool *p)
{
    if (p->dirty || p->patch || p->verify || p->wake_timer || p->awaiting || p->asked ||
        p->advertised || p->withdraw || p->refused)
        return;
    uint64_t read_ends = p->verified_ms + rt_fence_window_ms(p->rt);
    if (p->verified_member && rt_pool_rec(p) && ev_now_ms() < read_ends) {
        rt_wake_at(p, read_ends); /* freed then, unless a request came */
        return;
    }
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

/* ---- deciding pools marked by events ---- */

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
    const api_pool *o = rec;
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
    store_index_each(informer_store(rt->caches.pools), API_INDEX_MEMBER, key, rt_mark_pool_rec, &c);
}

static void rt_pool_changed(void *ud, const void *old_rec, const void *rec)
{
    rt_router *rt = ud;
    const api_pool *o = rec ? rec : old_rec;
    rt_routes_invalidate(rt->routes);
    rt_pool *p = rt_pool_find_named(rt, o->ns, o->name);
    if (!p) { /* nothing of it here, nothing in flight: acknowledged at once (else its decision
                 does) */
        rt_ack(rt, o, NULL);
        return;
    }
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
    const api_pool *o = rec;
    rt_routes_invalidate(rt->routes);
    if (rt_registry_ack(rt->reg, o->ns, o->name, NULL) < 0)
        log_kv(LOG_ERROR, "out of memory: an acknowledgement of a deleted pool is kept", "pool",
               o->name, NULL);
    rt_mark_key(rt, o->ns, o->name);
    rt_metrics_forget_pool(rt->o.metrics, o->ns ? o->ns : "", o->name);
}

static void rt_isvc_changed(void *ud, const void *old_rec, const void *rec)
{
    rt_router *rt = ud;
    const api_isvc *a = old_rec, *b = rec ? rec : old_rec;
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
    const api_pod *p = rec ? rec : old_rec;
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

/* The registration began (every pool may go on) or pool_key's acknowledgement was withdrawn. */
static void rt_registry_changed(void *ud, const char *pool_key)
{
    rt_router *rt = ud;
    if (pool_key) {
        rt_pool *p = rt_pool_find(rt, pool_key);
        if (p)
            rt_mark(p);
        return;
    }
    for (strmap_node *n = strmap_first(&rt->pool_map); n; n = strmap_next(&rt->pool_map, n))
        rt_mark(STRMAP_OWNER(n, rt_pool, node));
}

static void rt_cache_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "watch failed, retrying", "error", err->message ? err->message : "", NULL);
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
    rt->o.drain_fence_ms = api_fence_ms(rt->o.drain_fence_ms);
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
    api_caches_config ac = {.namespace_ = o->namespace_,
                            .pool_selector = o->label_selector,
                            .pools = {.on_add = rt_pool_added,
                                      .on_update = rt_pool_changed,
                                      .on_delete = rt_pool_deleted,
                                      .on_error = rt_cache_error,
                                      .ud = rt},
                            .isvcs = {.on_add = rt_isvc_added,
                                      .on_update = rt_isvc_changed,
                                      .on_delete = rt_isvc_deleted,
                                      .on_error = rt_cache_error,
                                      .ud = rt},
                            .pods = {.on_add = rt_pod_added,
                                     .on_update = rt_pod_changed,
                                     .on_delete = rt_pod_deleted,
                                     .on_error = rt_cache_error,
                                     .ud = rt}};
    if (api_caches_init(&rt->caches, loop, client, &ac) < 0)
        goto oom;
    if (!(rt->routes = rt_routes_new(informer_store(rt->caches.pools),
                                     informer_store(rt->caches.isvcs), rt->home_copy)) ||
        !(rt->fwd = fwd_new(loop, &(fwd_config){.idle_timeout_ms = o->upstream_timeout_ms})) ||
        !(rt->podcheck = rt_podcheck_new(rt->client, informer_store(rt->caches.pods),
                                         RT_PODCHECK_TIMEOUT_MS)) ||
        rt_metrics_init(&rt->m, o->metrics) < 0)
        goto oom;
    rt_registry_config rc = {.namespace_ = o->lease_namespace,
                             .name = o->lease_name,
                             .identity = o->lease_name,
                             .fronts = o->namespace_,
                             .duration_ms = API_ROUTER_LEASE_S * 1000,
                             .renew_ms = API_ROUTER_RENEW_MS,
                             .window_ms = rt_fence_window_ms(rt),
                             .changed = rt_registry_changed,
                             .ud = rt};
    if (!(rt->reg = rt_registry_new(loop, client, &rc)))
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
    if (api_caches_start(&rt->caches) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rt_registry_start(rt->reg);
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
    return api_caches_synced(&rt->caches);
}

void rt_router_unregistered(const rt_router *rt, char *buf, size_t len)
{
    rt_registry_unready(rt->reg, ev_now_ms(), buf, len);
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
    api_caches_waiting(&rt->caches, buf, len);
}

static void rt_stop_check(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_router *rt = ud;
    rt->stop_timer = 0;
    /* Done once no forward runs and every answer given has been sent; then the Lease goes (a
     * replica that forwards nothing more holds no swap up). */
    uint64_t now = ev_now_ms();
    bool settled = rt->in_flight == 0 && now >= rt->linger_until; /* api/fence.h */
    if ((settled && httpd_pending(rt->front) == 0) || now >= rt->stop_deadline) {
        if (settled)
            rt_registry_release(rt->reg, RT_RELEASE_TIMEOUT_MS, rt->stopped, rt->stopped_ud);
        else if (rt->stopped)
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
    rt_registry_free(rt->reg);
    rt_routes_free(rt->routes);
    api_caches_free(&rt->caches);
    strmap_fini(&rt->pool_map);
    free(rt->home_copy);
    free(rt);
}

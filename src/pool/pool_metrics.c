/* pool_metrics: names, help, labels and buckets of the controller's series. The per-member
 * resident gauges are not registry series: each pool's members and resident sit in one block in a
 * map by pool, rewritten only when they change, and the gauges are listed from it at each scrape
 * (about 130 bytes a pool instead of three series with their label strings). A pool's other
 * series are removed by their exact labels, so a large fleet costs no scans. */
#include "pool/pool_metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

/* A list of owned strings. */
typedef struct pm_names {
    char **v;
    size_t n;
} pm_names;

/* What one pool's series are: its members (each name once) and which is resident, the source of
 * its resident gauges, and the deferral reasons it has series for, so that they are removed
 * without a scan of every pool's. One allocation: the struct, the member pointers, then the
 * strings (the key "ns/name", the namespace, the members). */
typedef struct pm_pool {
    strmap_node node; /* key: "ns/name" */
    pm_names reasons;
    const char *ns, *pool; /* the label values; pool points into the key */
    size_t resident;       /* index in members; n_members when none */
    size_t n_members;
    const char *members[];
} pm_pool;

struct pool_metrics {
    metrics *reg;
    metrics_family *reconciles, *reconcile_errors, *reconcile_seconds;
    metrics_family *depth, *waiting, *adds, *queue_seconds, *retries;
    metrics_family *watch_restarts, *relists;
    metrics_family *resident, *swaps, *swap_seconds, *deferrals, *reaction, *fences;
    strmap pools;
};

static const double pm_latency_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* Up to well past the default 300 s swap budget. */
static const double pm_swap_buckets[] = {1,   2.5, 5,   10,  20,  30,  60,
                                         120, 180, 300, 450, 600, 900, 1800};
/* Fine below 10 ms, the target of the decision path. */
static const double pm_reaction_buckets[] = {0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.003,
                                             0.005,  0.0075, 0.01,   0.02,  0.05,  0.1,
                                             0.25,   0.5,    1,      2.5,   5};

#define PM_N(a) (sizeof(a) / sizeof((a)[0]))

static void pm_list_resident(void *ud, metrics_emitter *out);

static const char *const pm_result[] = {"result", NULL};
static const char *const pm_resource[] = {"resource", NULL};
static const char *const pm_pool_labels[] = {"namespace", "pool", NULL};
static const char *const pm_member[] = {"namespace", "pool", "member", NULL};
static const char *const pm_reason[] = {"namespace", "pool", "reason", NULL};
static const char *const pm_path[] = {"path", NULL};
static const char *const pm_outcome[] = {"outcome", NULL};

#define PM_DEF(...) METRICS_DEF(pool_metrics, __VA_ARGS__)
#define PM_HISTOGRAM(...) METRICS_DEF_HISTOGRAM(pool_metrics, __VA_ARGS__)

static const metrics_def pm_defs[] = {
    PM_DEF(reconciles, METRICS_COUNTER, "modelpool_reconcile_total",
           "Reconciles of a pool, by result (success, error).", pm_result),
    PM_DEF(reconcile_errors, METRICS_COUNTER, "modelpool_reconcile_errors_total",
           "Reconciles that failed and were retried with backoff.", NULL),
    PM_HISTOGRAM(reconcile_seconds, "modelpool_reconcile_duration_seconds",
                 "Time from taking a pool off the queue to the end of its reconcile (API writes "
                 "and idle probes included).",
                 NULL, pm_latency_buckets),
    PM_DEF(depth, METRICS_GAUGE, "modelpool_workqueue_depth", "Pool keys ready to be reconciled.",
           NULL),
    PM_DEF(waiting, METRICS_GAUGE, "modelpool_workqueue_waiting",
           "Pool keys waiting for a delay (backoff, a requeue, the resync backstop).", NULL),
    PM_DEF(adds, METRICS_COUNTER, "modelpool_workqueue_adds_total",
           "Pool keys added to the work queue.", NULL),
    PM_HISTOGRAM(queue_seconds, "modelpool_workqueue_queue_duration_seconds",
                 "Time a pool key waited in the queue before its reconcile began.", NULL,
                 pm_latency_buckets),
    PM_DEF(retries, METRICS_COUNTER, "modelpool_workqueue_retries_total",
           "Pool keys requeued with backoff after a failure.", NULL),
    PM_DEF(watch_restarts, METRICS_COUNTER, "modelpool_watch_restarts_total",
           "Watches that ended and were resumed (or replaced by a relist), by resource.",
           pm_resource),
    PM_DEF(relists, METRICS_COUNTER, "modelpool_relists_total",
           "Complete lists after the first (410 Gone, errors), by resource.", pm_resource),
    {.at = offsetof(pool_metrics, resident),
     .kind = METRICS_GAUGE,
     .name = "modelpool_pool_resident",
     .help = "1 for the member resident in the pool's GPU slot, 0 for its other members.",
     .labels = pm_member,
     .list = pm_list_resident},
    PM_DEF(swaps, METRICS_COUNTER, "modelpool_swaps_total",
           "Swaps completed (a pending member became resident).", pm_pool_labels),
    PM_HISTOGRAM(swap_seconds, "modelpool_swap_duration_seconds",
                 "Time from a swap's start (Swapping=True) to its target being resident.",
                 pm_pool_labels, pm_swap_buckets),
    PM_DEF(deferrals, METRICS_COUNTER, "modelpool_swap_deferrals_total",
           "Swaps held back (SwapDeferred=True), by reason: PodsBusy, IdleCheckFailed, "
           "IdleCheckUnsupported.",
           pm_reason),
    PM_HISTOGRAM(reaction, "modelpool_reaction_seconds",
                 "Operator-side reaction: path a, from the watch event of a member scaled up to "
                 "the PATCH scaling the incumbent down; path b, from the watch event of the "
                 "incumbent's last Pod deleted to the PATCH scaling the target up.",
                 pm_path, pm_reaction_buckets),
    PM_DEF(fences, METRICS_COUNTER, "modelpool_drain_fence_total",
           "Drain fences of swaps away from a resident that ended, by outcome: acknowledged (every "
           "router acknowledged the swap in its Lease before the fence was over), waited (the "
           "whole --drain-fence).",
           pm_outcome),
};

pool_metrics *pool_metrics_new(metrics *reg)
{
    if (!reg)
        return NULL;
    pool_metrics *pm = calloc(1, sizeof(*pm));
    if (!pm || strmap_init(&pm->pools) < 0) {
        free(pm);
        return NULL;
    }
    pm->reg = reg;
    if (metrics_declare(reg, pm_defs, PM_N(pm_defs), pm) < 0) {
        pool_metrics_free(pm);
        return NULL;
    }
    /* Zero series exist from the start, so rate() sees the first increment. */
    metrics_add(pm->reconciles, (const char *[]){"success"}, 0);
    metrics_add(pm->reconciles, (const char *[]){"error"}, 0);
    metrics_add(pm->reconcile_errors, NULL, 0);
    metrics_add(pm->fences, (const char *[]){"acknowledged"}, 0);
    metrics_add(pm->fences, (const char *[]){"waited"}, 0);
    return pm;
}

static void pm_names_clear(pm_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (pm_names){0};
}

/* Appends a copy of name. false when out of memory. */
static bool pm_names_add(pm_names *l, const char *name)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
    if (!v)
        return false;
    l->v = v;
    if (!(v[l->n] = strdup(name ? name : "")))
        return false;
    l->n++;
    return true;
}

static bool pm_names_has(const pm_names *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], name) == 0)
            return true;
    return false;
}

static void pm_pool_free(pm_pool *p)
{
    pm_names_clear(&p->reasons);
    free(p);
}

static bool pm_str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Whether members[i] is one of members[0..i): a duplicate member (an invalid spec) has one gauge.
 */
static bool pm_seen(const char *const *members, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (pm_str_eq(members[j], members[i]))
            return true;
    return false;
}

/* A block for ns/pool with these members (duplicates once) and resident; NULL when out of
 * memory. */
static pm_pool *pm_pool_make(const char *ns, const char *pool, const char *const *members, size_t n,
                             const char *resident)
{
    size_t nl = strlen(ns), pl = strlen(pool), kept = 0, bytes = 2 * nl + pl + 3;
    for (size_t i = 0; i < n; i++) {
        if (!pm_seen(members, i)) {
            kept++;
            bytes += strlen(members[i] ? members[i] : "") + 1;
        }
    }
    size_t head = sizeof(pm_pool) + kept * sizeof(const char *);
    pm_pool *p = calloc(1, head + bytes);
    if (!p)
        return NULL;
    char *at = (char *)p + head;
    memcpy(at, ns, nl);
    at[nl] = '/';
    memcpy(at + nl + 1, pool, pl + 1);
    p->pool = at + nl + 1;
    at += nl + pl + 2;
    p->ns = memcpy(at, ns, nl + 1);
    at += nl + 1;
    p->resident = kept;
    for (size_t i = 0; i < n; i++) {
        if (pm_seen(members, i))
            continue;
        const char *m = members[i] ? members[i] : "";
        size_t ml = strlen(m) + 1;
        if (resident && *resident && strcmp(m, resident) == 0)
            p->resident = p->n_members;
        p->members[p->n_members++] = memcpy(at, m, ml);
        at += ml;
    }
    return p;
}

/* The pool's entry; NULL when absent or out of memory. */
static pm_pool *pm_pool_get(pool_metrics *pm, const char *ns, const char *pool)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, pool) < 0)
        return NULL;
    pm_pool *p = STRMAP_FIND(&pm->pools, key, pm_pool, node);
    free(key);
    return p;
}

/* Puts p in the place of old (NULL: none), which it takes the deferral reasons of. */
static void pm_pool_replace(pool_metrics *pm, pm_pool *old, pm_pool *p)
{
    const char *key = (const char *)&p->members[p->n_members];
    if (old) {
        p->reasons = old->reasons;
        old->reasons = (pm_names){0};
        strmap_remove(&pm->pools, &old->node);
        pm_pool_free(old);
    }
    strmap_insert(&pm->pools, &p->node, key);
}

/* Lists the resident gauges of every pool. */
static void pm_list_resident(void *ud, metrics_emitter *out)
{
    pool_metrics *pm = ud;
    for (strmap_node *n = strmap_first(&pm->pools); n; n = strmap_next(&pm->pools, n)) {
        const pm_pool *p = STRMAP_OWNER(n, pm_pool, node);
        for (size_t i = 0; i < p->n_members; i++)
            metrics_emit(out, (const char *[]){p->ns, p->pool, p->members[i]},
                         i == p->resident ? 1 : 0);
    }
}

void pool_metrics_free(pool_metrics *pm)
{
    if (!pm)
        return;
    strmap_node *n = strmap_first(&pm->pools);
    while (n) {
        strmap_node *next = strmap_next(&pm->pools, n);
        strmap_remove(&pm->pools, n);
        pm_pool_free(STRMAP_OWNER(n, pm_pool, node));
        n = next;
    }
    strmap_fini(&pm->pools);
    free(pm); /* the families belong to the registry */
}

void pool_metrics_reconciled(pool_metrics *pm, bool ok, uint64_t duration_ms)
{
    if (!pm)
        return;
    metrics_add(pm->reconciles, (const char *[]){ok ? "success" : "error"}, 1);
    if (!ok)
        metrics_add(pm->reconcile_errors, NULL, 1);
    metrics_observe(pm->reconcile_seconds, NULL, (double)duration_ms / 1000.0);
}

void pool_metrics_dequeued(pool_metrics *pm, uint64_t waited_ms)
{
    if (pm)
        metrics_observe(pm->queue_seconds, NULL, (double)waited_ms / 1000.0);
}

void pool_metrics_queue(pool_metrics *pm, const wq_stats *q)
{
    if (!pm)
        return;
    metrics_set(pm->depth, NULL, (double)q->depth);
    metrics_set(pm->waiting, NULL, (double)q->waiting);
    metrics_set(pm->adds, NULL, (double)q->adds_total);
    metrics_set(pm->retries, NULL, (double)q->retries_total);
}

void pool_metrics_informer(pool_metrics *pm, const char *resource, const informer_stats *st)
{
    if (!pm)
        return;
    metrics_set(pm->watch_restarts, (const char *[]){resource}, (double)st->watch_restarts);
    metrics_set(pm->relists, (const char *[]){resource}, (double)st->relists);
}

/* Whether p already says these members (in this order, each once) and this resident. */
static bool pm_same(const pm_pool *p, const char *const *members, size_t n, const char *resident)
{
    if (p->n_members != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!pm_str_eq(p->members[i], members[i]))
            return false;
    if (!resident || !*resident)
        return p->resident == n;
    return p->resident < n && strcmp(p->members[p->resident], resident) == 0;
}

void pool_metrics_members(pool_metrics *pm, const char *ns, const char *pool,
                          const char *const *members, size_t n, const char *resident)
{
    if (!pm)
        return;
    pm_pool *old = pm_pool_get(pm, ns, pool);
    if (old && pm_same(old, members, n, resident))
        return;
    pm_pool *p = pm_pool_make(ns, pool, members, n, resident);
    if (p) /* else (out of memory) the gauges stay as they were; the next plan rewrites them */
        pm_pool_replace(pm, old, p);
}

void pool_metrics_swap_done(pool_metrics *pm, const char *ns, const char *pool, int64_t duration_ms)
{
    if (!pm)
        return;
    metrics_add(pm->swaps, (const char *[]){ns, pool}, 1);
    if (duration_ms >= 0)
        metrics_observe(pm->swap_seconds, (const char *[]){ns, pool}, (double)duration_ms / 1000.0);
}

void pool_metrics_deferred(pool_metrics *pm, const char *ns, const char *pool, const char *reason)
{
    pm_pool *p = pm ? pm_pool_get(pm, ns, pool) : NULL;
    if (pm && !p && (p = pm_pool_make(ns, pool, NULL, 0, NULL)))
        pm_pool_replace(pm, NULL, p);
    if (p && !pm_names_has(&p->reasons, reason) && !pm_names_add(&p->reasons, reason))
        return; /* a series we could not remember could not be removed: none is made */
    if (pm)
        metrics_add(pm->deferrals, (const char *[]){ns, pool, reason}, 1);
}

void pool_metrics_reaction(pool_metrics *pm, pool_reaction_path path, uint64_t us)
{
    if (pm)
        metrics_observe(pm->reaction, (const char *[]){path == POOL_REACTION_A ? "a" : "b"},
                        (double)us / 1e6);
}

void pool_metrics_fence_ended(pool_metrics *pm, bool acknowledged)
{
    if (pm)
        metrics_add(pm->fences, (const char *[]){acknowledged ? "acknowledged" : "waited"}, 1);
}

void pool_metrics_forget(pool_metrics *pm, const char *ns, const char *pool)
{
    pm_pool *p = pm ? pm_pool_get(pm, ns, pool) : NULL;
    if (!p) {
        /* Nothing remembered (out of memory on the way): the scan is the only way to be sure. */
        if (pm)
            metrics_remove(pm->reg, (const char *[]){"namespace", "pool"},
                           (const char *[]){ns, pool}, 2);
        return;
    }
    /* The resident gauges go with the block. A lookup that ran out of memory: the scan. */
    int rc = 0;
    for (size_t i = 0; i < p->reasons.n; i++)
        rc |= metrics_delete(pm->deferrals, (const char *[]){ns, pool, p->reasons.v[i]});
    rc |= metrics_delete(pm->swaps, (const char *[]){ns, pool});
    rc |= metrics_delete(pm->swap_seconds, (const char *[]){ns, pool});
    if (rc)
        metrics_remove(pm->reg, (const char *[]){"namespace", "pool"}, (const char *[]){ns, pool},
                       2);
    strmap_remove(&pm->pools, &p->node);
    pm_pool_free(p);
}

/* clocks: one entry per pool with a clock running, in a map by pool key, freed as soon as both of
 * its clocks have stopped; the requested member's name is kept in the same allocation. */
#include "pool/clocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/status.h"
#include "util/strmap.h"

typedef struct clock_entry {
    strmap_node node;
    uint64_t requested_us; /* path a, 0: stopped */
    uint64_t pod_gone_us;  /* path b, 0: stopped */
    char *requested;       /* path a: the member requested (malloc'd) */
    char key[];            /* the pool's */
} clock_entry;

struct pool_clocks {
    pool_metrics *pm;
    strmap pools;
};

pool_clocks *pool_clocks_new(pool_metrics *pm)
{
    if (!pm)
        return NULL;
    pool_clocks *c = calloc(1, sizeof(*c));
    if (!c || strmap_init(&c->pools) < 0) {
        free(c);
        return NULL;
    }
    c->pm = pm;
    return c;
}

static void clock_drop(pool_clocks *c, clock_entry *e)
{
    strmap_remove(&c->pools, &e->node);
    free(e->requested);
    free(e);
}

void pool_clocks_free(pool_clocks *c)
{
    if (!c)
        return;
    for (strmap_node *n; (n = strmap_first(&c->pools));)
        clock_drop(c, STRMAP_OWNER(n, clock_entry, node));
    strmap_fini(&c->pools);
    free(c);
}

static clock_entry *clock_get(const pool_clocks *c, const char *key)
{
    return STRMAP_FIND(&c->pools, key, clock_entry, node);
}

static clock_entry *clock_make(pool_clocks *c, const char *key)
{
    return STRMAP_FIND_OR_ADD(&c->pools, key, clock_entry, node, key);
}

/* Frees e once neither clock runs. */
static void clock_trim(pool_clocks *c, clock_entry *e)
{
    if (!e->requested_us && !e->pod_gone_us)
        clock_drop(c, e);
}

/* Starts pool key's path a at now_us for a request of member, unless it runs already: the first
 * request seen starts it, and the incumbent's scale-down stops it. */
static void clock_request(pool_clocks *c, const char *key, const char *member, uint64_t now_us)
{
    clock_entry *e = clock_make(c, key);
    if (!e)
        return;
    if (!e->requested_us) {
        char *m = strdup(member);
        if (m) {
            free(e->requested);
            e->requested = m;
            e->requested_us = now_us;
        }
    }
    clock_trim(c, e);
}

/* The cache key of a pool record (store_key_of's form), malloc'd; NULL when out of memory. */
static char *clock_pool_key(const api_pool *pool)
{
    char *key = NULL;
    if (!pool->ns || !*pool->ns)
        return strdup(pool->name);
    return asprintf(&key, "%s/%s", pool->ns, pool->name) < 0 ? NULL : key;
}

void pool_clocks_pool_updated(pool_clocks *c, const api_pool *was, const api_pool *now,
                              uint64_t now_us)
{
    const char *rq = now->requested, *before = was->requested;
    if (!c || !rq || !*rq || (before && strcmp(before, rq) == 0))
        return;
    const api_status *st = &now->status;
    const char *phase = st->phase, *res = st->resident_member, *pend = st->pending_member;
    if ((phase && strcmp(phase, API_PHASE_DEGRADED) == 0) ||
        (pend && *pend ? strcmp(pend, rq) == 0 : res && strcmp(res, rq) == 0))
        return;
    bool member = false;
    for (size_t i = 0; i < now->n_members; i++)
        member |= now->members[i] && strcmp(now->members[i], rq) == 0;
    char *key = member ? clock_pool_key(now) : NULL;
    if (key)
        clock_request(c, key, rq, now_us);
    free(key);
}

/* Starting a clock for every pool listing a member: the member, and which clock. */
typedef struct clock_start {
    pool_clocks *c;
    const char *member;
    bool pod_gone; /* path b; else path a */
    uint64_t now_us;
} clock_start;

static bool clock_start_one(const char *key, const void *rec, void *ud)
{
    clock_start *s = ud;
    if (!s->pod_gone) {
        clock_request(s->c, key, s->member, s->now_us);
        return true;
    }
    /* Only the incumbent's Pods, during a swap: the target waits for them. */
    const char *pending = ((const api_pool *)rec)->status.pending_member;
    if (!pending || !*pending || strcmp(pending, s->member) == 0)
        return true;
    clock_entry *e = clock_make(s->c, key);
    if (e)
        e->pod_gone_us = s->now_us;
    return true;
}

static void clock_member(pool_clocks *c, const store *pools, const char *ns, const char *member,
                         bool pod_gone, uint64_t now_us)
{
    if (!c || !member)
        return;
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", member) < 0)
        return;
    clock_start s = {.c = c, .member = member, .pod_gone = pod_gone, .now_us = now_us};
    store_index_each(pools, API_INDEX_MEMBER, v, clock_start_one, &s);
    free(v);
}

void pool_clocks_member_up(pool_clocks *c, const store *pools, const char *ns, const char *member,
                           uint64_t now_us)
{
    clock_member(c, pools, ns, member, false, now_us);
}

void pool_clocks_pod_gone(pool_clocks *c, const store *pools, const char *ns, const char *member,
                          uint64_t now_us)
{
    clock_member(c, pools, ns, member, true, now_us);
}

void pool_clocks_scaling(pool_clocks *c, const char *pool_key, const char *member, int32_t replicas,
                         uint64_t now_us)
{
    clock_entry *e = c ? clock_get(c, pool_key) : NULL;
    if (!e)
        return;
    if (replicas == 0 && e->requested_us && e->requested && strcmp(e->requested, member) != 0) {
        pool_metrics_reaction(c->pm, POOL_REACTION_A, now_us - e->requested_us);
        e->requested_us = 0;
    } else if (replicas >= 1 && e->pod_gone_us) {
        pool_metrics_reaction(c->pm, POOL_REACTION_B, now_us - e->pod_gone_us);
        e->pod_gone_us = 0;
    }
    clock_trim(c, e);
}

void pool_clocks_deferred(pool_clocks *c, const char *pool_key)
{
    clock_entry *e = c ? clock_get(c, pool_key) : NULL;
    if (e) {
        e->requested_us = 0;
        clock_trim(c, e);
    }
}

void pool_clocks_fenced(pool_clocks *c, const char *pool_key, uint64_t until_us)
{
    clock_entry *e = c ? clock_get(c, pool_key) : NULL;
    if (e && e->requested_us && e->requested_us < until_us)
        e->requested_us = until_us;
}

void pool_clocks_stop(pool_clocks *c, const char *pool_key)
{
    clock_entry *e = c ? clock_get(c, pool_key) : NULL;
    if (e)
        clock_drop(c, e);
}

size_t pool_clocks_running(const pool_clocks *c)
{
    return c ? c->pools.count : 0;
}

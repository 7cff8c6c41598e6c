/* controller_fence: the early end of a swap's drain fence (api/fence.h, "Operator"). Router Lease
 * events note when this replica first saw each Lease's version and wake the pools whose swap waits
 * on its fence. A run of such a pool whose Lease cache shows every router acknowledging the swap
 * (or expired) sends one list of the router Leases from the API server, a quorum read sent after
 * the drain was seen begun, and the pure rule (pool/fence_ack.h) over its answer decides: the cache
 * only says when to ask, since it may lag, and a router whose Lease it lacks may have registered
 * before the swap was written. Confirmed, the fence ends at the answer (plan_snapshot's
 * drain_after_ms, controller_plan.c), remembered for the swap (its first sighting and resident);
 * otherwise nothing changes, the fence ends at F, and a later change of the cache may ask again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "controller_internal.h"

void pc_fence_forget(pc_pool *st)
{
    st->acked_ms = 0;
    free(st->acked_resident);
    st->acked_resident = NULL;
    st->acks_listed_gen = 0;
    st->fence_counted = st->fence_held_logged = false;
}

uint64_t pc_fence_acked(const pc_pool *st, const char *resident)
{
    return st->acked_ms && resident && strcmp(st->acked_resident, resident) == 0 ? st->acked_ms : 0;
}

/* Whether st's swap waits on its fence now: its drain seen begun, the fence not over, not ended
 * early. */
static bool pc_fence_waits(const pool_controller *pc, const pc_pool *st, uint64_t now)
{
    return st->swap_seen_ms && !st->acked_ms &&
           now < st->swap_seen_ms + (uint64_t)pc->cfg.drain_fence_ms;
}

void pc_fence_ended(pool_controller *pc, pc_pool *st, bool acknowledged)
{
    if (st->fence_counted)
        return;
    st->fence_counted = true;
    pool_metrics_fence_ended(pc->cfg.pm, acknowledged);
}

void pc_fence_wake(pool_controller *pc)
{
    uint64_t now = ev_now_ms();
    for (strmap_node *n = strmap_first(&pc->state); n; n = strmap_next(&pc->state, n)) {
        const pc_pool *st = STRMAP_OWNER(n, pc_pool, node);
        if (pc_fence_waits(pc, st, now))
            wq_add(pc->queue, st->key);
    }
}

/* ---- the rule over the cache ---- */

typedef struct pc_cached_leases {
    pool_controller *pc;
    fence_ack_lease *v;
    size_t n, cap;
    uint64_t now;
} pc_cached_leases;

static bool pc_cached_lease(const char *key, const void *rec, void *ud)
{
    pc_cached_leases *c = ud;
    const api_router_lease *l = rec;
    if (c->n == c->cap)
        return false; /* never: the walk changes nothing */
    c->v[c->n].lease = l;
    /* Out of memory: counted from now, so it expires later; safe. */
    (void)fence_seen_note(c->pc->lease_seen, key, l->rv, c->now, &c->v[c->n].seen_ms);
    c->n++;
    return true;
}

/* Whether the Lease cache shows every router acknowledging the swap of pool (or expired). */
static bool pc_fence_cache_acked(pool_controller *pc, const pc_run *run, const char *resident,
                                 uint64_t now)
{
    pc_cached_leases c = {.pc = pc, .cap = store_count(pc->cfg.router_leases), .now = now};
    if (c.cap && !(c.v = calloc(c.cap, sizeof(*c.v))))
        return false;
    store_each(pc->cfg.router_leases, pc_cached_lease, &c);
    fence_ack_verdict v =
        fence_ack_check(c.v, c.n, now, pc->cfg.drain_fence_ms, run->ns, run->name, resident);
    free(c.v);
    return v.result == FENCE_ACK_CONFIRMED;
}

/* ---- the list, and the rule over its answer ---- */

/* Logs once a swap what holds its fence up: the Lease the rule named, or a list that failed. */
static void pc_fence_held(pc_run *run, pc_pool *st, const fence_ack_verdict *v, uint64_t now,
                          const char *failed)
{
    if (st->fence_held_logged)
        return;
    st->fence_held_logged = true;
    if (failed) {
        log_kv(LOG_INFO, "could not list the router Leases; the swap waits the whole drain fence",
               "pool", run->key, "error", failed, NULL);
        return;
    }
    if (v->result == FENCE_ACK_NO_ROUTERS) {
        log_kv(LOG_INFO, "no router Lease; the swap waits the whole drain fence", "pool", run->key,
               "member", run->fence_resident, NULL);
        return;
    }
    char why[96];
    if (v->result == FENCE_ACK_NO_EXPIRY)
        snprintf(why, sizeof(why), "no acknowledgement, and no leaseDurationSeconds");
    else
        snprintf(why, sizeof(why), "no acknowledgement; expires in %llu ms",
                 (unsigned long long)(v->expires_ms - now));
    log_kv(LOG_INFO, "a router has not acknowledged the swap; it waits the whole drain fence",
           "pool", run->key, "member", run->fence_resident, "lease", v->holder->name, "reason", why,
           NULL);
}

/* The list's answer: confirmed, the fence of st's swap ends now. */
static void pc_fence_answer(pc_run *run, pc_pool *st, const cJSON *body, uint64_t now)
{
    pool_controller *pc = run->pc;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(body, "items"), *item;
    size_t cap = cJSON_IsArray(items) ? (size_t)cJSON_GetArraySize(items) : 0, n = 0;
    api_router_lease **recs = calloc(cap ? cap : 1, sizeof(*recs));
    fence_ack_lease *leases = calloc(cap ? cap : 1, sizeof(*leases));
    const char *failed = !cJSON_IsArray(items) ? "the answer holds no items" : NULL;
    cJSON_ArrayForEach(item, (failed ? NULL : items))
    {
        int err = 0;
        char *key = NULL;
        if (!recs || !leases || !(recs[n] = api_router_lease_decode(item, &err)) ||
            asprintf(&key, "%s/%s", recs[n]->ns ? recs[n]->ns : "", recs[n]->name) < 0) {
            failed = err == -EINVAL ? "a router Lease without a name" : "out of memory";
            break;
        }
        leases[n].lease = recs[n];
        /* Out of memory: counted from now, so it expires later; safe. */
        (void)fence_seen_note(pc->lease_seen, key, recs[n]->rv, now, &leases[n].seen_ms);
        free(key);
        n++;
    }
    fence_ack_verdict v = {0};
    if (!failed)
        v = fence_ack_check(leases, n, now, pc->cfg.drain_fence_ms, run->ns, run->name,
                            run->fence_resident);
    if (failed || v.result != FENCE_ACK_CONFIRMED) {
        pc_fence_held(run, st, &v, now, failed);
    } else if ((st->acked_resident = strdup(run->fence_resident))) {
        st->acked_ms = now;
        log_kv(LOG_DEBUG, "every router acknowledged the swap: its drain fence ends now", "pool",
               run->key, "member", run->fence_resident, NULL);
    }
    for (size_t i = 0; recs && i < cap; i++)
        free(recs[i]);
    free(recs);
    free(leases);
}

static void pc_on_fence_list(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    pc_run *run = ud;
    pool_controller *pc = run->pc;
    const api_pool *pool;
    pc_pool *st = pc_run_answered(run, &pool);
    uint64_t now = ev_now_ms();
    /* Still the swap it was sent for, its drain seen begun before the list was sent. */
    if (pool && st && st->swap_seen_ms == run->fence_swap_ms &&
        run->fence_sent_ms >= st->swap_seen_ms && pc_fence_waits(pc, st, now) &&
        pool->status.resident_member &&
        strcmp(pool->status.resident_member, run->fence_resident) == 0) {
        if (err->kind != KUBE_OK)
            pc_fence_held(run, st, NULL, now, err->message ? err->message : "failed");
        else
            pc_fence_answer(run, st, body, now);
    }
    pc_plan(run);
}

bool pc_fence_confirm(pc_run *run, const api_pool *pool)
{
    pool_controller *pc = run->pc;
    pc_pool *st = pc_pool_get(pc, run->key, false);
    const char *resident = pool->status.resident_member;
    uint64_t now = ev_now_ms();
    if (!pc->cfg.router_leases || !st || !resident || !*resident || !pc_fence_waits(pc, st, now) ||
        st->acks_listed_gen == pc->lease_gen || !informer_synced(pc->cfg.lease_informer) ||
        !pc_fence_cache_acked(pc, run, resident, now))
        return false; /* a router's Lease changes when it acknowledges: that wakes the pool */
    st->acks_listed_gen = pc->lease_gen;
    free(run->fence_resident);
    char *path =
        kube_path(API_LEASE_GROUP, API_LEASE_VERSION, pc->cfg.lease_ns, "leases", NULL, NULL);
    if (!path || !(run->fence_resident = strdup(resident))) {
        free(path);
        return false;
    }
    const kube_query query[] = {{"labelSelector", API_ROUTER_LEASE_LABEL}, {NULL, NULL}};
    /* No resourceVersion: a quorum read. Past F the fence is over anyway. */
    kube_request req = {.method = KUBE_GET,
                        .path = path,
                        .query = query,
                        .timeout_ms = pc->cfg.drain_fence_ms < PC_WRITE_TIMEOUT_MS
                                          ? pc->cfg.drain_fence_ms
                                          : PC_WRITE_TIMEOUT_MS,
                        .max_retries = 0,
                        .list = true,
                        .scratch = true};
    run->fence_swap_ms = st->swap_seen_ms;
    run->fence_sent_ms = now;
    kube_error err = {0};
    run->call = kube_call_start(pc->cfg.client, &req, pc_on_fence_list, run, &err);
    free(path);
    if (!run->call)
        pc_fence_held(run, st, NULL, now, err.message ? err.message : "not sent");
    kube_error_clear(&err);
    return run->call != NULL;
}

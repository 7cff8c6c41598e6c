/* controller_plan: one run's plan of its pool. A snapshot of the caches with the pool's memory
 * (the drain fence from when this replica first saw the swap, or its early end; a refused scale)
 * goes to the pure plan (pool/plan.h). A pool whose own last write the cache does not show yet is
 * not planned (so a plan never acts on a view older than its last action, informer/expect.h), and
 * a member the cache lacks is not judged missing until the cache caught up with the pool or the
 * API server says so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "controller_internal.h"
#include "pool/snapshot.h"

/* A member absent from a cache that has not caught up with its pool is read from the API server
 * after this long: the cache's own events usually settle it first (a pool applied with its
 * members), and a quiet cluster's watch may send nothing for a minute. */
#define PC_ABSENT_GRACE_MS 1000

static const prober_memo *pc_memo_lookup(void *ud, const char *uid)
{
    return prober_memo_get(((pool_controller *)ud)->prober, uid);
}

/* The resident gauges. */
static void pc_plan_metrics(pc_run *run)
{
    pool_controller *pc = run->pc;
    const api_status *st = &run->plan->status;
    if (!pc->cfg.pm)
        return;
    const char **names = calloc(st->n_members ? st->n_members : 1, sizeof(*names));
    if (!names)
        return;
    for (size_t i = 0; i < st->n_members; i++)
        names[i] = st->members[i].name;
    pool_metrics_members(pc->cfg.pm, run->ns, run->name, names, st->n_members, st->resident_member);
    free(names);
}

/* The swap's first sighting forgotten, and with it what the fence's early end remembered. */
static void pc_swap_unseen(pc_pool *st)
{
    st->swap_seen_ms = 0;
    pc_fence_forget(st);
}

/* When this replica first saw pool's swap with its drain begun (api_status_awaits_probe false):
 * st->swap_seen_ms, set at the first sight (now), forgotten while the pool shows no swap or one
 * awaiting its probe. *out: the pool's memory while it shows a swap, else NULL. 0 or -ENOMEM. */
static int pc_swap_seen(pool_controller *pc, const char *key, const api_pool *pool, uint64_t now,
                        pc_pool **out)
{
    bool swapping = pool->status.pending_member && *pool->status.pending_member;
    pc_pool *st = pc_pool_get(pc, key, swapping);
    *out = swapping ? st : NULL;
    if (!swapping) {
        if (st) {
            pc_swap_unseen(st);
            pc_pool_trim(pc, st);
        }
        return 0;
    }
    if (!st)
        return -ENOMEM;
    if (api_status_awaits_probe(&pool->status))
        pc_swap_unseen(st);
    else if (!st->swap_seen_ms)
        st->swap_seen_ms = now;
    return 0;
}

/* The drain fence of pool's swap (plan_snapshot.drain_after_ms), from when this replica first saw
 * it with its drain begun: a replica that takes over a swap waits the fence out again. It ends
 * early once a list of the router Leases confirmed that every router acknowledged the swap
 * (controller_fence.c). now: the monotonic instant the snapshot was built at (its probe times were
 * converted at it too). 0 or -ENOMEM. */
static int pc_fence(pool_controller *pc, const char *key, const api_pool *pool, uint64_t now,
                    plan_snapshot *s)
{
    pc_pool *st;
    int rc = pc_swap_seen(pc, key, pool, now, &st);
    if (rc < 0 || !st)
        return rc;
    if (!st->swap_seen_ms) {
        /* The drain has not begun (#26): the resident serves and routers forward to it while the
         * pool shows this, so the fence counts only from when this replica sees it gone; until
         * then it lies a whole fence ahead. */
        s->drain_after_ms = s->now_ms + pc->cfg.drain_fence_ms;
        return 0;
    }
    const char *resident = pool->status.resident_member;
    uint64_t after = st->swap_seen_ms + (uint64_t)pc->cfg.drain_fence_ms;
    uint64_t acked = pc_fence_acked(st, resident);
    bool early = acked && acked < after;
    if (early)
        after = acked;
    s->drain_after_ms = s->now_ms + ((int64_t)after - (int64_t)now);
    if (now >= after && resident && *resident) /* a pool warming up unloads nothing */
        pc_fence_ended(pc, st, early);
    return 0;
}

/* ---- members absent from the cache (#26) ---- */

/* Whether the cache holds member name of pool (out of memory: not known, so not held). */
static bool pc_member_cached(const pool_controller *pc, const api_pool *pool, const char *name)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", pool->ns ? pool->ns : "", name) < 0)
        return false;
    bool cached = store_get(pc->cfg.isvcs, key) != NULL;
    free(key);
    return cached;
}

static bool pc_any_absent(const pool_controller *pc, const api_pool *pool)
{
    for (size_t i = 0; i < pool->n_members; i++)
        if (pool->members[i] && *pool->members[i] && !pc_member_cached(pc, pool, pool->members[i]))
            return true;
    return false;
}

/* The cache's lack of a member counts as its absence: the cache has caught up with the pool's
 * resourceVersion (a pool applied with its members is seen before them), or a read of the API
 * server made at this version of the pool found none of the members the cache lacks. */
static bool pc_absence_known(const pool_controller *pc, const pc_pool *st, const api_pool *pool)
{
    if (pc->cfg.isvc_informer &&
        expect_rv_at_least(informer_resource_version(pc->cfg.isvc_informer), pool->rv))
        return true;
    return st && st->absent_ok_rv && pool->rv && strcmp(st->absent_ok_rv, pool->rv) == 0;
}

static void pc_on_absent_read(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    pc_run *run = ud;
    pool_controller *pc = run->pc;
    const api_pool *pool;
    pc_pool *st = pc_run_answered(run, &pool);
    if (err->kind != KUBE_OK) {
        pc_fail(run, LOG_ERROR, "could not read the members the cache lacks, will retry", err);
        return;
    }
    if (!pool || !st) { /* gone meanwhile: plan from what is there now */
        pc_plan(run);
        return;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(body, "items"))
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(item, "metadata"), "name"));
        for (size_t i = 0; name && i < pool->n_members; i++) {
            if (!pool->members[i] || strcmp(pool->members[i], name) != 0 ||
                pc_member_cached(pc, pool, name))
                continue;
            /* It exists: the cache is behind, and its event queues the pool again. */
            log_kv(LOG_DEBUG, "a member the cache lacks exists; waiting for the cache", "pool",
                   run->key, "member", name, NULL);
            st->absent_since_ms = ev_now_ms();
            pc_finish(run, WQ_SUCCESS, PC_ABSENT_GRACE_MS);
            return;
        }
    }
    free(st->absent_ok_rv);
    st->absent_ok_rv = strdup(run->rv);
    pc_plan(run);
}

/* Lists the InferenceServices of run's namespace from the API server (a consistent read) to
 * learn whether the members the cache lacks exist. 0 (started), or -1 with err set. */
static int pc_read_absent(pc_run *run, kube_error *err)
{
    char *path = kube_path(API_GROUP, API_VERSION, run->ns, "inferenceservices", NULL, NULL);
    if (!path)
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    kube_request req = {.method = KUBE_GET,
                        .path = path,
                        .timeout_ms = PC_WRITE_TIMEOUT_MS,
                        .max_retries = 0,
                        .list = true};
    run->call = kube_call_start(run->pc->cfg.client, &req, pc_on_absent_read, run, err);
    free(path);
    return run->call ? 0 : -1;
}

/* Builds run's plan from the cache and the pool's memory. 0 or -errno. */
static int pc_build(pc_run *run, const api_pool *pool, bool absence_confirmed)
{
    pool_controller *pc = run->pc;
    plan_free(run->plan);
    run->plan = NULL;
    run->next_action = 0;
    pool_sources src = {.pools = pc->cfg.pools,
                        .isvcs = pc->cfg.isvcs,
                        .pods = pc->cfg.pods,
                        .probe = pc_memo_lookup,
                        .probe_ud = pc,
                        .absence_confirmed = absence_confirmed};
    pool_snapshot snap;
    uint64_t mono = ev_now_ms();
    int rc = pool_snapshot_build(pool, &src, (int64_t)ev_wall_ms(), (int64_t)mono, &snap);
    if (rc < 0)
        return rc;
    if ((rc = pc_fence(pc, run->key, pool, mono, &snap.snap)) < 0) {
        pool_snapshot_release(&snap);
        return rc;
    }
    pc_pool *st = pc_pool_get(pc, run->key, false);
    if (st && st->refused_member)
        snap.snap.refused = (plan_refusal){.member = st->refused_member,
                                           .replicas = st->refused_replicas,
                                           .message = st->refused_message};
    rc = plan_build(&snap.snap, &run->plan);
    if (rc == 0 && st && st->refused_member &&
        !plan_wants_scale(run->plan, st->refused_member, st->refused_replicas)) {
        /* The plan moved on from the refused write: forget it, and plan once more without it
         * so the status stops reporting it. */
        pc_refusal_clear(st);
        plan_free(run->plan);
        run->plan = NULL;
        snap.snap.refused = (plan_refusal){0};
        rc = plan_build(&snap.snap, &run->plan);
        pc_pool_trim(pc, st);
    }
    if (rc == 0)
        pc_plan_metrics(run);
    bool awaiting = rc == 0 && api_status_awaits_probe(&run->plan->status);
    if (awaiting && (st = pc_pool_get(pc, run->key, false)) != NULL)
        pc_swap_unseen(st); /* marked now: the fence starts again once the mark is gone */
    if (rc == 0 && !awaiting && run->plan->fenced_until_ms > snap.snap.now_ms)
        pool_clocks_fenced(pc->cfg.clocks, run->key,
                           ev_now_us() +
                               (uint64_t)(run->plan->fenced_until_ms - snap.snap.now_ms) * 1000);
    pool_snapshot_release(&snap);
    return rc;
}

void pc_plan(pc_run *run)
{
    pool_controller *pc = run->pc;
    const api_pool *pool = store_get(pc->cfg.pools, run->key);
    if (!pool) {
        /* Deleted: its series, clocks, refusals and expectations go with it. */
        size_t nl = strcspn(run->key, "/");
        char *ns = strndup(run->key, nl);
        if (ns && run->key[nl])
            pool_metrics_forget(pc->cfg.pm, ns, run->key + nl + 1);
        free(ns);
        pc_pool_drop(pc, run->key);
        pool_clocks_stop(pc->cfg.clocks, run->key);
        expects_forget(pc->expects, run->key);
        pc_finish(run, WQ_SUCCESS, PC_NO_REQUEUE);
        return;
    }
    if (expects_pending(pc->expects, run->key, ev_now_ms(), pc->cfg.expect_ms)) {
        /* The watch event of our write will queue the pool again; the delay is a backstop. */
        pc_finish(run, WQ_SUCCESS, pc->cfg.expect_ms);
        return;
    }
    const char *ns = pool->ns, *name = pool->name, *uid = pool->uid, *rv = pool->rv;
    free(run->ns);
    free(run->name);
    free(run->uid);
    free(run->rv);
    run->ns = strdup(ns ? ns : "");
    run->name = strdup(name ? name : "");
    run->uid = uid ? strdup(uid) : NULL;
    run->rv = strdup(rv ? rv : "");
    if (!run->ns || !run->name || !run->rv || (uid && !run->uid)) {
        kube_error err = {0};
        kube_error_set(&err, KUBE_ERR_NOMEM, "could not plan: %s", strerror(ENOMEM));
        pc_fail(run, LOG_ERROR, "plan failed", &err);
        kube_error_clear(&err);
        return;
    }
    /* A member the cache lacks: not judged missing until the cache has caught up with the pool
     * or the API server says so (#26); the pool waits meanwhile, with nothing written. */
    bool absent = pc_any_absent(pc, pool), confirmed = true;
    pc_pool *st = pc_pool_get(pc, run->key, absent);
    uint64_t wait_ms = 0;
    if (!absent && st && (st->absent_since_ms || st->absent_ok_rv)) {
        st->absent_since_ms = 0;
        free(st->absent_ok_rv);
        st->absent_ok_rv = NULL;
        pc_pool_trim(pc, st);
    } else if (absent && st && !pc_absence_known(pc, st, pool)) {
        uint64_t now = ev_now_ms();
        if (!st->absent_since_ms)
            st->absent_since_ms = now;
        if (now - st->absent_since_ms >= PC_ABSENT_GRACE_MS) {
            kube_error err = {0};
            if (pc_read_absent(run, &err) == 0)
                return;
            pc_fail(run, LOG_ERROR, "could not read the members the cache lacks", &err);
            kube_error_clear(&err);
            return;
        }
        confirmed = false;
        wait_ms = st->absent_since_ms + PC_ABSENT_GRACE_MS - now;
    } else if (absent && st && !st->absent_since_ms) {
        st->absent_since_ms = ev_now_ms(); /* keeps the confirmation while the member is absent */
    }
    /* A swap whose drain began: the routers may have acknowledged it already. */
    pc_pool *swap = NULL;
    if (pc_swap_seen(pc, run->key, pool, ev_now_ms(), &swap) == 0 && swap && swap->swap_seen_ms &&
        pc_fence_confirm(run, pool))
        return; /* its answer plans again */
    int rc = pc_build(run, pool, confirmed);
    if (rc == 0 && !confirmed)
        run->plan->requeue_after_ms = (int64_t)wait_ms;
    if (rc < 0) {
        kube_error err = {0};
        kube_error_set(&err, KUBE_ERR_NOMEM, "could not plan: %s", strerror(-rc));
        pc_fail(run, LOG_ERROR, "plan failed", &err);
        kube_error_clear(&err);
        return;
    }
    pc_next(run);
}

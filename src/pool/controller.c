/* controller: the work queue and each pool's runs. Each pool key in flight has its own run
 * (pc_run), the user data of every callback it starts, so reconciles of different pools interleave
 * on the loop, up to max_concurrent at once; the work queue never hands out a key twice at once.
 * A run plans its pool (controller_plan.c) and carries the plan out (controller_act.c); here are
 * the runs' start and end, what the controller remembers of each pool between runs, and its
 * lifecycle. */
#include "pool/controller.h"

#include <stdlib.h>
#include <string.h>

#include "api/fence.h"
#include "api/records.h"
#include "controller_internal.h"

/* ---- probe memory (kept by the prober) ---- */

/* For the prober's sweep: the cache still has this Pod (not one replaced under its name). */
static bool pc_pod_alive(void *ud, const char *pod_key, const char *uid)
{
    const api_pod *pod = store_get(((pool_controller *)ud)->cfg.pods, pod_key);
    return pod && pod->uid && strcmp(pod->uid, uid) == 0;
}

/* ---- per-pool memory ---- */

pc_pool *pc_pool_get(pool_controller *pc, const char *pool, bool create)
{
    strmap_node *n = strmap_get(&pc->state, pool);
    if (n || !create)
        return n ? STRMAP_OWNER(n, pc_pool, node) : NULL;
    pc_pool *st = calloc(1, sizeof(*st));
    if (!st || !(st->key = strdup(pool))) {
        free(st);
        return NULL;
    }
    st->pc = pc;
    strmap_insert(&pc->state, &st->node, st->key);
    return st;
}

static void pc_pool_free(pool_controller *pc, pc_pool *st)
{
    strmap_remove(&pc->state, &st->node);
    prober_cancel(st->probing);
    free(st->key);
    free(st->refused_member);
    free(st->refused_message);
    free(st->absent_ok_rv);
    free(st->acked_resident);
    free(st);
}

void pc_pool_drop(pool_controller *pc, const char *pool)
{
    pc_pool *st = pc_pool_get(pc, pool, false);
    if (st)
        pc_pool_free(pc, st);
}

/* Frees st when it holds nothing any more. */
void pc_pool_trim(pool_controller *pc, pc_pool *st)
{
    if (!st->refused_member && !st->status_refused && !st->probing && !st->swap_seen_ms &&
        !st->absent_since_ms)
        pc_pool_free(pc, st);
}

void pc_refusal_clear(pc_pool *st)
{
    free(st->refused_member);
    free(st->refused_message);
    st->refused_member = st->refused_message = NULL;
}

/* Remembers the refused scale of member to replicas, replacing an earlier one. */
void pc_refusal_set(pool_controller *pc, const char *pool, const char *member, int32_t replicas,
                    const char *message)
{
    pc_pool *st = pc_pool_get(pc, pool, true);
    if (!st)
        return;
    char *m = strdup(member), *msg = strdup(message ? message : "");
    if (!m || !msg) {
        /* Unreported then, but still retried with backoff: the log line said why. */
        free(m);
        free(msg);
        pc_pool_trim(pc, st);
        return;
    }
    pc_refusal_clear(st);
    st->refused_member = m;
    st->refused_replicas = replicas;
    st->refused_message = msg;
}

/* ---- one reconcile ---- */

static void pc_run_free(pc_run *run)
{
    if (!run)
        return;
    kube_call_cancel(run->call);
    plan_free(run->plan);
    free(run->key);
    free(run->ns);
    free(run->name);
    free(run->uid);
    free(run->rv);
    free(run->write_key);
    free(run->write_rv);
    free(run->fence_resident);
    free(run);
}

/* Ends run. On success the pool comes back after requeue_ms (0: the resync backstop), unless
 * PC_NO_REQUEUE. */
void pc_finish(pc_run *run, wq_result result, uint64_t requeue_ms)
{
    pool_controller *pc = run->pc;
    for (pc_run **pp = &pc->runs; *pp; pp = &(*pp)->next) {
        if (*pp == run) {
            *pp = run->next;
            break;
        }
    }
    pool_metrics_reconciled(pc->cfg.pm, result == WQ_SUCCESS, ev_now_ms() - run->started_ms);
    char *key = run->key;
    bool requeue = run->requeue;
    run->key = NULL;
    run->call = NULL; /* finished or never started: nothing to cancel */
    pc_run_free(run);
    wq_done(pc->queue, key, result);
    if (requeue && result == WQ_SUCCESS)
        wq_add(pc->queue, key);
    else if (result == WQ_SUCCESS && requeue_ms != PC_NO_REQUEUE)
        wq_add_after(pc->queue, key, requeue_ms ? requeue_ms : pc->cfg.resync_ms);
    free(key);
}

void pc_fail(pc_run *run, log_level level, const char *what, const kube_error *err)
{
    log_kv(level, what, "pool", run->key, "error", err && err->message ? err->message : "",
           "reason", err && err->reason ? err->reason : "", NULL);
    pc_finish(run, WQ_FAILURE, 0);
}

pc_pool *pc_run_answered(pc_run *run, const api_pool **pool)
{
    run->call = NULL;
    *pool = store_get(run->pc->cfg.pools, run->key);
    return pc_pool_get(run->pc, run->key, false);
}

static void pc_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    pool_controller *pc = ud;
    pool_metrics_dequeued(pc->cfg.pm, waited_ms);
    pc_run *run = calloc(1, sizeof(*run));
    if (!run || !(run->key = strdup(key))) {
        free(run);
        wq_done(q, key, WQ_FAILURE);
        return;
    }
    run->pc = pc;
    run->started_ms = ev_now_ms();
    run->next = pc->runs;
    pc->runs = run;
    pc_plan(run);
}

/* ---- lifecycle ---- */

pool_controller *pool_controller_new(const pool_controller_config *cfg)
{
    pool_controller *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    pc->cfg = *cfg;
    if (!pc->cfg.probe_timeout_ms)
        pc->cfg.probe_timeout_ms = 2000;
    pc->cfg.drain_fence_ms = api_fence_ms(pc->cfg.drain_fence_ms);
    if (!pc->cfg.resync_ms)
        pc->cfg.resync_ms = 300000;
    if (!pc->cfg.expect_ms)
        pc->cfg.expect_ms = 5000;
    if (!pc->cfg.max_concurrent)
        pc->cfg.max_concurrent = 4;
    pc->cfg.instance = NULL;
    pc->lease_gen = 1;
    if (strmap_init(&pc->state) < 0 ||
        !(pc->instance = strdup(cfg->instance ? cfg->instance : "")) ||
        (cfg->router_leases && !(pc->lease_seen = fence_seen_new()))) {
        pool_controller_free(pc);
        return NULL;
    }
    /* The queue bounds the reconciles in flight and never hands out a key twice at once. */
    wq_config qc = {.concurrency = pc->cfg.max_concurrent};
    pc->queue = wq_new(cfg->loop, &qc, pc_process, pc);
    pc->prober = prober_new(cfg->loop, pc->cfg.probe_timeout_ms);
    pc->expects = expects_new();
    if (!pc->queue || !pc->prober || !pc->expects) {
        pool_controller_free(pc);
        return NULL;
    }
    prober_memo_alive(pc->prober, pc_pod_alive, pc);
    return pc;
}

void pool_controller_enqueue(pool_controller *pc, const char *pool_key)
{
    wq_add(pc->queue, pool_key);
}

void pool_controller_lease_changed(pool_controller *pc, const char *key, const char *rv, bool wake)
{
    if (!pc->lease_seen)
        return;
    uint64_t seen;
    if (rv) /* out of memory: the version counts from a later sighting, which is safe */
        (void)fence_seen_note(pc->lease_seen, key, rv, ev_now_ms(), &seen);
    else
        fence_seen_forget(pc->lease_seen, key);
    pc->lease_gen++;
    if (wake)
        pc_fence_wake(pc);
}

void pool_controller_pod_gone(pool_controller *pc, const char *uid)
{
    prober_memo_forget(pc->prober, uid);
}

void pool_controller_queue_stats(const pool_controller *pc, wq_stats *out)
{
    wq_stats_get(pc->queue, out);
}

static void pc_drained(wq *q, void *ud)
{
    (void)q;
    pool_controller *pc = ud;
    if (pc->shutdown_done)
        pc->shutdown_done(pc->shutdown_ud);
}

void pool_controller_shutdown(pool_controller *pc, void (*done)(void *ud), void *ud)
{
    pc->shutdown_done = done;
    pc->shutdown_ud = ud;
    wq_shutdown(pc->queue, pc_drained, pc);
}

void pool_controller_free(pool_controller *pc)
{
    if (!pc)
        return;
    while (pc->runs) {
        pc_run *run = pc->runs;
        pc->runs = run->next;
        pc_run_free(run);
    }
    wq_free(pc->queue);
    /* The pools' probes in flight before the prober that runs them. */
    for (strmap_node *n; pc->state.buckets && (n = strmap_first(&pc->state));)
        pc_pool_free(pc, STRMAP_OWNER(n, pc_pool, node));
    strmap_fini(&pc->state);
    prober_free(pc->prober);
    expects_free(pc->expects);
    fence_seen_free(pc->lease_seen);
    free(pc->instance);
    free(pc);
}

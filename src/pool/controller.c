/* controller: wires informers, the work queue, the plan and the API writes. One reconcile runs at
 * a time; it walks the plan's actions in order and stops at the first failure (the key is then
 * retried with backoff). After its own write, a pool is not planned again until the cache shows
 * that write (or expect_ms passed), so a plan never acts on a view older than its last action. */
#include "pool/controller.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/log.h"
#include "informer/informer.h"
#include "informer/workqueue.h"
#include "kube/event.h"
#include "pool/plan.h"
#include "pool/pool_metrics.h"
#include "pool/scale.h"
#include "pool/prober.h"
#include "pool/snapshot.h"
#include "pool/status.h"
#include "util/strmap.h"

#define PC_COMPONENT "modelpool-operator"
/* Probes and re-plans in one reconcile before it yields to the queue. */
#define PC_MAX_REPLANS 4

/* A write of ours for pool that the cache has not shown yet: the object under key in cache had
 * resourceVersion old_rv before it. */
typedef struct pc_expect {
    struct pc_expect *next;
    char *pool;
    const store *cache;
    char *key;
    char *old_rv;
    uint64_t at_ms;
} pc_expect;

/* The last idle probe of a Pod, by UID. */
typedef struct pc_memo {
    struct pc_memo *next;
    char *uid;
    pool_probe_memo memo;
    char *message;
} pc_memo;

/* Reaction clocks of one pool (modelpool_reaction_seconds): when a member was scaled up (path a)
 * and when the last Pod of a member was deleted during a swap (path b), in ev_now_us time. */
typedef struct pc_stamp {
    strmap_node node; /* key: the pool's key */
    char *key;
    char *requested; /* path a: the member that was scaled up */
    uint64_t requested_us, pod_gone_us;
} pc_stamp;

/* The reconcile in flight. */
typedef struct pc_run {
    char *key;
    char *ns, *name, *uid, *rv;
    plan_result *plan;
    size_t next;
    int replans;
    kube_call *call;
    prober_batch *batch;
    uint64_t started_ms;
    bool tested;     /* the write in flight is a scale's JSON patch with test operations */
    int64_t swap_ms; /* a swap this plan completes: how long it took; -1 unknown */
} pc_run;

struct pool_controller {
    ev_loop *loop;
    kube_client *client;
    pool_controller_opts opts;
    char *instance;
    informer *pools, *isvcs, *pods;
    wq *queue;
    prober *prober;
    pc_expect *expects;
    pc_memo *memos;
    pc_run *run;
    pool_metrics *pm;
    strmap stamps;
    bool synced;  /* all three caches hold a full list */
    bool leading; /* may write (pool_controller_lead); until then events queue nothing */
    void (*shutdown_done)(void *ud);
    void *shutdown_ud;
};

static int64_t pc_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *pc_str(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- probe memory ---- */

static const pool_probe_memo *pc_memo_lookup(void *ud, const char *uid)
{
    pool_controller *pc = ud;
    for (pc_memo *m = pc->memos; m; m = m->next)
        if (strcmp(m->uid, uid) == 0)
            return &m->memo;
    return NULL;
}

static void pc_memo_forget(pool_controller *pc, const char *uid)
{
    for (pc_memo **pp = &pc->memos; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->uid, uid) == 0) {
            pc_memo *m = *pp;
            *pp = m->next;
            free(m->uid);
            free(m->message);
            free(m);
            return;
        }
    }
}

static int pc_memo_set(pool_controller *pc, const char *uid, plan_probe_result r,
                       const char *message)
{
    pc_memo_forget(pc, uid);
    pc_memo *m = calloc(1, sizeof(*m));
    if (!m || !(m->uid = strdup(uid)) || !(m->message = strdup(message ? message : ""))) {
        if (m)
            free(m->uid);
        free(m);
        return -ENOMEM;
    }
    m->memo = (pool_probe_memo){.result = r, .at_ms = pc_wall_ms(), .message = m->message};
    m->next = pc->memos;
    pc->memos = m;
    return 0;
}

/* ---- expectations of our own writes ---- */

static void pc_expect_free(pc_expect *e)
{
    free(e->pool);
    free(e->key);
    free(e->old_rv);
    free(e);
}

static void pc_expect_add(pool_controller *pc, const char *pool, const store *cache,
                          const char *key, const char *old_rv)
{
    pc_expect *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->cache = cache;
    e->pool = strdup(pool);
    e->key = strdup(key);
    e->old_rv = strdup(old_rv ? old_rv : "");
    if (!e->pool || !e->key || !e->old_rv) {
        /* Without the record the next plan may read the cache before our write: the writes
         * carry resourceVersion preconditions, so that costs a 409, not safety. */
        pc_expect_free(e);
        return;
    }
    e->at_ms = ev_now_ms();
    e->next = pc->expects;
    pc->expects = e;
}

/* True while a write of ours for pool is not yet in the cache. Expectations met or expired are
 * dropped as a side effect. */
static bool pc_expect_pending(pool_controller *pc, const char *pool)
{
    bool pending = false;
    uint64_t now = ev_now_ms();
    for (pc_expect **pp = &pc->expects; *pp;) {
        pc_expect *e = *pp;
        const cJSON *obj = store_get(e->cache, e->key);
        const char *rv = obj ? pc_str(obj, "metadata", "resourceVersion") : NULL;
        if (!rv || strcmp(rv, e->old_rv) != 0 || now - e->at_ms >= pc->opts.expect_ms) {
            *pp = e->next;
            pc_expect_free(e);
            continue;
        }
        if (strcmp(e->pool, pool) == 0)
            pending = true;
        pp = &e->next;
    }
    return pending;
}

/* ---- reaction clocks ---- */

static pc_stamp *pc_stamp_get(pool_controller *pc, const char *pool, bool create)
{
    strmap_node *n = strmap_get(&pc->stamps, pool);
    if (n || !create)
        return n ? STRMAP_OWNER(n, pc_stamp, node) : NULL;
    pc_stamp *st = calloc(1, sizeof(*st));
    if (!st || !(st->key = strdup(pool))) {
        free(st);
        return NULL;
    }
    strmap_insert(&pc->stamps, &st->node, st->key);
    return st;
}

static void pc_stamp_drop(pool_controller *pc, const char *pool)
{
    pc_stamp *st = pc_stamp_get(pc, pool, false);
    if (!st)
        return;
    strmap_remove(&pc->stamps, &st->node);
    free(st->key);
    free(st->requested);
    free(st);
}

/* The PATCH about to be sent for action a ends a reaction clock: a scale-down of a member other
 * than the one requested (path a), or the target's scale-up once the slot is free (path b). */
static void pc_stamp_scaled(pool_controller *pc, const char *pool, const plan_action *a)
{
    pc_stamp *st = pc->pm ? pc_stamp_get(pc, pool, false) : NULL;
    if (!st)
        return;
    uint64_t now = ev_now_us();
    if (a->replicas == 0 && st->requested_us && st->requested &&
        strcmp(st->requested, a->member) != 0) {
        pool_metrics_reaction(pc->pm, POOL_REACTION_A, now - st->requested_us);
        st->requested_us = 0;
    } else if (a->replicas >= 1 && st->pod_gone_us) {
        pool_metrics_reaction(pc->pm, POOL_REACTION_B, now - st->pod_gone_us);
        st->pod_gone_us = 0;
    }
}

/* ---- one reconcile ---- */

static void pc_run_free(pc_run *run)
{
    if (!run)
        return;
    kube_call_cancel(run->call);
    prober_cancel(run->batch);
    plan_free(run->plan);
    free(run->key);
    free(run->ns);
    free(run->name);
    free(run->uid);
    free(run->rv);
    free(run);
}

/* pc_finish's requeue_ms for a pool that is gone: no backstop reconcile (an event brings back a
 * pool created again under the name). */
#define PC_NO_REQUEUE UINT64_MAX

/* Ends the reconcile in flight. On success the pool comes back after requeue_ms (0: the resync
 * backstop), unless PC_NO_REQUEUE. */
static void pc_finish(pool_controller *pc, wq_result result, uint64_t requeue_ms)
{
    pc_run *run = pc->run;
    pc->run = NULL;
    pool_metrics_reconciled(pc->pm, result == WQ_SUCCESS, ev_now_ms() - run->started_ms);
    char *key = run->key;
    run->key = NULL;
    run->call = NULL; /* finished or never started: nothing to cancel */
    run->batch = NULL;
    pc_run_free(run);
    wq_done(pc->queue, key, result);
    if (result == WQ_SUCCESS && requeue_ms != PC_NO_REQUEUE)
        wq_add_after(pc->queue, key, requeue_ms ? requeue_ms : pc->opts.resync_ms);
    free(key);
}

static void pc_plan(pool_controller *pc);
static void pc_next(pool_controller *pc);

static void pc_fail(pool_controller *pc, const char *what, const kube_error *err)
{
    log_kv(LOG_ERROR, what, "pool", pc->run->key, "error", err && err->message ? err->message : "",
           "reason", err && err->reason ? err->reason : "", NULL);
    pc_finish(pc, WQ_FAILURE, 0);
}

static void pc_on_write(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    (void)body;
    pool_controller *pc = ud;
    pc->run->call = NULL;
    if (err->kind != KUBE_OK) {
        /* A precondition that no longer holds: a resourceVersion (409), or a scale's JSON patch
         * test (422 Invalid, which the API server does not tell apart from a value it refuses).
         * Either way the plan is retried with backoff from a fresher cache. */
        const char *what = "write failed";
        if (kube_error_is(err, "Conflict"))
            what = "write conflict, will re-plan";
        else if (pc->run->tested && kube_error_is(err, "Invalid"))
            what = "scale refused: the member's uid or replicas changed (or the value is "
                   "invalid), will re-plan";
        pc_fail(pc, what, err);
        return;
    }
    pc->run->next++;
    pc_next(pc);
}

static void pc_on_event(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)ud;
    (void)code;
    (void)body;
    if (err->kind != KUBE_OK)
        log_kv(LOG_ERROR, "could not record event", "error", err->message, NULL);
}

static int pc_write_status(pool_controller *pc, kube_error *err)
{
    pc_run *run = pc->run;
    char *body = pool_status_patch(&run->plan->status, run->rv);
    char *path = kube_path(POOL_GROUP, POOL_VERSION, run->ns, "modelpools", run->name, "status");
    int rc = -1;
    if (!body || !path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        kube_request req = {
            .method = KUBE_PATCH_MERGE, .path = path, .body = body, .max_retries = -1};
        run->tested = false;
        run->call = kube_call_start(pc->client, &req, pc_on_write, pc, err);
        if (run->call) {
            pc_expect_add(pc, run->key, informer_store(pc->pools), run->key, run->rv);
            rc = 0;
        }
    }
    log_kv(LOG_INFO, "status", "pool", run->key, "phase", run->plan->status.phase, "resident",
           run->plan->status.resident_member, "pending", run->plan->status.pending_member, NULL);
    free(body);
    free(path);
    return rc;
}

/* Sends the scale PATCH of a: 0 (started; pc_on_write continues), 1 when the cache already shows
 * the member at those replicas (nothing to send), -1 with err set. A plan's later actions run
 * after its earlier writes, by which time the cache may have caught up with them: a write that
 * changes nothing would leave no trace in the cache and hold the pool back for expect_ms. */
static int pc_scale(pool_controller *pc, const plan_action *a, kube_error *err)
{
    pc_run *run = pc->run;
    char *key = NULL, *path = NULL, *body = NULL;
    int rc = -1;
    if (asprintf(&key, "%s/%s", run->ns, a->member) < 0) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        return -1;
    }
    const cJSON *isvc = store_get(informer_store(pc->isvcs), key);
    const char *rv = isvc ? pc_str(isvc, "metadata", "resourceVersion") : NULL;
    const cJSON *now = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(isvc, "spec"), "replicas");
    if (rv && cJSON_IsNumber(now) && now->valuedouble == (double)a->replicas) {
        log_kv(LOG_DEBUG, "already scaled", "pool", run->key, "member", a->member, NULL);
        free(key);
        return 1;
    }
    bool json_patch = false;
    path = kube_path(POOL_GROUP, POOL_VERSION, run->ns, "inferenceservices", a->member, NULL);
    if (!rv) {
        kube_error_set(err, KUBE_ERR_CONFIG, "member %s is not in the cache", key);
    } else if (!path || !(body = pool_scale_patch(isvc, a->replicas, &json_patch))) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        kube_request req = {.method = json_patch ? KUBE_PATCH_JSON : KUBE_PATCH_MERGE,
                            .path = path,
                            .body = body,
                            .max_retries = -1};
        char replicas[16];
        snprintf(replicas, sizeof(replicas), "%d", (int)a->replicas);
        log_kv(LOG_INFO, "scale", "pool", run->key, "member", a->member, "replicas", replicas,
               "reason", a->reason, NULL);
        pc_stamp_scaled(pc, run->key, a);
        run->tested = json_patch;
        run->call = kube_call_start(pc->client, &req, pc_on_write, pc, err);
        if (run->call) {
            pc_expect_add(pc, run->key, informer_store(pc->isvcs), key, rv);
            rc = 0;
        }
    }
    free(key);
    free(path);
    free(body);
    return rc;
}

static void pc_event(pool_controller *pc, const plan_action *a)
{
    pc_run *run = pc->run;
    kube_object_ref about = {.api_version = POOL_GROUP "/" POOL_VERSION,
                             .kind = "ModelPool",
                             .namespace_ = run->ns,
                             .name = run->name,
                             .uid = run->uid};
    kube_event ev = {.warning = a->warning,
                     .reason = a->reason,
                     .message = a->message,
                     .component = PC_COMPONENT,
                     .instance = pc->instance};
    log_kv(a->warning ? LOG_ERROR : LOG_INFO, "event", "pool", run->key, "reason", a->reason,
           "message", a->message, NULL);
    if (strcmp(a->reason, "SwapCompleted") == 0) {
        pool_metrics_swap_done(pc->pm, run->ns, run->name, run->swap_ms);
        pc_stamp_drop(pc, run->key);
    } else if (strcmp(a->reason, "SwapDeferred") == 0) {
        /* The message starts with the condition's reason; a wait for a busy member is not part
         * of the operator's reaction time. */
        char reason[64];
        snprintf(reason, sizeof(reason), "%.*s", (int)strcspn(a->message, ":"), a->message);
        pool_metrics_deferred(pc->pm, run->ns, run->name, reason);
        pc_stamp *st = pc_stamp_get(pc, run->key, false);
        if (st)
            st->requested_us = 0;
    }
    kube_error err = {0};
    /* An Event is for people; a failure to record one must not hold up the slot. */
    if (!kube_event_post(pc->client, &about, &ev, pc_on_event, pc, &err))
        log_kv(LOG_ERROR, "could not record event", "error", err.message, NULL);
    kube_error_clear(&err);
}

static plan_probe_result pc_probe_result(probe_verdict v)
{
    switch (v) {
    case PROBE_IDLE:
        return PLAN_PROBE_IDLE;
    case PROBE_BUSY:
        return PLAN_PROBE_BUSY;
    case PROBE_UNSUPPORTED:
        return PLAN_PROBE_UNSUPPORTED;
    case PROBE_ERROR:
        break;
    }
    return PLAN_PROBE_ERROR;
}

static void pc_on_probed(void *ud, const prober_verdict *results, size_t n)
{
    pool_controller *pc = ud;
    pc_run *run = pc->run;
    run->batch = NULL;
    for (size_t i = 0; i < n; i++) {
        char *key = NULL;
        if (asprintf(&key, "%s/%s", run->ns, results[i].pod) < 0)
            continue;
        const cJSON *pod = store_get(informer_store(pc->pods), key);
        const char *uid = pod ? pc_str(pod, "metadata", "uid") : NULL;
        log_kv(LOG_DEBUG, "probed", "pool", run->key, "pod", key, "verdict",
               probe_verdict_name(results[i].verdict), "message", results[i].message, NULL);
        if (uid)
            pc_memo_set(pc, uid, pc_probe_result(results[i].verdict), results[i].message);
        free(key);
    }
    /* Probe results are inputs of the plan: plan again with them. */
    if (++run->replans > PC_MAX_REPLANS) {
        pc_finish(pc, WQ_SUCCESS, PLAN_PROBE_TTL_MS);
        return;
    }
    pc_plan(pc);
}

static int pc_probe(pool_controller *pc, const plan_action *a)
{
    prober_target *targets = calloc(a->n_pods ? a->n_pods : 1, sizeof(*targets));
    if (!targets)
        return -1;
    for (size_t i = 0; i < a->n_pods; i++)
        targets[i] = (prober_target){.pod = a->pods[i].name, .ip = a->pods[i].ip};
    pc->run->batch = prober_start(pc->prober, a->runtime, a->idle_path, a->port, targets, a->n_pods,
                                  pc_on_probed, pc);
    free(targets);
    return pc->run->batch ? 0 : -1;
}

/* Applies the plan's actions from run->next on; each write continues here from its callback. */
static void pc_next(pool_controller *pc)
{
    pc_run *run = pc->run;
    kube_error err = {0};
    while (run->next < run->plan->n_actions) {
        const plan_action *a = &run->plan->actions[run->next];
        switch (a->kind) {
        case PLAN_EVENT:
            pc_event(pc, a);
            run->next++;
            continue;
        case PLAN_WRITE_STATUS:
            if (pc_write_status(pc, &err) < 0)
                break;
            return;
        case PLAN_SCALE: {
            int rc = pc_scale(pc, a, &err);
            if (rc < 0)
                break;
            if (rc > 0) {
                run->next++;
                continue;
            }
            return;
        }
        case PLAN_PROBE:
            if (pc_probe(pc, a) < 0) {
                kube_error_set(&err, KUBE_ERR_NOMEM, "could not start the idle probe");
                break;
            }
            return;
        }
        pc_fail(pc, "action failed", &err);
        kube_error_clear(&err);
        return;
    }
    pc_finish(pc, WQ_SUCCESS,
              run->plan->requeue_after_ms > 0 ? (uint64_t)run->plan->requeue_after_ms : 0);
}

/* The resident gauges, and how long a swap this plan completes took: since the Swapping
 * condition became True (so a swap begun before a restart is timed too). */
static void pc_plan_metrics(pool_controller *pc, const plan_snapshot *snap)
{
    pc_run *run = pc->run;
    const plan_status *st = &run->plan->status;
    run->swap_ms = -1;
    for (size_t i = 0; i < snap->status.n_conditions; i++) {
        const plan_condition *c = &snap->status.conditions[i];
        if (strcmp(c->type, "Swapping") == 0 && c->status && strcmp(c->status, "True") == 0)
            run->swap_ms = snap->now_ms - c->last_transition_ms;
    }
    if (!pc->pm)
        return;
    const char **names = calloc(st->n_members ? st->n_members : 1, sizeof(*names));
    if (!names)
        return;
    for (size_t i = 0; i < st->n_members; i++)
        names[i] = st->members[i].name;
    pool_metrics_members(pc->pm, run->ns, run->name, names, st->n_members, st->resident_member);
    free(names);
}

static void pc_plan(pool_controller *pc)
{
    pc_run *run = pc->run;
    const cJSON *pool = store_get(informer_store(pc->pools), run->key);
    if (!pool) {
        /* Deleted: its series and clocks go with it. */
        size_t nl = strcspn(run->key, "/");
        char *ns = strndup(run->key, nl);
        if (ns && run->key[nl])
            pool_metrics_forget(pc->pm, ns, run->key + nl + 1);
        free(ns);
        pc_stamp_drop(pc, run->key);
        pc_finish(pc, WQ_SUCCESS, PC_NO_REQUEUE);
        return;
    }
    const char *ns = pc_str(pool, "metadata", "namespace");
    if (pc_expect_pending(pc, run->key)) {
        /* The watch event of our write will queue the pool again; the delay is a backstop. */
        pc_finish(pc, WQ_SUCCESS, pc->opts.expect_ms);
        return;
    }
    free(run->ns);
    free(run->name);
    free(run->uid);
    free(run->rv);
    run->ns = strdup(ns ? ns : "");
    run->name = strdup(pc_str(pool, "metadata", "name"));
    const char *uid = pc_str(pool, "metadata", "uid");
    run->uid = uid ? strdup(uid) : NULL;
    run->rv = strdup(pc_str(pool, "metadata", "resourceVersion"));
    plan_free(run->plan);
    run->plan = NULL;
    run->next = 0;

    pool_sources src = {.pools = informer_store(pc->pools),
                        .isvcs = informer_store(pc->isvcs),
                        .pods = informer_store(pc->pods),
                        .probe = pc_memo_lookup,
                        .probe_ud = pc};
    pool_snapshot snap;
    int rc = run->ns && run->name && run->rv ? pool_snapshot_build(pool, &src, pc_wall_ms(), &snap)
                                             : -ENOMEM;
    if (rc == 0) {
        rc = plan_build(&snap.snap, &run->plan);
        if (rc == 0)
            pc_plan_metrics(pc, &snap.snap);
        pool_snapshot_release(&snap);
    }
    if (rc < 0) {
        kube_error err = {0};
        kube_error_set(&err, KUBE_ERR_NOMEM, "could not plan: %s", strerror(-rc));
        pc_fail(pc, "plan failed", &err);
        kube_error_clear(&err);
        return;
    }
    pc_next(pc);
}

static void pc_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    pool_controller *pc = ud;
    pool_metrics_dequeued(pc->pm, waited_ms);
    pc->run = calloc(1, sizeof(*pc->run));
    if (!pc->run || !(pc->run->key = strdup(key))) {
        free(pc->run);
        pc->run = NULL;
        wq_done(q, key, WQ_FAILURE);
        return;
    }
    pc->run->started_ms = ev_now_ms();
    pc_plan(pc);
}

/* ---- informer events -> queue ---- */

static void pc_enqueue_pool(pool_controller *pc, const cJSON *pool)
{
    char *key = store_key_of(pool);
    if (key)
        wq_add(pc->queue, key);
    free(key);
}

static bool pc_enqueue_each(const char *key, const cJSON *obj, void *ud)
{
    (void)obj;
    wq_add(ud, key);
    return true;
}

/* Queues every pool listing member name in ns. */
static void pc_enqueue_member(pool_controller *pc, const char *ns, const char *name)
{
    if (!pc->synced || !pc->leading || !name)
        return;
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", name) < 0)
        return;
    store_index_each(informer_store(pc->pools), POOL_INDEX_MEMBER, v, pc_enqueue_each, pc->queue);
    free(v);
}

static void pc_on_synced(void *ud)
{
    pool_controller *pc = ud;
    if (pc->synced || !informer_synced(pc->pools) || !informer_synced(pc->isvcs) ||
        !informer_synced(pc->pods))
        return;
    pc->synced = true;
    /* The list pages are freed by now; hand their pages back instead of keeping the high-water
     * mark of the initial list for the life of the process. */
    malloc_trim(0);
    log_kv(LOG_INFO, "caches synced", NULL);
    if (pc->leading)
        store_each(informer_store(pc->pools), pc_enqueue_each, pc->queue);
}

static void pc_pool_changed(void *ud, const cJSON *obj)
{
    pool_controller *pc = ud;
    if (pc->synced && pc->leading)
        pc_enqueue_pool(pc, obj);
}

static void pc_pool_updated(void *ud, const cJSON *old_obj, const cJSON *new_obj)
{
    pool_controller *pc = ud;
    /* Members dropped from a pool's spec may now be free for another pool that claimed them. */
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(old_obj, "spec"), "members"))
    {
        pc_enqueue_member(
            pc, pc_str(old_obj, "metadata", "namespace"),
            pc_str(cJSON_GetObjectItemCaseSensitive(m, "inferenceServiceRef"), "name", NULL));
    }
    pc_pool_changed(ud, new_obj);
}

static void pc_pool_deleted(void *ud, const cJSON *obj)
{
    pc_pool_updated(ud, obj, obj);
}

static void pc_isvc_changed(void *ud, const cJSON *obj)
{
    pc_enqueue_member(ud, pc_str(obj, "metadata", "namespace"), pc_str(obj, "metadata", "name"));
}

/* Starting a reaction clock for every pool listing a member: the member, and what to stamp. */
typedef struct pc_clock {
    pool_controller *pc;
    const char *member;
    bool pod_gone; /* path b; else path a */
    uint64_t now_us;
} pc_clock;

static bool pc_clock_start(const char *key, const cJSON *pool, void *ud)
{
    pc_clock *c = ud;
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(pool, "status");
    const char *pending = pc_str(status, "pendingMember", NULL);
    if (c->pod_gone) {
        /* Only the incumbent's Pods, during a swap: the target waits for them. */
        if (!pending || !*pending || strcmp(pending, c->member) == 0)
            return true;
        pc_stamp *st = pc_stamp_get(c->pc, key, true);
        if (st)
            st->pod_gone_us = c->now_us;
        return true;
    }
    pc_stamp *st = pc_stamp_get(c->pc, key, true);
    if (st && !st->requested_us) {
        char *m = strdup(c->member);
        if (m) {
            free(st->requested);
            st->requested = m;
            st->requested_us = c->now_us;
        }
    }
    return true;
}

static void pc_clock_member(pool_controller *pc, const char *ns, const char *member, bool pod_gone)
{
    if (!pc->pm || !pc->synced || !pc->leading || !member)
        return;
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", member) < 0)
        return;
    pc_clock c = {.pc = pc, .member = member, .pod_gone = pod_gone, .now_us = ev_now_us()};
    store_index_each(informer_store(pc->pools), POOL_INDEX_MEMBER, v, pc_clock_start, &c);
    free(v);
}

/* spec.replicas, absent counting as 1 (what the InferenceService then runs). */
static double pc_replicas(const cJSON *isvc)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(isvc, "spec"), "replicas");
    return cJSON_IsNumber(r) ? r->valuedouble : 1;
}

static void pc_isvc_updated(void *ud, const cJSON *old_obj, const cJSON *new_obj)
{
    if (pc_replicas(old_obj) < 1 && pc_replicas(new_obj) >= 1)
        pc_clock_member(ud, pc_str(new_obj, "metadata", "namespace"),
                        pc_str(new_obj, "metadata", "name"), false);
    pc_isvc_changed(ud, new_obj);
}

/* The member a Pod belongs to: its inference.llmkube.dev/service label, or NULL. */
static const char *pc_pod_member(const cJSON *pod)
{
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "labels");
    return pc_str(labels, POOL_SERVICE_LABEL, NULL);
}

static void pc_pod_changed(void *ud, const cJSON *obj)
{
    pc_enqueue_member(ud, pc_str(obj, "metadata", "namespace"), pc_pod_member(obj));
}

static void pc_pod_updated(void *ud, const cJSON *old_obj, const cJSON *new_obj)
{
    (void)old_obj;
    pc_pod_changed(ud, new_obj);
}

static void pc_pod_deleted(void *ud, const cJSON *obj)
{
    const char *uid = pc_str(obj, "metadata", "uid");
    if (uid)
        pc_memo_forget(ud, uid);
    pc_clock_member(ud, pc_str(obj, "metadata", "namespace"), pc_pod_member(obj), true);
    pc_pod_changed(ud, obj);
}

static void pc_on_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "list/watch failed, retrying", "error", err->message, "reason", err->reason,
           NULL);
}

/* ---- lifecycle ---- */

static informer *pc_informer(pool_controller *pc, const char *group, const char *resource,
                             const char *selector, store_trim_fn trim, const informer_handlers *h)
{
    informer_config cfg = {.group = group,
                           .version = *group ? POOL_VERSION : "v1",
                           .resource = resource,
                           .namespace_ = pc->opts.namespace_,
                           .label_selector = selector,
                           .trim = trim};
    return informer_new(pc->loop, pc->client, &cfg, h);
}

/* Before a scrape: counters the queue and the informers keep themselves. */
static void pc_collect(void *ud)
{
    pool_controller *pc = ud;
    wq_stats q;
    wq_stats_get(pc->queue, &q);
    pool_metrics_queue(pc->pm, &q);
    informer_stats st;
    informer_stats_get(pc->pools, &st);
    pool_metrics_informer(pc->pm, "modelpools", &st);
    informer_stats_get(pc->isvcs, &st);
    pool_metrics_informer(pc->pm, "inferenceservices", &st);
    informer_stats_get(pc->pods, &st);
    pool_metrics_informer(pc->pm, "pods", &st);
}

pool_controller *pool_controller_new(ev_loop *loop, kube_client *client,
                                     const pool_controller_opts *opts)
{
    pool_controller *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    pc->loop = loop;
    pc->client = client;
    pc->opts = *opts;
    pc->opts.namespace_ = NULL;
    if (opts->namespace_ && !(pc->opts.namespace_ = strdup(opts->namespace_)))
        goto fail;
    if (!pc->opts.probe_timeout_ms)
        pc->opts.probe_timeout_ms = 2000;
    if (!pc->opts.resync_ms)
        pc->opts.resync_ms = 300000;
    if (!pc->opts.expect_ms)
        pc->opts.expect_ms = 5000;
    char host[256] = "";
    if (!opts->instance)
        gethostname(host, sizeof(host) - 1);
    if (!(pc->instance = strdup(opts->instance ? opts->instance : host)))
        goto fail;

    informer_handlers hp = {pc_pool_changed, pc_pool_updated, pc_pool_deleted,
                            pc_on_synced,    pc_on_error,     pc};
    informer_handlers hi = {pc_isvc_changed, pc_isvc_updated, pc_isvc_changed,
                            pc_on_synced,    pc_on_error,     pc};
    informer_handlers hd = {pc_pod_changed, pc_pod_updated, pc_pod_deleted,
                            pc_on_synced,   pc_on_error,    pc};
    pc->pools = pc_informer(pc, POOL_GROUP, "modelpools", NULL, pool_trim_pool, &hp);
    pc->isvcs = pc_informer(pc, POOL_GROUP, "inferenceservices", NULL, pool_trim_isvc, &hi);
    pc->pods = pc_informer(pc, "", "pods", POOL_SERVICE_LABEL, pool_trim_pod, &hd);
    if (strmap_init(&pc->stamps) < 0)
        goto fail;
    if (opts->metrics && !(pc->pm = pool_metrics_new(opts->metrics)))
        goto fail;
    pc->queue = wq_new(loop, NULL, pc_process, pc);
    pc->prober = prober_new(loop, pc->opts.probe_timeout_ms);
    if (!pc->pools || !pc->isvcs || !pc->pods || !pc->queue || !pc->prober)
        goto fail;
    if (store_add_index(informer_store(pc->pools), POOL_INDEX_MEMBER, pool_index_pool_members,
                        NULL) < 0 ||
        store_add_index(informer_store(pc->pods), POOL_INDEX_SERVICE, pool_index_pod_service,
                        NULL) < 0)
        goto fail;
    /* Last: once registered, the collector must find a whole controller. */
    if (opts->metrics && metrics_on_collect(opts->metrics, pc_collect, pc) < 0)
        goto fail;
    return pc;
fail:
    pool_controller_free(pc);
    return NULL;
}

int pool_controller_start(pool_controller *pc)
{
    int rc = informer_start(pc->pools);
    if (rc == 0)
        rc = informer_start(pc->isvcs);
    if (rc == 0)
        rc = informer_start(pc->pods);
    return rc;
}

bool pool_controller_synced(const pool_controller *pc)
{
    return pc->synced;
}

void pool_controller_waiting(const pool_controller *pc, char *buf, size_t len)
{
    const informer *const all[] = {pc->pools, pc->isvcs, pc->pods};
    informer_waiting(all, sizeof(all) / sizeof(all[0]), buf, len);
}

void pool_controller_lead(pool_controller *pc)
{
    if (pc->leading)
        return;
    pc->leading = true;
    /* A standby queued nothing: every pool is reconciled once now, from the warm cache. */
    if (pc->synced)
        store_each(informer_store(pc->pools), pc_enqueue_each, pc->queue);
}

static void pc_drained(wq *q, void *ud)
{
    (void)q;
    pool_controller *pc = ud;
    informer_stop(pc->pools);
    informer_stop(pc->isvcs);
    informer_stop(pc->pods);
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
    pc_run_free(pc->run);
    wq_free(pc->queue);
    prober_free(pc->prober);
    informer_free(pc->pools);
    informer_free(pc->isvcs);
    informer_free(pc->pods);
    while (pc->expects) {
        pc_expect *e = pc->expects;
        pc->expects = e->next;
        pc_expect_free(e);
    }
    while (pc->memos)
        pc_memo_forget(pc, pc->memos->uid);
    for (strmap_node *n; pc->stamps.buckets && (n = strmap_first(&pc->stamps));)
        pc_stamp_drop(pc, STRMAP_OWNER(n, pc_stamp, node)->key);
    strmap_fini(&pc->stamps);
    pool_metrics_free(pc->pm);
    free((char *)pc->opts.namespace_);
    free(pc->instance);
    free(pc);
}

/* controller: the work queue, the plan and the API writes. Each pool key in flight has its own
 * run (pc_run), the user data of every callback it starts, so reconciles of different pools
 * interleave on the loop, up to max_concurrent at once; the work queue never hands out a key twice
 * at once. An idle probe holds no reconcile slot (its answer queues the pool again), so probes
 * that hang until their timeout, however many, delay only their own pools.
 * A run walks the plan's actions in order and stops at the first failure (the key is then retried
 * with backoff). After its own write, a pool is not planned again until the cache shows that write
 * (informer/expect.h), so a plan never acts on a view older than its last action. */
#include "pool/controller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/log.h"
#include "informer/expect.h"
#include "kube/event.h"
#include "pool/plan.h"
#include "pool/prober.h"
#include "pool/records.h"
#include "pool/snapshot.h"
#include "pool/write_fault.h"
#include "util/strmap.h"

#define PC_COMPONENT "modelpool-operator"
/* Each attempt of a write ends within this: leadership is checked right before a write is sent,
 * and a write must not reach the API server long after, when the lease may have passed. 5 s is
 * the gap between the renew deadline (10 s) and the lease's expiry for the others (15 s). */
#define PC_WRITE_TIMEOUT_MS 5000
/* A member absent from a cache that has not caught up with its pool is read from the API server
 * after this long: the cache's own events usually settle it first (a pool applied with its
 * members), and a quiet cluster's watch may send nothing for a minute. */
#define PC_ABSENT_GRACE_MS 1000

/* What the controller remembers of one pool between its reconciles, by pool key; dropped with the
 * pool, and when nothing is left in it. */
typedef struct pc_pool {
    strmap_node node;
    char *key;
    pool_controller *pc;
    /* The idle probe in flight for this pool. It holds no reconcile slot: a probe that hangs
     * until its timeout must not keep other pools waiting for one (rule 6); its answer queues the
     * pool again. */
    prober_batch *probing;
    uint64_t probe_sent_ms; /* when probing was sent (monotonic), for the drain fence */
    /* When this replica first saw the pool's pendingMember set (monotonic ms), 0 while it is not:
     * the drain fence counts from here, never from before the swap was written. */
    uint64_t swap_seen_ms;
    /* A scale the API server refused (plan_refusal): member NULL when none. */
    char *refused_member;
    int32_t refused_replicas;
    char *refused_message;
    bool status_refused; /* status writes are refused: the episode's Warning Event is out */
    /* A member absent from the cache (#26): since when (monotonic ms, 0 none), and the pool's
     * resourceVersion at which a GET confirmed it absent (NULL none). */
    uint64_t absent_since_ms;
    char *absent_ok_rv;
} pc_pool;

/* Which write a run has in flight. */
typedef enum { PC_WRITE_STATUS, PC_WRITE_SCALE, PC_WRITE_REQUEST } pc_write;

/* One reconcile of one pool key, from hand-out to wq_done. */
typedef struct pc_run {
    struct pc_run *next; /* in pool_controller.runs */
    pool_controller *pc;
    char *key;
    char *ns, *name, *uid, *rv;
    plan_result *plan;
    size_t next_action;
    kube_call *call;
    uint64_t started_ms;
    bool requeue; /* queue the key again when done: a refusal was forgotten mid-run */
    /* The write in flight, for its answer: what kind, the object written (cache, key,
     * resourceVersion before) for the expectation, and for a scale its action. */
    pc_write writing;
    bool tested; /* a scale's JSON patch with test operations */
    const store *write_cache;
    char *write_key, *write_rv;
    const plan_action *scaling;
    /* the scale whose fresh read of the Pods allowed it: a start that found none live, or a stop
     * without an idle probe that found none running */
    const plan_action *slot_read;
} pc_run;

struct pool_controller {
    pool_controller_config cfg;
    char *instance;
    wq *queue;
    prober *prober;
    expects *expects;
    strmap state; /* pc_pool by key */
    pc_run *runs;
    void (*shutdown_done)(void *ud);
    void *shutdown_ud;
};

static int64_t pc_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- probe memory (kept by the prober) ---- */

static const prober_memo *pc_memo_lookup(void *ud, const char *uid)
{
    return prober_memo_get(((pool_controller *)ud)->prober, uid);
}

/* For the prober's sweep: the cache still has this Pod (not one replaced under its name). */
static bool pc_pod_alive(void *ud, const char *pod_key, const char *uid)
{
    const pool_pod *pod = store_get(((pool_controller *)ud)->cfg.pods, pod_key);
    return pod && pod->uid && strcmp(pod->uid, uid) == 0;
}

/* ---- per-pool memory ---- */

static pc_pool *pc_pool_get(pool_controller *pc, const char *pool, bool create)
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
    free(st);
}

static void pc_pool_drop(pool_controller *pc, const char *pool)
{
    pc_pool *st = pc_pool_get(pc, pool, false);
    if (st)
        pc_pool_free(pc, st);
}

/* Frees st when it holds nothing any more. */
static void pc_pool_trim(pool_controller *pc, pc_pool *st)
{
    if (!st->refused_member && !st->status_refused && !st->probing && !st->swap_seen_ms &&
        !st->absent_since_ms)
        pc_pool_free(pc, st);
}

static void pc_refusal_clear(pc_pool *st)
{
    free(st->refused_member);
    free(st->refused_message);
    st->refused_member = st->refused_message = NULL;
}

/* Remembers the refused scale of member to replicas, replacing an earlier one. */
static void pc_refusal_set(pool_controller *pc, const char *pool, const char *member,
                           int32_t replicas, const char *message)
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
    free(run);
}

/* pc_finish's requeue_ms for a pool that is gone: no backstop reconcile (an event brings back a
 * pool created again under the name). */
#define PC_NO_REQUEUE UINT64_MAX

/* Ends run. On success the pool comes back after requeue_ms (0: the resync backstop), unless
 * PC_NO_REQUEUE. */
static void pc_finish(pc_run *run, wq_result result, uint64_t requeue_ms)
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

static void pc_plan(pc_run *run);
static void pc_next(pc_run *run);

static void pc_fail(pc_run *run, log_level level, const char *what, const kube_error *err)
{
    log_kv(level, what, "pool", run->key, "error", err && err->message ? err->message : "",
           "reason", err && err->reason ? err->reason : "", NULL);
    pc_finish(run, WQ_FAILURE, 0);
}

/* Leadership, asked right before each write (what: for the log). false: the run has ended. */
static bool pc_may_write(pc_run *run, const char *what)
{
    const pool_controller_config *o = &run->pc->cfg;
    if (!o->may_write || o->may_write(o->may_write_ud))
        return true;
    log_kv(LOG_ERROR, "write not sent: the lease may have passed to another replica", "pool",
           run->key, "write", what, NULL);
    pc_finish(run, WQ_FAILURE, 0);
    return false;
}

static void pc_on_event(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)ud;
    (void)code;
    (void)body;
    if (err->kind != KUBE_OK)
        log_kv(LOG_ERROR, "could not record event", "error", err->message, NULL);
}

/* Posts an Event about run's pool. An Event is for people; a failure to record one must not hold
 * up the slot, so it is fire and forget: kube_event_post lets the client retry a 5xx or a dropped
 * connection twice (a late Event changes nothing but the record), and the reconcile goes on. */
static void pc_post_event(pc_run *run, bool warning, const char *reason, const char *message)
{
    pool_controller *pc = run->pc;
    kube_object_ref about = {.api_version = POOL_GROUP "/" POOL_VERSION,
                             .kind = "ModelPool",
                             .namespace_ = run->ns,
                             .name = run->name,
                             .uid = run->uid};
    kube_event ev = {.warning = warning,
                     .reason = reason,
                     .message = message,
                     .component = PC_COMPONENT,
                     .instance = pc->instance};
    log_kv(warning ? LOG_ERROR : LOG_INFO, "event", "pool", run->key, "reason", reason, "message",
           message, NULL);
    kube_error err = {0};
    if (!kube_event_post(pc->cfg.client, &about, &ev, pc_on_event, pc, &err))
        log_kv(LOG_ERROR, "could not record event", "error", err.message, NULL);
    kube_error_clear(&err);
}

/* A write refused on its merits (pool/write_fault.h): reported, then the key fails and the
 * backoff plans it again, so a fix (a policy relaxed, RBAC granted) is picked up by itself. */
static void pc_refused(pc_run *run, const kube_error *err)
{
    pool_controller *pc = run->pc;
    char code[16];
    snprintf(code, sizeof(code), "%ld", err->http_code);
    if (run->writing == PC_WRITE_SCALE) {
        /* The plan reports it (SwapDeferred True/WriteRefused and its Warning Event). */
        const plan_action *a = run->scaling;
        char replicas[16];
        snprintf(replicas, sizeof(replicas), "%d", (int)a->replicas);
        log_kv(LOG_ERROR, "scale refused by the API server, will retry", "pool", run->key, "member",
               a->member, "replicas", replicas, "code", code, "reason",
               err->reason ? err->reason : "", "error", err->message, NULL);
        pc_refusal_set(pc, run->key, a->member, a->replicas, err->message);
    } else if (run->writing == PC_WRITE_REQUEST) {
        /* The swap it asked for is persisted already; only the annotation stays, and the next
         * plan takes it as the request it already is. */
        log_kv(LOG_ERROR, "clearing the pool's request refused by the API server, will retry",
               "pool", run->key, "code", code, "reason", err->reason ? err->reason : "", "error",
               err->message, NULL);
    } else {
        log_kv(LOG_ERROR, "status write refused by the API server, will retry", "pool", run->key,
               "code", code, "reason", err->reason ? err->reason : "", "error", err->message, NULL);
        /* The status cannot say it: one Warning Event per episode does. */
        pc_pool *st = pc_pool_get(pc, run->key, true);
        if (st && !st->status_refused) {
            if (!pc_may_write(run, "event"))
                return;
            st->status_refused = true;
            pc_post_event(run, true, "StatusWriteRefused", err->message);
        }
    }
    pc_finish(run, WQ_FAILURE, 0);
}

static void pc_on_write(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    pc_run *run = ud;
    pool_controller *pc = run->pc;
    run->call = NULL;
    if (err->kind != KUBE_OK) {
        switch (pool_write_fault_of(err, run->tested)) {
        case POOL_WRITE_PRECONDITION:
            /* The object moved since the plan: a resourceVersion (409), or the member's uid or
             * replicas that a scale's JSON patch tests (whose 422 says only "rejected"). Routine;
             * plan again from the cache. */
            log_kv(LOG_INFO, "write conflict, will re-plan", "pool", run->key, "cause",
                   err->http_code == 409 ? "the object changed since the plan"
                                         : "the member's uid or replicas changed since the plan",
                   "error", err->message, NULL);
            pc_finish(run, WQ_FAILURE, 0);
            return;
        case POOL_WRITE_REFUSED:
            pc_refused(run, err);
            return;
        case POOL_WRITE_TRANSIENT:
            break;
        }
        pc_fail(run, LOG_ERROR, "write failed, will retry", err);
        return;
    }
    /* Met by the write's own resourceVersion (or a later one) in the cache, not by any change. */
    if (expects_add(pc->expects, run->key, run->write_cache, run->write_key, run->write_rv,
                    pool_answer_version(body), ev_now_ms()) < 0)
        log_kv(LOG_DEBUG, "write not remembered (out of memory)", "pool", run->key, NULL);
    pc_pool *st = pc_pool_get(pc, run->key, false);
    if (st && run->writing == PC_WRITE_STATUS && st->status_refused) {
        log_kv(LOG_INFO, "status write accepted again", "pool", run->key, NULL);
        st->status_refused = false;
    } else if (st && run->writing == PC_WRITE_SCALE && st->refused_member &&
               strcmp(st->refused_member, run->scaling->member) == 0) {
        /* The refusal is over; the status written before this scale still says it. */
        pc_refusal_clear(st);
        run->requeue = true;
    }
    if (st)
        pc_pool_trim(pc, st);
    run->next_action++;
    pc_next(run);
}

/* Starts run's write: req, of kind w, to the object under key in cache (at rv before). 0, or -1
 * with err set. */
static int pc_send(pc_run *run, const kube_request *req, pc_write w, const store *cache,
                   const char *key, const char *rv, kube_error *err)
{
    free(run->write_key);
    free(run->write_rv);
    run->write_key = strdup(key);
    run->write_rv = strdup(rv ? rv : "");
    if (!run->write_key || !run->write_rv)
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    run->writing = w;
    run->write_cache = cache;
    kube_request bounded = *req;
    bounded.timeout_ms = PC_WRITE_TIMEOUT_MS;
    run->call = kube_call_start(run->pc->cfg.client, &bounded, pc_on_write, run, err);
    return run->call ? 0 : -1;
}

static int pc_write_status(pc_run *run, kube_error *err)
{
    pool_controller *pc = run->pc;
    char *body = pool_status_patch(&run->plan->status, run->rv);
    char *path = kube_path(POOL_GROUP, POOL_VERSION, run->ns, "modelpools", run->name, "status");
    int rc = -1;
    if (!body || !path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        /* Retried by the client (5xx, transport): the patch carries the resourceVersion the plan
         * read, so a late retry of a stale status fails with 409 instead of applying. */
        kube_request req = {
            .method = KUBE_PATCH_MERGE, .path = path, .body = body, .max_retries = -1};
        run->tested = false;
        rc = pc_send(run, &req, PC_WRITE_STATUS, pc->cfg.pools, run->key, run->rv, err);
    }
    log_kv(LOG_INFO, "status", "pool", run->key, "phase", run->plan->status.phase, "resident",
           run->plan->status.resident_member, "pending", run->plan->status.pending_member, NULL);
    free(body);
    free(path);
    return rc;
}

/* Removes the pool's request annotation (or, for CLEAR_WITHDRAW, its withdraw annotation) if it
 * still names a->member: a JSON patch whose test fails (a newer request written since) is a quiet
 * re-plan, never a lost request. Retried by the client: the test makes a late retry harmless. */
static int pc_clear_request(pc_run *run, const plan_action *a, kube_error *err)
{
    pool_controller *pc = run->pc;
    bool withdraw = a->kind == PLAN_CLEAR_WITHDRAW;
    char *body =
        withdraw ? pool_withdraw_clear_patch(a->member) : pool_request_clear_patch(a->member);
    char *path = kube_path(POOL_GROUP, POOL_VERSION, run->ns, "modelpools", run->name, NULL);
    int rc = -1;
    if (!body || !path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        kube_request req = {
            .method = KUBE_PATCH_JSON, .path = path, .body = body, .max_retries = -1};
        log_kv(LOG_INFO, withdraw ? "withdrawal taken" : "request taken", "pool", run->key,
               "member", a->member, NULL);
        run->tested = true;
        const pool_obj *pool = store_get(pc->cfg.pools, run->key);
        rc = pc_send(run, &req, PC_WRITE_REQUEST, pc->cfg.pools, run->key,
                     pool ? pool->rv : run->rv, err);
    }
    free(body);
    free(path);
    return rc;
}

/* Forgets a refused scale of member once the cache shows it at replicas by other hands. */
static void pc_refusal_moot(pc_run *run, const char *member)
{
    pc_pool *st = pc_pool_get(run->pc, run->key, false);
    if (st && st->refused_member && strcmp(st->refused_member, member) == 0) {
        pc_refusal_clear(st);
        pc_pool_trim(run->pc, st);
        run->requeue = true;
    }
}

/* Sends the scale PATCH of a: 0 (started; pc_on_write continues), 1 when the cache already shows
 * the member at those replicas (nothing to send), -1 with err set. A plan's later actions run
 * after its earlier writes, by which time the cache may have caught up with them: a write that
 * changes nothing would leave no trace in the cache and hold the pool back for expect_ms. */
static int pc_scale(pc_run *run, const plan_action *a, kube_error *err)
{
    pool_controller *pc = run->pc;
    char *key = NULL, *path = NULL, *body = NULL;
    int rc = -1;
    if (asprintf(&key, "%s/%s", run->ns, a->member) < 0) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        return -1;
    }
    const pool_isvc *isvc = store_get(pc->cfg.isvcs, key);
    const char *rv = isvc ? isvc->rv : NULL;
    if (rv && isvc->replicas_exact && isvc->replicas == a->replicas) {
        log_kv(LOG_DEBUG, "already scaled", "pool", run->key, "member", a->member, NULL);
        pc_refusal_moot(run, a->member);
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
        /* A scale-up is sent once, never retried by the client: the check that the slot is free
         * was made on this plan's cache, and a retry seconds later (backoff, Retry-After) could
         * start the target after the world moved. A failure fails the key and the backoff plans
         * again from a fresh cache. A scale-down only ever frees the slot (and its JSON patch
         * tests the replicas it read), so it keeps the client's retries. */
        kube_request req = {.method = json_patch ? KUBE_PATCH_JSON : KUBE_PATCH_MERGE,
                            .path = path,
                            .body = body,
                            .max_retries = a->replicas >= 1 ? 0 : -1};
        char replicas[16];
        snprintf(replicas, sizeof(replicas), "%d", (int)a->replicas);
        log_kv(LOG_INFO, "scale", "pool", run->key, "member", a->member, "replicas", replicas,
               "reason", a->reason, NULL);
        pool_clocks_scaling(pc->cfg.clocks, run->key, a->member, a->replicas, ev_now_us());
        run->tested = json_patch;
        run->scaling = a;
        rc = pc_send(run, &req, PC_WRITE_SCALE, pc->cfg.isvcs, key, rv, err);
    }
    free(key);
    free(path);
    free(body);
    return rc;
}

/* Whether a starts its member: more replicas than the cache shows. */
static bool pc_starts(const pc_run *run, const plan_action *a)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", run->ns, a->member);
    const pool_isvc *isvc = store_get(run->pc->cfg.isvcs, key);
    return a->replicas >= 1 && (!isvc || pool_isvc_replicas(isvc) < a->replicas);
}

/* A stop the plan makes without an idle probe because the cache shows no running Pod. */
static bool pc_unprobed_stop(const plan_action *a)
{
    return a->replicas == 0 && a->reason && strcmp(a->reason, "NoRunningPod") == 0;
}

/* Whether a Pod object (as the API server lists it) has a container in state running. */
static bool pc_pod_json_running(const cJSON *pod)
{
    const cJSON *cs;
    cJSON_ArrayForEach(
        cs, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"),
                                             "containerStatuses"))
    {
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cs, "state"), "running")))
            return true;
    }
    return false;
}

static void pc_on_slot_read(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    pc_run *run = ud;
    run->call = NULL;
    const plan_action *a = &run->plan->actions[run->next_action];
    bool stop = pc_unprobed_stop(a);
    if (err->kind != KUBE_OK) {
        pc_fail(run, LOG_ERROR,
                stop ? "could not read the member's pods before a stop, will retry"
                     : "could not read the pool's pods before a start, will retry",
                err);
        return;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(body, "items"))
    {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(item, "metadata");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));
        const char *phase = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(item, "status"), "phase"));
        if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
            continue;
        /* A stop without a probe is wrong only if a Pod runs: it may be serving. */
        if (stop && !pc_pod_json_running(item))
            continue;
        log_kv(LOG_INFO,
               stop ? "stop held: the API server shows a running pod the cache does not yet"
                    : "start held: the API server shows a live pod the cache does not yet",
               "pool", run->key, "member", a->member, "pod", name ? name : "", "phase",
               phase ? phase : "", NULL);
        /* The pod's watch event (or the relist) queues the pool again; the backoff is a stop. */
        pc_finish(run, WQ_FAILURE, 0);
        return;
    }
    run->slot_read = a;
    pc_next(run);
}

/* The plan found the slot free in the caches, but the Pod cache can be older than the Pods: a
 * watch cut and waiting out its backoff while a member controller started a Pod (the chaos run
 * saw a target started beside a member whose Pod the cache had not seen). So right before a start
 * the pool's Pods are listed from the API server (a consistent read; one request a start), and
 * the scale is sent only if none of them is live (Pending, Running or Unknown, terminating or
 * not: as the plan's rule 1 counts them). The same stale cache could hide a running, busy Pod of a
 * member the plan stops without an idle probe (NoRunningPod): such a stop is read first too, and
 * sent only if none of the member's Pods has a running container (the chaos run saw one, seed
 * 178053688). 0 (read started), or -1 with err set. */
static int pc_read_slot(pc_run *run, kube_error *err)
{
    pool_controller *pc = run->pc;
    const pool_obj *pool = store_get(pc->cfg.pools, run->key);
    if (!pool)
        return kube_error_set(err, KUBE_ERR_CONFIG, "the pool left the cache");
    /* "<label> in (a,b,c)": every member's Pods, the target's own old ones included; for a stop
     * without a probe, the member's own ("<label>=m"). */
    const plan_action *a = &run->plan->actions[run->next_action];
    char *sel = NULL;
    size_t sel_len = 0;
    FILE *f = open_memstream(&sel, &sel_len);
    if (f && pc_unprobed_stop(a)) {
        fprintf(f, POOL_SERVICE_LABEL "=%s", a->member);
        if (fclose(f) != 0) {
            free(sel);
            sel = NULL;
        }
    } else if (f) {
        fputs(POOL_SERVICE_LABEL " in (", f);
        bool first = true;
        for (size_t i = 0; i < pool->n_members; i++) {
            if (!pool->members[i])
                continue;
            fprintf(f, "%s%s", first ? "" : ",", pool->members[i]);
            first = false;
        }
        /* and those of members removed from the spec that the status still records (rule 1) */
        const char **removed = calloc(POOL_REMOVED_MAX(pool), sizeof(*removed));
        size_t n_removed = removed ? pool_removed_names(pool, removed) : 0;
        for (size_t i = 0; i < n_removed; i++) {
            fprintf(f, "%s%s", first ? "" : ",", removed[i]);
            first = false;
        }
        fputs(")", f);
        if (fclose(f) != 0 || !removed) {
            free(sel);
            sel = NULL;
        }
        free(removed);
    }
    char *path = sel ? kube_path("", "v1", run->ns, "pods", NULL, NULL) : NULL;
    int rc = -1;
    if (!path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        kube_query q[] = {{"labelSelector", sel}, {NULL, NULL}};
        kube_request req = {.method = KUBE_GET,
                            .path = path,
                            .query = q,
                            .timeout_ms = PC_WRITE_TIMEOUT_MS,
                            .max_retries = 0,
                            .list = true};
        run->call = kube_call_start(pc->cfg.client, &req, pc_on_slot_read, run, err);
        rc = run->call ? 0 : -1;
    }
    free(path);
    free(sel);
    return rc;
}

static void pc_event(pc_run *run, const plan_action *a)
{
    pool_controller *pc = run->pc;
    if (a->fact == PLAN_FACT_SWAP_COMPLETED) {
        pool_metrics_swap_done(pc->cfg.pm, run->ns, run->name, run->plan->swap_ms);
        pool_clocks_stop(pc->cfg.clocks, run->key);
    } else if (a->fact == PLAN_FACT_SWAP_DEFERRED) {
        /* A wait for a busy member is not part of the operator's reaction time. */
        pool_metrics_deferred(pc->cfg.pm, run->ns, run->name, run->plan->deferred_reason);
        pool_clocks_deferred(pc->cfg.clocks, run->key);
    }
    pc_post_event(run, a->warning, a->reason, a->message);
}

static void pc_on_probed(void *ud, const prober_verdict *results, size_t n)
{
    pc_pool *st = ud;
    pool_controller *pc = st->pc;
    st->probing = NULL;
    size_t nsl = strcspn(st->key, "/");
    for (size_t i = 0; i < n; i++) {
        char *key = NULL;
        if (asprintf(&key, "%.*s/%s", (int)nsl, st->key, results[i].pod) < 0)
            continue;
        const pool_pod *pod = store_get(pc->cfg.pods, key);
        const char *uid = pod ? pod->uid : NULL;
        log_kv(LOG_DEBUG, "probed", "pool", st->key, "pod", key, "verdict",
               probe_verdict_name(results[i].verdict), "message", results[i].message, NULL);
        if (uid)
            prober_memo_set(pc->prober, uid, key, results[i].verdict, results[i].message,
                            (int64_t)st->probe_sent_ms, (int64_t)ev_now_ms());
        free(key);
    }
    /* Probe results are inputs of the plan: plan again with them. */
    wq_add(pc->queue, st->key);
    pc_pool_trim(pc, st);
}

/* Starts the probe of a for run's pool, unless one is in flight (its answer queues the pool),
 * and ends the run: waiting for the answer holds no reconcile slot. 0 or -1 (out of memory). */
static int pc_probe(pc_run *run, const plan_action *a)
{
    pc_pool *st = pc_pool_get(run->pc, run->key, true);
    if (!st)
        return -1;
    if (!st->probing) {
        prober_target *targets = calloc(a->n_pods ? a->n_pods : 1, sizeof(*targets));
        if (!targets)
            return -1;
        for (size_t i = 0; i < a->n_pods; i++)
            targets[i] = (prober_target){
                .pod = a->pods[i].name, .ip = a->pods[i].ip, .port = a->pods[i].port};
        st->probe_sent_ms = ev_now_ms();
        st->probing = prober_start(run->pc->prober, a->runtime, a->idle_path, targets, a->n_pods,
                                   pc_on_probed, st);
        free(targets);
        if (!st->probing) {
            pc_pool_trim(run->pc, st);
            return -1;
        }
    }
    /* The answer queues the pool at once; the delay is a backstop. */
    pc_finish(run, WQ_SUCCESS, PLAN_PROBE_TTL_MS + run->pc->cfg.probe_timeout_ms);
    return 0;
}

/* Applies the plan's actions from run->next_action on; each write continues here from its
 * callback. Leadership is asked right before each write: pc_may_write ends the run if lost. */
static void pc_next(pc_run *run)
{
    kube_error err = {0};
    while (run->next_action < run->plan->n_actions) {
        const plan_action *a = &run->plan->actions[run->next_action];
        switch (a->kind) {
        case PLAN_EVENT:
            if (!pc_may_write(run, "event"))
                return;
            pc_event(run, a);
            run->next_action++;
            continue;
        case PLAN_WRITE_STATUS:
            if (!pc_may_write(run, "status"))
                return;
            if (pc_write_status(run, &err) < 0)
                break;
            return;
        case PLAN_SCALE: {
            if (run->slot_read != a && (pc_starts(run, a) || pc_unprobed_stop(a))) {
                if (pc_read_slot(run, &err) < 0)
                    break;
                return;
            }
            if (!pc_may_write(run, "scale"))
                return;
            int rc = pc_scale(run, a, &err);
            if (rc < 0)
                break;
            if (rc > 0) {
                run->next_action++;
                continue;
            }
            return;
        }
        case PLAN_CLEAR_REQUEST:
        case PLAN_CLEAR_WITHDRAW:
            if (!pc_may_write(run, "request"))
                return;
            if (pc_clear_request(run, a, &err) < 0)
                break;
            return;
        case PLAN_PROBE:
            if (pc_probe(run, a) < 0) {
                kube_error_set(&err, KUBE_ERR_NOMEM, "could not start the idle probe");
                break;
            }
            return;
        }
        pc_fail(run, LOG_ERROR, "action failed", &err);
        kube_error_clear(&err);
        return;
    }
    pc_finish(run, WQ_SUCCESS,
              run->plan->requeue_after_ms > 0 ? (uint64_t)run->plan->requeue_after_ms : 0);
}

/* The resident gauges. */
static void pc_plan_metrics(pc_run *run)
{
    pool_controller *pc = run->pc;
    const plan_status *st = &run->plan->status;
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

/* The drain fence of pool's swap (plan_snapshot.drain_after_ms), from when this replica first saw
 * it with its drain begun (plan_awaits_probe false): a replica that takes over a swap waits the
 * fence out again. now: the monotonic instant the
 * snapshot was built at (its probe times were converted at it too). 0 or -ENOMEM. */
static int pc_fence(pool_controller *pc, const char *key, const pool_obj *pool, uint64_t now,
                    plan_snapshot *s)
{
    bool swapping = pool->status.pending_member && *pool->status.pending_member;
    pc_pool *st = pc_pool_get(pc, key, swapping);
    if (!swapping) {
        if (st) {
            st->swap_seen_ms = 0;
            pc_pool_trim(pc, st);
        }
        return 0;
    }
    if (!st)
        return -ENOMEM;
    if (plan_awaits_probe(&pool->status)) {
        /* The drain has not begun (#26): the resident serves and routers forward to it while the
         * pool shows this, so the fence counts only from when this replica sees it gone; until
         * then it lies a whole fence ahead. */
        st->swap_seen_ms = 0;
        s->drain_after_ms = s->now_ms + pc->cfg.drain_fence_ms;
        return 0;
    }
    if (!st->swap_seen_ms)
        st->swap_seen_ms = now;
    s->drain_after_ms = s->now_ms - (int64_t)(now - st->swap_seen_ms) + pc->cfg.drain_fence_ms;
    return 0;
}

/* ---- members absent from the cache (#26) ---- */

/* Whether the cache holds member name of pool (out of memory: not known, so not held). */
static bool pc_member_cached(const pool_controller *pc, const pool_obj *pool, const char *name)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", pool->ns ? pool->ns : "", name) < 0)
        return false;
    bool cached = store_get(pc->cfg.isvcs, key) != NULL;
    free(key);
    return cached;
}

static bool pc_any_absent(const pool_controller *pc, const pool_obj *pool)
{
    for (size_t i = 0; i < pool->n_members; i++)
        if (pool->members[i] && *pool->members[i] && !pc_member_cached(pc, pool, pool->members[i]))
            return true;
    return false;
}

/* The cache's lack of a member counts as its absence: the cache has caught up with the pool's
 * resourceVersion (a pool applied with its members is seen before them), or a read of the API
 * server made at this version of the pool found none of the members the cache lacks. */
static bool pc_absence_known(const pool_controller *pc, const pc_pool *st, const pool_obj *pool)
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
    run->call = NULL;
    const pool_obj *pool = store_get(pc->cfg.pools, run->key);
    pc_pool *st = pc_pool_get(pc, run->key, false);
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
    char *path = kube_path(POOL_GROUP, POOL_VERSION, run->ns, "inferenceservices", NULL, NULL);
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
static int pc_build(pc_run *run, const pool_obj *pool, bool absence_confirmed)
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
    int rc = pool_snapshot_build(pool, &src, pc_wall_ms(), (int64_t)mono, &snap);
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
    bool awaiting = rc == 0 && plan_awaits_probe(&run->plan->status);
    if (awaiting && (st = pc_pool_get(pc, run->key, false)) != NULL)
        st->swap_seen_ms = 0; /* marked now: the fence starts again once the mark is gone */
    if (rc == 0 && !awaiting && run->plan->fenced_until_ms > snap.snap.now_ms)
        pool_clocks_fenced(pc->cfg.clocks, run->key,
                           ev_now_us() +
                               (uint64_t)(run->plan->fenced_until_ms - snap.snap.now_ms) * 1000);
    pool_snapshot_release(&snap);
    return rc;
}

static void pc_plan(pc_run *run)
{
    pool_controller *pc = run->pc;
    const pool_obj *pool = store_get(pc->cfg.pools, run->key);
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
    if (!pc->cfg.drain_fence_ms)
        pc->cfg.drain_fence_ms = 2000;
    if (!pc->cfg.resync_ms)
        pc->cfg.resync_ms = 300000;
    if (!pc->cfg.expect_ms)
        pc->cfg.expect_ms = 5000;
    if (!pc->cfg.max_concurrent)
        pc->cfg.max_concurrent = 4;
    pc->cfg.instance = NULL;
    if (strmap_init(&pc->state) < 0 ||
        !(pc->instance = strdup(cfg->instance ? cfg->instance : ""))) {
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
    free(pc->instance);
    free(pc);
}

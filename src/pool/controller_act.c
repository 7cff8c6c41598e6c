/* controller_act: a run carries out its plan's actions in order and stops at the first failure
 * (the key is then retried with backoff): Events, the status write, scales (a consistent read of
 * the Pods first where the cache could hide a live one), clearing a pool's request, and the idle
 * probe, which holds no reconcile slot (its answer queues the pool again), so probes that hang
 * until their timeout, however many, delay only their own pools. Leadership is asked right before
 * each write; a write's answer is remembered as an expectation of the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "controller_internal.h"
#include "kube/event.h"
#include "pool/write_fault.h"

#define PC_COMPONENT "modelpool-operator"

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
    kube_object_ref about = {.api_version = API_GROUP "/" API_VERSION,
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
                    api_answer_version(body), ev_now_ms()) < 0)
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
    char *body = api_status_patch(&run->plan->status, run->rv);
    char *path = kube_path(API_GROUP, API_VERSION, run->ns, "modelpools", run->name, "status");
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
        withdraw ? api_withdraw_clear_patch(a->member) : api_request_clear_patch(a->member);
    char *path = kube_path(API_GROUP, API_VERSION, run->ns, "modelpools", run->name, NULL);
    int rc = -1;
    if (!body || !path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    } else {
        kube_request req = {
            .method = KUBE_PATCH_JSON, .path = path, .body = body, .max_retries = -1};
        log_kv(LOG_INFO, withdraw ? "withdrawal taken" : "request taken", "pool", run->key,
               "member", a->member, NULL);
        run->tested = true;
        const api_pool *pool = store_get(pc->cfg.pools, run->key);
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
    const api_isvc *isvc = store_get(pc->cfg.isvcs, key);
    const char *rv = isvc ? isvc->rv : NULL;
    if (rv && isvc->replicas_exact && isvc->replicas == a->replicas) {
        log_kv(LOG_DEBUG, "already scaled", "pool", run->key, "member", a->member, NULL);
        pc_refusal_moot(run, a->member);
        free(key);
        return 1;
    }
    bool json_patch = false;
    path = kube_path(API_GROUP, API_VERSION, run->ns, "inferenceservices", a->member, NULL);
    if (!rv) {
        kube_error_set(err, KUBE_ERR_CONFIG, "member %s is not in the cache", key);
    } else if (!path || !(body = api_scale_patch(isvc, a->replicas, &json_patch))) {
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
    const api_isvc *isvc = store_get(run->pc->cfg.isvcs, key);
    return a->replicas >= 1 && (!isvc || api_isvc_replicas(isvc) < a->replicas);
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
    const api_pool *pool = store_get(pc->cfg.pools, run->key);
    if (!pool)
        return kube_error_set(err, KUBE_ERR_CONFIG, "the pool left the cache");
    /* "<label> in (a,b,c)": every member's Pods, the target's own old ones included; for a stop
     * without a probe, the member's own ("<label>=m"). */
    const plan_action *a = &run->plan->actions[run->next_action];
    char *sel = NULL;
    size_t sel_len = 0;
    FILE *f = open_memstream(&sel, &sel_len);
    if (f && pc_unprobed_stop(a)) {
        fprintf(f, API_SERVICE_LABEL "=%s", a->member);
        if (fclose(f) != 0) {
            free(sel);
            sel = NULL;
        }
    } else if (f) {
        fputs(API_SERVICE_LABEL " in (", f);
        bool first = true;
        for (size_t i = 0; i < pool->n_members; i++) {
            if (!pool->members[i])
                continue;
            fprintf(f, "%s%s", first ? "" : ",", pool->members[i]);
            first = false;
        }
        /* and those of members removed from the spec that the status still records (rule 1) */
        const char **removed = calloc(API_REMOVED_MAX(pool), sizeof(*removed));
        size_t n_removed = removed ? api_removed_names(pool, removed) : 0;
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
        const api_pod *pod = store_get(pc->cfg.pods, key);
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
void pc_next(pc_run *run)
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

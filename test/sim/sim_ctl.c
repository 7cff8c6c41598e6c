/* sim_ctl: the simulator's controller. Informer events queue member keys ("ns/name"); a pass over
 * a member compares the cache (plus what this process wrote and the cache may not show yet) with
 * what the member should look like and makes at most one write, keeping the key in flight until it
 * is answered. So writes to one member never overlap, a 409 or a failing API server is a failure
 * the work queue retries with backoff, and a restart rebuilds everything from the cache. */
#include "sim_ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

/* ---- small helpers ---- */

const cJSON *sim_field(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

const char *sim_str(const cJSON *obj, const char *a, const char *b)
{
    return cJSON_GetStringValue(sim_field(obj, a, b));
}

/* metadata.resourceVersion, "" when missing (the write then fails and is retried). */
static const char *sim_rv(const cJSON *obj)
{
    const char *rv = sim_str(obj, "metadata", "resourceVersion");
    return rv ? rv : "";
}

bool sim_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* The phase as one of our static strings (m->phase outlives the cached object), or NULL. */
static const char *sim_phase_literal(const char *phase)
{
    static const char *const known[] = {"Pending",       "Creating", "Progressing", "Ready",
                                        "WaitingForGPU", "Stopped",  "Suspended",   "Failed"};
    for (size_t i = 0; phase && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(known[i], phase) == 0)
            return known[i];
    return NULL;
}

bool sim_terminal(const char *phase)
{
    return sim_eq(phase, "Failed") || sim_eq(phase, "Succeeded");
}

/* Address index n is 127.<n>>16>.<n>>8 & 255>.<n & 255>: 2..254 is 127.0.0.2..254. */
char *sim_ip_text(int ip, char *buf, size_t len)
{
    if (ip)
        snprintf(buf, len, "127.%d.%d.%d", (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    else
        snprintf(buf, len, "-");
    return buf;
}

static void sim_now_rfc3339(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint32_t sim_rand(sim *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (uint32_t)(s->rng >> 32);
}

static bool sim_has_finalizer(const cJSON *pod)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, sim_field(pod, "metadata", "finalizers"))
    {
        if (sim_eq(cJSON_GetStringValue(f), SIM_FINALIZER))
            return true;
    }
    return false;
}

/* The answer to a DELETE or a finalizer removal is the object; without finalizers left (and
 * deleted with grace 0, as we do) it no longer exists. */
static bool sim_answer_gone(long http_code, const cJSON *body)
{
    if (http_code == 404)
        return true;
    if (sim_eq(sim_str(body, "kind", NULL), "Status"))
        return true;
    return cJSON_GetArraySize(sim_field(body, "metadata", "finalizers")) == 0;
}

/* ---- writes ---- */

static void sim_on_done(void *ud, const kube_error *err, long http_code, const cJSON *body);

/* Starts the member's one write; path and body are taken (either may be NULL after an
 * allocation failure, which is then a retry). */
static sim_step sim_call(sim_member *m, sim_op op, kube_method method, char *path, cJSON *body)
{
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    sim_step step = SIM_RETRY;
    if (path && (text || method == KUBE_DELETE)) {
        kube_request req = {
            .method = method, .path = path, .body = text, .timeout_ms = 10000, .max_retries = -1};
        kube_error err = {0};
        m->op = op;
        m->call = kube_call_start(m->s->client, &req, sim_on_done, m, &err);
        if (m->call)
            step = SIM_CALL;
        else
            log_kv(LOG_ERROR, "cannot start a call", "member", m->key, "error", err.message, NULL);
        kube_error_clear(&err);
    }
    free(text);
    free(path);
    return step;
}

static char *sim_pod_path(const sim_member *m, const char *name, const char *sub)
{
    return kube_path("", "v1", m->ns, "pods", name, sub);
}

static sim_step sim_create(sim_member *m, const cJSON *isvc)
{
    sim *s = m->s;
    char suffix[6];
    for (size_t i = 0; i < 5; i++)
        suffix[i] = (char)('a' + sim_rand(s) % 26);
    suffix[5] = 0;
    free(m->op_name);
    m->op_name = NULL;
    if (asprintf(&m->op_name, "%s-%s", m->name, suffix) < 0) {
        m->op_name = NULL;
        return SIM_RETRY;
    }
    const char *uid = sim_str(isvc, "metadata", "uid");
    cJSON *pod = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    cJSON_AddStringToObject(meta, "name", m->op_name);
    cJSON_AddStringToObject(meta, "namespace", m->ns);
    cJSON_AddStringToObject(labels, "app", m->name);
    cJSON_AddStringToObject(labels, SIM_LABEL_SERVICE, m->name);
    if (s->opt.finalizer)
        cJSON_AddItemToObject(meta, "finalizers",
                              cJSON_CreateStringArray((const char *[]){SIM_FINALIZER}, 1));
    /* Only for whoever reads it: without a garbage collector nothing acts on it. */
    if (uid) {
        cJSON *owner = cJSON_CreateObject();
        cJSON_AddStringToObject(owner, "apiVersion", "inference.llmkube.dev/v1alpha1");
        cJSON_AddStringToObject(owner, "kind", "InferenceService");
        cJSON_AddStringToObject(owner, "name", m->name);
        cJSON_AddStringToObject(owner, "uid", uid);
        cJSON_AddBoolToObject(owner, "controller", true);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), owner);
    }
    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", "server");
    cJSON_AddStringToObject(c, "image", "sim");
    cJSON *port = cJSON_CreateObject();
    cJSON_AddStringToObject(port, "name", "http");
    cJSON_AddNumberToObject(port, "containerPort", sim_isvc_port(isvc));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "ports"), port);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    return sim_call(m, SIM_OP_CREATE, KUBE_POST, sim_pod_path(m, NULL, NULL), pod);
}

static sim_step sim_delete(sim_member *m, sim_pod *p)
{
    m->op_pod = p;
    /* Grace 0: there is no kubelet to end it, so without a finalizer it goes at once. */
    cJSON *opts = cJSON_CreateObject();
    cJSON_AddStringToObject(opts, "apiVersion", "v1");
    cJSON_AddStringToObject(opts, "kind", "DeleteOptions");
    cJSON_AddNumberToObject(opts, "gracePeriodSeconds", 0);
    return sim_call(m, SIM_OP_DELETE, KUBE_DELETE, sim_pod_path(m, p->name, NULL), opts);
}

/* Removes our finalizer, keeping anyone else's; resourceVersion makes it a compare-and-swap. */
static sim_step sim_unfinalize(sim_member *m, sim_pod *p, const cJSON *cached)
{
    m->op_pod = p;
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(patch, "metadata");
    cJSON_AddStringToObject(meta, "resourceVersion", sim_rv(cached));
    cJSON *keep = cJSON_AddArrayToObject(meta, "finalizers");
    const cJSON *f;
    cJSON_ArrayForEach(f, sim_field(cached, "metadata", "finalizers"))
    {
        if (!sim_eq(cJSON_GetStringValue(f), SIM_FINALIZER))
            cJSON_AddItemToArray(keep, cJSON_Duplicate(f, true));
    }
    return sim_call(m, SIM_OP_UNFINALIZE, KUBE_PATCH_MERGE, sim_pod_path(m, p->name, NULL), patch);
}

static cJSON *sim_condition(const char *type, bool status, const char *now)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", type);
    cJSON_AddStringToObject(c, "status", status ? "True" : "False");
    cJSON_AddStringToObject(c, "lastTransitionTime", now);
    return c;
}

/* What a kubelet would report: Running with the address and a ready `server` container, or
 * Failed with the container terminated (an eviction also loses the address). */
static sim_step sim_pod_status(sim_member *m, sim_pod *p, const cJSON *cached, sim_pod_state st)
{
    char now[32], ip[24];
    sim_now_rfc3339(now, sizeof(now));
    bool running = st == SIM_POD_RUNNING;
    /* A real server's container runs from its start and is ready once its model is loaded. */
    bool ready = running && sim_pod_loaded(p);
    m->op_pod = p;
    m->op_state = st;
    m->op_ready = ready;
    cJSON *patch = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(patch, "metadata"), "resourceVersion",
                            sim_rv(cached));
    cJSON *status = cJSON_AddObjectToObject(patch, "status");
    cJSON_AddStringToObject(status, "phase", running ? "Running" : "Failed");
    if (running) {
        sim_ip_text(p->ip, ip, sizeof(ip));
        cJSON_AddStringToObject(status, "podIP", ip);
        cJSON *ips = cJSON_AddArrayToObject(status, "podIPs");
        cJSON *one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "ip", ip);
        cJSON_AddItemToArray(ips, one);
        cJSON_AddStringToObject(status, "startTime", now);
    } else {
        cJSON_AddNullToObject(status, "podIP");
        cJSON_AddNullToObject(status, "podIPs");
        cJSON_AddStringToObject(status, "reason", st == SIM_POD_EVICTED ? "Evicted" : "Error");
        cJSON_AddStringToObject(
            status, "message",
            st == SIM_POD_EVICTED   ? "simulated eviction (sim.modelpool.test/evict)"
            : st == SIM_POD_CRASHED ? "llama-server exited (see --llama-log-dir)"
                                    : "simulated failure (sim.modelpool.test/fail)");
    }
    cJSON *conds = cJSON_AddArrayToObject(status, "conditions");
    cJSON_AddItemToArray(conds, sim_condition("PodScheduled", true, now));
    cJSON_AddItemToArray(conds, sim_condition("Initialized", true, now));
    cJSON_AddItemToArray(conds, sim_condition("ContainersReady", ready, now));
    cJSON_AddItemToArray(conds, sim_condition("Ready", ready, now));
    cJSON *cs = cJSON_CreateObject();
    cJSON_AddStringToObject(cs, "name", "server");
    cJSON_AddStringToObject(cs, "image", "sim");
    cJSON_AddStringToObject(cs, "imageID", "");
    cJSON_AddBoolToObject(cs, "ready", ready);
    cJSON_AddBoolToObject(cs, "started", running);
    cJSON_AddNumberToObject(cs, "restartCount", 0);
    cJSON *state = cJSON_AddObjectToObject(cs, "state");
    if (running) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(state, "running"), "startedAt", now);
    } else {
        cJSON *t = cJSON_AddObjectToObject(state, "terminated");
        cJSON_AddNumberToObject(t, "exitCode", st == SIM_POD_EVICTED ? 137 : 1);
        cJSON_AddStringToObject(t, "reason", st == SIM_POD_EVICTED ? "Evicted" : "Error");
        cJSON_AddStringToObject(t, "finishedAt", now);
    }
    cJSON_AddItemToArray(cJSON_AddArrayToObject(status, "containerStatuses"), cs);
    return sim_call(m, SIM_OP_POD_STATUS, KUBE_PATCH_MERGE, sim_pod_path(m, p->name, "status"),
                    patch);
}

/* Reports phase (and replicas) in the InferenceService status, unless it already says so. */
static sim_step sim_status(sim_member *m, const cJSON *isvc, const char *phase, int replicas)
{
    m->phase = phase;
    const cJSON *st = sim_field(isvc, "status", NULL);
    const cJSON *r = sim_field(st, "replicas", NULL);
    const char *rv = sim_str(isvc, "metadata", "resourceVersion");
    if (sim_eq(sim_str(st, "phase", NULL), phase) && cJSON_IsNumber(r) &&
        (int)r->valuedouble == replicas)
        return SIM_IDLE;
    if (sim_eq(m->status_phase, phase) && m->status_replicas == replicas &&
        sim_eq(m->status_rv, rv))
        return SIM_IDLE;
    free(m->op_rv);
    m->op_rv = rv ? strdup(rv) : NULL;
    m->op_phase = phase;
    m->op_replicas = replicas;
    cJSON *patch = cJSON_CreateObject();
    cJSON *status = cJSON_AddObjectToObject(patch, "status");
    cJSON_AddStringToObject(status, "phase", phase);
    cJSON_AddNumberToObject(status, "replicas", replicas);
    return sim_call(m, SIM_OP_ISVC_STATUS, KUBE_PATCH_MERGE,
                    kube_path("inference.llmkube.dev", "v1alpha1", m->ns, "inferenceservices",
                              m->name, "status"),
                    patch);
}

/* Records what an answered write changed; false when it failed and must be retried. */
static bool sim_apply_answer(sim_member *m, const kube_error *err, long code, const cJSON *body)
{
    sim *s = m->s;
    sim_pod *p = m->op_pod;
    bool ok = err->kind == KUBE_OK;
    switch (m->op) {
    case SIM_OP_CREATE:
        if (!ok)
            return false; /* AlreadyExists included: the next pass picks another name */
        if (!(p = sim_pod_new(m, m->op_name)))
            return false;
        log_kv(LOG_INFO, "created pod", "member", m->key, "pod", p->name, NULL);
        return true;
    case SIM_OP_DELETE:
    case SIM_OP_UNFINALIZE:
        if (!ok && code != 404)
            return false;
        sim_pod_terminating(p);
        p->gone = sim_answer_gone(code, body);
        p->cut_busy = p->cut_busy || p->inflight > 0;
        sim_pod_unserve(p);
        log_kv(LOG_INFO, p->gone ? "pod deleted" : "pod terminating", "member", m->key, "pod",
               p->name, NULL);
        return true;
    case SIM_OP_POD_STATUS:
        if (code == 404) {
            p->gone = true;
            return true;
        }
        if (!ok)
            return false;
        if (m->op_state == SIM_POD_RUNNING) {
            p->phase = "Running";
            p->ip_in_status = true;
            p->ready_in_status = m->op_ready;
        } else {
            p->phase = "Failed";
            sim_pod_unserve(p);
            sim_ip_release(s, &p->ip);
            p->ip_in_status = false;
            p->ready_in_status = false;
        }
        log_kv(LOG_INFO, "pod status", "member", m->key, "pod", p->name, "phase", p->phase, NULL);
        return true;
    case SIM_OP_ISVC_STATUS:
        if (code == 404)
            return true; /* deleted meanwhile: nothing to report to */
        if (!ok)
            return false;
        m->status_phase = m->op_phase;
        m->status_replicas = m->op_replicas;
        free(m->status_rv);
        m->status_rv = m->op_rv;
        m->op_rv = NULL;
        return true;
    case SIM_OP_NONE:
        break;
    }
    return true;
}

static void sim_on_done(void *ud, const kube_error *err, long http_code, const cJSON *body)
{
    sim_member *m = ud;
    m->call = NULL;
    bool ok = sim_apply_answer(m, err, http_code, body);
    if (err->kind != KUBE_OK && !(ok && http_code == 404)) {
        static const char *const names[] = {
            [SIM_OP_NONE] = "none",
            [SIM_OP_CREATE] = "create pod",
            [SIM_OP_DELETE] = "delete pod",
            [SIM_OP_POD_STATUS] = "write pod status",
            [SIM_OP_UNFINALIZE] = "remove finalizer",
            [SIM_OP_ISVC_STATUS] = "write status",
        };
        /* A conflict is routine (our cache was behind): say it only when asked. */
        log_kv(kube_error_is(err, "Conflict") ? LOG_DEBUG : LOG_ERROR, "write failed, will retry",
               "member", m->key, "op", names[m->op], "error", err->message, NULL);
    }
    m->op = SIM_OP_NONE;
    m->op_pod = NULL;
    sim_show(m);
    /* Success goes straight on to the next step: its effect is already in memory. */
    wq_done(m->s->q, m->key, ok ? WQ_SUCCESS : WQ_FAILURE);
    if (ok)
        wq_add(m->s->q, m->key);
}

/* ---- one pass over a member ---- */

/* Active as a ReplicaSet counts Pods: not being deleted, not Failed or Succeeded. */
static bool sim_active(const sim_pod *p)
{
    return !p->gone && !p->terminating && !sim_terminal(p->phase);
}

/* Ready: Running, its address in its status, its server loaded, not being deleted. */
static bool sim_ready(const sim_pod *p)
{
    return sim_active(p) && sim_eq(p->phase, "Running") && p->ip_in_status && p->ready_in_status;
}

/* The active Pod a ReplicaSet deletes first when there are too many (getPodsToDelete's ranking,
 * less what needs nodes): Pending before Running, not ready before ready, then the newest. */
static sim_pod *sim_extra(sim_member *m)
{
    sim_pod *pick = NULL;
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!sim_active(p))
            continue;
        if (!pick) {
            pick = p;
            continue;
        }
        bool p_pending = sim_eq(p->phase, "Pending"), k_pending = sim_eq(pick->phase, "Pending");
        if (p_pending != k_pending) {
            if (p_pending)
                pick = p;
            continue;
        }
        if (sim_ready(p) != sim_ready(pick)) {
            if (!sim_ready(p))
                pick = p;
            continue;
        }
        if (p->born_ms > pick->born_ms)
            pick = p;
    }
    return pick;
}

/* One active Pod: load it, fail it, keep it serving. SIM_IDLE when it needs no write now. */
static sim_step sim_run(sim_member *m, const cJSON *isvc, sim_pod *p)
{
    sim *s = m->s;
    const cJSON *cached = sim_pod_cached(p);
    bool fail = sim_isvc_flag(isvc, "sim.modelpool.test/fail");
    bool evict = sim_isvc_flag(isvc, "sim.modelpool.test/evict");
    if (sim_eq(p->phase, "Pending")) {
        if (sim_isvc_flag(isvc, "sim.modelpool.test/waiting-for-gpu"))
            return SIM_IDLE;
        uint64_t load = sim_isvc_ms(isvc, "sim.modelpool.test/load-ms", s->opt.load_ms);
        if (!sim_due(s->loop, p->born_ms + load, &p->load_timer, &p->load_at, sim_on_load, p))
            return SIM_IDLE;
        if (!cached) /* its resourceVersion is needed; the ADDED event will bring us back */
            return SIM_IDLE;
        if (fail)
            return sim_pod_status(m, p, cached, SIM_POD_FAILED);
        /* Listening before the status says Running, so a probe never finds a Pod that is not
         * there yet. */
        if (sim_pod_place(p, isvc) < 0)
            return SIM_RETRY;
        return sim_pod_status(m, p, cached, SIM_POD_RUNNING);
    }
    if (p->llama && sim_llama_state_of(p->llama) == SIM_LLAMA_EXITED) {
        /* The server died under a Pod nobody deleted: a crashed container (never restarted here,
         * so a test sees it), reported Failed and replaced. */
        log_kv(LOG_ERROR, "llama-server crashed", "member", m->key, "pod", p->name, NULL);
        return cached ? sim_pod_status(m, p, cached, SIM_POD_CRASHED) : SIM_IDLE;
    }
    if (evict || fail) {
        sim_pod_unserve(p);
        return cached ? sim_pod_status(m, p, cached, evict ? SIM_POD_EVICTED : SIM_POD_FAILED)
                      : SIM_IDLE;
    }
    if (sim_pod_place(p, isvc) < 0)
        return SIM_RETRY;
    if (!p->ip_in_status || p->ready_in_status != sim_pod_loaded(p))
        return cached ? sim_pod_status(m, p, cached, SIM_POD_RUNNING) : SIM_IDLE;
    return SIM_IDLE;
}

/* The status a Deployment-backed member reports: Ready while a Pod is ready (terminating Pods are
 * not: Stopped can come while they still go); else Failed when the test fails its Pods, else
 * WaitingForGPU or Creating while it wants replicas, else Stopped. */
static const char *sim_member_phase(const sim_member *m, const cJSON *isvc, bool failed, int ready)
{
    if (ready > 0) /* loading: its server runs but has not loaded the model yet */
        return sim_isvc_flag(isvc, "sim.modelpool.test/loading") ? "Progressing" : "Ready";
    if (m->desired <= 0)
        return "Stopped";
    if (failed)
        return "Failed";
    for (const sim_pod *p = m->pods; p; p = p->next)
        if (sim_active(p) && sim_eq(p->phase, "Running"))
            return "Progressing"; /* a real server loading its model (--llama-server) */
    for (const sim_pod *p = m->pods; p; p = p->next)
        if (sim_active(p) && sim_eq(p->phase, "Pending") &&
            sim_isvc_flag(isvc, "sim.modelpool.test/waiting-for-gpu"))
            return "WaitingForGPU";
    return "Creating";
}

static sim_step sim_reconcile(sim_member *m)
{
    sim *s = m->s;
    const cJSON *isvc = store_get(informer_store(s->isvcs), m->key);
    if (sim_sync_pods(m) < 0)
        return SIM_RETRY;
    m->desired = isvc ? sim_isvc_replicas(isvc) : 0;
    if (!m->phase) /* after a restart: what the status said, until a pass decides */
        m->phase = sim_phase_literal(sim_str(isvc, "status", "phase"));

    /* Pods on their way out, whatever is wanted: stop serving, then let them go. */
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!p->terminating || p->gone)
            continue;
        sim_pod_unserve(p);
        /* A real server's Pod is gone only once its process is (the memory is freed): its exit
         * brings the member back here. */
        if (p->llama && sim_llama_state_of(p->llama) != SIM_LLAMA_EXITED)
            continue;
        /* Until the cache shows the deletion, its resourceVersion would only earn a 409. */
        const cJSON *cached = sim_pod_cached(p);
        if (!cached || !sim_has_finalizer(cached) ||
            !sim_field(cached, "metadata", "deletionTimestamp"))
            continue;
        uint64_t hold = sim_isvc_ms(isvc, "sim.modelpool.test/terminate-ms", s->opt.terminate_ms);
        if (sim_due(s->loop, p->term_since_ms + hold, &p->term_timer, &p->term_at, sim_on_terminate,
                    p))
            return sim_unfinalize(m, p, cached);
    }

    /* As a ReplicaSet: the old Pods still terminating are not counted, so replacements are
     * created at once beside them; a Pod failed on the test's request is not replaced while the
     * annotation stays (it would fail again, forever). */
    int active = 0;
    bool failed = false;
    for (sim_pod *p = m->pods; p; p = p->next) {
        active += sim_active(p);
        failed |= !p->gone && !p->terminating && sim_terminal(p->phase);
    }
    failed = failed && (sim_isvc_flag(isvc, "sim.modelpool.test/fail") ||
                        sim_isvc_flag(isvc, "sim.modelpool.test/evict"));
    if (m->desired <= 0) {
        /* Failed Pods go too, so a member scaled to 0 is left without Pods. */
        for (sim_pod *p = m->pods; p; p = p->next)
            if (!p->gone && !p->terminating)
                return sim_delete(m, p);
    } else if (active > m->desired) {
        return sim_delete(m, sim_extra(m));
    } else if (active < m->desired && !failed) {
        return sim_create(m, isvc);
    }

    int ready = 0;
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!sim_active(p))
            continue;
        sim_step step = sim_run(m, isvc, p);
        if (step != SIM_IDLE)
            return step;
        ready += sim_ready(p);
    }
    m->ready = ready;
    if (!isvc)
        return SIM_IDLE;
    return sim_status(m, isvc, sim_member_phase(m, isvc, failed, ready), ready);
}

/* ---- members ---- */

static sim_member *sim_member_get(sim *s, const char *key)
{
    strmap_node *n = strmap_get(&s->members, key);
    if (n)
        return STRMAP_OWNER(n, sim_member, node);
    const char *slash = strchr(key, '/');
    if (!slash)
        return NULL;
    sim_member *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->s = s;
    m->key = strdup(key);
    m->ns = strndup(key, (size_t)(slash - key));
    m->name = strdup(slash + 1);
    if (!m->key || !m->ns || !m->name) {
        free(m->key);
        free(m->ns);
        free(m->name);
        free(m);
        return NULL;
    }
    strmap_insert(&s->members, &m->node, m->key);
    return m;
}

static void sim_member_free(sim_member *m)
{
    kube_call_cancel(m->call);
    while (m->pods) {
        sim_pod *p = m->pods;
        m->pods = p->next;
        sim_pod_free(p);
    }
    free(m->key);
    free(m->ns);
    free(m->name);
    free(m->status_rv);
    free(m->op_name);
    free(m->op_rv);
    free(m->shown);
    free(m);
}

/* A member whose InferenceService and Pods are all gone is forgotten. */
static void sim_member_maybe_drop(sim *s, sim_member *m)
{
    if (m->pods || m->call || store_get(informer_store(s->isvcs), m->key))
        return;
    strmap_remove(&s->members, &m->node);
    sim_member_free(m);
}

static void sim_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    (void)waited_ms;
    sim *s = ud;
    /* Before both caches are complete, a missing Pod may only be unlisted yet: wait for the
     * sync, which queues every member. */
    if (!s->synced) {
        wq_done(q, key, WQ_SUCCESS);
        return;
    }
    sim_member *m = sim_member_get(s, key);
    if (!m) {
        wq_done(q, key, WQ_FAILURE);
        return;
    }
    sim_step step = sim_reconcile(m);
    if (step == SIM_CALL)
        return;
    sim_show(m);
    wq_done(q, key, step == SIM_RETRY ? WQ_FAILURE : WQ_SUCCESS);
    sim_member_maybe_drop(s, m);
}

/* ---- informers ---- */

static void sim_queue_obj(sim *s, const cJSON *obj, bool is_pod)
{
    const char *ns = sim_str(obj, "metadata", "namespace");
    const char *name = is_pod ? cJSON_GetStringValue(sim_field(sim_field(obj, "metadata", "labels"),
                                                               SIM_LABEL_SERVICE, NULL))
                              : sim_str(obj, "metadata", "name");
    char *key = NULL;
    if (!ns || !name || !*name || asprintf(&key, "%s/%s", ns, name) < 0)
        return;
    wq_add(s->q, key);
    free(key);
}

static void sim_isvc_add(void *ud, const void *obj)
{
    sim_queue_obj(ud, obj, false);
}

static void sim_isvc_update(void *ud, const void *old_obj, const void *new_obj)
{
    (void)old_obj;
    sim_queue_obj(ud, new_obj, false);
}

static void sim_pod_add(void *ud, const void *obj)
{
    sim_queue_obj(ud, obj, true);
}

static void sim_pod_update(void *ud, const void *old_obj, const void *new_obj)
{
    (void)old_obj;
    sim_queue_obj(ud, new_obj, true);
}

static bool sim_queue_each(const char *key, const void *obj, void *ud)
{
    (void)key;
    sim *s = ud;
    sim_queue_obj(s, obj, sim_field(sim_field(obj, "metadata", "labels"), SIM_LABEL_SERVICE, NULL));
    return true;
}

static void sim_on_synced(void *ud)
{
    sim *s = ud;
    if (s->synced || !informer_synced(s->isvcs) || !informer_synced(s->pods))
        return;
    s->synced = true;
    log_kv(LOG_INFO, "caches synced", NULL);
    store_each(informer_store(s->isvcs), sim_queue_each, s);
    store_each(informer_store(s->pods), sim_queue_each, s);
}

static void sim_on_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "watch failed, retrying", "error", err->message, NULL);
}

/* Pods by "ns/<inference.llmkube.dev/service label>", the member key. */
static int sim_index_member(const void *obj, store_index_out *out, void *ud)
{
    (void)ud;
    const char *ns = sim_str(obj, "metadata", "namespace");
    const char *svc = cJSON_GetStringValue(
        sim_field(sim_field(obj, "metadata", "labels"), SIM_LABEL_SERVICE, NULL));
    if (!ns || !svc || !*svc)
        return 0;
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, svc) < 0)
        return -ENOMEM;
    int rc = store_index_emit(out, key);
    free(key);
    return rc;
}

/* ---- lifecycle ---- */

sim *sim_new(ev_loop *loop, kube_client *client, const sim_options *opt)
{
    sim *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->loop = loop;
    s->client = client;
    s->opt = *opt;
    if (s->opt.ip_first <= 0 || s->opt.ip_count <= 0) {
        s->opt.ip_first = SIM_IP_FIRST_DEFAULT;
        s->opt.ip_count = SIM_IP_COUNT_DEFAULT;
    }
    if (strmap_init(&s->members) < 0 ||
        !(s->ip_used = calloc((size_t)s->opt.ip_count, sizeof(*s->ip_used)))) {
        strmap_fini(&s->members);
        free(s);
        return NULL;
    }
    s->rng = (ev_now_ms() << 16) ^ (uint64_t)getpid() ^ (uint64_t)time(NULL);
    if (!s->rng)
        s->rng = 1;
    informer_handlers h = {.on_add = sim_isvc_add,
                           .on_update = sim_isvc_update,
                           .on_delete = sim_isvc_add,
                           .on_synced = sim_on_synced,
                           .on_error = sim_on_error,
                           .ud = s};
    informer_config ic = {.group = "inference.llmkube.dev",
                          .version = "v1alpha1",
                          .resource = "inferenceservices",
                          .namespace_ = opt->namespace_,
                          .codec = &store_codec_json_trimmed};
    s->isvcs = informer_new(loop, client, &ic, &h);
    h.on_add = sim_pod_add;
    h.on_update = sim_pod_update;
    h.on_delete = sim_pod_add;
    informer_config pc = {.group = "",
                          .version = "v1",
                          .resource = "pods",
                          .namespace_ = opt->namespace_,
                          .label_selector = SIM_LABEL_SERVICE,
                          .codec = &store_codec_json_trimmed};
    s->pods = informer_new(loop, client, &pc, &h);
    /* Conflicts clear within a watch event or two: retry fast, but never faster than 5 s apart
     * once the API server keeps failing. */
    wq_config qc = {.concurrency = 8, .base_delay_ms = 20, .max_delay_ms = 5000};
    s->q = wq_new(loop, &qc, sim_process, s);
    if (!s->isvcs || !s->pods || !s->q ||
        store_add_index(informer_store(s->pods), SIM_INDEX_MEMBER, sim_index_member, NULL) < 0) {
        sim_free(s);
        return NULL;
    }
    return s;
}

int sim_start(sim *s)
{
    int rc = informer_start(s->isvcs);
    return rc < 0 ? rc : informer_start(s->pods);
}

void sim_print_requests(const sim *s, FILE *out)
{
    for (strmap_node *n = strmap_first(&s->members); n; n = strmap_next(&s->members, n)) {
        const sim_member *m = STRMAP_OWNER(n, sim_member, node);
        fprintf(out, "sim %s requests=%llu\n", m->key, (unsigned long long)m->requests);
    }
    fflush(out);
}

void sim_free(sim *s)
{
    if (!s)
        return;
    informer_free(s->isvcs);
    informer_free(s->pods);
    /* Calls first: their callbacks must not reach a freed queue. */
    strmap_node *n = s->members.buckets ? strmap_first(&s->members) : NULL;
    while (n) {
        strmap_node *next = strmap_next(&s->members, n);
        sim_member_free(STRMAP_OWNER(n, sim_member, node));
        n = next;
    }
    strmap_fini(&s->members);
    wq_free(s->q);
    free(s->ip_used);
    free(s);
}

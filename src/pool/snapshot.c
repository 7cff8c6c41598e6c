/* snapshot: field extraction from cached API objects into plan_snapshot. A field of the wrong
 * type reads as absent; the plan decides what absence means (for replicas: 1, as the member
 * controller does). */
#include "pool/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/status.h"

static const cJSON *snap_get(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const char *snap_str(const cJSON *v)
{
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int snap_emit_ns(store_index_out *out, const cJSON *obj, const char *name)
{
    const char *ns = snap_str(snap_get(obj, "metadata", "namespace"));
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", name) < 0)
        return -ENOMEM;
    int rc = store_index_emit(out, v);
    free(v);
    return rc;
}

int pool_index_pod_service(const cJSON *pod, store_index_out *out, void *ud)
{
    (void)ud;
    const char *svc = snap_str(
        cJSON_GetObjectItemCaseSensitive(snap_get(pod, "metadata", "labels"), POOL_SERVICE_LABEL));
    return svc ? snap_emit_ns(out, pod, svc) : 0;
}

int pool_index_pool_members(const cJSON *pool, store_index_out *out, void *ud)
{
    (void)ud;
    const cJSON *m;
    cJSON_ArrayForEach(m, snap_get(pool, "spec", "members"))
    {
        const char *name = snap_str(snap_get(m, "inferenceServiceRef", "name"));
        if (name && *name) {
            int rc = snap_emit_ns(out, pool, name);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* ---- what the caches keep ---- */

#define SNAP_KEEP(obj, ...)                                                                        \
    store_keep((obj), (const char *const[]){__VA_ARGS__},                                          \
               sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static cJSON *snap_child(cJSON *obj, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

void pool_trim_pod(cJSON *pod, void *ud)
{
    (void)ud;
    SNAP_KEEP(pod, "metadata", "spec", "status");
    SNAP_KEEP(snap_child(pod, "spec"), "containers");
    cJSON *c, *port;
    cJSON_ArrayForEach(c, snap_child(snap_child(pod, "spec"), "containers"))
    {
        SNAP_KEEP(c, "ports");
        cJSON_ArrayForEach(port, snap_child(c, "ports")) SNAP_KEEP(port, "name", "containerPort");
    }
    cJSON *meta = snap_child(pod, "metadata");
    SNAP_KEEP(meta, "name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp");
    SNAP_KEEP(snap_child(meta, "labels"), POOL_SERVICE_LABEL);
    cJSON *status = snap_child(pod, "status");
    SNAP_KEEP(status, "phase", "podIP", "containerStatuses");
    cJSON *cs;
    cJSON_ArrayForEach(cs, snap_child(status, "containerStatuses"))
    {
        SNAP_KEEP(cs, "state");
        cJSON *state = snap_child(cs, "state");
        SNAP_KEEP(state, "running");
        /* Only whether it is there counts. */
        store_keep(snap_child(state, "running"), NULL, 0);
    }
}

void pool_trim_isvc(cJSON *isvc, void *ud)
{
    (void)ud;
    SNAP_KEEP(isvc, "metadata", "spec", "status");
    cJSON *meta = snap_child(isvc, "metadata");
    SNAP_KEEP(meta, "name", "namespace", "uid", "resourceVersion", "annotations");
    SNAP_KEEP(snap_child(meta, "annotations"), POOL_IDLE_ANNOTATION);
    cJSON *spec = snap_child(isvc, "spec");
    SNAP_KEEP(spec, "replicas", "runtime", "endpoint", "containerPort");
    SNAP_KEEP(snap_child(spec, "endpoint"), "port");
    SNAP_KEEP(snap_child(isvc, "status"), "phase");
}

void pool_trim_pool(cJSON *pool, void *ud)
{
    (void)ud;
    SNAP_KEEP(pool, "metadata", "spec", "status");
    SNAP_KEEP(snap_child(pool, "metadata"), "name", "namespace", "uid", "resourceVersion",
              "generation", "annotations");
    SNAP_KEEP(snap_child(snap_child(pool, "metadata"), "annotations"), POOL_REQUEST_ANNOTATION);
    cJSON *spec = snap_child(pool, "spec");
    SNAP_KEEP(spec, "members", "default", "swapBudget", "swapPolicy");
    cJSON *m;
    cJSON_ArrayForEach(m, snap_child(spec, "members"))
    {
        SNAP_KEEP(m, "inferenceServiceRef");
        SNAP_KEEP(snap_child(m, "inferenceServiceRef"), "name");
    }
    cJSON *status = snap_child(pool, "status");
    SNAP_KEEP(status, "phase", "residentMember", "pendingMember", "observedGeneration", "members",
              "conditions");
    cJSON_ArrayForEach(m, snap_child(status, "members"))
        SNAP_KEEP(m, "name", "phase", "resident", "releasing");
    cJSON_ArrayForEach(m, snap_child(status, "conditions"))
        SNAP_KEEP(m, "type", "status", "reason", "message", "lastTransitionTime");
}

static plan_pod_phase snap_pod_phase(const char *p)
{
    if (!p || strcmp(p, "Pending") == 0)
        return PLAN_POD_PENDING;
    if (strcmp(p, "Running") == 0)
        return PLAN_POD_RUNNING;
    if (strcmp(p, "Succeeded") == 0)
        return PLAN_POD_SUCCEEDED;
    if (strcmp(p, "Failed") == 0)
        return PLAN_POD_FAILED;
    return PLAN_POD_UNKNOWN;
}

typedef struct {
    const pool_sources *src;
    int64_t now_ms, now_mono_ms;
    plan_pod *pods;
    size_t n, cap;
    int rc;
} snap_pod_walk;

/* Where the server listens, as the Pod spec says: the port named http, else the first port the
 * first container with ports declares; 0 when the spec names none. */
static int32_t snap_pod_port(const cJSON *pod)
{
    const cJSON *c, *port;
    int32_t first = 0;
    cJSON_ArrayForEach(c, snap_get(pod, "spec", "containers"))
    {
        cJSON_ArrayForEach(port, cJSON_GetObjectItemCaseSensitive(c, "ports"))
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(port, "containerPort");
            if (!cJSON_IsNumber(n) || n->valuedouble < 1 || n->valuedouble > 65535)
                continue;
            const char *name = snap_str(cJSON_GetObjectItemCaseSensitive(port, "name"));
            if (name && strcmp(name, "http") == 0)
                return (int32_t)n->valuedouble;
            if (first == 0)
                first = (int32_t)n->valuedouble;
        }
    }
    return first;
}

static bool snap_add_pod(const char *key, const cJSON *pod, void *ud)
{
    (void)key;
    snap_pod_walk *w = ud;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 2;
        plan_pod *grown = realloc(w->pods, cap * sizeof(*grown));
        if (!grown) {
            w->rc = -ENOMEM;
            return false;
        }
        w->pods = grown;
        w->cap = cap;
    }
    plan_pod *p = &w->pods[w->n++];
    *p = (plan_pod){0};
    p->name = snap_str(snap_get(pod, "metadata", "name"));
    p->phase = snap_pod_phase(snap_str(snap_get(pod, "status", "phase")));
    p->terminating = snap_get(pod, "metadata", "deletionTimestamp") &&
                     !cJSON_IsNull(snap_get(pod, "metadata", "deletionTimestamp"));
    p->ip = snap_str(snap_get(pod, "status", "podIP"));
    p->port = snap_pod_port(pod);
    const cJSON *cs;
    cJSON_ArrayForEach(cs, snap_get(pod, "status", "containerStatuses"))
    {
        if (cJSON_IsObject(snap_get(cs, "state", "running")))
            p->container_running = true;
    }
    const char *uid = snap_str(snap_get(pod, "metadata", "uid"));
    const pool_probe_memo *memo =
        uid && w->src->probe ? w->src->probe(w->src->probe_ud, uid) : NULL;
    if (memo) {
        p->probe = memo->result;
        p->probed_at_ms = w->now_ms - (w->now_mono_ms - memo->at_mono_ms);
        p->probe_message = memo->message;
    }
    return true;
}

typedef struct {
    const char *self;
    const char *first; /* smallest other pool name, for a stable message */
} snap_claim_walk;

static bool snap_find_claim(const char *key, const cJSON *pool, void *ud)
{
    (void)key;
    snap_claim_walk *w = ud;
    const char *name = snap_str(snap_get(pool, "metadata", "name"));
    if (name && strcmp(name, w->self) != 0 && (!w->first || strcmp(name, w->first) < 0))
        w->first = name;
    return true;
}

static int32_t snap_int(const cJSON *v, int32_t absent)
{
    return cJSON_IsNumber(v) ? (int32_t)v->valuedouble : absent;
}

static int snap_member(const pool_sources *src, const char *ns, const char *self, size_t i,
                       int64_t now_mono_ms, pool_snapshot *out)
{
    plan_member *m = &out->members[i];
    if (!m->name || !*m->name)
        return 0;
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, m->name) < 0)
        return -ENOMEM;
    const cJSON *isvc = store_get(src->isvcs, key);
    if (isvc) {
        m->exists = true;
        m->replicas = snap_int(snap_get(isvc, "spec", "replicas"), PLAN_REPLICAS_UNSET);
        m->phase = snap_str(snap_get(isvc, "status", "phase"));
        m->runtime = snap_str(snap_get(isvc, "spec", "runtime"));
        m->idle_endpoint = snap_str(cJSON_GetObjectItemCaseSensitive(
            snap_get(isvc, "metadata", "annotations"), POOL_IDLE_ANNOTATION));
        m->endpoint_port = snap_int(snap_get(snap_get(isvc, "spec", "endpoint"), "port", NULL), 0);
        m->container_port = snap_int(snap_get(isvc, "spec", "containerPort"), 0);
    }
    snap_pod_walk pw = {.src = src, .now_ms = out->snap.now_ms, .now_mono_ms = now_mono_ms};
    store_index_each(src->pods, POOL_INDEX_SERVICE, key, snap_add_pod, &pw);
    out->pods[i] = pw.pods;
    m->pods = pw.pods;
    m->n_pods = pw.n;
    snap_claim_walk cw = {.self = self};
    store_index_each(src->pools, POOL_INDEX_MEMBER, key, snap_find_claim, &cw);
    free(key);
    if (pw.rc < 0)
        return pw.rc;
    if (cw.first) {
        if (!(out->claims[i] = strdup(cw.first)))
            return -ENOMEM;
        m->claimed_by = out->claims[i];
    }
    return 0;
}

int pool_snapshot_build(const cJSON *pool, const pool_sources *src, int64_t now_ms,
                        int64_t now_mono_ms, pool_snapshot *out)
{
    *out = (pool_snapshot){0};
    plan_snapshot *s = &out->snap;
    s->ns = snap_str(snap_get(pool, "metadata", "namespace"));
    s->name = snap_str(snap_get(pool, "metadata", "name"));
    const cJSON *gen = snap_get(pool, "metadata", "generation");
    s->generation = cJSON_IsNumber(gen) ? (int64_t)gen->valuedouble : 0;
    s->default_member = snap_str(snap_get(pool, "spec", "default"));
    s->requested = snap_str(cJSON_GetObjectItemCaseSensitive(
        snap_get(pool, "metadata", "annotations"), POOL_REQUEST_ANNOTATION));
    s->swap_budget = snap_str(snap_get(pool, "spec", "swapBudget"));
    s->swap_policy = snap_str(snap_get(pool, "spec", "swapPolicy"));
    s->now_ms = now_ms;
    if (pool_status_read(pool, &s->status) < 0)
        return -ENOMEM;

    const cJSON *members = snap_get(pool, "spec", "members");
    size_t n = cJSON_IsArray(members) ? (size_t)cJSON_GetArraySize(members) : 0;
    if (n) {
        out->members = calloc(n, sizeof(*out->members));
        out->pods = calloc(n, sizeof(*out->pods));
        out->claims = calloc(n, sizeof(*out->claims));
        if (!out->members || !out->pods || !out->claims)
            goto nomem;
    }
    s->members = out->members;
    s->n_members = n;
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, (n ? members : NULL))
    {
        out->members[i].name = snap_str(snap_get(m, "inferenceServiceRef", "name"));
        out->members[i].replicas = PLAN_REPLICAS_UNSET;
        if (snap_member(src, s->ns ? s->ns : "", s->name ? s->name : "", i, now_mono_ms, out) < 0)
            goto nomem;
        i++;
    }
    return 0;
nomem:
    pool_snapshot_release(out);
    return -ENOMEM;
}

void pool_snapshot_release(pool_snapshot *s)
{
    for (size_t i = 0; i < s->snap.n_members; i++) {
        if (s->pods)
            free(s->pods[i]);
        if (s->claims)
            free(s->claims[i]);
    }
    free(s->members);
    free(s->pods);
    free(s->claims);
    pool_status_release(&s->snap.status);
    *s = (pool_snapshot){0};
}

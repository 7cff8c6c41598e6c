/* snapshot: the cached records of a pool, its members (and the members its status recorded that
 * the spec no longer lists) and their Pods, gathered into plan_snapshot. The records hold what was
 * decoded (api/records.c); the plan decides what absence means (for replicas: 1, as the member
 * controller does). */
#include "pool/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const pool_sources *src;
    int64_t now_ms, now_mono_ms;
    plan_pod *pods;
    size_t n, cap;
    int rc;
} snap_pod_walk;

static plan_probe_result snap_probe_result(probe_verdict v)
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

static bool snap_add_pod(const char *key, const void *rec, void *ud)
{
    const api_pod *pod = rec;
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
    *p = (plan_pod){.name = pod->name,
                    .phase = pod->phase,
                    .terminating = pod->terminating,
                    .container_running = pod->running,
                    .ready = pod->ready,
                    .waiting = pod->waiting,
                    .ip = pod->ip,
                    .port = pod->port};
    const char *uid = pod->uid;
    const prober_memo *memo = uid && w->src->probe ? w->src->probe(w->src->probe_ud, uid) : NULL;
    if (memo) {
        p->probe = snap_probe_result(memo->verdict);
        p->probed_at_ms = w->now_ms - (w->now_mono_ms - memo->at_mono_ms);
        p->probe_sent_ms = w->now_ms - (w->now_mono_ms - memo->sent_mono_ms);
        p->probe_message = memo->message;
    }
    return true;
}

typedef struct {
    const char *self;
    const char *first; /* smallest other pool name, for a stable message */
} snap_claim_walk;

static bool snap_find_claim(const char *key, const void *rec, void *ud)
{
    (void)key;
    snap_claim_walk *w = ud;
    const char *name = ((const api_pool *)rec)->name;
    if (name && strcmp(name, w->self) != 0 && (!w->first || strcmp(name, w->first) < 0))
        w->first = name;
    return true;
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
    const api_isvc *isvc = store_get(src->isvcs, key);
    if (isvc) {
        m->exists = true;
        m->replicas = isvc->replicas;
        m->phase = isvc->phase;
        m->runtime = isvc->runtime;
        m->idle_endpoint = isvc->idle_endpoint;
        m->endpoint_port = isvc->endpoint_port;
        m->container_port = isvc->container_port;
    } else {
        m->absence_unconfirmed = !src->absence_confirmed;
    }
    snap_pod_walk pw = {.src = src, .now_ms = out->snap.now_ms, .now_mono_ms = now_mono_ms};
    store_index_each(src->pods, API_INDEX_SERVICE, key, snap_add_pod, &pw);
    out->pods[i] = pw.pods;
    m->pods = pw.pods;
    m->n_pods = pw.n;
    if (!self) { /* a removed member: no longer the pool's to share */
        free(key);
        return pw.rc;
    }
    snap_claim_walk cw = {.self = self};
    store_index_each(src->pools, API_INDEX_MEMBER, key, snap_find_claim, &cw);
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

int pool_snapshot_build(const api_pool *pool, const pool_sources *src, int64_t now_ms,
                        int64_t now_mono_ms, pool_snapshot *out)
{
    *out = (pool_snapshot){0};
    plan_snapshot *s = &out->snap;
    /* Borrowed from the record, as the plan takes it (it copies what it keeps). */
    *s = (plan_snapshot){.ns = pool->ns,
                         .name = pool->name,
                         .generation = pool->generation,
                         .default_member = pool->default_member,
                         .requested = pool->requested,
                         .withdrawn = pool->withdrawn,
                         .unload_after = pool->unload_after,
                         .swap_budget = pool->swap_budget,
                         .swap_policy = pool->swap_policy,
                         .now_ms = now_ms,
                         .status = pool->status};

    size_t n = pool->n_members;
    const char **removed = calloc(API_REMOVED_MAX(pool), sizeof(*removed));
    if (!removed)
        return -ENOMEM;
    size_t n_removed = api_removed_names(pool, removed);
    out->n_all = n + n_removed;
    if (out->n_all) {
        out->members = calloc(out->n_all, sizeof(*out->members));
        out->pods = calloc(out->n_all, sizeof(*out->pods));
        out->claims = calloc(out->n_all, sizeof(*out->claims));
        if (!out->members || !out->pods || !out->claims)
            goto nomem;
    }
    s->members = out->members;
    s->n_members = n;
    s->removed = out->members ? out->members + n : NULL;
    s->n_removed = n_removed;
    for (size_t i = 0; i < out->n_all; i++) {
        out->members[i].name = i < n ? pool->members[i] : removed[i - n];
        out->members[i].replicas = API_REPLICAS_UNSET;
        if (snap_member(src, s->ns ? s->ns : "", i < n ? (s->name ? s->name : "") : NULL, i,
                        now_mono_ms, out) < 0)
            goto nomem;
    }
    free(removed);
    return 0;
nomem:
    free(removed);
    pool_snapshot_release(out);
    return -ENOMEM;
}

void pool_snapshot_release(pool_snapshot *s)
{
    for (size_t i = 0; i < s->n_all; i++) {
        if (s->pods)
            free(s->pods[i]);
        if (s->claims)
            free(s->claims[i]);
    }
    free(s->members);
    free(s->pods);
    free(s->claims);
    *s = (pool_snapshot){0};
}

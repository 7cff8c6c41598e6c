/* view: the router's reading of its caches. A member's ready Pods are the ones a request may go
 * to; its record, phase and replicas are what rt_hold judges; the pool's conditions give the words
 * of a 503 (Degraded, a dropped request). */
#include "router/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/defaults.h"
#include "api/runtime.h"
#include "api/status.h"
#include "informer/expect.h"
#include "util/duration.h"

static bool view_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

uint64_t rt_view_budget_ms(const api_pool *o)
{
    int64_t ms = API_SWAP_BUDGET_DEFAULT_MS;
    if (o && o->swap_budget && *o->swap_budget &&
        (duration_parse_ms(o->swap_budget, &ms) < 0 || ms < 1))
        ms = API_SWAP_BUDGET_DEFAULT_MS;
    return (uint64_t)ms;
}

/* The pool's phase with the message of the condition that says why it cannot serve: MembersValid
 * when False (a spec fault: the slot's condition is left as it was then), else SlotAllocated when
 * False (a target that cannot become Ready). */
static void view_pool_reason(const api_pool *o, char *buf, size_t len)
{
    const char *msg = NULL, *slot = NULL;
    for (size_t i = 0; o && i < o->status.n_conditions; i++) {
        const api_condition *c = &o->status.conditions[i];
        if (!view_eq(c->status, "False") || !c->message || !*c->message)
            continue;
        if (view_eq(c->type, API_COND_MEMBERS_VALID))
            msg = c->message;
        else if (view_eq(c->type, API_COND_SLOT_ALLOCATED))
            slot = c->message;
    }
    if (!msg)
        msg = slot;
    snprintf(buf, len, "pool %s/%s is %s%s%s", o && o->ns ? o->ns : "", o ? o->name : "",
             o && o->status.phase ? o->status.phase : "unavailable", msg ? ": " : "",
             msg ? msg : "");
}

void rt_view_reject_message(const api_pool *o, const rt_hold_member *m, rt_hold_reject why,
                            const char *dropped, char *buf, size_t len)
{
    if (why == RT_REJECT_DEGRADED)
        view_pool_reason(o, buf, len);
    else if (why == RT_REJECT_DROPPED)
        snprintf(buf, len, "%s", dropped ? dropped : "");
    else
        snprintf(buf, len, "member %s of pool %s/%s is %s", m->name, o->ns ? o->ns : "", o->name,
                 !m->exists ? "missing"
                 : m->phase ? m->phase
                            : "");
}

bool rt_view_dropped(const api_pool *o, char *buf, size_t len)
{
    const char *msg = NULL;
    bool dropped = false;
    for (size_t i = 0; o && i < o->status.n_conditions; i++) {
        const api_condition *c = &o->status.conditions[i];
        if (view_eq(c->type, API_COND_SWAPPING))
            dropped = view_eq(c->status, "False") && view_eq(c->reason, API_REASON_REQUEST_DROPPED);
        else if (view_eq(c->type, API_COND_SWAP_DEFERRED) && view_eq(c->status, "True"))
            msg = c->message;
    }
    if (dropped)
        snprintf(buf, len, "pool %s/%s cannot swap away from its resident %s: %s",
                 o->ns ? o->ns : "", o->name,
                 o->status.resident_member ? o->status.resident_member : "",
                 msg ? msg : "its idle probe cannot decide");
    return dropped;
}

int rt_view_pod_port(const api_pod *pod, const api_isvc *isvc)
{
    if (pod->port > 0)
        return pod->port;
    return isvc ? api_runtime_port(isvc->runtime, isvc->endpoint_port, isvc->container_port) : 0;
}

static bool view_pod_ready(const api_pod *pod, const api_isvc *isvc)
{
    return pod->ready && pod->running && !pod->terminating && pod->ip && *pod->ip &&
           rt_view_pod_port(pod, isvc) > 0;
}

typedef struct view_collect {
    rt_view_targets *t;
    const rt_podcheck *refuted;
} view_collect;

static bool view_collect_pod(const char *key, const void *rec, void *ud)
{
    (void)key;
    view_collect *c = ud;
    rt_view_targets *t = c->t;
    const api_pod *pod = rec;
    if (view_pod_ready(pod, t->isvc) && !(c->refuted && rt_podcheck_refuted(c->refuted, pod)) &&
        t->n < sizeof(t->pods) / sizeof(t->pods[0]))
        t->pods[t->n++] = pod;
    return true;
}

static int view_pod_cmp(const void *a, const void *b)
{
    return strcmp((*(const api_pod *const *)a)->name, (*(const api_pod *const *)b)->name);
}

void rt_view_ready_pods(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                        const char *ns, const char *member, rt_view_targets *t)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, member);
    t->isvc = store_get(isvcs, key);
    t->n = 0;
    view_collect c = {t, refuted};
    store_index_each(pods, API_INDEX_SERVICE, key, view_collect_pod, &c);
    qsort(t->pods, t->n, sizeof(t->pods[0]), view_pod_cmp);
}

static size_t view_count_ready(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                               const char *ns, const char *member)
{
    rt_view_targets t;
    rt_view_ready_pods(isvcs, pods, refuted, ns, member, &t);
    return t.n;
}

rt_hold_member rt_view_member(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                              const char *isvcs_rv, const api_pool *o, const char *name)
{
    const char *ns = o->ns ? o->ns : "";
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    const api_isvc *isvc = store_get(isvcs, key);
    return (rt_hold_member){
        .name = name,
        .exists = isvc != NULL,
        .absence_unsure = !isvc && !expect_rv_at_least(isvcs_rv, o->rv),
        .phase = isvc ? isvc->phase : NULL,
        .up = isvc && api_isvc_replicas(isvc) >= 1,
        .ready_pods = isvc ? view_count_ready(isvcs, pods, refuted, ns, name) : 0,
    };
}

bool rt_view_unconfirmed(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                         const api_pool *o, const char *member)
{
    return o && view_eq(o->status.resident_member, member) &&
           (!(o->status.pending_member && *o->status.pending_member) ||
            api_status_awaits_probe(&o->status)) &&
           view_count_ready(isvcs, pods, refuted, o->ns ? o->ns : "", member) > 0;
}

/* plan_facts: what a plan reads from its snapshot: members and their Pods (live, running, serving,
 * clear of the GPU), names, the status's conditions. Questions only; nothing is decided here. */
#include "plan_ctx.h"

int32_t plan_replicas(const plan_member *m)
{
    return m->replicas < 0 ? 1 : m->replicas;
}

/* Succeeded and Failed Pods have released the GPU; every other Pod, terminating or not, holds it.
 */
bool plan_pod_live(const plan_pod *p)
{
    return p->phase != API_POD_SUCCEEDED && p->phase != API_POD_FAILED;
}

/* A Pod that may be serving a request right now, so it must be probed before an unload. */
bool plan_pod_running(const plan_pod *p)
{
    return plan_pod_live(p) && p->container_running;
}

bool plan_has_live_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_live(&m->pods[i]))
            return true;
    return false;
}

/* Holds no claim on the GPU, now or soon. */
static bool is_clear(const plan_member *m)
{
    return plan_replicas(m) == 0 && !plan_has_live_pod(m);
}

bool plan_is_serving(const plan_member *m)
{
    return plan_replicas(m) >= 1 && str_eq(m->phase, "Ready") && plan_has_live_pod(m);
}

const plan_member *plan_member_named(const plan_snapshot *s, const char *name)
{
    if (is_empty(name))
        return NULL;
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, name))
            return &s->members[i];
    return NULL;
}

/* The first entry of each distinct, non-empty name: what status.members[] lists. */
bool plan_first_of_name(const plan_snapshot *s, size_t i)
{
    if (is_empty(s->members[i].name))
        return false;
    return plan_member_named(s, s->members[i].name) == &s->members[i];
}

/* A removed member (plan_snapshot.removed) that still claims the GPU: up (it exists and its
 * replicas are at least 1) or a live Pod. Until neither, it stays recorded in status.members. */
bool plan_removed_holds(const plan_member *m)
{
    return (m->exists && plan_replicas(m) >= 1) || plan_has_live_pod(m);
}

/* Every member but the target has replicas 0 and no live Pod, and no member removed from the spec
 * still holds the GPU (rule 1). */
bool plan_others_clear(const plan_snapshot *s, const char *target)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (!str_eq(s->members[i].name, target) && !is_clear(&s->members[i]))
            return false;
    for (size_t i = 0; i < s->n_removed; i++)
        if (plan_removed_holds(&s->removed[i]))
            return false;
    return true;
}

bool plan_is_up(const plan_member *m)
{
    return m != NULL && plan_replicas(m) >= 1;
}

bool plan_has_terminating_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_live(&m->pods[i]) && m->pods[i].terminating)
            return true;
    return false;
}

bool plan_has_running_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_running(&m->pods[i]))
            return true;
    return false;
}

bool plan_was_releasing(const plan_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->status.n_members; i++)
        if (str_eq(s->status.members[i].name, name))
            return s->status.members[i].releasing;
    return false;
}

/* The swap was at Loading: its target was started (only then is Loading written). */
bool plan_was_loading(const plan_ctx *c)
{
    const api_condition *sw = api_status_cond(&c->s->status, API_COND_SWAPPING);
    return sw && str_eq(sw->status, "True") && str_eq(sw->reason, "Loading");
}

/* A pod that still holds the slot, for a message. */
const char *plan_live_pod_name(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_live(&m->pods[i]))
            return m->pods[i].name ? m->pods[i].name : "";
    return "";
}

/* plan_unprobeable: a resident whose idle probe cannot decide must not wedge the pool (#26): the
 * swap waiting on it is dropped after swapBudget, or the resident unloaded where the pool opts in.
 */
#include "plan_ctx.h"

#include "pool/probe.h"

/* ---- a resident that cannot be probed (#26) ----
 * Failing closed is right (never unload what may be busy), but it must not wedge the pool: a swap
 * whose resident's idle probe cannot decide (no probe for its runtime, or its Pods' probes fail,
 * none busy) for swapBudget since the swap was requested is dropped: pendingMember is cleared and
 * the resident serves again, with Swapping False/RequestDropped and SwapDeferred naming the probe's
 * error, and a Warning Event. Routers answer requests for other members 503 with that message
 * while it stands, and the resident is probed until its probe decides again, which clears it. The
 * annotation modelpool-operator.dev/unprobeable-unload-after opts a pool into unloading such a
 * resident instead, once the swap has waited that long (and the drain fence is over). */

/* Why m's idle probe cannot decide (IdleCheckUnsupported or IdleCheckFailed; each Pod's error in
 * msg), or NULL when it can or may: no running Pod, a Pod answered busy (decided: wait), or a Pod
 * not probed yet. */
const char *plan_undecided(const plan_member *m, plan_msg *msg)
{
    if (!plan_has_running_pod(m))
        return NULL;
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_running(&m->pods[i]) && m->pods[i].probe == PLAN_PROBE_BUSY)
            return NULL;
    if (!probe_supported(m->runtime, m->idle_endpoint)) {
        if (str_eq(m->runtime, "generic"))
            plan_msg_add(msg,
                         "runtime generic without annotation inference.llmkube.dev/idle-endpoint "
                         "cannot be probed");
        else
            plan_msg_add(msg, "runtime %s has no idle probe", m->runtime);
        return "IdleCheckUnsupported";
    }
    for (size_t i = 0; i < m->n_pods; i++)
        if (plan_pod_running(&m->pods[i]) && m->pods[i].probe == PLAN_PROBE_NONE)
            return NULL;
    const char *why = NULL;
    for (size_t i = 0; i < m->n_pods; i++) {
        const plan_pod *p = &m->pods[i];
        if (!plan_pod_running(p) || p->probe == PLAN_PROBE_IDLE)
            continue;
        bool unsupported = p->probe == PLAN_PROBE_UNSUPPORTED;
        if (why == NULL || unsupported)
            why = unsupported ? "IdleCheckUnsupported" : "IdleCheckFailed";
        plan_msg_sep(msg);
        plan_msg_add(msg, "pod %s: %s", p->name ? p->name : "",
                     !is_empty(p->probe_message) ? p->probe_message
                     : unsupported               ? "idle probe unsupported"
                                                 : "idle probe failed");
    }
    return why;
}

/* The swap to pend is dropped: r, the resident, serves again; the target is held at 0 like any
 * other member up (its replicas are no request any more). */
void plan_drop_request(plan_ctx *c, plan_want *w, const plan_member *r, const char *pend,
                       const char *reason, const plan_msg *why, int64_t budget_ms, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, pend))
            c->rel[i] = plan_is_up(&s->members[i]);
        else if (&s->members[i] == r)
            c->rel[i] = false;
    plan_settle(w, r);
    plan_release_others(c, r->name, s->drain_after_ms, d);
    plan_want_set(
        &w->swapping, "False", API_REASON_REQUEST_DROPPED,
        "the request for %s was dropped: resident %s could not be probed within swapBudget "
        "(%lld ms); it serves again",
        pend, r->name, (long long)budget_ms);
    plan_want_set(
        &w->deferred, "True", reason,
        "member %s: %s; the request for %s was dropped after swapBudget (%lld ms) without a probe "
        "that could decide, and %s serves again",
        r->name, plan_msg_str(why), pend, (long long)budget_ms, r->name);
    c->dropped = true;
}

/* Whether every running Pod of r answered its probe (idle or busy) and the answers are fresh;
 * if not, r is probed again (stale answers) or looked at again once they go stale. Only where
 * drain() sends no probe for r in the same plan. */
bool plan_probe_decides(plan_ctx *c, const plan_member *r, plan_defer *d)
{
    const int64_t now = c->s->now_ms;
    size_t running = 0, stale = 0, decided = 0;
    int64_t expires = 0;
    for (size_t i = 0; i < r->n_pods; i++) {
        const plan_pod *p = &r->pods[i];
        if (!plan_pod_running(p))
            continue;
        running++;
        bool fresh = p->probe != PLAN_PROBE_NONE && now - p->probed_at_ms < PLAN_PROBE_TTL_MS;
        if (!fresh) {
            stale++;
            continue;
        }
        decided += p->probe == PLAN_PROBE_IDLE || p->probe == PLAN_PROBE_BUSY;
        if (expires == 0 || p->probed_at_ms + PLAN_PROBE_TTL_MS < expires)
            expires = p->probed_at_ms + PLAN_PROBE_TTL_MS;
    }
    if (decided == running && probe_supported(r->runtime, r->idle_endpoint))
        return true;
    if (!probe_supported(r->runtime, r->idle_endpoint))
        return false; /* nothing to ask: a change of the member (its annotation) re-plans */
    if (stale > 0)
        plan_push_probe(c, r, plan_replicas(r), running);
    else
        plan_defer_requeue(d, expires - now);
    return false;
}

/* After a dropped request (Swapping False/RequestDropped), the resident r is probed until its
 * probe decides (idle or busy on every running Pod, fresh), which ends the episode; until then the
 * conditions stay as they are. */
void plan_recheck_dropped(plan_ctx *c, plan_want *w, const plan_member *r, plan_defer *d)
{
    const api_condition *sw = api_status_cond(&c->s->status, API_COND_SWAPPING);
    /* Over too once the pool opts into unloading: a swap would not wedge any more. */
    if (!sw || !str_eq(sw->status, "False") || !str_eq(sw->reason, API_REASON_REQUEST_DROPPED) ||
        !plan_has_running_pod(r) || !is_empty(c->s->unload_after))
        return;
    if (plan_probe_decides(c, r, d))
        return; /* the probe decides again: the episode is over */
    w->swapping.keep = true;
    w->deferred.keep = true;
    c->dropped = true;
}

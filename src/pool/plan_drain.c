/* plan_drain: how a plan brings members down (rules 2 and 3): the idle probe of every running Pod,
 * a member scaled to 0 or back to 1 once safe, a target held back beside another member. */
#include "plan_ctx.h"

#include <stdlib.h>

#include "pool/probe.h"

/* Probes every running Pod of m at once, fresh results too: results of one instant agree, where
 * Pods probed one by one could go stale in turn and never all be fresh together. */
void plan_push_probe(plan_ctx *c, const plan_member *m, int32_t to, size_t n_pods)
{
    plan_action *a = plan_push(c, &c->work, PLAN_PROBE);
    if (a == NULL)
        return;
    a->member = plan_copy(c, m->name);
    a->replicas = to;
    a->runtime = plan_copy(c, is_empty(m->runtime) ? "llamacpp" : m->runtime);
    /* Where its member controller makes the server listen (pool/probe.h, the runtime table). */
    a->port = api_runtime_port(m->runtime, m->endpoint_port, m->container_port);
    const api_runtime *rt = api_runtime_find(m->runtime);
    a->idle_path = plan_copy(c, rt && rt->generic ? m->idle_endpoint : NULL);
    a->pods = calloc(n_pods, sizeof *a->pods);
    if (a->pods == NULL) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < m->n_pods && a->n_pods < n_pods; i++) {
        const plan_pod *pod = &m->pods[i];
        if (!plan_pod_running(pod))
            continue;
        a->pods[a->n_pods].name = plan_copy(c, pod->name);
        a->pods[a->n_pods].ip = plan_copy(c, pod->ip);
        /* What the Pod says beats what the member's spec implies. */
        a->pods[a->n_pods].port = pod->port > 0 ? pod->port : a->port;
        a->n_pods++;
    }
}

/* Brings member m down to `to` replicas (0, or 1 for a member above one) if that is safe now
 * (rule 2): at most `to` running Pods (the member controller removes Pods that never ran first), or
 * every running Pod freshly probed idle, since which Pod goes is not ours to choose. Otherwise asks
 * for probes, or records why the swap waits. An idle answer counts only from a probe sent at or
 * after not_before (the drain fence, plan_snapshot.drain_after_ms); none is sent before it. */
static void drain(plan_ctx *c, const plan_member *m, int32_t to, int64_t not_before, plan_defer *d)
{
    const char *why_scale = to > 0 ? "TooManyReplicas" : "Idle";
    const int64_t now = c->s->now_ms;
    size_t running = 0, need = 0, busy = 0, failed = 0, unsupported = 0;
    int64_t bad_until = 0; /* when the last fresh busy/failed result goes stale */
    plan_msg why = {0};

    for (size_t i = 0; i < m->n_pods; i++) {
        const plan_pod *pod = &m->pods[i];
        if (!plan_pod_running(pod))
            continue;
        running++;
        bool fresh = pod->probe != PLAN_PROBE_NONE && now - pod->probed_at_ms < PLAN_PROBE_TTL_MS;
        /* Idle before the fence: a router's request may still have been on its way. */
        if (!fresh || (pod->probe == PLAN_PROBE_IDLE && pod->probe_sent_ms < not_before))
            need++;
        if (pod->probe == PLAN_PROBE_NONE)
            d->unknown = true;
        const char *detail = pod->probe_message;
        switch (pod->probe) {
        case PLAN_PROBE_BUSY:
            busy++;
            plan_msg_sep(&why);
            plan_msg_add(&why, "pod %s is busy", pod->name ? pod->name : "");
            break;
        case PLAN_PROBE_ERROR:
            failed++;
            plan_msg_sep(&why);
            plan_msg_add(&why, "pod %s: %s", pod->name ? pod->name : "",
                         is_empty(detail) ? "idle probe failed" : detail);
            break;
        case PLAN_PROBE_UNSUPPORTED:
            unsupported++;
            plan_msg_sep(&why);
            plan_msg_add(&why, "pod %s: %s", pod->name ? pod->name : "",
                         is_empty(detail) ? "idle probe unsupported" : detail);
            break;
        default:
            continue;
        }
        /* Stale bad results still explain the wait (no flapping condition) but are re-probed. */
        if (fresh && pod->probed_at_ms + PLAN_PROBE_TTL_MS > bad_until)
            bad_until = pod->probed_at_ms + PLAN_PROBE_TTL_MS;
    }
    c->oom |= why.oom;

    if (running <= (size_t)to) {
        plan_push_scale(c, m->name, to, to > 0 ? "TooManyReplicas" : "NoRunningPod");
    } else if (!probe_supported(m->runtime, m->idle_endpoint)) {
        if (str_eq(m->runtime, "generic"))
            plan_defer_add(d, "IdleCheckUnsupported",
                           "member %s: runtime generic without annotation "
                           "inference.llmkube.dev/idle-endpoint cannot be probed",
                           m->name);
        else
            plan_defer_add(d, "IdleCheckUnsupported", "member %s: runtime %s has no idle probe",
                           m->name, m->runtime);
    } else {
        if (bad_until == 0 && need > 0 && now < not_before) {
            plan_defer_requeue(d, not_before - now);
            c->p->fenced_until_ms = not_before;
        } else if (bad_until == 0 && need > 0)
            plan_push_probe(c, m, to, running);
        if (busy + failed + unsupported > 0) {
            plan_defer_add(d,
                           busy     ? "PodsBusy"
                           : failed ? "IdleCheckFailed"
                                    : "IdleCheckUnsupported",
                           "member %s: %s", m->name, plan_msg_str(&why));
            if (bad_until > 0)
                plan_defer_requeue(d, bad_until - now);
        } else if (need == 0) {
            plan_push_scale(c, m->name, to, why_scale);
        }
    }
    free(why.s);
}

/* ---- the desired status ---- */

/* Every member up other than keep is brought to 0, after its idle probe (rule 3: none is left
 * running because another could not be held), and so is a member removed from the spec that is
 * still up (the pool was releasing it, or its replicas were a request the removal voids);
 * not_before as drain's. */
void plan_release_others(plan_ctx *c, const char *keep, int64_t not_before, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (plan_first_of_name(s, i) && plan_is_up(&s->members[i]) &&
            !str_eq(s->members[i].name, keep))
            drain(c, &s->members[i], 0, not_before, d);
    for (size_t i = 0; i < s->n_removed; i++)
        if (!is_empty(s->removed[i].name) && s->removed[i].exists && plan_is_up(&s->removed[i]))
            drain(c, &s->removed[i], 0, not_before, d);
}

/* Rule 2: a pooled member never runs more than one replica. */
void plan_limit_to_one(plan_ctx *c, const plan_member *m, plan_defer *d)
{
    if (plan_replicas(m) <= 1)
        return;
    plan_msg_add(
        &c->too_many,
        "%smember %s was scaled to %d replicas; a pooled member runs one, so it is brought "
        "back to 1",
        c->too_many.len ? "; " : "", m->name, (int)plan_replicas(m));
    drain(c, m, 1, 0, d);
}

/* Rule 3: a target up beside another member (or beside its own old Pod, rule 1) is held at 0, its
 * member controller would otherwise start it there. One that is not serving is scaled back at
 * once, in the plan that records the request or the next, before any fence or probe: it never had
 * the slot and is starting (a loading server fails its idle probe, which would keep two models on
 * the GPU for the whole load). One that serves (it started while the operator was away) is probed
 * first (rule 2), and the serving target of a new pool is the one kept, not restarted. */
void plan_hold_back(plan_ctx *c, const plan_member *target, const char *res, plan_defer *d)
{
    if (!plan_is_up(target) ||
        (plan_others_clear(c->s, target->name) && !plan_has_terminating_pod(target)))
        return;
    /* The resident, until its swap reached Loading, may hold requests (a swap back to it, its
     * readiness flapping under load): only its idle probe lets it go. */
    bool resident = str_eq(target->name, c->s->status.resident_member) && !plan_was_loading(c);
    if (!plan_is_serving(target) && !resident)
        plan_push_scale(c, target->name, 0, "HeldBack");
    else if (res != NULL)
        drain(c, target, 0, c->s->drain_after_ms, d);
}

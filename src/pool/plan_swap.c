/* plan_swap: a swap in progress (pendingMember set, no newer request): drain, hold, start the
 * target once the slot is free, then complete, cancel, or report a target that fails (rule 7). */
#include "plan_ctx.h"

#include <stdlib.h>

/* A target that cannot become Ready is reported (rule 7); only judged once it was started. */
static bool judge_target(plan_want *w, const plan_member *t, int64_t swap_start_ms,
                         int64_t budget_ms, int64_t now_ms, int64_t *requeue_ms)
{
    const char *reason = NULL;
    if (str_eq(t->phase, "Failed"))
        reason = "TargetFailed";
    else if (str_eq(t->phase, "Suspended"))
        reason = "TargetSuspended";
    else if (str_eq(t->phase, "WaitingForGPU")) {
        if (now_ms - swap_start_ms >= budget_ms)
            reason = "TargetWaitingForGPU";
        else
            *requeue_ms = swap_start_ms + budget_ms - now_ms;
    }
    if (reason == NULL)
        return false;
    w->phase = API_PHASE_DEGRADED;
    if (strcmp(reason, "TargetWaitingForGPU") == 0)
        plan_want_set(&w->slot, "False", reason,
                      "target %s is WaitingForGPU longer than swapBudget (%lld ms)", t->name,
                      (long long)budget_ms);
    else
        plan_want_set(&w->slot, "False", reason, "target %s is %s", t->name, t->phase);
    return true;
}

static const char *pod_phase_name(api_pod_phase p)
{
    switch (p) {
    case API_POD_PENDING:
        return "Pending";
    case API_POD_RUNNING:
        return "Running";
    case API_POD_SUCCEEDED:
        return "Succeeded";
    case API_POD_FAILED:
        return "Failed";
    case API_POD_UNKNOWN:
        break;
    }
    return "Unknown";
}

/* A started target that does not become Ready (an image that never pulls, a Pod the scheduler
 * never places, a crash loop) is reported too (rule 7), once swapBudget has passed since it was
 * started: TargetReady False/Loading says since when it loads (its lastTransitionTime, written
 * with Loading), then False/TargetNotReady, with SlotAllocated and the phase Degraded, says what it
 * waits for: its phase and its Pods' state. judged: its phase is fresh (it was started before
 * this plan) and judge_target reported nothing else. */
static void judge_load(plan_ctx *c, plan_want *w, const plan_member *t, int64_t budget_ms,
                       bool judged, plan_defer *d)
{
    const api_condition *cur = api_status_cond(&c->s->status, "TargetReady");
    int64_t since = cur && str_eq(cur->status, "False") ? cur->last_transition_ms : c->stamp_ms;
    if (!judged || c->s->now_ms - since < budget_ms) {
        plan_want_set(&w->target, "False", "Loading",
                      "%s was started; waiting for it to become Ready", t->name);
        if (judged)
            plan_defer_requeue(d, since + budget_ms - c->s->now_ms);
        return;
    }
    plan_msg why = {0};
    plan_msg_add(&why, "target %s is not Ready within swapBudget (%lld ms) of its start: phase %s",
                 t->name, (long long)budget_ms, is_empty(t->phase) ? "unknown" : t->phase);
    size_t live = 0;
    for (size_t i = 0; i < t->n_pods; i++) {
        const plan_pod *p = &t->pods[i];
        if (!plan_pod_live(p))
            continue;
        live++;
        plan_msg_add(&why, "; pod %s %s%s%s%s%s%s", p->name ? p->name : "",
                     pod_phase_name(p->phase), is_empty(p->waiting) ? "" : " (",
                     is_empty(p->waiting) ? "" : p->waiting, is_empty(p->waiting) ? "" : ")",
                     p->terminating ? ", terminating" : "",
                     p->phase != API_POD_RUNNING ? ""
                     : !p->container_running     ? ", no container running"
                     : p->ready                  ? ", ready"
                                                 : ", not ready");
    }
    if (live == 0)
        plan_msg_add(&why, "; no pod");
    c->oom |= why.oom;
    w->phase = API_PHASE_DEGRADED;
    plan_want_set(&w->slot, "False", "TargetNotReady", "%s", plan_msg_str(&why));
    plan_want_set(&w->target, "False", "TargetNotReady", "%s", plan_msg_str(&why));
    free(why.s);
}

/* pendingMember is set and no newer request: drain, hold, start, complete or cancel. */
void plan_decide_swap(plan_ctx *c, plan_want *w, const char *res, const char *pend,
                      int64_t budget_ms, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    const plan_member *target = plan_member_named(s, pend);
    const api_condition *sw = api_status_cond(&s->status, API_COND_SWAPPING);
    int64_t swap_start = sw && str_eq(sw->status, "True") ? sw->last_transition_ms : c->stamp_ms;
    /* Loading is written only once the cache showed the target up with the slot clear, so a
     * target at 0 after it is someone's cancellation, not our write still on its way. */
    bool started = plan_was_loading(c);
    bool clear = plan_others_clear(s, pend);
    bool own_old = plan_has_terminating_pod(target);

    const plan_member *rm = plan_member_named(s, res);
    if (!started && rm && !str_eq(res, pend) && plan_is_up(rm)) {
        plan_msg why = {0};
        const char *reason = plan_undecided(rm, &why);
        int64_t unload_ms = 0;
        if (!is_empty(s->unload_after))
            duration_parse_ms(s->unload_after, &unload_ms); /* validated */
        int64_t limit = swap_start + (unload_ms > 0 ? unload_ms : budget_ms);
        if (reason && unload_ms > 0 && s->now_ms >= limit && s->now_ms >= s->drain_after_ms) {
            plan_push_scale(c, res, 0, "UnprobeableUnload"); /* the pool's opt-in */
        } else if (reason && unload_ms == 0 && s->now_ms >= limit) {
            plan_drop_request(c, w, rm, pend, reason, &why, budget_ms, d);
            c->oom |= why.oom;
            free(why.s);
            return;
        } else if (reason) {
            plan_defer_requeue(d,
                               (limit > s->drain_after_ms ? limit : s->drain_after_ms) - s->now_ms);
        }
        if (reason && unload_ms == 0) {
            /* The drain has not begun: the resident serves until its probe decides (then the
             * drain fence starts, from the status without the mark) or the request is dropped.
             * While the mark stands the fence lies ahead, so drain() sends no probe: this does. */
            if (api_status_awaits_probe(&s->status))
                plan_probe_decides(c, rm, d);
            c->awaiting_probe = true;
            plan_msg_add(&c->awaiting_why, "%s", plan_msg_str(&why));
        }
        c->oom |= why.oom;
        free(why.s);
    }

    if (started && !plan_is_up(target)) {
        c->cancelled = true;
        plan_settle(w, target);
        return;
    }
    if (plan_is_serving(target) && clear) {
        plan_settle(w, target);
        plan_limit_to_one(c, target, d);
        return;
    }
    bool loading = started || (clear && plan_is_up(target) && !own_old);
    if (!loading)
        plan_hold_back(c, target, res, d);
    else
        plan_limit_to_one(c, target, d);
    plan_release_others(c, pend, s->drain_after_ms, d);

    bool starting = false;
    plan_msg wait = {0};
    for (size_t i = 0; i < s->n_removed; i++) {
        const plan_member *m = &s->removed[i];
        if (!plan_removed_holds(m))
            continue;
        plan_msg_sep(&wait);
        if (plan_has_live_pod(m))
            plan_msg_add(&wait, "waiting for pod %s of %s (removed from spec.members) to be gone",
                         plan_live_pod_name(m), m->name);
        else
            plan_msg_add(&wait, "waiting for %s (removed from spec.members) to be scaled to 0",
                         m->name);
    }
    if (clear && !plan_is_up(target)) {
        /* Rule 1: the slot is free only once the target's own old Pods are gone too. */
        if (plan_has_live_pod(target)) {
            plan_msg_add(&wait, "waiting for pod %s of %s to terminate", plan_live_pod_name(target),
                         pend);
        } else {
            plan_push_scale(c, pend, 1, "SlotFree");
            starting = true;
        }
    }
    c->oom |= wait.oom;

    plan_swapping(w, res, pend);
    if (loading)
        plan_want_set(&w->swapping, "True", "Loading", "loading %s", pend);
    else if (c->awaiting_probe)
        plan_want_set(&w->swapping, "True", API_REASON_AWAITING_PROBE,
                      "%s serves until its idle probe can decide (%s); the request for %s is "
                      "dropped if it cannot within swapBudget",
                      res, plan_msg_str(&c->awaiting_why), pend);
    else if (starting)
        plan_want_set(&w->swapping, "True", "Draining", "the slot is free; starting %s", pend);
    else if (wait.len > 0)
        plan_want_set(&w->swapping, "True", "Draining", "%s", plan_msg_str(&wait));
    else
        plan_want_set(&w->swapping, "True", "Draining",
                      "waiting for the other members to release the GPU");
    free(wait.s);

    bool reported = false;
    if (started) { /* a phase seen before the scale-up would be stale */
        int64_t gpu_wait = 0;
        reported = judge_target(w, target, swap_start, budget_ms, s->now_ms, &gpu_wait);
        if (gpu_wait > 0)
            plan_defer_requeue(d, gpu_wait);
    }
    if (loading && !plan_is_serving(target))
        judge_load(c, w, target, budget_ms, started && !reported, d);
}

/* api_status: the status a plan writes (members[], the five conditions, their times) and the
 * Events that mark its transitions, so re-planning an applied plan repeats none. */
#include "plan_ctx.h"

#include <stdlib.h>

static const char *const plan_cond_types[PLAN_N_CONDS] = {
    API_COND_MEMBERS_VALID, API_COND_SLOT_ALLOCATED, API_COND_SWAP_DEFERRED, API_COND_SWAPPING,
    API_COND_TARGET_READY};

void plan_fill_status(plan_ctx *c, const plan_want *w)
{
    const plan_snapshot *s = c->s;
    api_status *st = &c->p->status;

    st->phase = plan_copy(c, w->phase);
    st->resident_member = plan_copy(c, or_null(w->resident));
    st->pending_member = plan_copy(c, or_null(w->pending));
    /* Nothing judged, nothing observed: the generation is the status's own. */
    st->observed_generation = c->unsure ? s->status.observed_generation : s->generation;

    /* members[] is a list-map keyed by name: one entry per distinct name, never an empty one. */
    size_t n = c->unsure ? s->status.n_members : s->n_members + s->n_removed;
    st->members = calloc(n ? n : 1, sizeof *st->members);
    if (st->members == NULL) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; c->unsure && i < s->status.n_members; i++) {
        const api_member_status *cur = &s->status.members[i];
        st->members[st->n_members++] = (api_member_status){.name = plan_copy(c, cur->name),
                                                           .phase = plan_copy(c, cur->phase),
                                                           .resident = cur->resident,
                                                           .releasing = cur->releasing};
    }
    for (size_t i = 0; !c->unsure && i < s->n_members; i++) {
        const plan_member *m = &s->members[i];
        if (!plan_first_of_name(s, i))
            continue;
        api_member_status *ms = &st->members[st->n_members++];
        ms->name = plan_copy(c, m->name);
        ms->phase = plan_copy(c, m->exists ? or_null(m->phase) : NULL);
        ms->resident = str_eq(m->name, w->resident);
        ms->releasing = c->rel[i];
    }
    /* A member removed from the spec stays recorded, releasing, while it holds the GPU: the
     * record is what makes its Pods count (rule 1) after this write. */
    for (size_t i = 0; !c->unsure && i < s->n_removed; i++) {
        const plan_member *m = &s->removed[i];
        if (is_empty(m->name) || !plan_removed_holds(m))
            continue;
        api_member_status *ms = &st->members[st->n_members++];
        ms->name = plan_copy(c, m->name);
        ms->phase = plan_copy(c, m->exists ? or_null(m->phase) : NULL);
        ms->resident = str_eq(m->name, w->resident);
        /* a removed resident or target is Degraded's (ResidentNotMember, PendingNotMember) */
        ms->releasing = !ms->resident && !str_eq(m->name, w->pending);
    }

    const plan_cond_want *wants[PLAN_N_CONDS] = {&w->valid, &w->slot, &w->deferred, &w->swapping,
                                                 &w->target};
    st->conditions = calloc(PLAN_N_CONDS, sizeof *st->conditions);
    if (st->conditions == NULL) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < PLAN_N_CONDS; i++) {
        const api_condition *cur = api_status_cond(&s->status, plan_cond_types[i]);
        const plan_cond_want *cw = wants[i];
        if ((cw->keep && cur == NULL) || (!cw->keep && cw->absent))
            continue;
        api_condition *nc = &st->conditions[st->n_conditions++];
        nc->type = plan_copy(c, plan_cond_types[i]);
        if (cw->keep) {
            nc->status = plan_copy(c, cur->status);
            nc->reason = plan_copy(c, cur->reason);
            nc->message = plan_copy(c, cur->message);
            nc->last_transition_ms = cur->last_transition_ms;
            continue;
        }
        nc->status = plan_copy(c, cw->status);
        nc->reason = plan_copy(c, cw->reason);
        nc->message = plan_copy(c, plan_msg_str(&cw->msg));
        /* The time moves only when the status does (metav1 convention), so a swap's start time
         * survives reason changes and superseding targets. */
        nc->last_transition_ms =
            cur && str_eq(cur->status, cw->status) ? cur->last_transition_ms : c->stamp_ms;
    }
}

/* Events mark transitions of the status, so re-planning an applied plan repeats none of them. */
void plan_emit_events(plan_ctx *c, const plan_want *w)
{
    const api_status *cur = &c->s->status;
    const char *cur_res = or_null(cur->resident_member), *cur_pend = or_null(cur->pending_member);
    const char *res = or_null(w->resident), *pend = or_null(w->pending);

    const api_condition *cv = api_status_cond(cur, API_COND_MEMBERS_VALID);
    if (!w->valid.keep && str_eq(w->valid.status, "False") &&
        (cv == NULL || !str_eq(cv->status, "False") || !str_eq(cv->reason, w->valid.reason) ||
         !str_eq(cv->message, plan_msg_str(&w->valid.msg))))
        plan_push_event(c, true, w->valid.reason, "%s", plan_msg_str(&w->valid.msg));

    if (pend && !str_eq(pend, cur_pend)) {
        if (str_eq(pend, res))
            plan_push_event(c, false, "SwapStarted", "returning to %s", pend);
        else if (cur_pend)
            plan_push_event(c, false, "SwapStarted", "swapping to %s (supersedes %s)", pend,
                            cur_pend);
        else if (res)
            plan_push_event(c, false, "SwapStarted", "swapping from %s to %s", res, pend);
        else
            plan_push_event(c, false, "SwapStarted", "warming %s", pend);
        if (c->superseded.len > 0)
            plan_push_event(c, false, "RequestSuperseded",
                            "%s requested too; the pool runs one member, so it is held at 0 "
                            "(request it again once %s is resident)",
                            plan_msg_str(&c->superseded), pend);
    }
    if (cur_pend && !pend && res && str_eq(res, cur_pend)) {
        if (c->cancelled)
            plan_push_event(c, true, "SwapCancelled",
                            "%s was scaled to 0 while loading: the swap is cancelled and %s stays "
                            "resident, stopped",
                            res, res);
        else
            plan_push_fact(c, PLAN_FACT_SWAP_COMPLETED, NULL, "SwapCompleted", "%s is resident",
                           res);
    }
    if (c->withdrawn)
        plan_push_event(c, false, "RequestWithdrawn",
                        "the request for %s was withdrawn (its clients left) before anything was "
                        "unloaded: %s stays resident",
                        cur_pend, res);
    if (!cur_res && !cur_pend && res && !pend)
        plan_push_event(c, false, "Adopted", "%s was already serving and is now resident", res);
    if (cur_pend && !pend && !w->swapping.keep &&
        str_eq(w->swapping.reason, API_REASON_REQUEST_DROPPED))
        plan_push_event(c, true, API_REASON_REQUEST_DROPPED, "%s", plan_msg_str(&w->deferred.msg));

    const api_condition *cd = api_status_cond(cur, API_COND_SWAP_DEFERRED);
    if (!w->deferred.keep && str_eq(w->deferred.status, "True") &&
        (cd == NULL || !str_eq(cd->status, "True") || !str_eq(cd->reason, w->deferred.reason))) {
        if (str_eq(w->deferred.reason, "WriteRefused"))
            plan_push_event(c, true, "WriteRefused", "%s", plan_msg_str(&w->deferred.msg));
        else
            plan_push_fact(c, PLAN_FACT_SWAP_DEFERRED, w->deferred.reason, "SwapDeferred", "%s: %s",
                           w->deferred.reason, plan_msg_str(&w->deferred.msg));
    }

    const api_condition *cs = api_status_cond(cur, API_COND_SLOT_ALLOCATED);
    const char *r = w->slot.reason;
    if (!w->slot.keep && str_eq(w->slot.status, "False") &&
        (str_eq(r, "TargetFailed") || str_eq(r, "TargetSuspended") ||
         str_eq(r, "TargetWaitingForGPU") || str_eq(r, "TargetNotReady")) &&
        (cs == NULL || !str_eq(cs->reason, r)))
        plan_push_event(c, true, r, "%s", plan_msg_str(&w->slot.msg));
    /* Once per episode: while the note stands in the slot's message, it is not news. */
    if (c->too_many.len > 0 && !w->slot.keep &&
        (cs == NULL || cs->message == NULL ||
         strstr(cs->message, plan_msg_str(&c->too_many)) == NULL))
        plan_push_event(c, true, "TooManyReplicas", "%s", plan_msg_str(&c->too_many));
}

bool plan_status_equal(const api_status *a, const api_status *b)
{
    if (!str_eq(a->phase, b->phase) || !str_eq(a->resident_member, b->resident_member) ||
        !str_eq(a->pending_member, b->pending_member) ||
        a->observed_generation != b->observed_generation || a->n_members != b->n_members ||
        a->n_conditions != b->n_conditions)
        return false;
    for (size_t i = 0; i < a->n_members; i++) {
        const api_member_status *x = &a->members[i], *y = &b->members[i];
        if (!str_eq(x->name, y->name) || !str_eq(x->phase, y->phase) ||
            x->resident != y->resident || x->releasing != y->releasing)
            return false;
    }
    for (size_t i = 0; i < a->n_conditions; i++) {
        const api_condition *x = &a->conditions[i], *y = &b->conditions[i];
        if (!str_eq(x->type, y->type) || !str_eq(x->status, y->status) ||
            !str_eq(x->reason, y->reason) || !str_eq(x->message, y->message) ||
            x->last_transition_ms != y->last_transition_ms)
            return false;
    }
    return true;
}

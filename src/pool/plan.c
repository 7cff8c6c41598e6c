/* plan: decides what the ModelPool reconciler does next for one pool, from a snapshot alone.
 * Pure and deterministic: all memory of a swap lives in the pool's status (pendingMember, and the
 * Swapping condition whose reason says whether the target was started and whose time starts the
 * swapBudget clock), so a crash or a stale cache re-plans to the same place. This file holds the
 * entry points and the top of the decision; each rule lives in a plan_*.c of its own (plan_ctx.h).
 */
#include "pool/plan.h"

#include <errno.h>
#include <stdlib.h>

#include "plan_ctx.h"

/* A new pool (no resident, no swap). The replicas found are the state of the world, not requests:
 * a member that serves is kept (the first in spec.members order), else default is warmed, else
 * the requests are weighed as in a warm pool. Every other member up is released. */
static void decide_cold(plan_ctx *c, plan_want *w)
{
    const plan_snapshot *s = c->s;
    const plan_member *owner = NULL;
    for (size_t i = 0; owner == NULL && i < s->n_members; i++)
        if (plan_is_serving(&s->members[i]))
            owner = &s->members[i];
    if (owner == NULL)
        owner = plan_member_named(s, s->default_member);
    if (owner == NULL)
        owner = plan_first_request(c, NULL, NULL);

    if (owner == NULL) {
        w->phase = API_PHASE_PENDING;
        plan_want_set(&w->slot, "False", "NoResident", "no member requested and no default");
    } else if (plan_is_serving(owner) && plan_others_clear(s, owner->name)) {
        plan_settle(w, owner);
    } else {
        plan_start_swap(c, w, NULL, owner->name);
    }
}

/* Actions that set member to replicas, now or once its probe says idle. */
static bool actions_want(const plan_action *v, size_t n, const char *member, int32_t replicas)
{
    for (size_t i = 0; i < n; i++)
        if ((v[i].kind == PLAN_SCALE || v[i].kind == PLAN_PROBE) && str_eq(v[i].member, member) &&
            v[i].replicas == replicas)
            return true;
    return false;
}

bool plan_wants_scale(const plan_result *p, const char *member, int32_t replicas)
{
    return p && !is_empty(member) && actions_want(p->actions, p->n_actions, member, replicas);
}

/* The scale the controller saw refused, if this plan still heads for it: reported (rule 5). A
 * plan that first probes the member again (its last answer went stale) still wants the write, or
 * the report would come and go with every probe. */
static bool refused_again(const plan_ctx *c)
{
    const plan_refusal *r = &c->s->refused;
    return !is_empty(r->member) && actions_want(c->work.v, c->work.n, r->member, r->replicas);
}

static void decide(plan_ctx *c, plan_want *w, int64_t budget_ms)
{
    const plan_snapshot *s = c->s;
    const char *res = or_null(s->status.resident_member);
    const char *pend = or_null(s->status.pending_member);

    size_t n = 0;
    for (size_t i = 0; i < s->n_members; i++)
        n += plan_first_of_name(s, i);
    plan_want_set(&w->valid, "True", "Valid", "all %zu members found", n);
    plan_want_set(&w->deferred, "False", "NotDeferred", "no swap is waiting on a member");
    plan_want_set(&w->swapping, "False", "NotSwapping", "no swap in progress");
    w->target.absent = true;

    plan_defer d = {0};
    const plan_member *req = NULL;
    if (plan_take_withdrawal(c, w, res, pend)) {
        /* the swap ended; a request written meanwhile is taken by the next plan */
    } else if (plan_take_pool_request(c, w, res, pend)) {
        /* the request through the pool was the newest word: persisted alone */
    } else if (!res && !pend) {
        decide_cold(c, w);
    } else if ((req = plan_pick_request(c, res, pend)) != NULL) {
        /* A newer request takes over at once (persisted first, rule 3). */
        plan_start_swap(c, w, plan_swap_from(c, res, pend), req->name);
        plan_hold_back_new(c, req);
    } else if (!pend) {
        /* Sticky (rule 4): the resident stays until another member is requested. */
        const plan_member *r = plan_member_named(s, res);
        plan_settle(w, r);
        plan_limit_to_one(c, r, &d);
        plan_release_others(c, res, 0, &d);
        plan_recheck_dropped(c, w, r, &d);
    } else {
        plan_decide_swap(c, w, res, pend, budget_ms, &d);
    }

    if (c->too_many.len > 0)
        plan_msg_add(&w->slot.msg, "; %s", plan_msg_str(&c->too_many));
    if (refused_again(c))
        plan_want_set(&w->deferred, "True", "WriteRefused",
                      "scaling member %s to %d was refused by the API server: %s",
                      s->refused.member, (int)s->refused.replicas,
                      s->refused.message ? s->refused.message : "");
    else if (c->dropped)
        ; /* drop_request wrote it, or recheck_dropped keeps it */
    else if (d.reason)
        plan_want_set(&w->deferred, "True", d.reason, "%s", plan_msg_str(&d.msg));
    else if (c->awaiting_probe)
        w->deferred.keep = true; /* its probe's answer went stale: asked again, not NotDeferred */
    else if (d.unknown && api_status_cond(&s->status, API_COND_SWAP_DEFERRED))
        /* Not known yet, so not "NotDeferred": a restarted operator (its probe results are in
         * memory only) would otherwise flip a deferred swap to NotDeferred and back, with a
         * second SwapDeferred Event, before its first probe answers. */
        w->deferred.keep = true;
    c->oom |= d.msg.oom;
    free(d.msg.s);
    c->p->requeue_after_ms = d.requeue_ms;
}

/* ---- entry points ---- */

static void free_actions(plan_action *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        plan_action *a = &v[i];
        free(a->member);
        free(a->runtime);
        free(a->idle_path);
        for (size_t j = 0; j < a->n_pods; j++) {
            free(a->pods[j].name);
            free(a->pods[j].ip);
        }
        free(a->pods);
        free(a->reason);
        free(a->message);
    }
    free(v);
}

void plan_free(plan_result *p)
{
    if (p == NULL)
        return;
    api_status *st = &p->status;
    free(st->phase);
    free(st->resident_member);
    free(st->pending_member);
    for (size_t i = 0; i < st->n_members; i++) {
        free(st->members[i].name);
        free(st->members[i].phase);
    }
    free(st->members);
    for (size_t i = 0; i < st->n_conditions; i++) {
        free(st->conditions[i].type);
        free(st->conditions[i].status);
        free(st->conditions[i].reason);
        free(st->conditions[i].message);
    }
    free(st->conditions);
    free_actions(p->actions, p->n_actions);
    free(p->deferred_reason);
    free(p);
}

int plan_build(const plan_snapshot *snap, plan_result **out)
{
    if (snap == NULL || out == NULL || (snap->members == NULL && snap->n_members > 0))
        return -EINVAL;
    *out = NULL;
    plan_ctx c = {.s = snap};
    c.p = calloc(1, sizeof *c.p);
    if (c.p == NULL)
        return -ENOMEM;
    c.p->swap_ms = -1;
    c.stamp_ms = snap->now_ms - snap->now_ms % 1000;
    c.rel = calloc(snap->n_members ? snap->n_members : 1, sizeof *c.rel);
    if (c.rel == NULL) {
        free(c.p);
        return -ENOMEM;
    }
    for (size_t i = 0; i < snap->n_members; i++)
        c.rel[i] = plan_is_up(&snap->members[i]) && plan_was_releasing(snap, snap->members[i].name);

    plan_want w = {0};
    plan_msg faults = {0};
    int64_t budget_ms = 0;
    const char *bad = plan_validate(snap, &budget_ms, &faults);
    c.oom |= faults.oom;
    if (plan_unsure_of_members(snap)) {
        /* Rule 5 judges a spec against what exists: not before the cache can say (#26). */
        w.phase = snap->status.phase;
        w.resident = or_null(snap->status.resident_member);
        w.pending = or_null(snap->status.pending_member);
        w.valid.keep = w.slot.keep = w.deferred.keep = w.swapping.keep = w.target.keep = true;
        c.unsure = true;
    } else if (bad) {
        /* Rule 5: report, keep the intent in status as it is, change no replicas. */
        w.phase = API_PHASE_DEGRADED;
        w.resident = or_null(snap->status.resident_member);
        w.pending = or_null(snap->status.pending_member);
        plan_want_set(&w.valid, "False", bad, "%s", plan_msg_str(&faults));
        w.slot.keep = w.deferred.keep = w.swapping.keep = w.target.keep = true;
    } else {
        decide(&c, &w, budget_ms);
    }
    free(faults.s);

    plan_fill_status(&c, &w);
    bool write = !plan_status_equal(&c.p->status, &snap->status);
    if (write)
        plan_emit_events(&c, &w);
    plan_cond_want *wants[PLAN_N_CONDS] = {&w.valid, &w.slot, &w.deferred, &w.swapping, &w.target};
    for (size_t i = 0; i < PLAN_N_CONDS; i++) {
        c.oom |= wants[i]->msg.oom;
        free(wants[i]->msg.s);
    }
    c.oom |= c.too_many.oom || c.superseded.oom || c.awaiting_why.oom;
    free(c.too_many.s);
    free(c.superseded.s);
    free(c.awaiting_why.s);
    free(c.rel);

    size_t n = (write ? 1 : 0) + c.events.n + c.work.n;
    if (!c.oom && n > 0) {
        c.p->actions = calloc(n, sizeof *c.p->actions);
        if (c.p->actions == NULL)
            c.oom = true;
    }
    if (c.oom) {
        free_actions(c.events.v, c.events.n);
        free_actions(c.work.v, c.work.n);
        plan_free(c.p);
        return -ENOMEM;
    }
    if (write)
        c.p->actions[c.p->n_actions++].kind = PLAN_WRITE_STATUS;
    for (size_t i = 0; i < c.events.n; i++)
        c.p->actions[c.p->n_actions++] = c.events.v[i];
    for (size_t i = 0; i < c.work.n; i++)
        c.p->actions[c.p->n_actions++] = c.work.v[i];
    free(c.events.v); /* the actions moved; only the arrays go */
    free(c.work.v);
    *out = c.p;
    return 0;
}

/* plan_requests: how replicas and the pool's annotations become requests for the slot, which one
 * wins, and how a swap starts or a settled resident is written. */
#include "plan_ctx.h"

/* How replicas become requests. A member scaled to >= 1 that the pool has not accounted for is a
 * request for the slot. The pool accounts for the resident (outside a swap), the target, and the
 * members it is releasing (status.members[].releasing: the previous resident and target, members
 * found up when the pool was new, requests that lost to another). A releasing member stops being
 * one once it is at 0, so scaling it up again (say, back to the member being swapped out) is a
 * request like any other. */

static bool is_request(const plan_ctx *c, size_t i, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const plan_member *m = &s->members[i];
    if (!plan_first_of_name(s, i) || !plan_is_up(m) || c->rel[i] || str_eq(m->name, pend))
        return false;
    return pend != NULL || !str_eq(m->name, res); /* outside a swap the resident is up by right */
}

/* Several requests at once (made while the operator was down, or while the pool was Degraded or
 * another replica led): the first, in spec.members order, that already runs a Pod wins, since it
 * holds the GPU now; else the first. */
const plan_member *plan_first_request(const plan_ctx *c, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (is_request(c, i, res, pend) && plan_has_running_pod(&s->members[i]))
            return &s->members[i];
    for (size_t i = 0; i < s->n_members; i++)
        if (is_request(c, i, res, pend))
            return &s->members[i];
    return NULL;
}

/* Every request but win's is released and named in an Event. */
static void supersede(plan_ctx *c, const plan_member *win, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++) {
        if (&s->members[i] == win || !is_request(c, i, res, pend))
            continue;
        c->rel[i] = true;
        plan_msg_add(&c->superseded, "%s%s", c->superseded.len ? ", " : "", s->members[i].name);
    }
}

/* The winning request, the others superseded. */
const plan_member *plan_pick_request(plan_ctx *c, const char *res, const char *pend)
{
    const plan_member *win = plan_first_request(c, res, pend);
    if (win)
        supersede(c, win, res, pend);
    return win;
}

/* The status of a swap from `from` (NULL: a cold pool) to `to`: phase, members, the slot's message.
 */
void plan_swapping(plan_want *w, const char *from, const char *to)
{
    w->phase = API_PHASE_SWAPPING;
    w->resident = from;
    w->pending = to;
    if (str_eq(from, to))
        plan_want_set(&w->slot, "False", "SwapInProgress", "returning to %s", to);
    else if (from)
        plan_want_set(&w->slot, "False", "SwapInProgress", "swapping from %s to %s", from, to);
    else
        plan_want_set(&w->slot, "False", "SwapInProgress", "warming %s", to);
}

void plan_start_swap(plan_ctx *c, plan_want *w, const char *from, const char *to)
{
    const plan_snapshot *s = c->s;
    /* Every other member that is up is released: its replicas were counted before this swap. */
    for (size_t i = 0; i < s->n_members; i++)
        c->rel[i] =
            str_eq(s->members[i].name, to) ? false : c->rel[i] || plan_is_up(&s->members[i]);
    plan_swapping(w, from, to);
    plan_want_set(&w->swapping, "True", "Draining",
                  "waiting for the other members to release the GPU");
}

void plan_settle(plan_want *w, const plan_member *m)
{
    w->phase = API_PHASE_READY;
    w->resident = m->name;
    w->pending = NULL;
    if (plan_is_up(m))
        plan_want_set(&w->slot, "True", "Resident", "%s holds the slot", m->name);
    else
        plan_want_set(&w->slot, "True", "Resident", "%s is resident, scaled to 0 (stopped)",
                      m->name);
}

/* The target of a swap this plan starts, held back in the same plan as the pendingMember write
 * (after it) if it is starting beside another member; a serving one waits for the next plan's
 * probe. */
void plan_hold_back_new(plan_ctx *c, const plan_member *target)
{
    if (!plan_is_serving(target))
        plan_hold_back(c, target, NULL, NULL);
}

/* Who a newer request swaps from: a target that was started holds the GPU now, so it becomes the
 * incumbent (released like any other); else the resident. */
const char *plan_swap_from(const plan_ctx *c, const char *res, const char *pend)
{
    return pend && plan_was_loading(c) && plan_is_up(plan_member_named(c->s, pend)) ? pend : res;
}

/* A router's withdrawal (its clients left): honoured while the swap has unloaded nothing, the way
 * a cancel is: the resident is still up and the target was not started. The swap ends and the
 * resident stays, with no replica changed; the annotation is cleared either way. True when
 * honoured. */
bool plan_take_withdrawal(plan_ctx *c, plan_want *w, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const char *wd = or_null(s->withdrawn);
    if (wd == NULL)
        return false;
    plan_action *a = plan_push(c, &c->work, PLAN_CLEAR_WITHDRAW);
    if (a)
        a->member = plan_copy(c, wd);
    const plan_member *r = plan_member_named(s, res);
    if (!str_eq(wd, pend) || str_eq(res, pend) || !plan_is_up(r) || plan_was_loading(c))
        return false;
    c->withdrawn = true;
    /* The resident serves on; the target, if someone raised it meanwhile, is released. */
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, res))
            c->rel[i] = false;
        else if (str_eq(s->members[i].name, pend))
            c->rel[i] = plan_is_up(&s->members[i]);
    plan_settle(w, r);
    return true;
}

/* A request through the pool (its annotation) is the newest request: it wins over members scaled
 * up, which are released, and is cleared once the plan that takes it has persisted it. True when
 * it starts a swap. */
bool plan_take_pool_request(plan_ctx *c, plan_want *w, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const char *rq = or_null(s->requested);
    if (rq == NULL)
        return false;
    plan_action *a = plan_push(c, &c->work, PLAN_CLEAR_REQUEST);
    if (a)
        a->member = plan_copy(c, rq);
    const plan_member *m = plan_member_named(s, rq);
    if (m == NULL) {
        plan_push_event(c, true, "RequestIgnored",
                        "the request through the pool names %s, which is not in spec.members", rq);
        return false;
    }
    /* Already the target, or the settled resident still up. A resident at 0 (a cancelled swap,
     * someone's kubectl scale) is started again, the way back to it being a swap. */
    if (str_eq(rq, pend) || (pend == NULL && str_eq(rq, res) && plan_is_up(m)))
        return false;
    supersede(c, m, res, pend);
    plan_start_swap(c, w, plan_swap_from(c, res, pend), rq);
    plan_hold_back_new(c, m);
    return true;
}

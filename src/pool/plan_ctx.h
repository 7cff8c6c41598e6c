/* plan_ctx: what the files of the plan share while one plan is built (src/pool/plan*.c, private):
 * the builder's context, its messages, the status it wants, and the functions each file lends the
 * others. Every plan is built from its snapshot alone; nothing here outlives plan_build. */
#ifndef MP_POOL_PLAN_CTX_H
#define MP_POOL_PLAN_CTX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pool/plan.h"
#include "util/duration.h"

#define FMT(a, b) __attribute__((format(printf, a, b)))

/* ---- strings ---- */

static inline bool is_empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

static inline const char *or_null(const char *s)
{
    return is_empty(s) ? NULL : s;
}

static inline bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* A growable message; an allocation failure is remembered and reported once at the end. */
typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} plan_msg;

/* ---- the builder ---- */

typedef struct {
    plan_action *v;
    size_t n, cap;
} plan_vec;

typedef struct {
    const plan_snapshot *s;
    plan_result *p;
    plan_vec events, work; /* assembled after the status write, in this order */
    bool oom;
    int64_t stamp_ms;    /* now, rounded down to what a status timestamp holds */
    bool *rel;           /* per member index: releasing in the status this plan writes */
    plan_msg too_many;   /* members above one replica, for the slot message and an Event */
    plan_msg superseded; /* requests that lost to another, for an Event */
    bool cancelled;      /* the loading target was scaled to 0 by someone else */
    bool unsure;         /* a member's absence is not confirmed: nothing is decided */
    bool withdrawn;      /* a router withdrew the swap's request before anything was unloaded */
    bool
        dropped; /* SwapDeferred is a dropped request's (plan_drop_request, plan_recheck_dropped) */
    /* The swap waits for the resident's idle probe to decide before its drain begins (#26): the
     * resident serves meanwhile (Swapping True/AwaitingProbe); the probe's error in why. */
    bool awaiting_probe;
    plan_msg awaiting_why;
} plan_ctx;

/* Why a swap is held up: the first deferred member sets the reason, every one is named. */
typedef struct {
    const char *reason;
    plan_msg msg;
    int64_t requeue_ms;
    bool unknown; /* some running Pod was never probed (a new Pod, or a restarted operator) */
} plan_defer;

/* ---- the desired status ---- */

typedef struct {
    const char *status, *reason;
    plan_msg msg;
    bool keep;   /* carry the current condition over unchanged (spec invalid: nothing was judged) */
    bool absent; /* not written: TargetReady while no started target loads */
} plan_cond_want;

#define PLAN_N_CONDS 5 /* valid, slot, deferred, swapping, target: api_status.c writes them */

typedef struct {
    const char *phase, *resident, *pending;
    plan_cond_want valid, slot, deferred, swapping, target;
} plan_want;

/* ---- plan_msg.c: messages and the actions a plan assembles ---- */
FMT(2, 0) void plan_msg_vadd(plan_msg *m, const char *fmt, va_list ap);
FMT(2, 3) void plan_msg_add(plan_msg *m, const char *fmt, ...);
void plan_msg_sep(plan_msg *m); /* starts a new clause of a message that lists several facts */
const char *plan_msg_str(const plan_msg *m);
char *plan_copy(plan_ctx *c, const char *s);
plan_action *plan_push(plan_ctx *c, plan_vec *v, plan_action_kind kind);
FMT(4, 5) void plan_push_event(plan_ctx *c, bool warning, const char *reason, const char *fmt, ...);
FMT(5, 6)
void plan_push_fact(plan_ctx *c, plan_fact fact, const char *why, const char *reason,
                    const char *fmt, ...);
void plan_push_scale(plan_ctx *c, const char *member, int32_t replicas, const char *reason);
FMT(3, 4) void plan_defer_add(plan_defer *d, const char *reason, const char *fmt, ...);
void plan_defer_requeue(plan_defer *d, int64_t wait_ms);
FMT(4, 5)
void plan_want_set(plan_cond_want *w, const char *status, const char *reason, const char *fmt, ...);

/* ---- plan_facts.c: members, Pods and conditions ---- */
int32_t plan_replicas(const plan_member *m);
bool plan_pod_live(const plan_pod *p);
bool plan_pod_running(const plan_pod *p);
bool plan_has_live_pod(const plan_member *m);
bool plan_is_serving(const plan_member *m);
bool plan_is_up(const plan_member *m);
bool plan_has_terminating_pod(const plan_member *m);
bool plan_has_running_pod(const plan_member *m);
const char *plan_live_pod_name(const plan_member *m);
const plan_member *plan_member_named(const plan_snapshot *s, const char *name);
bool plan_first_of_name(const plan_snapshot *s, size_t i);
bool plan_removed_holds(const plan_member *m);
bool plan_others_clear(const plan_snapshot *s, const char *target);
bool plan_was_releasing(const plan_snapshot *s, const char *name);
bool plan_was_loading(const plan_ctx *c);

/* ---- plan_drain.c: rules 2 and 3, members brought down ---- */
void plan_push_probe(plan_ctx *c, const plan_member *m, int32_t to, size_t n_pods);
void plan_release_others(plan_ctx *c, const char *keep, int64_t not_before, plan_defer *d);
void plan_limit_to_one(plan_ctx *c, const plan_member *m, plan_defer *d);
void plan_hold_back(plan_ctx *c, const plan_member *target, const char *res, plan_defer *d);

/* ---- api_status.c: the status written and its Events ---- */
void plan_fill_status(plan_ctx *c, const plan_want *w);
void plan_emit_events(plan_ctx *c, const plan_want *w);

/* ---- plan_validate.c: rule 5 ---- */
const char *plan_validate(const plan_snapshot *s, int64_t *budget_ms, plan_msg *msg);
bool plan_unsure_of_members(const plan_snapshot *s);

/* ---- plan_requests.c: requests, a swap's start, a settled resident ---- */
const plan_member *plan_first_request(const plan_ctx *c, const char *res, const char *pend);
const plan_member *plan_pick_request(plan_ctx *c, const char *res, const char *pend);
void plan_swapping(plan_want *w, const char *from, const char *to);
void plan_start_swap(plan_ctx *c, plan_want *w, const char *from, const char *to);
void plan_settle(plan_want *w, const plan_member *m);
void plan_hold_back_new(plan_ctx *c, const plan_member *target);
const char *plan_swap_from(const plan_ctx *c, const char *res, const char *pend);
bool plan_take_withdrawal(plan_ctx *c, plan_want *w, const char *res, const char *pend);
bool plan_take_pool_request(plan_ctx *c, plan_want *w, const char *res, const char *pend);

/* ---- plan_swap.c: a swap in progress ---- */
void plan_decide_swap(plan_ctx *c, plan_want *w, const char *res, const char *pend,
                      int64_t budget_ms, plan_defer *d);

/* ---- plan_unprobeable.c: a resident that cannot be probed (#26) ---- */
const char *plan_undecided(const plan_member *m, plan_msg *msg);
void plan_drop_request(plan_ctx *c, plan_want *w, const plan_member *r, const char *pend,
                       const char *reason, const plan_msg *why, int64_t budget_ms, plan_defer *d);
void plan_recheck_dropped(plan_ctx *c, plan_want *w, const plan_member *r, plan_defer *d);
bool plan_probe_decides(plan_ctx *c, const plan_member *r, plan_defer *d);

#endif

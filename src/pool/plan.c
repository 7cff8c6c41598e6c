/* plan: decides what the ModelPool reconciler does next for one pool, from a snapshot alone.
 * Pure and deterministic: all memory of a swap lives in the pool's status (pendingMember, and the
 * Swapping condition whose reason says whether the target was started and whose time starts the
 * swapBudget clock), so a crash or a stale cache re-plans to the same place. */
#include "pool/plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/probe.h"

#define FMT(a, b) __attribute__((format(printf, a, b)))

/* ---- strings ---- */

static bool is_empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

static const char *or_null(const char *s)
{
    return is_empty(s) ? NULL : s;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* A growable message; an allocation failure is remembered and reported once at the end. */
typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} plan_msg;

FMT(2, 0) static void msg_vadd(plan_msg *m, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        m->oom = true;
        return;
    }
    size_t need = m->len + (size_t)n + 1;
    if (need > m->cap) {
        size_t cap = need * 2;
        char *s = realloc(m->s, cap);
        if (s == NULL) {
            m->oom = true;
            return;
        }
        m->s = s;
        m->cap = cap;
    }
    vsnprintf(m->s + m->len, m->cap - m->len, fmt, ap);
    m->len += (size_t)n;
}

FMT(2, 3) static void msg_add(plan_msg *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    msg_vadd(m, fmt, ap);
    va_end(ap);
}

/* Starts a new clause of a message that lists several facts. */
static void msg_sep(plan_msg *m)
{
    if (m->len > 0)
        msg_add(m, "; ");
}

static const char *msg_str(const plan_msg *m)
{
    return m->s ? m->s : "";
}

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
    bool dropped;        /* SwapDeferred is a dropped request's (drop_request, recheck_dropped) */
} plan_ctx;

static char *copy(plan_ctx *c, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d == NULL) {
        c->oom = true;
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

static plan_action *push(plan_ctx *c, plan_vec *v, plan_action_kind kind)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        plan_action *a = realloc(v->v, cap * sizeof *a);
        if (a == NULL) {
            c->oom = true;
            return NULL;
        }
        v->v = a;
        v->cap = cap;
    }
    plan_action *a = &v->v[v->n++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    return a;
}

FMT(4, 0)
static plan_action *push_event_v(plan_ctx *c, bool warning, const char *reason, const char *fmt,
                                 va_list ap)
{
    plan_msg m = {0};
    msg_vadd(&m, fmt, ap);
    c->oom |= m.oom;
    plan_action *a = push(c, &c->events, PLAN_EVENT);
    if (a == NULL) {
        free(m.s);
        return NULL;
    }
    a->warning = warning;
    a->reason = copy(c, reason);
    a->message = m.s;
    return a;
}

FMT(4, 5)
static void push_event(plan_ctx *c, bool warning, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_event_v(c, warning, reason, fmt, ap);
    va_end(ap);
}

static const plan_condition *find_cond(const plan_status *st, const char *type);

/* An Event that also carries a fact for the controller, recorded in the result beside it: a swap
 * completed, or one deferred for why (the condition's reason; PodsBusy is routine, so Normal, and
 * every other deferral is a Warning). */
FMT(5, 6)
static void push_fact(plan_ctx *c, plan_fact fact, const char *why, const char *reason,
                      const char *fmt, ...)
{
    bool warning = false;
    if (fact == PLAN_FACT_SWAP_COMPLETED) {
        const plan_condition *sw = find_cond(&c->s->status, "Swapping");
        c->p->swap_ms =
            sw && str_eq(sw->status, "True") ? c->s->now_ms - sw->last_transition_ms : -1;
    } else {
        warning = !str_eq(why, "PodsBusy");
        free(c->p->deferred_reason);
        c->p->deferred_reason = copy(c, why);
    }
    va_list ap;
    va_start(ap, fmt);
    plan_action *a = push_event_v(c, warning, reason, fmt, ap);
    va_end(ap);
    if (a)
        a->fact = fact;
}

static void push_scale(plan_ctx *c, const char *member, int32_t replicas, const char *reason)
{
    plan_action *a = push(c, &c->work, PLAN_SCALE);
    if (a == NULL)
        return;
    a->member = copy(c, member);
    a->replicas = replicas;
    a->reason = copy(c, reason);
}

/* ---- facts about members and pods ---- */

static int32_t replicas_of(const plan_member *m)
{
    return m->replicas < 0 ? 1 : m->replicas;
}

/* Succeeded and Failed Pods have released the GPU; every other Pod, terminating or not, holds it.
 */
static bool pod_live(const plan_pod *p)
{
    return p->phase != PLAN_POD_SUCCEEDED && p->phase != PLAN_POD_FAILED;
}

/* A Pod that may be serving a request right now, so it must be probed before an unload. */
static bool pod_running(const plan_pod *p)
{
    return pod_live(p) && p->container_running;
}

static bool has_live_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_live(&m->pods[i]))
            return true;
    return false;
}

/* Holds no claim on the GPU, now or soon. */
static bool is_clear(const plan_member *m)
{
    return replicas_of(m) == 0 && !has_live_pod(m);
}

static bool is_serving(const plan_member *m)
{
    return replicas_of(m) >= 1 && str_eq(m->phase, "Ready") && has_live_pod(m);
}

static const plan_member *member_named(const plan_snapshot *s, const char *name)
{
    if (is_empty(name))
        return NULL;
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, name))
            return &s->members[i];
    return NULL;
}

/* The first entry of each distinct, non-empty name: what status.members[] lists. */
static bool is_first_of_name(const plan_snapshot *s, size_t i)
{
    if (is_empty(s->members[i].name))
        return false;
    return member_named(s, s->members[i].name) == &s->members[i];
}

/* A removed member (plan_snapshot.removed) that still claims the GPU: up (it exists and its
 * replicas are at least 1) or a live Pod. Until neither, it stays recorded in status.members. */
static bool removed_holds(const plan_member *m)
{
    return (m->exists && replicas_of(m) >= 1) || has_live_pod(m);
}

/* Every member but the target has replicas 0 and no live Pod, and no member removed from the spec
 * still holds the GPU (rule 1). */
static bool others_clear(const plan_snapshot *s, const char *target)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (!str_eq(s->members[i].name, target) && !is_clear(&s->members[i]))
            return false;
    for (size_t i = 0; i < s->n_removed; i++)
        if (removed_holds(&s->removed[i]))
            return false;
    return true;
}

static const plan_condition *find_cond(const plan_status *st, const char *type)
{
    for (size_t i = 0; i < st->n_conditions; i++)
        if (str_eq(st->conditions[i].type, type))
            return &st->conditions[i];
    return NULL;
}

/* ---- runtimes and the idle probe ---- */

/* Probes every running Pod of m at once, fresh results too: results of one instant agree, where
 * Pods probed one by one could go stale in turn and never all be fresh together. */
static void push_probe(plan_ctx *c, const plan_member *m, int32_t to, size_t n_pods)
{
    plan_action *a = push(c, &c->work, PLAN_PROBE);
    if (a == NULL)
        return;
    a->member = copy(c, m->name);
    a->replicas = to;
    a->runtime = copy(c, is_empty(m->runtime) ? "llamacpp" : m->runtime);
    /* Where its member controller makes the server listen (pool/probe.h, the runtime table). */
    a->port = probe_port(m->runtime, m->endpoint_port, m->container_port);
    const probe_runtime *rt = probe_runtime_find(m->runtime);
    a->idle_path = copy(c, rt && rt->generic ? m->idle_endpoint : NULL);
    a->pods = calloc(n_pods, sizeof *a->pods);
    if (a->pods == NULL) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < m->n_pods && a->n_pods < n_pods; i++) {
        const plan_pod *pod = &m->pods[i];
        if (!pod_running(pod))
            continue;
        a->pods[a->n_pods].name = copy(c, pod->name);
        a->pods[a->n_pods].ip = copy(c, pod->ip);
        /* What the Pod says beats what the member's spec implies. */
        a->pods[a->n_pods].port = pod->port > 0 ? pod->port : a->port;
        a->n_pods++;
    }
}

/* Why a swap is held up: the first deferred member sets the reason, every one is named. */
typedef struct {
    const char *reason;
    plan_msg msg;
    int64_t requeue_ms;
    bool unknown; /* some running Pod was never probed (a new Pod, or a restarted operator) */
} plan_defer;

FMT(3, 4) static void defer_add(plan_defer *d, const char *reason, const char *fmt, ...)
{
    if (d->reason == NULL)
        d->reason = reason;
    msg_sep(&d->msg);
    va_list ap;
    va_start(ap, fmt);
    msg_vadd(&d->msg, fmt, ap);
    va_end(ap);
}

/* The swap is looked at again within wait_ms at the latest. */
static void defer_requeue(plan_defer *d, int64_t wait_ms)
{
    if (wait_ms < 1)
        wait_ms = 1;
    if (d->requeue_ms == 0 || wait_ms < d->requeue_ms)
        d->requeue_ms = wait_ms;
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
        if (!pod_running(pod))
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
            msg_sep(&why);
            msg_add(&why, "pod %s is busy", pod->name ? pod->name : "");
            break;
        case PLAN_PROBE_ERROR:
            failed++;
            msg_sep(&why);
            msg_add(&why, "pod %s: %s", pod->name ? pod->name : "",
                    is_empty(detail) ? "idle probe failed" : detail);
            break;
        case PLAN_PROBE_UNSUPPORTED:
            unsupported++;
            msg_sep(&why);
            msg_add(&why, "pod %s: %s", pod->name ? pod->name : "",
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
        push_scale(c, m->name, to, to > 0 ? "TooManyReplicas" : "NoRunningPod");
    } else if (!probe_supported(m->runtime, m->idle_endpoint)) {
        if (str_eq(m->runtime, "generic"))
            defer_add(d, "IdleCheckUnsupported",
                      "member %s: runtime generic without annotation "
                      "inference.llmkube.dev/idle-endpoint cannot be probed",
                      m->name);
        else
            defer_add(d, "IdleCheckUnsupported", "member %s: runtime %s has no idle probe", m->name,
                      m->runtime);
    } else {
        if (bad_until == 0 && need > 0 && now < not_before) {
            defer_requeue(d, not_before - now);
            c->p->fenced_until_ms = not_before;
        } else if (bad_until == 0 && need > 0)
            push_probe(c, m, to, running);
        if (busy + failed + unsupported > 0) {
            defer_add(d,
                      busy     ? "PodsBusy"
                      : failed ? "IdleCheckFailed"
                               : "IdleCheckUnsupported",
                      "member %s: %s", m->name, msg_str(&why));
            if (bad_until > 0)
                defer_requeue(d, bad_until - now);
        } else if (need == 0) {
            push_scale(c, m->name, to, why_scale);
        }
    }
    free(why.s);
}

/* ---- the desired status ---- */

typedef struct {
    const char *status, *reason;
    plan_msg msg;
    bool keep;   /* carry the current condition over unchanged (spec invalid: nothing was judged) */
    bool absent; /* not written: TargetReady while no started target loads */
} plan_cond_want;

typedef struct {
    const char *phase, *resident, *pending;
    plan_cond_want valid, slot, deferred, swapping, target;
} plan_want;

FMT(4, 5)
static void want(plan_cond_want *w, const char *status, const char *reason, const char *fmt, ...)
{
    w->status = status;
    w->reason = reason;
    w->absent = false;
    w->msg.len = 0;
    va_list ap;
    va_start(ap, fmt);
    msg_vadd(&w->msg, fmt, ap);
    va_end(ap);
}

#define PLAN_N_CONDS 5
static const char *const plan_cond_types[PLAN_N_CONDS] = {
    "MembersValid", "SlotAllocated", "SwapDeferred", "Swapping", "TargetReady"};

static void fill_status(plan_ctx *c, const plan_want *w)
{
    const plan_snapshot *s = c->s;
    plan_status *st = &c->p->status;

    st->phase = copy(c, w->phase);
    st->resident_member = copy(c, or_null(w->resident));
    st->pending_member = copy(c, or_null(w->pending));
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
        const plan_member_status *cur = &s->status.members[i];
        st->members[st->n_members++] = (plan_member_status){.name = copy(c, cur->name),
                                                            .phase = copy(c, cur->phase),
                                                            .resident = cur->resident,
                                                            .releasing = cur->releasing};
    }
    for (size_t i = 0; !c->unsure && i < s->n_members; i++) {
        const plan_member *m = &s->members[i];
        if (!is_first_of_name(s, i))
            continue;
        plan_member_status *ms = &st->members[st->n_members++];
        ms->name = copy(c, m->name);
        ms->phase = copy(c, m->exists ? or_null(m->phase) : NULL);
        ms->resident = str_eq(m->name, w->resident);
        ms->releasing = c->rel[i];
    }
    /* A member removed from the spec stays recorded, releasing, while it holds the GPU: the
     * record is what makes its Pods count (rule 1) after this write. */
    for (size_t i = 0; !c->unsure && i < s->n_removed; i++) {
        const plan_member *m = &s->removed[i];
        if (is_empty(m->name) || !removed_holds(m))
            continue;
        plan_member_status *ms = &st->members[st->n_members++];
        ms->name = copy(c, m->name);
        ms->phase = copy(c, m->exists ? or_null(m->phase) : NULL);
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
        const plan_condition *cur = find_cond(&s->status, plan_cond_types[i]);
        const plan_cond_want *cw = wants[i];
        if ((cw->keep && cur == NULL) || (!cw->keep && cw->absent))
            continue;
        plan_condition *nc = &st->conditions[st->n_conditions++];
        nc->type = copy(c, plan_cond_types[i]);
        if (cw->keep) {
            nc->status = copy(c, cur->status);
            nc->reason = copy(c, cur->reason);
            nc->message = copy(c, cur->message);
            nc->last_transition_ms = cur->last_transition_ms;
            continue;
        }
        nc->status = copy(c, cw->status);
        nc->reason = copy(c, cw->reason);
        nc->message = copy(c, msg_str(&cw->msg));
        /* The time moves only when the status does (metav1 convention), so a swap's start time
         * survives reason changes and superseding targets. */
        nc->last_transition_ms =
            cur && str_eq(cur->status, cw->status) ? cur->last_transition_ms : c->stamp_ms;
    }
}

/* Events mark transitions of the status, so re-planning an applied plan repeats none of them. */
static void emit_events(plan_ctx *c, const plan_want *w)
{
    const plan_status *cur = &c->s->status;
    const char *cur_res = or_null(cur->resident_member), *cur_pend = or_null(cur->pending_member);
    const char *res = or_null(w->resident), *pend = or_null(w->pending);

    const plan_condition *cv = find_cond(cur, "MembersValid");
    if (!w->valid.keep && str_eq(w->valid.status, "False") &&
        (cv == NULL || !str_eq(cv->status, "False") || !str_eq(cv->reason, w->valid.reason) ||
         !str_eq(cv->message, msg_str(&w->valid.msg))))
        push_event(c, true, w->valid.reason, "%s", msg_str(&w->valid.msg));

    if (pend && !str_eq(pend, cur_pend)) {
        if (str_eq(pend, res))
            push_event(c, false, "SwapStarted", "returning to %s", pend);
        else if (cur_pend)
            push_event(c, false, "SwapStarted", "swapping to %s (supersedes %s)", pend, cur_pend);
        else if (res)
            push_event(c, false, "SwapStarted", "swapping from %s to %s", res, pend);
        else
            push_event(c, false, "SwapStarted", "warming %s", pend);
        if (c->superseded.len > 0)
            push_event(c, false, "RequestSuperseded",
                       "%s requested too; the pool runs one member, so it is held at 0 "
                       "(request it again once %s is resident)",
                       msg_str(&c->superseded), pend);
    }
    if (cur_pend && !pend && res && str_eq(res, cur_pend)) {
        if (c->cancelled)
            push_event(c, true, "SwapCancelled",
                       "%s was scaled to 0 while loading: the swap is cancelled and %s stays "
                       "resident, stopped",
                       res, res);
        else
            push_fact(c, PLAN_FACT_SWAP_COMPLETED, NULL, "SwapCompleted", "%s is resident", res);
    }
    if (c->withdrawn)
        push_event(c, false, "RequestWithdrawn",
                   "the request for %s was withdrawn (its clients left) before anything was "
                   "unloaded: %s stays resident",
                   cur_pend, res);
    if (!cur_res && !cur_pend && res && !pend)
        push_event(c, false, "Adopted", "%s was already serving and is now resident", res);
    if (cur_pend && !pend && !w->swapping.keep && str_eq(w->swapping.reason, "RequestDropped"))
        push_event(c, true, "RequestDropped", "%s", msg_str(&w->deferred.msg));

    const plan_condition *cd = find_cond(cur, "SwapDeferred");
    if (!w->deferred.keep && str_eq(w->deferred.status, "True") &&
        (cd == NULL || !str_eq(cd->status, "True") || !str_eq(cd->reason, w->deferred.reason))) {
        if (str_eq(w->deferred.reason, "WriteRefused"))
            push_event(c, true, "WriteRefused", "%s", msg_str(&w->deferred.msg));
        else
            push_fact(c, PLAN_FACT_SWAP_DEFERRED, w->deferred.reason, "SwapDeferred", "%s: %s",
                      w->deferred.reason, msg_str(&w->deferred.msg));
    }

    const plan_condition *cs = find_cond(cur, "SlotAllocated");
    const char *r = w->slot.reason;
    if (!w->slot.keep && str_eq(w->slot.status, "False") &&
        (str_eq(r, "TargetFailed") || str_eq(r, "TargetSuspended") ||
         str_eq(r, "TargetWaitingForGPU") || str_eq(r, "TargetNotReady")) &&
        (cs == NULL || !str_eq(cs->reason, r)))
        push_event(c, true, r, "%s", msg_str(&w->slot.msg));
    /* Once per episode: while the note stands in the slot's message, it is not news. */
    if (c->too_many.len > 0 && !w->slot.keep &&
        (cs == NULL || cs->message == NULL || strstr(cs->message, msg_str(&c->too_many)) == NULL))
        push_event(c, true, "TooManyReplicas", "%s", msg_str(&c->too_many));
}

/* ---- validation (rule 5) ---- */

FMT(4, 5)
static void fault(const char **reason, plan_msg *msg, const char *r, const char *fmt, ...)
{
    if (*reason == NULL)
        *reason = r;
    msg_sep(msg);
    va_list ap;
    va_start(ap, fmt);
    msg_vadd(msg, fmt, ap);
    va_end(ap);
}

/* Returns the reason of the first fault (NULL if the spec is valid), each fault named in msg. */
static const char *validate(const plan_snapshot *s, int64_t *budget_ms, plan_msg *msg)
{
    const char *reason = NULL;

    if (s->n_members == 0)
        fault(&reason, msg, "NoMembers", "spec.members is empty");
    for (size_t i = 0; i < s->n_members; i++)
        if (is_empty(s->members[i].name))
            fault(&reason, msg, "EmptyMemberName", "spec.members[%zu] has an empty name", i);
    for (size_t i = 0; i < s->n_members; i++) {
        if (!is_first_of_name(s, i))
            continue;
        size_t n = 0;
        for (size_t j = i; j < s->n_members; j++)
            n += str_eq(s->members[j].name, s->members[i].name);
        if (n > 1)
            fault(&reason, msg, "DuplicateMember", "member %s is listed %zu times",
                  s->members[i].name, n);
    }
    if (!is_empty(s->default_member) && member_named(s, s->default_member) == NULL)
        fault(&reason, msg, "DefaultNotMember", "default %s is not in spec.members",
              s->default_member);
    *budget_ms = PLAN_DEFAULT_SWAP_BUDGET_MS;
    if (!is_empty(s->swap_budget) &&
        (plan_parse_duration_ms(s->swap_budget, budget_ms) != 0 || *budget_ms <= 0))
        fault(&reason, msg, "InvalidSwapBudget",
              "swapBudget \"%s\" is not a positive duration such as 300s or 5m", s->swap_budget);
    int64_t unload_ms = 0;
    if (!is_empty(s->unload_after) &&
        (plan_parse_duration_ms(s->unload_after, &unload_ms) != 0 || unload_ms <= 0))
        fault(&reason, msg, "InvalidUnloadAfter",
              "annotation modelpool-operator.dev/unprobeable-unload-after \"%s\" is not a "
              "positive duration such as 10m",
              s->unload_after);
    if (!is_empty(s->swap_policy) && !str_eq(s->swap_policy, "sticky"))
        fault(&reason, msg, "UnsupportedSwapPolicy", "swapPolicy %s is not supported (sticky is)",
              s->swap_policy);
    /* A member dropped from the spec mid-flight would hold the GPU out of our sight. */
    const char *res = or_null(s->status.resident_member), *pend = or_null(s->status.pending_member);
    if (res && member_named(s, res) == NULL)
        fault(&reason, msg, "ResidentNotMember",
              "residentMember %s was removed from spec.members (add it back, move the slot to "
              "another member, then remove it)",
              res);
    if (pend && member_named(s, pend) == NULL)
        fault(&reason, msg, "PendingNotMember",
              "pendingMember %s was removed from spec.members (add it back until the swap ends)",
              pend);
    for (size_t i = 0; i < s->n_members; i++)
        if (is_first_of_name(s, i) && !is_empty(s->members[i].claimed_by))
            fault(&reason, msg, "MemberInMultiplePools", "member %s is also claimed by pool %s",
                  s->members[i].name, s->members[i].claimed_by);
    for (size_t i = 0; i < s->n_members; i++)
        if (is_first_of_name(s, i) && !s->members[i].exists)
            fault(&reason, msg, "MissingMembers", "InferenceService %s not found in namespace %s",
                  s->members[i].name, s->ns ? s->ns : "");
    return reason;
}

/* A member is absent from a cache that may not have caught up with the pool yet. */
static bool unsure_of_members(const plan_snapshot *s)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (!is_empty(s->members[i].name) && !s->members[i].exists &&
            s->members[i].absence_unconfirmed)
            return true;
    return false;
}

/* ---- decisions ---- */

/* How replicas become requests. A member scaled to >= 1 that the pool has not accounted for is a
 * request for the slot. The pool accounts for the resident (outside a swap), the target, and the
 * members it is releasing (status.members[].releasing: the previous resident and target, members
 * found up when the pool was new, requests that lost to another). A releasing member stops being
 * one once it is at 0, so scaling it up again (say, back to the member being swapped out) is a
 * request like any other. */

static bool is_up(const plan_member *m)
{
    return m != NULL && replicas_of(m) >= 1;
}

static bool has_terminating_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_live(&m->pods[i]) && m->pods[i].terminating)
            return true;
    return false;
}

static bool has_running_pod(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_running(&m->pods[i]))
            return true;
    return false;
}

static bool was_releasing(const plan_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->status.n_members; i++)
        if (str_eq(s->status.members[i].name, name))
            return s->status.members[i].releasing;
    return false;
}

static bool is_request(const plan_ctx *c, size_t i, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const plan_member *m = &s->members[i];
    if (!is_first_of_name(s, i) || !is_up(m) || c->rel[i] || str_eq(m->name, pend))
        return false;
    return pend != NULL || !str_eq(m->name, res); /* outside a swap the resident is up by right */
}

/* Several requests at once (made while the operator was down, or while the pool was Degraded or
 * another replica led): the first, in spec.members order, that already runs a Pod wins, since it
 * holds the GPU now; else the first. */
static const plan_member *first_request(const plan_ctx *c, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (is_request(c, i, res, pend) && has_running_pod(&s->members[i]))
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
        msg_add(&c->superseded, "%s%s", c->superseded.len ? ", " : "", s->members[i].name);
    }
}

/* The winning request, the others superseded. */
static const plan_member *pick_request(plan_ctx *c, const char *res, const char *pend)
{
    const plan_member *win = first_request(c, res, pend);
    if (win)
        supersede(c, win, res, pend);
    return win;
}

/* The swap was at Loading: its target was started (only then is Loading written). */
static bool was_loading(const plan_ctx *c)
{
    const plan_condition *sw = find_cond(&c->s->status, "Swapping");
    return sw && str_eq(sw->status, "True") && str_eq(sw->reason, "Loading");
}

static void start_swap(plan_ctx *c, plan_want *w, const char *from, const char *to)
{
    const plan_snapshot *s = c->s;
    /* Every other member that is up is released: its replicas were counted before this swap. */
    for (size_t i = 0; i < s->n_members; i++)
        c->rel[i] = str_eq(s->members[i].name, to) ? false : c->rel[i] || is_up(&s->members[i]);
    w->phase = "Swapping";
    w->resident = from;
    w->pending = to;
    if (str_eq(from, to))
        want(&w->slot, "False", "SwapInProgress", "returning to %s", to);
    else if (from)
        want(&w->slot, "False", "SwapInProgress", "swapping from %s to %s", from, to);
    else
        want(&w->slot, "False", "SwapInProgress", "warming %s", to);
    want(&w->swapping, "True", "Draining", "waiting for the other members to release the GPU");
}

static void settle(plan_want *w, const plan_member *m)
{
    w->phase = "Ready";
    w->resident = m->name;
    w->pending = NULL;
    if (is_up(m))
        want(&w->slot, "True", "Resident", "%s holds the slot", m->name);
    else
        want(&w->slot, "True", "Resident", "%s is resident, scaled to 0 (stopped)", m->name);
}

/* Every member up other than keep is brought to 0, after its idle probe (rule 3: none is left
 * running because another could not be held), and so is a member removed from the spec that is
 * still up (the pool was releasing it, or its replicas were a request the removal voids);
 * not_before as drain's. */
static void release_others(plan_ctx *c, const char *keep, int64_t not_before, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (is_first_of_name(s, i) && is_up(&s->members[i]) && !str_eq(s->members[i].name, keep))
            drain(c, &s->members[i], 0, not_before, d);
    for (size_t i = 0; i < s->n_removed; i++)
        if (!is_empty(s->removed[i].name) && s->removed[i].exists && is_up(&s->removed[i]))
            drain(c, &s->removed[i], 0, not_before, d);
}

/* Rule 2: a pooled member never runs more than one replica. */
static void limit_to_one(plan_ctx *c, const plan_member *m, plan_defer *d)
{
    if (replicas_of(m) <= 1)
        return;
    msg_add(&c->too_many,
            "%smember %s was scaled to %d replicas; a pooled member runs one, so it is brought "
            "back to 1",
            c->too_many.len ? "; " : "", m->name, (int)replicas_of(m));
    drain(c, m, 1, 0, d);
}

/* A new pool (no resident, no swap). The replicas found are the state of the world, not requests:
 * a member that serves is kept (the first in spec.members order), else default is warmed, else
 * the requests are weighed as in a warm pool. Every other member up is released. */
static void decide_cold(plan_ctx *c, plan_want *w)
{
    const plan_snapshot *s = c->s;
    const plan_member *owner = NULL;
    for (size_t i = 0; owner == NULL && i < s->n_members; i++)
        if (is_serving(&s->members[i]))
            owner = &s->members[i];
    if (owner == NULL)
        owner = member_named(s, s->default_member);
    if (owner == NULL)
        owner = first_request(c, NULL, NULL);

    if (owner == NULL) {
        w->phase = "Pending";
        want(&w->slot, "False", "NoResident", "no member requested and no default");
    } else if (is_serving(owner) && others_clear(s, owner->name)) {
        settle(w, owner);
    } else {
        start_swap(c, w, NULL, owner->name);
    }
}

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
    w->phase = "Degraded";
    if (strcmp(reason, "TargetWaitingForGPU") == 0)
        want(&w->slot, "False", reason,
             "target %s is WaitingForGPU longer than swapBudget (%lld ms)", t->name,
             (long long)budget_ms);
    else
        want(&w->slot, "False", reason, "target %s is %s", t->name, t->phase);
    return true;
}

static const char *pod_phase_name(plan_pod_phase p)
{
    switch (p) {
    case PLAN_POD_PENDING:
        return "Pending";
    case PLAN_POD_RUNNING:
        return "Running";
    case PLAN_POD_SUCCEEDED:
        return "Succeeded";
    case PLAN_POD_FAILED:
        return "Failed";
    case PLAN_POD_UNKNOWN:
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
    const plan_condition *cur = find_cond(&c->s->status, "TargetReady");
    int64_t since = cur && str_eq(cur->status, "False") ? cur->last_transition_ms : c->stamp_ms;
    if (!judged || c->s->now_ms - since < budget_ms) {
        want(&w->target, "False", "Loading", "%s was started; waiting for it to become Ready",
             t->name);
        if (judged)
            defer_requeue(d, since + budget_ms - c->s->now_ms);
        return;
    }
    plan_msg why = {0};
    msg_add(&why, "target %s is not Ready within swapBudget (%lld ms) of its start: phase %s",
            t->name, (long long)budget_ms, is_empty(t->phase) ? "unknown" : t->phase);
    size_t live = 0;
    for (size_t i = 0; i < t->n_pods; i++) {
        const plan_pod *p = &t->pods[i];
        if (!pod_live(p))
            continue;
        live++;
        msg_add(&why, "; pod %s %s%s%s%s%s%s", p->name ? p->name : "", pod_phase_name(p->phase),
                is_empty(p->waiting) ? "" : " (", is_empty(p->waiting) ? "" : p->waiting,
                is_empty(p->waiting) ? "" : ")", p->terminating ? ", terminating" : "",
                p->phase != PLAN_POD_RUNNING ? ""
                : !p->container_running      ? ", no container running"
                : p->ready                   ? ", ready"
                                             : ", not ready");
    }
    if (live == 0)
        msg_add(&why, "; no pod");
    c->oom |= why.oom;
    w->phase = "Degraded";
    want(&w->slot, "False", "TargetNotReady", "%s", msg_str(&why));
    want(&w->target, "False", "TargetNotReady", "%s", msg_str(&why));
    free(why.s);
}

/* A pod that still holds the slot, for a message. */
static const char *live_pod_name(const plan_member *m)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_live(&m->pods[i]))
            return m->pods[i].name ? m->pods[i].name : "";
    return "";
}

/* Rule 3: a target up beside another member (or beside its own old Pod, rule 1) is held at 0, its
 * member controller would otherwise start it there. One that is not serving is scaled back at
 * once, in the plan that records the request or the next, before any fence or probe: it never had
 * the slot and is starting (a loading server fails its idle probe, which would keep two models on
 * the GPU for the whole load). One that serves (it started while the operator was away) is probed
 * first (rule 2), and the serving target of a new pool is the one kept, not restarted. */
static void hold_back(plan_ctx *c, const plan_member *target, const char *res, plan_defer *d)
{
    if (!is_up(target) || (others_clear(c->s, target->name) && !has_terminating_pod(target)))
        return;
    /* The resident, until its swap reached Loading, may hold requests (a swap back to it, its
     * readiness flapping under load): only its idle probe lets it go. */
    bool resident = str_eq(target->name, c->s->status.resident_member) && !was_loading(c);
    if (!is_serving(target) && !resident)
        push_scale(c, target->name, 0, "HeldBack");
    else if (res != NULL)
        drain(c, target, 0, c->s->drain_after_ms, d);
}

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
static const char *undecided(const plan_member *m, plan_msg *msg)
{
    if (!has_running_pod(m))
        return NULL;
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_running(&m->pods[i]) && m->pods[i].probe == PLAN_PROBE_BUSY)
            return NULL;
    if (!probe_supported(m->runtime, m->idle_endpoint)) {
        if (str_eq(m->runtime, "generic"))
            msg_add(msg, "runtime generic without annotation inference.llmkube.dev/idle-endpoint "
                         "cannot be probed");
        else
            msg_add(msg, "runtime %s has no idle probe", m->runtime);
        return "IdleCheckUnsupported";
    }
    for (size_t i = 0; i < m->n_pods; i++)
        if (pod_running(&m->pods[i]) && m->pods[i].probe == PLAN_PROBE_NONE)
            return NULL;
    const char *why = NULL;
    for (size_t i = 0; i < m->n_pods; i++) {
        const plan_pod *p = &m->pods[i];
        if (!pod_running(p) || p->probe == PLAN_PROBE_IDLE)
            continue;
        bool unsupported = p->probe == PLAN_PROBE_UNSUPPORTED;
        if (why == NULL || unsupported)
            why = unsupported ? "IdleCheckUnsupported" : "IdleCheckFailed";
        msg_sep(msg);
        msg_add(msg, "pod %s: %s", p->name ? p->name : "",
                !is_empty(p->probe_message) ? p->probe_message
                : unsupported               ? "idle probe unsupported"
                                            : "idle probe failed");
    }
    return why;
}

/* The swap to pend is dropped: r, the resident, serves again; the target is held at 0 like any
 * other member up (its replicas are no request any more). */
static void drop_request(plan_ctx *c, plan_want *w, const plan_member *r, const char *pend,
                         const char *reason, const plan_msg *why, int64_t budget_ms, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, pend))
            c->rel[i] = is_up(&s->members[i]);
        else if (&s->members[i] == r)
            c->rel[i] = false;
    settle(w, r);
    release_others(c, r->name, s->drain_after_ms, d);
    want(&w->swapping, "False", "RequestDropped",
         "the request for %s was dropped: resident %s could not be probed within swapBudget "
         "(%lld ms); it serves again",
         pend, r->name, (long long)budget_ms);
    want(&w->deferred, "True", reason,
         "member %s: %s; the request for %s was dropped after swapBudget (%lld ms) without a probe "
         "that could decide, and %s serves again",
         r->name, msg_str(why), pend, (long long)budget_ms, r->name);
    c->dropped = true;
}

/* After a dropped request (Swapping False/RequestDropped), the resident r is probed until its
 * probe decides (idle or busy on every running Pod, fresh), which ends the episode; until then the
 * conditions stay as they are. */
static void recheck_dropped(plan_ctx *c, plan_want *w, const plan_member *r, plan_defer *d)
{
    const plan_condition *sw = find_cond(&c->s->status, "Swapping");
    /* Over too once the pool opts into unloading: a swap would not wedge any more. */
    if (!sw || !str_eq(sw->status, "False") || !str_eq(sw->reason, "RequestDropped") ||
        !has_running_pod(r) || !is_empty(c->s->unload_after))
        return;
    const int64_t now = c->s->now_ms;
    size_t running = 0, stale = 0, decided = 0;
    int64_t expires = 0;
    for (size_t i = 0; i < r->n_pods; i++) {
        const plan_pod *p = &r->pods[i];
        if (!pod_running(p))
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
        return; /* the probe decides again: the episode is over */
    w->swapping.keep = true;
    w->deferred.keep = true;
    c->dropped = true;
    if (!probe_supported(r->runtime, r->idle_endpoint))
        return; /* nothing to ask: a change of the member (its annotation) re-plans */
    if (stale > 0)
        push_probe(c, r, replicas_of(r), running);
    else
        defer_requeue(d, expires - now);
}

/* pendingMember is set and no newer request: drain, hold, start, complete or cancel. */
static void decide_swap(plan_ctx *c, plan_want *w, const char *res, const char *pend,
                        int64_t budget_ms, plan_defer *d)
{
    const plan_snapshot *s = c->s;
    const plan_member *target = member_named(s, pend);
    const plan_condition *sw = find_cond(&s->status, "Swapping");
    int64_t swap_start = sw && str_eq(sw->status, "True") ? sw->last_transition_ms : c->stamp_ms;
    /* Loading is written only once the cache showed the target up with the slot clear, so a
     * target at 0 after it is someone's cancellation, not our write still on its way. */
    bool started = was_loading(c);
    bool clear = others_clear(s, pend);
    bool own_old = has_terminating_pod(target);

    const plan_member *rm = member_named(s, res);
    if (!started && rm && !str_eq(res, pend) && is_up(rm)) {
        plan_msg why = {0};
        const char *reason = undecided(rm, &why);
        int64_t unload_ms = 0;
        if (!is_empty(s->unload_after))
            plan_parse_duration_ms(s->unload_after, &unload_ms); /* validated */
        int64_t limit = swap_start + (unload_ms > 0 ? unload_ms : budget_ms);
        if (reason && unload_ms > 0 && s->now_ms >= limit && s->now_ms >= s->drain_after_ms) {
            push_scale(c, res, 0, "UnprobeableUnload"); /* the pool's opt-in */
        } else if (reason && unload_ms == 0 && s->now_ms >= limit) {
            drop_request(c, w, rm, pend, reason, &why, budget_ms, d);
            c->oom |= why.oom;
            free(why.s);
            return;
        } else if (reason) {
            defer_requeue(d, (limit > s->drain_after_ms ? limit : s->drain_after_ms) - s->now_ms);
        }
        c->oom |= why.oom;
        free(why.s);
    }

    if (started && !is_up(target)) {
        c->cancelled = true;
        settle(w, target);
        return;
    }
    if (is_serving(target) && clear) {
        settle(w, target);
        limit_to_one(c, target, d);
        return;
    }
    bool loading = started || (clear && is_up(target) && !own_old);
    if (!loading)
        hold_back(c, target, res, d);
    else
        limit_to_one(c, target, d);
    release_others(c, pend, s->drain_after_ms, d);

    bool starting = false;
    plan_msg wait = {0};
    for (size_t i = 0; i < s->n_removed; i++) {
        const plan_member *m = &s->removed[i];
        if (!removed_holds(m))
            continue;
        msg_sep(&wait);
        if (has_live_pod(m))
            msg_add(&wait, "waiting for pod %s of %s (removed from spec.members) to be gone",
                    live_pod_name(m), m->name);
        else
            msg_add(&wait, "waiting for %s (removed from spec.members) to be scaled to 0", m->name);
    }
    if (clear && !is_up(target)) {
        /* Rule 1: the slot is free only once the target's own old Pods are gone too. */
        if (has_live_pod(target)) {
            msg_add(&wait, "waiting for pod %s of %s to terminate", live_pod_name(target), pend);
        } else {
            push_scale(c, pend, 1, "SlotFree");
            starting = true;
        }
    }
    c->oom |= wait.oom;

    w->phase = "Swapping";
    w->resident = res;
    w->pending = pend;
    if (str_eq(res, pend))
        want(&w->slot, "False", "SwapInProgress", "returning to %s", pend);
    else if (res)
        want(&w->slot, "False", "SwapInProgress", "swapping from %s to %s", res, pend);
    else
        want(&w->slot, "False", "SwapInProgress", "warming %s", pend);
    if (loading)
        want(&w->swapping, "True", "Loading", "loading %s", pend);
    else if (starting)
        want(&w->swapping, "True", "Draining", "the slot is free; starting %s", pend);
    else if (wait.len > 0)
        want(&w->swapping, "True", "Draining", "%s", msg_str(&wait));
    else
        want(&w->swapping, "True", "Draining", "waiting for the other members to release the GPU");
    free(wait.s);

    bool reported = false;
    if (started) { /* a phase seen before the scale-up would be stale */
        int64_t gpu_wait = 0;
        reported = judge_target(w, target, swap_start, budget_ms, s->now_ms, &gpu_wait);
        if (gpu_wait > 0)
            defer_requeue(d, gpu_wait);
    }
    if (loading && !is_serving(target))
        judge_load(c, w, target, budget_ms, started && !reported, d);
}

/* The target of a swap this plan starts, held back in the same plan as the pendingMember write
 * (after it) if it is starting beside another member; a serving one waits for the next plan's
 * probe. */
static void hold_back_new(plan_ctx *c, const plan_member *target)
{
    if (!is_serving(target))
        hold_back(c, target, NULL, NULL);
}

/* Who a newer request swaps from: a target that was started holds the GPU now, so it becomes the
 * incumbent (released like any other); else the resident. */
static const char *swap_from(const plan_ctx *c, const char *res, const char *pend)
{
    return pend && was_loading(c) && is_up(member_named(c->s, pend)) ? pend : res;
}

/* A router's withdrawal (its clients left): honoured while the swap has unloaded nothing, the way
 * a cancel is: the resident is still up and the target was not started. The swap ends and the
 * resident stays, with no replica changed; the annotation is cleared either way. True when
 * honoured. */
static bool take_withdrawal(plan_ctx *c, plan_want *w, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const char *wd = or_null(s->withdrawn);
    if (wd == NULL)
        return false;
    plan_action *a = push(c, &c->work, PLAN_CLEAR_WITHDRAW);
    if (a)
        a->member = copy(c, wd);
    const plan_member *r = member_named(s, res);
    if (!str_eq(wd, pend) || str_eq(res, pend) || !is_up(r) || was_loading(c))
        return false;
    c->withdrawn = true;
    /* The resident serves on; the target, if someone raised it meanwhile, is released. */
    for (size_t i = 0; i < s->n_members; i++)
        if (str_eq(s->members[i].name, res))
            c->rel[i] = false;
        else if (str_eq(s->members[i].name, pend))
            c->rel[i] = is_up(&s->members[i]);
    settle(w, r);
    return true;
}

/* A request through the pool (its annotation) is the newest request: it wins over members scaled
 * up, which are released, and is cleared once the plan that takes it has persisted it. True when
 * it starts a swap. */
static bool take_pool_request(plan_ctx *c, plan_want *w, const char *res, const char *pend)
{
    const plan_snapshot *s = c->s;
    const char *rq = or_null(s->requested);
    if (rq == NULL)
        return false;
    plan_action *a = push(c, &c->work, PLAN_CLEAR_REQUEST);
    if (a)
        a->member = copy(c, rq);
    const plan_member *m = member_named(s, rq);
    if (m == NULL) {
        push_event(c, true, "RequestIgnored",
                   "the request through the pool names %s, which is not in spec.members", rq);
        return false;
    }
    /* Already the target, or the settled resident still up. A resident at 0 (a cancelled swap,
     * someone's kubectl scale) is started again, the way back to it being a swap. */
    if (str_eq(rq, pend) || (pend == NULL && str_eq(rq, res) && is_up(m)))
        return false;
    supersede(c, m, res, pend);
    start_swap(c, w, swap_from(c, res, pend), rq);
    hold_back_new(c, m);
    return true;
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
        n += is_first_of_name(s, i);
    want(&w->valid, "True", "Valid", "all %zu members found", n);
    want(&w->deferred, "False", "NotDeferred", "no swap is waiting on a member");
    want(&w->swapping, "False", "NotSwapping", "no swap in progress");
    w->target.absent = true;

    plan_defer d = {0};
    const plan_member *req = NULL;
    if (take_withdrawal(c, w, res, pend)) {
        /* the swap ended; a request written meanwhile is taken by the next plan */
    } else if (take_pool_request(c, w, res, pend)) {
        /* the request through the pool was the newest word: persisted alone */
    } else if (!res && !pend) {
        decide_cold(c, w);
    } else if ((req = pick_request(c, res, pend)) != NULL) {
        /* A newer request takes over at once (persisted first, rule 3). */
        start_swap(c, w, swap_from(c, res, pend), req->name);
        hold_back_new(c, req);
    } else if (!pend) {
        /* Sticky (rule 4): the resident stays until another member is requested. */
        const plan_member *r = member_named(s, res);
        settle(w, r);
        limit_to_one(c, r, &d);
        release_others(c, res, 0, &d);
        recheck_dropped(c, w, r, &d);
    } else {
        decide_swap(c, w, res, pend, budget_ms, &d);
    }

    if (c->too_many.len > 0)
        msg_add(&w->slot.msg, "; %s", msg_str(&c->too_many));
    if (refused_again(c))
        want(&w->deferred, "True", "WriteRefused",
             "scaling member %s to %d was refused by the API server: %s", s->refused.member,
             (int)s->refused.replicas, s->refused.message ? s->refused.message : "");
    else if (c->dropped)
        ; /* drop_request wrote it, or recheck_dropped keeps it */
    else if (d.reason)
        want(&w->deferred, "True", d.reason, "%s", msg_str(&d.msg));
    else if (d.unknown && find_cond(&s->status, "SwapDeferred"))
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
    plan_status *st = &p->status;
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
        c.rel[i] = is_up(&snap->members[i]) && was_releasing(snap, snap->members[i].name);

    plan_want w = {0};
    plan_msg faults = {0};
    int64_t budget_ms = 0;
    const char *bad = validate(snap, &budget_ms, &faults);
    c.oom |= faults.oom;
    if (unsure_of_members(snap)) {
        /* Rule 5 judges a spec against what exists: not before the cache can say (#26). */
        w.phase = snap->status.phase;
        w.resident = or_null(snap->status.resident_member);
        w.pending = or_null(snap->status.pending_member);
        w.valid.keep = w.slot.keep = w.deferred.keep = w.swapping.keep = w.target.keep = true;
        c.unsure = true;
    } else if (bad) {
        /* Rule 5: report, keep the intent in status as it is, change no replicas. */
        w.phase = "Degraded";
        w.resident = or_null(snap->status.resident_member);
        w.pending = or_null(snap->status.pending_member);
        want(&w.valid, "False", bad, "%s", msg_str(&faults));
        w.slot.keep = w.deferred.keep = w.swapping.keep = w.target.keep = true;
    } else {
        decide(&c, &w, budget_ms);
    }
    free(faults.s);

    fill_status(&c, &w);
    bool write = !plan_status_equal(&c.p->status, &snap->status);
    if (write)
        emit_events(&c, &w);
    plan_cond_want *wants[PLAN_N_CONDS] = {&w.valid, &w.slot, &w.deferred, &w.swapping, &w.target};
    for (size_t i = 0; i < PLAN_N_CONDS; i++) {
        c.oom |= wants[i]->msg.oom;
        free(wants[i]->msg.s);
    }
    c.oom |= c.too_many.oom || c.superseded.oom;
    free(c.too_many.s);
    free(c.superseded.s);
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

bool plan_status_equal(const plan_status *a, const plan_status *b)
{
    if (!str_eq(a->phase, b->phase) || !str_eq(a->resident_member, b->resident_member) ||
        !str_eq(a->pending_member, b->pending_member) ||
        a->observed_generation != b->observed_generation || a->n_members != b->n_members ||
        a->n_conditions != b->n_conditions)
        return false;
    for (size_t i = 0; i < a->n_members; i++) {
        const plan_member_status *x = &a->members[i], *y = &b->members[i];
        if (!str_eq(x->name, y->name) || !str_eq(x->phase, y->phase) ||
            x->resident != y->resident || x->releasing != y->releasing)
            return false;
    }
    for (size_t i = 0; i < a->n_conditions; i++) {
        const plan_condition *x = &a->conditions[i], *y = &b->conditions[i];
        if (!str_eq(x->type, y->type) || !str_eq(x->status, y->status) ||
            !str_eq(x->reason, y->reason) || !str_eq(x->message, y->message) ||
            x->last_transition_ms != y->last_transition_ms)
            return false;
    }
    return true;
}

int plan_parse_duration_ms(const char *s, int64_t *out_ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"\xce\xbcs", 1e-3},
                 {"ms", 1},    {"s", 1e3},   {"m", 6e4},          {"h", 3.6e6}};
    if (s == NULL || out_ms == NULL)
        return -EINVAL;
    if (*s == '+')
        s++;
    if (strcmp(s, "0") == 0) {
        *out_ms = 0;
        return 0;
    }
    if (*s == '\0')
        return -EINVAL;
    double total = 0;
    while (*s) {
        double v = 0, scale = 1;
        bool digits = false, frac = false;
        for (; (*s >= '0' && *s <= '9') || (*s == '.' && !frac); s++) {
            if (*s == '.') {
                frac = true;
                continue;
            }
            digits = true;
            if (frac)
                v += (*s - '0') * (scale /= 10);
            else
                v = v * 10 + (*s - '0');
            if (v > 1e15)
                return -EINVAL;
        }
        if (!digits)
            return -EINVAL;
        size_t u = 0, ulen = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t l = strlen(units[i].unit);
            if (strncmp(s, units[i].unit, l) == 0 && l > ulen) {
                u = i;
                ulen = l;
            }
        }
        if (ulen == 0)
            return -EINVAL;
        s += ulen;
        total += v * units[u].ms;
        if (total > 1e15)
            return -EINVAL;
    }
    *out_ms = (int64_t)total;
    return 0;
}

/* plan_msg: the plan builder's messages (grown on demand, an allocation failure remembered), and
 * the actions a plan assembles: Events, scales, a swap's deferral and the conditions it wants. */
#include "plan_ctx.h"

#include <stdio.h>
#include <stdlib.h>

FMT(2, 0) void plan_msg_vadd(plan_msg *m, const char *fmt, va_list ap)
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

FMT(2, 3) void plan_msg_add(plan_msg *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plan_msg_vadd(m, fmt, ap);
    va_end(ap);
}

/* Starts a new clause of a message that lists several facts. */
void plan_msg_sep(plan_msg *m)
{
    if (m->len > 0)
        plan_msg_add(m, "; ");
}

const char *plan_msg_str(const plan_msg *m)
{
    return m->s ? m->s : "";
}

char *plan_copy(plan_ctx *c, const char *s)
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

plan_action *plan_push(plan_ctx *c, plan_vec *v, plan_action_kind kind)
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
    plan_msg_vadd(&m, fmt, ap);
    c->oom |= m.oom;
    plan_action *a = plan_push(c, &c->events, PLAN_EVENT);
    if (a == NULL) {
        free(m.s);
        return NULL;
    }
    a->warning = warning;
    a->reason = plan_copy(c, reason);
    a->message = m.s;
    return a;
}

FMT(4, 5)
void plan_push_event(plan_ctx *c, bool warning, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_event_v(c, warning, reason, fmt, ap);
    va_end(ap);
}

/* An Event that also carries a fact for the controller, recorded in the result beside it: a swap
 * completed, or one deferred for why (the condition's reason; PodsBusy is routine, so Normal, and
 * every other deferral is a Warning). */
FMT(5, 6)
void plan_push_fact(plan_ctx *c, plan_fact fact, const char *why, const char *reason,
                    const char *fmt, ...)
{
    bool warning = false;
    if (fact == PLAN_FACT_SWAP_COMPLETED) {
        const api_condition *sw = api_status_cond(&c->s->status, API_COND_SWAPPING);
        c->p->swap_ms =
            sw && str_eq(sw->status, "True") ? c->s->now_ms - sw->last_transition_ms : -1;
    } else {
        warning = !str_eq(why, "PodsBusy");
        free(c->p->deferred_reason);
        c->p->deferred_reason = plan_copy(c, why);
    }
    va_list ap;
    va_start(ap, fmt);
    plan_action *a = push_event_v(c, warning, reason, fmt, ap);
    va_end(ap);
    if (a)
        a->fact = fact;
}

void plan_push_scale(plan_ctx *c, const char *member, int32_t replicas, const char *reason)
{
    plan_action *a = plan_push(c, &c->work, PLAN_SCALE);
    if (a == NULL)
        return;
    a->member = plan_copy(c, member);
    a->replicas = replicas;
    a->reason = plan_copy(c, reason);
}

FMT(3, 4) void plan_defer_add(plan_defer *d, const char *reason, const char *fmt, ...)
{
    if (d->reason == NULL)
        d->reason = reason;
    plan_msg_sep(&d->msg);
    va_list ap;
    va_start(ap, fmt);
    plan_msg_vadd(&d->msg, fmt, ap);
    va_end(ap);
}

/* The swap is looked at again within wait_ms at the latest. */
void plan_defer_requeue(plan_defer *d, int64_t wait_ms)
{
    if (wait_ms < 1)
        wait_ms = 1;
    if (d->requeue_ms == 0 || wait_ms < d->requeue_ms)
        d->requeue_ms = wait_ms;
}

FMT(4, 5)
void plan_want_set(plan_cond_want *w, const char *status, const char *reason, const char *fmt, ...)
{
    w->status = status;
    w->reason = reason;
    w->absent = false;
    w->msg.len = 0;
    va_list ap;
    va_start(ap, fmt);
    plan_msg_vadd(&w->msg, fmt, ap);
    va_end(ap);
}

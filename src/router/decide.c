/* decide: one pool decided and the decision applied. The pool is read from the caches (view.c)
 * with this router's queues and the drain fence's last read (fence.c); rt_hold says what each
 * member's queue gets; here its requests are forwarded (relay.c), answered 503 with why, the
 * fence's read asked (fence.c), a member asked for or a request withdrawn (activate.c), and the
 * pool woken again when a grace ends or a request put back may go. Also a held request's
 * swapBudget running out (503 with Retry-After). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/status.h"
#include "informer/expect.h"
#include "router/hold.h"
#include "router/view.h"
#include "rt_state.h"

static void rt_reject_all(rt_mq *m, rt_oai_err err, const char *msg, const char *reason)
{
    while (m->head) {
        rt_req *q = m->head;
        rt_mq_unlink(q);
        if (reason)
            rt_metrics_unavailable(&q->rt->m, q->pool->ns, q->pool->name, reason);
        rt_answer(q, err, msg, 0);
    }
}

/* Learns how long this pool's swaps take, from its status as seen here. */
static void rt_swap_clock(rt_pool *p, const api_pool *o)
{
    bool swapping = o && o->status.pending_member && *o->status.pending_member;
    uint64_t now = ev_now_ms();
    if (swapping && !p->swap_seen_ms)
        p->swap_seen_ms = now;
    else if (!swapping && p->swap_seen_ms) {
        uint64_t d = now - p->swap_seen_ms;
        p->swap_estimate_ms = p->swap_estimate_ms ? (p->swap_estimate_ms + d) / 2 : d;
        p->swap_seen_ms = 0;
        p->settled_ms = now;
    }
}

/* The pool left the cache (deleted): its requests are answered, its series and its wait
 * forgotten. */
static void rt_pool_gone(rt_pool *p)
{
    for (size_t i = 0; i < p->nmq; i++)
        rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the model's pool was deleted", NULL);
    rt_metrics_forget_pool(p->rt->o.metrics, p->ns, p->name);
    free(p->refused);
    p->refused = NULL;
    free(p->request_rv);
    p->request_rv = NULL;
    free(p->asked);
    p->asked = NULL;
    free(p->advertised);
    p->advertised = NULL;
    p->awaiting = false;
    p->patch_not_before = 0;
}

/* Queues of names no longer in the pool: their model is gone (while the fence's read is refused,
 * every request gets that refusal). */
static void rt_reject_unlisted(rt_pool *p, const api_pool *o)
{
    for (size_t i = 0; i < p->nmq; i++) {
        bool listed = false;
        for (size_t k = 0; k < o->n_members; k++)
            listed |= rt_str_eq(o->members[k], p->mqs[i]->member);
        if (listed)
            continue;
        if (p->refused)
            rt_reject_all(p->mqs[i], RT_OAI_POOL_UNAVAILABLE, p->refused, "fence_refused");
        else
            rt_reject_all(p->mqs[i], RT_OAI_MODEL_NOT_FOUND, "the member is no longer in its pool",
                          NULL);
    }
}

/* One decision of a pool: its members as the caches show them with this router's queues, and
 * what rt_hold made of them. */
typedef struct rt_pass {
    size_t n;
    char waiting[256]; /* the member the pool's waiting annotation names, "" none */
    rt_hold_member *hm;
    rt_hold_verdict *v;
    rt_hold_reject *why;
    rt_mq **mq;
    char dropped[768];
    rt_hold_decision d;
} rt_pass;

static void rt_pass_free(rt_pass *x)
{
    free(x->hm), free(x->v), free(x->why), free(x->mq);
}

/* The pool's waiting annotation on this router's clock: the member into x->waiting and since when
 * (monotonic ms) into *since; nothing when absent, unreadable, or older than the pool's swap
 * budget (its clients have had their answer by now). */
static void rt_pass_waiting(rt_pass *x, const api_pool *o, uint64_t now, uint64_t *since)
{
    uint64_t unix_since = 0;
    x->waiting[0] = '\0';
    if (!rt_hold_waiting_parse(o->waiting, x->waiting, sizeof(x->waiting), &unix_since))
        return;
    uint64_t unix_now = ev_wall_ms();
    uint64_t age = unix_now > unix_since ? unix_now - unix_since : 0;
    if (age >= rt_view_budget_ms(o) || age > now) {
        x->waiting[0] = '\0';
        return;
    }
    *since = now - age;
}

/* Reads the pool and decides. -ENOMEM. */
static int rt_pass_run(rt_pass *x, rt_pool *p, const api_pool *o, uint64_t now)
{
    rt_router *rt = p->rt;
    size_t n = x->n = o->n_members;
    x->hm = calloc(n ? n : 1, sizeof(*x->hm));
    x->v = calloc(n ? n : 1, sizeof(*x->v));
    x->why = calloc(n ? n : 1, sizeof(*x->why));
    x->mq = calloc(n ? n : 1, sizeof(*x->mq));
    if (!x->hm || !x->v || !x->why || !x->mq)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *name = o->members[i] ? o->members[i] : "";
        x->hm[i] =
            rt_view_member(informer_store(rt->caches.isvcs), informer_store(rt->caches.pods),
                           rt->podcheck, informer_resource_version(rt->caches.isvcs), o, name);
        for (size_t k = 0; k < p->nmq; k++)
            if (strcmp(p->mqs[k]->member, name) == 0)
                x->mq[i] = p->mqs[k];
        if (x->mq[i]) {
            x->hm[i].waiting = x->mq[i]->waiting;
            x->hm[i].first_wait_ms = x->mq[i]->head ? x->mq[i]->head->arrived_ms : 0;
            x->hm[i].in_flight = x->mq[i]->in_flight;
        }
    }
    bool spares = api_status_fault_spares(&o->status, o->status.resident_member);
    /* A fence read counts once sent after this replica's registration began and after its last
     * acknowledgement of this pool's swap was withdrawn (registry.h): strictly, since the clock
     * counts whole milliseconds and a read sent in the same one may have gone before. */
    const char *fence_member =
        p->verified_ms > rt_registry_reads_from(rt->reg, p->key) ? p->verified_member : NULL;
    uint64_t waiting_since = 0;
    rt_pass_waiting(x, o, now, &waiting_since);
    rt_hold_pool hp = {
        .phase = o->status.phase,
        .dropped = rt_view_dropped(o, x->dropped, sizeof(x->dropped)),
        .degraded_spares_resident = spares,
        .resident = o->status.resident_member,
        .pending = o->status.pending_member,
        .requested = o->requested,
        .awaiting_probe = api_status_awaits_probe(&o->status),
        .request_unseen = p->patch != NULL || p->awaiting || now < p->patch_not_before,
        .members = x->hm,
        .n_members = n,
        .grace_ms = (uint64_t)rt->o.resident_grace_ms,
        .now_ms = now,
        .fence_member = fence_member,
        .registered_until_ms = rt_registry_until(rt->reg, now),
        .resident_blocked = rt_registry_blocks(rt->reg, p->key, o->status.resident_member),
        .fence_read_ms = p->verified_ms,
        .fence_window_ms = rt_fence_window_ms(rt),
        .waiting_member = x->waiting[0] ? x->waiting : NULL,
        .waiting_since_ms = waiting_since,
        .resident_since_ms = p->settled_ms,
        .fence_refused = p->refused != NULL};
    rt_hold_decide(&hp, x->v, x->why, &x->d);
    return 0;
}

/* Forwards m's requests. Returns when the first one put back after a refused forward may go
 * again, if it stopped there (0 otherwise). */
static uint64_t rt_serve(rt_mq *m, uint64_t send_by, uint64_t now)
{
    while (m->head) {
        rt_req *q = m->head;
        if (q->retry_at > now) /* put back: its turn comes a little later */
            return q->retry_at;
        rt_mq_unlink(q);
        if (q->budget_timer) {
            ev_timer_cancel(q->rt->loop, q->budget_timer);
            q->budget_timer = 0;
        }
        rt_forward(q, send_by);
    }
    return 0;
}

/* Answers member i's held requests 503 with why rt_hold refused them. */
static void rt_reject_member(rt_pool *p, const api_pool *o, const rt_pass *x, size_t i)
{
    char msg[768];
    rt_hold_reject why = x->why[i];
    if (why == RT_REJECT_FENCE_REFUSED)
        snprintf(msg, sizeof(msg), "%s", p->refused);
    else
        rt_view_reject_message(o, &x->hm[i], why, x->dropped, msg, sizeof(msg));
    rt_reject_all(x->mq[i], RT_OAI_POOL_UNAVAILABLE, msg,
                  why == RT_REJECT_FENCE_REFUSED ? "fence_refused"
                  : why == RT_REJECT_DEGRADED    ? "degraded"
                                                 : "member_unavailable");
}

/* The pool's waiting annotation from this router: its head named there when rt_hold says so;
 * what it named before cleared once no client here waits for that member. One write at a time,
 * none while a request of this router's is unseen. */
static void rt_advertise_check(rt_pool *p, const api_pool *o, const rt_pass *x, uint64_t now)
{
    if (p->advertised && !rt_str_eq(o->waiting, p->advertised)) {
        free(p->advertised); /* replaced or cleared since */
        p->advertised = NULL;
    }
    if (p->patch || p->awaiting || now < p->patch_not_before || !o->rv)
        return;
    if (x->d.advertise >= 0) {
        const rt_hold_member *h = &x->hm[x->d.advertise];
        char v[300];
        uint64_t age = now - h->first_wait_ms, unix_now = ev_wall_ms();
        snprintf(v, sizeof(v), "%s@%llu", h->name,
                 (unsigned long long)(unix_now > age ? unix_now - age : 0));
        rt_advertise(p, o, v);
        return;
    }
    if (!p->advertised)
        return;
    for (size_t i = 0; i < x->n; i++)
        if (x->mq[i] && x->mq[i]->waiting > 0 && rt_str_eq(x->hm[i].name, x->waiting))
            return; /* still waited for here */
    rt_advertise(p, o, NULL);
}

void rt_decide(rt_pool *p)
{
    rt_router *rt = p->rt;
    const api_pool *o = rt_pool_rec(p);
    if (!o) {
        rt_pool_gone(p);
        return;
    }
    rt_swap_clock(p, o);
    rt_ack(rt, o, p); /* a forward ended may be what it waited for */
    if (p->awaiting && expect_rv_shows(o->rv, p->request_old_rv, p->request_rv)) {
        free(p->request_rv);
        p->request_rv = NULL;
        p->awaiting = false;
    }
    rt_reject_unlisted(p, o);
    uint64_t now = ev_now_ms();
    rt_pass x = {0};
    if (rt_pass_run(&x, p, o, now) < 0) {
        rt_pass_free(&x);
        rt_mark(p); /* try again on the next turn */
        return;
    }
    uint64_t wake = 0; /* the first request put back that waits for its retry */
    for (size_t i = 0; i < x.n; i++) {
        if (!x.mq[i])
            continue;
        if (x.v[i] == RT_HOLD_REJECT)
            rt_reject_member(p, o, &x, i);
        else if (x.v[i] == RT_HOLD_SERVE) {
            uint64_t at = rt_serve(x.mq[i], x.d.send_by_ms, now);
            if (at && (!wake || at < wake))
                wake = at;
        }
    }
    if (x.d.fence_read)
        rt_verify(p, now);
    if (x.d.activate >= 0 && !rt->stopping) /* a stopping router asks nothing more */
        rt_activate(p, o, x.hm[x.d.activate].name);
    else if (!rt->stopping)
        rt_advertise_check(p, o, &x, now);
    const rt_mq *asked_mq = NULL;
    for (size_t i = 0; p->asked && i < p->nmq; i++)
        if (strcmp(p->mqs[i]->member, p->asked) == 0)
            asked_mq = p->mqs[i];
    if (!p->refused)
        rt_withdraw_check(p, o, asked_mq);
    if (x.d.wake_at_ms)
        rt_wake_at(p, x.d.wake_at_ms);
    if (wake)
        rt_wake_at(p, wake);
    if (p->patch_not_before > now)
        rt_wake_at(p, p->patch_not_before);
    rt_pass_free(&x);
}

void rt_budget_over(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_req *q = ud;
    q->budget_timer = 0;
    rt_pool *p = q->pool;
    const api_pool *o = rt_pool_rec(p);
    uint64_t budget = rt_view_budget_ms(o);
    rt_mq_unlink(q);
    uint32_t retry =
        rt_hold_retry_after_s(p->swap_estimate_ms, p->swap_seen_ms, ev_now_ms(), budget);
    /* Resident in this cache all along: what it lacked was the drain fence's read. */
    bool unconfirmed =
        rt_view_unconfirmed(informer_store(p->rt->caches.isvcs), informer_store(p->rt->caches.pods),
                            p->rt->podcheck, o, q->mq->member);
    char msg[512];
    snprintf(msg, sizeof(msg),
             unconfirmed ? "model %s (member %s of pool %s) could not be confirmed resident with "
                           "the API server within the pool's swapBudget (%llu ms); retry in %u s"
                         : "model %s (member %s of pool %s) is still loading: not resident within "
                           "the pool's swapBudget (%llu ms); retry in %u s",
             q->scan.name, q->mq->member, p->key, (unsigned long long)budget, retry);
    rt_metrics_unavailable(&q->rt->m, p->ns, p->name, unconfirmed ? "unconfirmed" : "swap_budget");
    rt_answer(q, RT_OAI_MODEL_LOADING, msg, retry);
    rt_mark(p);
}

/* activate: this router's writes to a pool, each a merge patch of its annotations with the pool's
 * resourceVersion as the precondition: the request for a member (which the operator turns into
 * pendingMember), its withdrawal once every client waiting for that member left before the
 * operator began to unload anything (#26), and the waiting annotation that names this router's
 * longest waiter for the replica that asks next (#27). Whether to withdraw is decided by a pure
 * function. */
#include "router/activate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "rt_state.h"

/* The request write: short, and not retried by the client (the decision retries it). */
#define RT_PATCH_TIMEOUT_MS 5000

static bool rt_activate_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static void rt_patch_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_pool *p = ud;
    p->patch = NULL;
    free(p->request_rv);
    p->request_rv = NULL;
    if (err->kind == KUBE_OK || code == 409) {
        /* 409: the pool changed since this router's cache saw it (another replica asked, the
         * operator wrote its status): nothing is written until the cache has caught up, and then
         * only if it still needs writing. */
        const char *rv = err->kind == KUBE_OK ? api_answer_version(body) : NULL;
        p->request_rv = rv ? strdup(rv) : NULL;
        p->awaiting = true;
        p->patch_failures = 0;
        p->patch_not_before = 0;
        if (p->patch_advert) {
            log_kv(LOG_DEBUG,
                   err->kind == KUBE_OK ? "named this router's longest waiter in the pool"
                                        : "naming this router's longest waiter lost a race",
                   "pool", p->key, "waiting", p->patch_member ? p->patch_member : "(none)", NULL);
            free(p->advertised);
            p->advertised =
                err->kind == KUBE_OK && p->patch_member ? strdup(p->patch_member) : NULL;
        } else if (err->kind == KUBE_OK) {
            log_kv(LOG_INFO, "requested member through the pool", "pool", p->key, "member",
                   p->patch_member, NULL);
            free(p->asked);
            p->asked = strdup(p->patch_member);
            p->asked_left = false;
            rt_metrics_activation(&p->rt->m, p->ns, p->name, p->patch_member);
        } else {
            log_kv(LOG_DEBUG, "request through the pool lost a race; waiting for the cache", "pool",
                   p->key, "member", p->patch_member, NULL);
        }
    } else {
        /* Not again before a backoff (RBAC missing would otherwise be a write a turn). */
        p->patch_not_before = rt_backoff(p, &p->patch_failures, 500, 30000);
        char c[8];
        snprintf(c, sizeof(c), "%ld", code);
        log_kv(LOG_ERROR,
               p->patch_advert ? "naming this router's longest waiter in the pool failed"
                               : "request through the pool failed",
               "pool", p->key, "member", p->patch_member ? p->patch_member : "", "code", c, "error",
               err->message ? err->message : "", NULL);
    }
    rt_mark(p);
}

/* Starts a merge patch of p's pool with body (taken): this router's writes, the request and the
 * withdrawal annotations. Not retried by the client: the decision retries. NULL when it cannot
 * start (why in err, or out of memory with err empty). */
static kube_call *rt_pool_patch(rt_pool *p, char *body, kube_done_fn done, kube_error *err)
{
    char *path = kube_path(API_GROUP, API_VERSION, p->ns, "modelpools", p->name, NULL);
    kube_request req = {.method = KUBE_PATCH_MERGE,
                        .path = path,
                        .body = body,
                        .timeout_ms = RT_PATCH_TIMEOUT_MS,
                        .max_retries = 0};
    kube_call *c = path && body ? kube_call_start(p->rt->client, &req, done, p, err) : NULL;
    free(path);
    free(body);
    return c;
}

/* Records what p's next write is (value, NULL for a removal; advert: the waiting annotation, not
 * a request) and the pool's version it is made at. */
static void rt_patch_begin(rt_pool *p, const api_pool *o, const char *value, bool advert)
{
    free(p->patch_member);
    p->patch_member = value ? strdup(value) : NULL;
    p->patch_advert = advert;
    free(p->request_old_rv);
    p->request_old_rv = o->rv ? strdup(o->rv) : NULL;
}

void rt_activate(rt_pool *p, const api_pool *o, const char *member)
{
    rt_patch_begin(p, o, member, false);
    kube_error err = {0};
    char *body = p->patch_member ? api_request_set_patch(member, o->rv) : NULL;
    p->patch = rt_pool_patch(p, body, rt_patch_done, &err);
    if (!p->patch) {
        log_kv(LOG_ERROR, "cannot request member through the pool", "pool", p->key, "member",
               member, "error", err.message ? err.message : "out of memory", NULL);
        p->patch_not_before = ev_now_ms() + 1000;
        rt_wake_at(p, p->patch_not_before);
    }
    kube_error_clear(&err);
}

void rt_advertise(rt_pool *p, const api_pool *o, const char *value)
{
    rt_patch_begin(p, o, value, true);
    kube_error err = {0};
    char *body = (!value || p->patch_member) && o->rv ? api_waiting_patch(value, o->rv) : NULL;
    p->patch = rt_pool_patch(p, body, rt_patch_done, &err);
    if (!p->patch) {
        p->patch_not_before = ev_now_ms() + 1000;
        rt_wake_at(p, p->patch_not_before);
    }
    kube_error_clear(&err);
}

static void rt_withdraw_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)body;
    rt_pool *p = ud;
    p->withdraw = NULL;
    if (err->kind == KUBE_OK || code != 409) {
        /* Done, or refused for good (rights, a bad answer): the swap then goes on, as it would
         * have without the withdrawal. */
        log_kv(err->kind == KUBE_OK ? LOG_INFO : LOG_ERROR,
               err->kind == KUBE_OK ? "withdrew the request: its clients left"
                                    : "could not withdraw the request",
               "pool", p->key, "member", p->asked, "error", err->message ? err->message : "", NULL);
        free(p->asked);
        p->asked = NULL;
        free(p->withdraw_rv);
        p->withdraw_rv = NULL;
    } else
        log_kv(LOG_DEBUG, "withdrawal lost a race; waiting for the cache", "pool", p->key, NULL);
    /* 409: the pool moved since this cache saw it; decided again from the cache's next view. */
    rt_mark(p);
}

rt_withdraw_step rt_activate_withdrawal(const rt_withdraw_view *v)
{
    if (!v->asked)
        return RT_WITHDRAW_NONE;
    bool untaken = rt_activate_eq(v->requested, v->asked);
    if (!untaken && !rt_activate_eq(v->pending, v->asked))
        return RT_WITHDRAW_FORGET;
    if (!v->asked_left || v->waiting || v->in_flight || rt_activate_eq(v->withdrawn, v->asked) ||
        rt_activate_eq(v->sent_at_rv, v->rv))
        return RT_WITHDRAW_NONE;
    return untaken ? RT_WITHDRAW_UNTAKEN : RT_WITHDRAW_TAKEN;
}

/* This router's request, once no client waits for its member here any more (one of them left):
 * withdrawn, with the pool's resourceVersion as the precondition, so only the request or swap
 * this cache shows as this router's is withdrawn. Forgotten once the pool shows neither. */
void rt_withdraw_check(rt_pool *p, const api_pool *o, const rt_mq *mq)
{
    if (!p->asked || p->withdraw || p->patch || p->awaiting)
        return;
    rt_withdraw_view v = {.asked = p->asked,
                          .asked_left = p->asked_left,
                          .waiting = mq ? mq->waiting : 0,
                          .in_flight = mq ? mq->in_flight : 0,
                          .requested = o->requested,
                          .pending = o->status.pending_member,
                          .withdrawn = o->withdrawn,
                          .rv = o->rv,
                          .sent_at_rv = p->withdraw_rv};
    rt_withdraw_step step = rt_activate_withdrawal(&v);
    if (step == RT_WITHDRAW_FORGET) {
        free(p->asked);
        p->asked = NULL;
    }
    if (step != RT_WITHDRAW_UNTAKEN && step != RT_WITHDRAW_TAKEN)
        return;
    free(p->withdraw_rv);
    p->withdraw_rv = o->rv ? strdup(o->rv) : NULL;
    kube_error err = {0};
    char *body =
        p->withdraw_rv ? api_withdraw_patch(p->asked, step == RT_WITHDRAW_UNTAKEN, o->rv) : NULL;
    p->withdraw = rt_pool_patch(p, body, rt_withdraw_done, &err);
    kube_error_clear(&err);
}

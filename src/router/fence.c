/* fence: the router's half of the drain fence. The operator unloads a swap's resident only on an
 * idle probe sent drain_fence_ms after the swap was written, so a request goes to the resident only
 * within half of that after a read of the pool from the API server (not the cache, which may lag
 * by a relist's backoff) showed it resident with no swap: such a request has reached the Pod before
 * the probe that could unload it is sent. This file sends that read and keeps its answer; rt_hold
 * decides with it. A read the API server refuses (401/403) is a missing right, named. It also
 * hands the registry (registry.h) this replica's acknowledgement of each pool's swap, which lets
 * the operator probe before the fence is over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fence.h"
#include "api/status.h"
#include "log/log.h"
#include "router/hold.h"
#include "rt_state.h"

/* A failed read for the drain fence is tried again after this, doubling up to the max. */
#define RT_VERIFY_BACKOFF_MS 250
#define RT_VERIFY_BACKOFF_MAX_MS 4000

/* How long after a read of the pool requests may go to the resident it showed (api/fence.h). */
uint64_t rt_fence_window_ms(const rt_router *rt)
{
    return (uint64_t)api_fence_window_ms(rt->o.drain_fence_ms);
}

static void rt_verify_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_pool *p = ud;
    p->verify = NULL;
    int derr = 0;
    api_pool *o = err->kind == KUBE_OK ? api_pool_decode(body, &derr) : NULL;
    const char *res = o ? o->status.resident_member : NULL;
    const char *pend = o ? o->status.pending_member : NULL;
    /* Settled: a resident whose drain has not begun (no swap, or one awaiting its probe). */
    bool decoded = o != NULL, swapping = pend && *pend,
         settled = res && *res && (!swapping || api_status_awaits_probe(&o->status));
    const api_pool *cached = rt_pool_rec(p);
    bool agrees = settled && cached && rt_str_eq(cached->status.resident_member, res);
    rt_metrics_fence_read(&p->rt->m, p->ns, p->name,
                          !o       ? "failed"
                          : agrees ? "confirmed"
                                   : "not_confirmed");
    char why[256];
    if (rt_hold_fence_refused(code, p->ns, why, sizeof(why))) {
        if (!p->refused) /* once, not once a read: it is tried again every few seconds */
            log_kv(LOG_ERROR,
                   "the drain fence's read of the pool was refused; its requests get 503", "pool",
                   p->key, "reason", why, "error", err->message ? err->message : "", NULL);
        if (!p->refused || strcmp(p->refused, why) != 0) {
            free(p->refused);
            p->refused = strdup(why);
        }
    } else if (o && p->refused) {
        log_kv(LOG_INFO, "the drain fence's read of the pool is allowed again", "pool", p->key,
               NULL);
        free(p->refused);
        p->refused = NULL;
    }
    if (o) { /* a failed read leaves the last good one to its age */
        free(p->verified_member);
        p->verified_member = settled ? strdup(res) : NULL;
        p->verified_ms = p->verify_sent_ms;
        free(o);
    }
    if (agrees && p->verified_member) {
        p->verify_failures = 0;
        p->verify_not_before = 0;
    } else {
        /* Failed, or the pool is not what this cache says: asked again after a backoff (a
         * cache catching up marks the pool anyway). */
        p->verify_not_before =
            rt_backoff(p, &p->verify_failures, RT_VERIFY_BACKOFF_MS, RT_VERIFY_BACKOFF_MAX_MS);
        char c[8];
        snprintf(c, sizeof(c), "%ld", code);
        log_kv(LOG_DEBUG,
               "the pool's read for the drain fence does not confirm this cache's resident; "
               "its requests wait",
               "pool", p->key, "code", c, "error",
               err->kind != KUBE_OK ? (err->message ? err->message : "")
               : !decoded           ? "an answer that is not a ModelPool"
               : swapping           ? "swapping"
               : settled            ? "another resident"
                                    : "no resident",
               NULL);
    }
    rt_mark(p);
}

void rt_verify(rt_pool *p, uint64_t now)
{
    if (p->verify)
        return;
    if (now < p->verify_not_before) {
        /* Asked again: the wake set when the backoff began may have been folded into an earlier
         * one (one timer a pool), which has fired by now; the requests waiting for this read
         * would otherwise wait for another event, or their budget. */
        rt_wake_at(p, p->verify_not_before);
        return;
    }
    char *path = kube_path(API_GROUP, API_VERSION, p->ns, "modelpools", p->name, NULL);
    /* An answer later than the window is of no use; the client does not retry (the decision
     * does, with its backoff). */
    kube_request req = {.method = KUBE_GET,
                        .path = path,
                        .timeout_ms =
                            (long)(rt_fence_window_ms(p->rt) ? rt_fence_window_ms(p->rt) : 1),
                        .max_retries = 0,
                        .scratch = true};
    kube_error err = {0};
    p->verify_sent_ms = now;
    if (path)
        p->verify = kube_call_start(p->rt->client, &req, rt_verify_done, p, &err);
    if (!p->verify) {
        p->verify_not_before = now + RT_VERIFY_BACKOFF_MS;
        rt_wake_at(p, p->verify_not_before);
    }
    kube_error_clear(&err);
    free(path);
}

void rt_ack(rt_router *rt, const api_pool *o, const rt_pool *p)
{
    size_t outstanding = 0;
    const char *resident = o->status.resident_member;
    for (size_t i = 0; p && resident && i < p->nmq; i++)
        if (strcmp(p->mqs[i]->member, resident) == 0)
            outstanding = p->mqs[i]->in_flight + (ev_now_ms() < p->mqs[i]->linger_until);
    const char *member = rt_hold_ack(resident, o->status.pending_member,
                                     api_status_awaits_probe(&o->status), outstanding);
    if (rt_registry_ack(rt->reg, o->ns, o->name, member) < 0)
        log_kv(LOG_ERROR, "out of memory: this replica's acknowledgement of a swap is not written",
               "pool", o->name,
               NULL); /* its swap waits the whole fence; the next event tries again */
}

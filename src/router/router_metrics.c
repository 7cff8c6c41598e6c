/* router_metrics: the router's series. Hold durations get buckets past 300 s (the default
 * swapBudget), upstream latency buckets from a millisecond (a loopback member) to minutes (a long
 * generation before its first byte). */
#include "router/router_metrics.h"

#include <stddef.h>
#include <stdio.h>

#define RT_N(a) (sizeof(a) / sizeof((a)[0]))

static const double rt_hold_buckets[] = {0.01, 0.05, 0.1, 0.5, 1,   2.5, 5,   10,  20,
                                         30,   60,   120, 180, 300, 450, 600, 900, 1800};
static const double rt_upstream_buckets[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

static const char *const rt_pmc[] = {"namespace", "pool", "member", "code", NULL};
static const char *const rt_pm[] = {"namespace", "pool", "member", NULL};
static const char *const rt_p[] = {"namespace", "pool", NULL};
static const char *const rt_pr[] = {"namespace", "pool", "reason", NULL};
static const char *const rt_pres[] = {"namespace", "pool", "result", NULL};

#define RT_DEF(...) METRICS_DEF(rt_metrics, __VA_ARGS__)
#define RT_HISTOGRAM(...) METRICS_DEF_HISTOGRAM(rt_metrics, __VA_ARGS__)

static const metrics_def rt_defs[] = {
    RT_DEF(requests, METRICS_COUNTER, "modelpool_router_requests_total",
           "Requests answered, by pool, member and HTTP status (502 and 503 the router's own).",
           rt_pmc),
    RT_DEF(held, METRICS_GAUGE, "modelpool_router_held_requests",
           "Requests held now, waiting for their member to be resident.", rt_p),
    RT_HISTOGRAM(hold, "modelpool_router_hold_duration_seconds",
                 "How long held requests waited (until forwarded, refused or the client left).",
                 rt_p, rt_hold_buckets),
    RT_DEF(activations, METRICS_COUNTER, "modelpool_router_activations_total",
           "Requests for a member made through its pool (the request annotation written).", rt_pm),
    RT_DEF(coalesced, METRICS_COUNTER, "modelpool_router_coalesced_requests_total",
           "Requests that waited on an activation already asked for (no write of their own).",
           rt_pm),
    RT_DEF(unavailable, METRICS_COUNTER, "modelpool_router_unavailable_total",
           "503 answers, by reason (swap_budget, unconfirmed, degraded, member_unavailable, "
           "fence_refused, shutdown).",
           rt_pr),
    RT_HISTOGRAM(upstream, "modelpool_router_upstream_first_byte_seconds",
                 "From forwarding a request to a member until its first response byte.", rt_pm,
                 rt_upstream_buckets),
    RT_DEF(fence_reads, METRICS_COUNTER, "modelpool_router_fence_reads_total",
           "Reads of a pool from the API server for the drain fence, by result (confirmed, "
           "not_confirmed, failed).",
           rt_pres),
    RT_DEF(buffered, METRICS_GAUGE, "modelpool_router_buffered_bytes",
           "Request body bytes held in memory now, all requests (at most --body-buffer-budget).",
           NULL),
};

int rt_metrics_init(rt_metrics *m, metrics *reg)
{
    return metrics_declare(reg, rt_defs, RT_N(rt_defs), m);
}

void rt_metrics_request(rt_metrics *m, const char *ns, const char *pool, const char *member,
                        unsigned code)
{
    char c[8];
    snprintf(c, sizeof(c), "%u", code);
    const char *v[] = {ns ? ns : "", pool ? pool : "", member ? member : "", c};
    metrics_add(m->requests, v, 1);
}

void rt_metrics_held(rt_metrics *m, const char *ns, const char *pool, int delta)
{
    const char *v[] = {ns, pool};
    metrics_add(m->held, v, delta);
}

void rt_metrics_hold_ended(rt_metrics *m, const char *ns, const char *pool, uint64_t ms)
{
    const char *v[] = {ns, pool};
    metrics_observe(m->hold, v, (double)ms / 1000.0);
}

void rt_metrics_activation(rt_metrics *m, const char *ns, const char *pool, const char *member)
{
    const char *v[] = {ns, pool, member};
    metrics_add(m->activations, v, 1);
}

void rt_metrics_coalesced(rt_metrics *m, const char *ns, const char *pool, const char *member)
{
    const char *v[] = {ns, pool, member};
    metrics_add(m->coalesced, v, 1);
}

void rt_metrics_unavailable(rt_metrics *m, const char *ns, const char *pool, const char *reason)
{
    const char *v[] = {ns, pool, reason};
    metrics_add(m->unavailable, v, 1);
}

void rt_metrics_upstream(rt_metrics *m, const char *ns, const char *pool, const char *member,
                         uint64_t us)
{
    const char *v[] = {ns, pool, member};
    metrics_observe(m->upstream, v, (double)us / 1e6);
}

void rt_metrics_forget_pool(metrics *reg, const char *ns, const char *pool)
{
    static const char *const names[] = {"namespace", "pool"};
    const char *values[] = {ns, pool};
    metrics_remove(reg, names, values, 2);
}

void rt_metrics_fence_read(rt_metrics *m, const char *ns, const char *pool, const char *result)
{
    const char *v[] = {ns, pool, result};
    metrics_add(m->fence_reads, v, 1);
}

void rt_metrics_buffered(rt_metrics *m, uint64_t bytes)
{
    metrics_set(m->buffered, NULL, (double)bytes);
}

/* router_metrics: the router's Prometheus series, declared in one place with their help text and
 * buckets, recorded through small functions so router.c reads as what happened, not as labels. */
#ifndef MP_ROUTER_ROUTER_METRICS_H
#define MP_ROUTER_ROUTER_METRICS_H

#include <stdint.h>

#include "metrics/metrics.h"

typedef struct rt_metrics {
    metrics_family *requests;    /* counter {namespace,pool,member,code} */
    metrics_family *held;        /* gauge {namespace,pool} */
    metrics_family *hold;        /* histogram {namespace,pool} seconds */
    metrics_family *activations; /* counter {namespace,pool,member} */
    metrics_family *coalesced;   /* counter {namespace,pool,member} */
    metrics_family *unavailable; /* counter {namespace,pool,reason} */
    metrics_family *upstream;    /* histogram {namespace,pool,member} seconds to first byte */
    metrics_family *fence_reads; /* counter {namespace,pool,result} */
    metrics_family *buffered;    /* gauge: request body bytes held, all requests */
} rt_metrics;

/* Declares the families in reg. 0 or -ENOMEM. */
int rt_metrics_init(rt_metrics *m, metrics *reg);

void rt_metrics_request(rt_metrics *m, const char *ns, const char *pool, const char *member,
                        unsigned code);
void rt_metrics_held(rt_metrics *m, const char *ns, const char *pool, int delta);
void rt_metrics_hold_ended(rt_metrics *m, const char *ns, const char *pool, uint64_t ms);
void rt_metrics_activation(rt_metrics *m, const char *ns, const char *pool, const char *member);
void rt_metrics_coalesced(rt_metrics *m, const char *ns, const char *pool, const char *member);
/* reason: swap_budget, unconfirmed (the drain fence's read), degraded, member_unavailable,
 * fence_refused (the API server refused the fence's read), shutdown */
void rt_metrics_unavailable(rt_metrics *m, const char *ns, const char *pool, const char *reason);
void rt_metrics_upstream(rt_metrics *m, const char *ns, const char *pool, const char *member,
                         uint64_t us);
/* A read of the pool for the drain fence. result: confirmed (this cache's resident, no swap),
 * not_confirmed (a swap, or another resident), failed (no answer, an error) */
void rt_metrics_fence_read(rt_metrics *m, const char *ns, const char *pool, const char *result);
/* The request body bytes the router holds now (its buffer budget's use). */
void rt_metrics_buffered(rt_metrics *m, uint64_t bytes);
/* Drops every series of a deleted pool. */
void rt_metrics_forget_pool(metrics *reg, const char *ns, const char *pool);

#endif

/* pool_metrics: the ModelPool controller's Prometheus series, declared on a registry and recorded
 * through named calls, so the controller says what happened ("a swap completed") and this file
 * alone knows metric names, labels and buckets. Every call is a no-op on a NULL pool_metrics, so
 * a controller runs without metrics in tests. */
#ifndef MP_POOL_POOL_METRICS_H
#define MP_POOL_POOL_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "informer/informer.h"
#include "informer/workqueue.h"
#include "metrics/metrics.h"

typedef struct pool_metrics pool_metrics;

/* Declares the families on reg. NULL when out of memory (or reg is NULL). */
pool_metrics *pool_metrics_new(metrics *reg);
void pool_metrics_free(pool_metrics *pm);

/* Reaction paths (see docs/metrics.md): A, a member scaled up -> the PATCH scaling the incumbent
 * down; B, the incumbent's last Pod deleted -> the PATCH scaling the target up. */
typedef enum { POOL_REACTION_A, POOL_REACTION_B } pool_reaction_path;

void pool_metrics_reconciled(pool_metrics *pm, bool ok, uint64_t duration_ms);
void pool_metrics_dequeued(pool_metrics *pm, uint64_t waited_ms);
/* Copies the queue's and the informers' counters (called when metrics are rendered). */
void pool_metrics_queue(pool_metrics *pm, const wq_stats *q);
void pool_metrics_informer(pool_metrics *pm, const char *resource, const informer_stats *st);
/* One gauge per member of the pool: 1 for the resident, else 0. */
void pool_metrics_members(pool_metrics *pm, const char *ns, const char *pool,
                          const char *const *members, size_t n, const char *resident);
void pool_metrics_swap_done(pool_metrics *pm, const char *ns, const char *pool,
                            int64_t duration_ms);
void pool_metrics_deferred(pool_metrics *pm, const char *ns, const char *pool, const char *reason);
void pool_metrics_reaction(pool_metrics *pm, pool_reaction_path path, uint64_t us);
/* A swap's drain fence ended: early, every router having acknowledged the swap, or after the whole
 * fence. */
void pool_metrics_fence_ended(pool_metrics *pm, bool acknowledged);
/* Drops every series of a pool (deleted, or its members changed). */
void pool_metrics_forget(pool_metrics *pm, const char *ns, const char *pool);

#endif

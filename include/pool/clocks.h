/* clocks: the reaction clocks behind modelpool_reaction_seconds. Path a runs from the watch event
 * of a request (a member scaled up, or the pool's request annotation) to the PATCH scaling the
 * incumbent down; path b from the watch event of the incumbent's last Pod deleted during a swap to
 * the PATCH scaling the target up. Watch events start them, the reconcile stops them; only pools
 * with a clock running cost memory. Times are ev_now_us. */
#ifndef MP_POOL_CLOCKS_H
#define MP_POOL_CLOCKS_H

#include <stdint.h>

#include "api/records.h"
#include "informer/store.h"
#include "pool/pool_metrics.h"

typedef struct pool_clocks pool_clocks;

/* Records into pm (which must outlive the clocks). NULL when out of memory or pm is NULL: every
 * call below is a no-op on NULL clocks. */
pool_clocks *pool_clocks_new(pool_metrics *pm);
void pool_clocks_free(pool_clocks *c);

/* ---- started by watch events ---- */

/* A pool changed from was to now: a request annotation that appears or changes starts path a,
 * unless no scale-down will answer it (a name that is no member, the target already, the settled
 * resident, or a Degraded pool), so that no stale clock is left to time a later swap. */
void pool_clocks_pool_updated(pool_clocks *c, const api_pool *was, const api_pool *now,
                              uint64_t now_us);
/* Member ns/member was scaled up from 0: path a for every pool in pools listing it. */
void pool_clocks_member_up(pool_clocks *c, const store *pools, const char *ns, const char *member,
                           uint64_t now_us);
/* A Pod of ns/member was deleted: path b for every pool in pools listing it whose swap waits for
 * it (a pending member other than this one). */
void pool_clocks_pod_gone(pool_clocks *c, const store *pools, const char *ns, const char *member,
                          uint64_t now_us);

/* ---- stopped by the reconcile of pool_key ---- */

/* The PATCH scaling member to replicas is about to be sent: a scale-down of another member than
 * the requested one ends path a, a scale-up ends path b. */
void pool_clocks_scaling(pool_clocks *c, const char *pool_key, const char *member, int32_t replicas,
                         uint64_t now_us);
/* The swap waits for a busy member: that wait is no part of the operator's reaction (path a
 * stops without a sample). */
void pool_clocks_deferred(pool_clocks *c, const char *pool_key);
/* The swap waits for the drain fence until until_us: path a starts again there, the wait being
 * the fence's (by design), not the operator's reaction. */
void pool_clocks_fenced(pool_clocks *c, const char *pool_key, uint64_t until_us);
/* The swap completed, or the pool is gone: its clocks stop without a sample. */
void pool_clocks_stop(pool_clocks *c, const char *pool_key);

/* Pools with a clock running, for tests. */
size_t pool_clocks_running(const pool_clocks *c);

#endif

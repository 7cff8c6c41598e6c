/* controller: the ModelPool reconciles in flight. Pool keys queued here are reconciled by
 * snapshot -> plan -> actions (status patch, idle probes, scale patches, Events) from the caches it
 * is given; reconciles of different pools run concurrently on the loop, up to max_concurrent at
 * once, never one pool twice. What feeds it (informers, leadership, metrics wiring) is the
 * manager's (pool/manager.h). */
#ifndef MP_POOL_CONTROLLER_H
#define MP_POOL_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "informer/informer.h"
#include "informer/store.h"
#include "informer/workqueue.h"
#include "kube/client.h"
#include "loop/ev.h"
#include "pool/clocks.h"
#include "pool/pool_metrics.h"

typedef struct pool_controller pool_controller;

typedef struct pool_controller_config {
    ev_loop *loop;
    kube_client *client;
    /* The caches it plans from (api/records.h codecs and indexes), read only. */
    const store *pools, *isvcs, *pods;
    /* The InferenceService informer, for its resourceVersion: a member absent from its cache is
     * missing only once it has caught up with the pool (or a GET says so). NULL: never caught up,
     * every absence is read from the API server. */
    const informer *isvc_informer;
    pool_metrics *pm;      /* NULL: no metrics */
    pool_clocks *clocks;   /* reaction clocks the reconcile stops; NULL: none */
    const char *instance;  /* who we are, for Events (copied) */
    long probe_timeout_ms; /* each idle probe request; 0: 2000 */
    /* The drain fence, the operator's side of api/fence.h (plan_snapshot.drain_after_ms); 0: its
     * default. */
    long drain_fence_ms;
    /* Its early end (api/fence.h, "Operator"): the cache of the router Leases (api_router_lease
     * records), its informer (a swap's fence is ended early only once it has synced), and their
     * namespace, where the confirming list is read. NULL: every swap waits the whole fence. */
    const store *router_leases;
    const informer *lease_informer;
    const char *lease_ns;
    unsigned max_concurrent; /* pools reconciled at once; 0: 4 */
    uint64_t resync_ms;      /* backstop re-reconcile of every pool; 0: 300000 */
    uint64_t expect_ms;      /* how long to wait for the cache to show our own write; 0: 5000 */
    /* Asked right before every write (status, scale, Event): false ends the reconcile without
     * sending. NULL: always allowed. */
    bool (*may_write)(void *ud);
    void *may_write_ud;
} pool_controller_config;

/* NULL when out of memory. Everything cfg points at must outlive the controller. */
pool_controller *pool_controller_new(const pool_controller_config *cfg);
/* Queues pool key for a reconcile (a no-op after shutdown). */
void pool_controller_enqueue(pool_controller *pc, const char *pool_key);
/* Router Lease key changed, now at resourceVersion rv, or is gone (rv NULL): noted (when this
 * replica first saw each version counts towards a Lease's expiry); with wake, the pools whose swap
 * waits on the drain fence are queued again, so an acknowledgement is acted on at once. */
void pool_controller_lease_changed(pool_controller *pc, const char *key, const char *rv, bool wake);
/* A Pod (by uid) is gone or replaced: its last idle probe verdict is of no use any more. */
void pool_controller_pod_gone(pool_controller *pc, const char *uid);
void pool_controller_queue_stats(const pool_controller *pc, wq_stats *out);
/* Stops taking new work; done runs (from the loop) once the reconciles in flight have finished. */
void pool_controller_shutdown(pool_controller *pc, void (*done)(void *ud), void *ud);
void pool_controller_free(pool_controller *pc);

#endif

/* manager: the ModelPool operator's runtime around the reconciles. Three informers (ModelPools,
 * member InferenceServices, their Pods) keep the caches; their events queue pools on the controller
 * (pool/controller.h) and start the reaction clocks (pool/clocks.h) once the caches are synced and
 * this replica leads; a fourth, of the router Leases, lets the controller end a swap's drain fence
 * early (api/fence.h); a scrape reads the queue's and informers' counters. */
#ifndef MP_POOL_MANAGER_H
#define MP_POOL_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "loop/ev.h"
#include "metrics/metrics.h"

typedef struct pool_manager pool_manager;

typedef struct pool_manager_opts {
    const char *namespace_; /* watch one namespace; NULL: all */
    const char *instance;   /* who we are, for Events (e.g. the Pod name); NULL: hostname */
    long probe_timeout_ms;  /* each idle probe request; 0: 2000 */
    long drain_fence_ms;    /* pool_controller_config.drain_fence_ms; 0: the default */
    /* Where the router Leases are, watched to end a swap's drain fence once every router has
     * acknowledged it; NULL: not watched, every swap waits the whole fence. Must outlive the
     * manager. */
    const char *router_lease_ns;
    unsigned max_concurrent; /* pools reconciled at once (never one pool twice); 0: 4 */
    uint64_t resync_ms;      /* backstop re-reconcile of every pool; 0: 300000 */
    uint64_t expect_ms;      /* how long to wait for the cache to show our own write; 0: 5000 */
    metrics *metrics;        /* where to record (pool/pool_metrics.h); NULL: nowhere. It must
                              * not be rendered after pool_manager_free. */
    /* Asked right before every write (status, scale, Event): false ends the reconcile without
     * sending (leader_may_write). NULL: always allowed. */
    bool (*may_write)(void *ud);
    void *may_write_ud;
} pool_manager_opts;

/* NULL when out of memory. loop and client must outlive the manager. */
pool_manager *pool_manager_new(ev_loop *loop, kube_client *client, const pool_manager_opts *opts);
/* Starts the informers; reconciling begins once all three caches are synced and the manager leads
 * (pool_manager_lead). 0 or -errno. */
int pool_manager_start(pool_manager *pm);
bool pool_manager_synced(const pool_manager *pm);
/* What pool_manager_synced waits for, for people (informer_waiting); "" once synced. */
void pool_manager_waiting(const pool_manager *pm, char *buf, size_t len);
/* Lets the controller write: until this is called (leader election won, or none configured) the
 * informers keep the cache warm but no pool is reconciled. Once leading, the only way back is to
 * stop the process: a leader that lost its lease must not write another byte. */
void pool_manager_lead(pool_manager *pm);
/* Stops taking new work; done runs (from the loop) once the reconciles in flight have finished and
 * the informers are stopped. */
void pool_manager_shutdown(pool_manager *pm, void (*done)(void *ud), void *ud);
void pool_manager_free(pool_manager *pm);

#endif

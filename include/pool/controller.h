/* controller: the ModelPool reconciler's runtime. Three informers (ModelPools, member
 * InferenceServices, their Pods) feed a work queue of pool keys; each key is reconciled by
 * snapshot -> plan -> actions (status patch, idle probes, scale patches, Events). Reconciles of
 * different pools run concurrently on the loop, up to max_concurrent at once. */
#ifndef MP_POOL_CONTROLLER_H
#define MP_POOL_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "loop/ev.h"
#include "metrics/metrics.h"

typedef struct pool_controller pool_controller;

typedef struct pool_controller_opts {
    const char *namespace_;  /* watch one namespace; NULL: all */
    const char *instance;    /* who we are, for Events (e.g. the Pod name); NULL: hostname */
    long probe_timeout_ms;   /* each idle probe request; 0: 2000 */
    unsigned max_concurrent; /* pools reconciled at once (never one pool twice); 0: 4 */
    uint64_t resync_ms;      /* backstop re-reconcile of every pool; 0: 300000 */
    uint64_t expect_ms;      /* how long to wait for the cache to show our own write; 0: 5000 */
    metrics *metrics;        /* where to record (pool/pool_metrics.h); NULL: nowhere. It must
                              * not be rendered after pool_controller_free. */
    /* Asked right before every write (status, scale, Event): false ends the reconcile without
     * sending (leader_may_write). NULL: always allowed. */
    bool (*may_write)(void *ud);
    void *may_write_ud;
} pool_controller_opts;

/* NULL when out of memory. loop and client must outlive the controller. */
pool_controller *pool_controller_new(ev_loop *loop, kube_client *client,
                                     const pool_controller_opts *opts);
/* Starts the informers; reconciling begins once all three caches are synced and the controller
 * leads (pool_controller_lead). 0 or -errno. */
int pool_controller_start(pool_controller *pc);
bool pool_controller_synced(const pool_controller *pc);
/* What pool_controller_synced waits for, for people (informer_waiting); "" once synced. */
void pool_controller_waiting(const pool_controller *pc, char *buf, size_t len);
/* Lets the controller write: until this is called (leader election won, or none configured) the
 * informers keep the cache warm but no pool is reconciled. Once leading, the only way back is to
 * stop the process: a leader that lost its lease must not write another byte. */
void pool_controller_lead(pool_controller *pc);
/* Stops taking new work; done runs (from the loop) once the reconciles in flight have finished. */
void pool_controller_shutdown(pool_controller *pc, void (*done)(void *ud), void *ud);
void pool_controller_free(pool_controller *pc);

#endif

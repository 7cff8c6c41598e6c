/* controller_internal: what the pool controller's files share (controller.c: its state, runs and
 * lifecycle; controller_plan.c: planning a pool; controller_fence.c: the drain fence's early end;
 * controller_act.c: carrying out a plan's actions). Private to src/pool: the controller's contract
 * is pool/controller.h. */
#ifndef MP_POOL_CONTROLLER_INTERNAL_H
#define MP_POOL_CONTROLLER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "informer/expect.h"
#include "log/log.h"
#include "pool/controller.h"
#include "pool/fence_ack.h"
#include "pool/plan.h"
#include "pool/prober.h"
#include "util/strmap.h"

/* Each attempt of a write ends within this: leadership is checked right before a write is sent,
 * and a write must not reach the API server long after, when the lease may have passed. 5 s is
 * the gap between the renew deadline (10 s) and the lease's expiry for the others (15 s). The
 * consistent reads made before some writes are bounded by it too. */
#define PC_WRITE_TIMEOUT_MS 5000

/* What the controller remembers of one pool between its reconciles, by pool key; dropped with the
 * pool, and when nothing is left in it. */
typedef struct pc_pool {
    strmap_node node;
    char *key;
    pool_controller *pc;
    /* The idle probe in flight for this pool. It holds no reconcile slot: a probe that hangs
     * until its timeout must not keep other pools waiting for one (rule 6); its answer queues the
     * pool again. */
    prober_batch *probing;
    uint64_t probe_sent_ms; /* when probing was sent (monotonic), for the drain fence */
    /* When this replica first saw the pool's pendingMember set (monotonic ms), 0 while it is not:
     * the drain fence counts from here, never from before the swap was written. */
    uint64_t swap_seen_ms;
    /* The early end of that swap's fence (controller_fence.c), forgotten with swap_seen_ms: when a
     * list of the router Leases confirmed that every router acknowledged it (monotonic ms, 0 not
     * yet) and for which resident; the Lease cache's generation the last list was sent at (0
     * none); whether its fence's end was counted, and whether a Lease holding it up was logged. */
    uint64_t acked_ms;
    char *acked_resident;
    uint64_t acks_listed_gen;
    bool fence_counted, fence_held_logged;
    /* A scale the API server refused (plan_refusal): member NULL when none. */
    char *refused_member;
    int32_t refused_replicas;
    char *refused_message;
    bool status_refused; /* status writes are refused: the episode's Warning Event is out */
    /* A member absent from the cache (#26): since when (monotonic ms, 0 none), and the pool's
     * resourceVersion at which a GET confirmed it absent (NULL none). */
    uint64_t absent_since_ms;
    char *absent_ok_rv;
} pc_pool;

/* Which write a run has in flight. */
typedef enum { PC_WRITE_STATUS, PC_WRITE_SCALE, PC_WRITE_REQUEST } pc_write;

/* One reconcile of one pool key, from hand-out to wq_done. */
typedef struct pc_run {
    struct pc_run *next; /* in pool_controller.runs */
    pool_controller *pc;
    char *key;
    char *ns, *name, *uid, *rv;
    plan_result *plan;
    size_t next_action;
    kube_call *call;
    uint64_t started_ms;
    bool requeue; /* queue the key again when done: a refusal was forgotten mid-run */
    /* The write in flight, for its answer: what kind, the object written (cache, key,
     * resourceVersion before) for the expectation, and for a scale its action. */
    pc_write writing;
    bool tested; /* a scale's JSON patch with test operations */
    const store *write_cache;
    char *write_key, *write_rv;
    const plan_action *scaling;
    /* the scale whose fresh read of the Pods allowed it: a start that found none live, or a stop
     * without an idle probe that found none running */
    const plan_action *slot_read;
    /* The list of the router Leases in flight (controller_fence.c): for the swap first seen at
     * fence_swap_ms, whose resident was fence_resident, sent at fence_sent_ms. */
    uint64_t fence_swap_ms, fence_sent_ms;
    char *fence_resident;
} pc_run;

struct pool_controller {
    pool_controller_config cfg;
    char *instance;
    wq *queue;
    prober *prober;
    expects *expects;
    strmap state; /* pc_pool by key */
    pc_run *runs;
    /* When this replica first saw each router Lease's version, and the generation of the Lease
     * cache (counts its changes from 1). */
    fence_seen *lease_seen;
    uint64_t lease_gen;
    void (*shutdown_done)(void *ud);
    void *shutdown_ud;
};

/* ---- controller.c ---- */

/* pool's memory; with create, made if missing (NULL: out of memory), else NULL when none. */
pc_pool *pc_pool_get(pool_controller *pc, const char *pool, bool create);
void pc_pool_drop(pool_controller *pc, const char *pool);
/* Frees st when it holds nothing any more. */
void pc_pool_trim(pool_controller *pc, pc_pool *st);
void pc_refusal_clear(pc_pool *st);
/* Remembers the refused scale of member to replicas, replacing an earlier one. */
void pc_refusal_set(pool_controller *pc, const char *pool, const char *member, int32_t replicas,
                    const char *message);

/* pc_finish's requeue_ms for a pool that is gone: no backstop reconcile (an event brings back a
 * pool created again under the name). */
#define PC_NO_REQUEUE UINT64_MAX

/* Ends run. On success the pool comes back after requeue_ms (0: the resync backstop), unless
 * PC_NO_REQUEUE. */
void pc_finish(pc_run *run, wq_result result, uint64_t requeue_ms);
/* Logs what failed and ends run with a failure (the key is retried with backoff). */
void pc_fail(pc_run *run, log_level level, const char *what, const kube_error *err);
/* A read run sent has answered: the call is over. Its pool as the cache has it now into *pool and
 * the pool's memory returned (either NULL when gone meanwhile). */
pc_pool *pc_run_answered(pc_run *run, const api_pool **pool);

/* ---- controller_plan.c ---- */

/* Plans run's pool from the caches (or finishes the run for a pool that is gone or whose own
 * write the cache does not show yet), then carries the plan out (pc_next). */
void pc_plan(pc_run *run);

/* ---- controller_fence.c ---- */

/* The swap's fence was first seen or is forgotten (st->swap_seen_ms set or cleared): what its
 * early end remembered of the swap before goes. */
void pc_fence_forget(pc_pool *st);
/* Whether the swap's fence was ended early for its resident resident: when (monotonic ms), else 0.
 */
uint64_t pc_fence_acked(const pc_pool *st, const char *resident);
/* The fence of st's swap away from a resident is over, early (every router acknowledged the swap)
 * or not: counted in modelpool_drain_fence_total once a swap. */
void pc_fence_ended(pool_controller *pc, pc_pool *st, bool acknowledged);
/* Before run plans pool: when its swap's fence is not over and the Lease cache shows every router
 * acknowledging the swap (or expired), sends one list of the router Leases (a quorum read) and
 * returns true: its answer records the early end if it confirms, then plans again (pc_plan).
 * false: nothing sent, plan now. */
bool pc_fence_confirm(pc_run *run, const api_pool *pool);
/* The pools whose swap waits on its fence (not ended early), queued again. */
void pc_fence_wake(pool_controller *pc);

/* ---- controller_act.c ---- */

/* Applies the plan's actions from run->next_action on; each write continues here from its
 * callback. Leadership is asked right before each write: the run ends if it was lost. */
void pc_next(pc_run *run);

#endif

/* prober: runs the idle probe (pool/probe.h) against every running Pod of one member at once,
 * over HTTP on the ev loop, and reports one verdict per Pod when the last answer is in. It keeps
 * the last verdict of each Pod (the memo, by Pod UID), which the next plans read. */
#ifndef MP_POOL_PROBER_H
#define MP_POOL_PROBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"
#include "pool/probe.h"

typedef struct prober prober;
typedef struct prober_batch prober_batch;

typedef struct prober_target {
    const char *pod; /* Pod name, echoed back */
    const char *ip;  /* status.podIP */
    int port;        /* where its server listens */
} prober_target;

typedef struct prober_verdict {
    const char *pod;
    probe_verdict verdict;
    const char *message;
} prober_verdict;

/* Runs once per batch, from the loop; results are borrowed for the call. */
typedef void (*prober_done_fn)(void *ud, const prober_verdict *results, size_t n);

/* timeout_ms bounds each request (connect included). NULL when out of memory. */
prober *prober_new(ev_loop *loop, long timeout_ms);
/* Cancels the batches in flight (their callbacks do not run) and frees the prober. */
void prober_free(prober *p);

/* Probes each target at http://ip:port<path for runtime>, with the target's own port. A runtime
 * with no probe yields PROBE_UNSUPPORTED for every Pod without a request. idle_endpoint is the
 * generic runtime's annotation (or NULL). NULL only when out of memory (done never runs). */
prober_batch *prober_start(prober *p, const char *runtime, const char *idle_endpoint,
                           const prober_target *targets, size_t n, prober_done_fn done, void *ud);
/* Cancels a batch in flight; its callback does not run. Not from inside its own callback. */
void prober_cancel(prober_batch *b);

/* The last verdict of a Pod. Its age is counted on the monotonic clock: a wall clock stepped
 * back or forth must not make a stale "idle" look fresh. */
typedef struct prober_memo {
    probe_verdict verdict;
    int64_t at_mono_ms; /* when its answer came (the caller's monotonic clock): its age */
    /* when the probe that found it was sent (same clock): the drain fence counts only probes
     * sent after it (plan_snapshot.drain_after_ms), whatever their answer took */
    int64_t sent_mono_ms;
    const char *message;
} prober_memo;

/* Whether the cache still has a Pod under pod_key ("namespace/name") with this uid. */
typedef bool (*prober_alive_fn)(void *ud, const char *pod_key, const char *uid);

/* How memos are swept: once they are 64, then each time their number doubles, those of Pods
 * alive says are gone are freed (a relist may skip the DELETED event that forgets one). Without
 * it nothing is swept. */
void prober_memo_alive(prober *p, prober_alive_fn alive, void *ud);
/* Remembers v for the Pod with this uid (under pod_key), found by a probe sent at sent_mono_ms
 * and answered at now_mono_ms, replacing its last one. 0 or -ENOMEM. */
int prober_memo_set(prober *p, const char *uid, const char *pod_key, probe_verdict v,
                    const char *message, int64_t sent_mono_ms, int64_t now_mono_ms);
/* The last verdict of the Pod with this uid, borrowed until the next memo call; NULL if none. */
const prober_memo *prober_memo_get(const prober *p, const char *uid);
/* Forgets the Pod with this uid (deleted, or replaced under its name). */
void prober_memo_forget(prober *p, const char *uid);
size_t prober_memo_count(const prober *p);

#endif

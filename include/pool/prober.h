/* prober: runs the idle probe (pool/probe.h) against every running Pod of one member at once,
 * over HTTP on the ev loop, and reports one verdict per Pod when the last answer is in. */
#ifndef MP_POOL_PROBER_H
#define MP_POOL_PROBER_H

#include <stddef.h>

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

#endif

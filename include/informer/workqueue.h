/* wq: a work queue of string keys for asynchronous processors, with client-go's guarantees: a key
 * queued many times before it is handed out is processed once, a key is never processed twice at
 * once, and a key queued while in flight is processed again after it is done. Failures come back
 * with per-key exponential backoff; everything runs from the event loop. */
#ifndef MP_INFORMER_WORKQUEUE_H
#define MP_INFORMER_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"

typedef struct wq wq;

typedef struct wq_config {
    unsigned concurrency;   /* keys in flight at once; 0 means 1 */
    uint64_t base_delay_ms; /* first backoff after a failure; 0 means 5 ms */
    uint64_t max_delay_ms;  /* backoff cap; 0 means 1000 s */
} wq_config;

typedef enum {
    WQ_SUCCESS, /* forget the key's failures */
    WQ_FAILURE, /* process the key again after its backoff, which then doubles */
} wq_result;

/* Hands a key out, from a loop timer (never inside wq_add). key stays valid until wq_done(key);
 * waited_ms is how long the key was queued before this hand-out (for a latency metric). The
 * processor must call wq_done exactly once, now or later. */
typedef void (*wq_process_fn)(wq *q, const char *key, uint64_t waited_ms, void *ud);
/* Runs once after wq_shutdown, when no key is in flight; it may free the queue. */
typedef void (*wq_drained_fn)(wq *q, void *ud);

typedef struct wq_stats {
    size_t depth;           /* keys ready to be handed out */
    size_t in_flight;       /* keys handed out and not done */
    size_t waiting;         /* keys waiting for a delay (wq_add_after, backoff) */
    uint64_t adds_total;    /* wq_add calls that queued a key not already queued */
    uint64_t retries_total; /* failures requeued with backoff */
} wq_stats;

/* cfg may be NULL (all defaults). NULL when out of memory. */
wq *wq_new(ev_loop *loop, const wq_config *cfg, wq_process_fn process, void *ud);
/* Frees the queue and forgets its timers. Keys still in flight must not be wq_done'd afterwards.
 * Not from inside the queue's own process callback. */
void wq_free(wq *q);

/* Queues key (copied). 0, -ENOMEM, or -ESHUTDOWN after wq_shutdown (the key is dropped). */
int wq_add(wq *q, const char *key);
/* Queues key after delay_ms (0: now). If the key already waits, the earlier deadline wins.
 * 0, -ENOMEM or -ESHUTDOWN. */
int wq_add_after(wq *q, const char *key, uint64_t delay_ms);
/* Ends the processing of a key handed out by the process callback. 0, -ENOENT (the key is not in
 * flight), or -ENOMEM (a failure could not be requeued). */
int wq_done(wq *q, const char *key, wq_result result);

/* The longest delay the key's next failure can wait: base * 2^failures, capped (the wait itself
 * is util_backoff_ms: jittered down to as little as half of it). */
uint64_t wq_backoff_ms(const wq *q, const char *key);
/* The same computation for a configuration (NULL: defaults) and a failure count. */
uint64_t wq_backoff_delay(const wq_config *cfg, unsigned failures);

size_t wq_len(const wq *q);
void wq_stats_get(const wq *q, wq_stats *out);

/* Stops handing keys out and drops waiting ones; later adds fail with -ESHUTDOWN. drained runs
 * when the last key in flight is done, inside that wq_done, or inside this call if none is. */
void wq_shutdown(wq *q, wq_drained_fn drained, void *ud);

#endif

/* leader: leader election on a coordination.k8s.io/v1 Lease, on the process's event loop, with
 * client-go's timing (15 s lease, 10 s renew deadline, 2 s retry). Only the leader may write; the
 * others keep their caches warm and try again every retry period. A leader that cannot renew for
 * the renew deadline is told it lost (before its lease can have expired for the others) and must
 * stop writing at once. On a clean shutdown the lease is released so a standby takes over without
 * waiting for it to expire. Nothing here knows about ModelPools. */
#ifndef MP_LEADER_LEADER_H
#define MP_LEADER_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "loop/ev.h"

typedef struct leader leader;

typedef struct leader_config {
    const char *namespace_;     /* the Lease's namespace */
    const char *name;           /* the Lease's name */
    const char *identity;       /* this process; unique per process (not reused on restart) */
    uint64_t lease_ms;          /* 0: 15000 */
    uint64_t renew_deadline_ms; /* 0: 10000; must be below lease_ms */
    uint64_t retry_ms;          /* 0: 2000; must be below renew_deadline_ms */
    uint64_t (*clock_ms)(void); /* monotonic ms; NULL: ev_now_ms (tests pass a fake) */
} leader_config;

typedef struct leader_callbacks {
    void (*started)(void *ud);               /* we hold the lease: start writing */
    void (*lost)(void *ud, const char *why); /* we no longer may write: stop now */
    void *ud;
} leader_callbacks;

/* NULL with the reason in err on bad timing or out of memory (start-up: an error buffer). Strings
 * are copied. */
leader *leader_new(ev_loop *loop, kube_client *client, const leader_config *cfg,
                   const leader_callbacks *cb, char *err, size_t errlen);
/* Starts trying to acquire (failures are retried, never returned). */
void leader_start(leader *l);
bool leader_is_leading(const leader *l);
/* True while we lead and the renew deadline, counted from the send of our last successful lease
 * write, has not passed on the monotonic clock: until then no other process can hold the lease.
 * Asked right before every write the caller makes, because the deadline timer that reports the
 * loss may run only after other callbacks of the same loop turn (answers already read, writes
 * they start). */
bool leader_may_write(const leader *l);
/* Why this process cannot take part in the election (it may not read, create or update the
 * Lease: RBAC, a namespace that does not exist), as one line; NULL when nothing is wrong. Set
 * from the first such answer until a lease request succeeds; logged once per episode at error. */
const char *leader_problem(const leader *l);
/* Stops competing; if we lead, writes the lease free. done runs once that is over (at once when
 * there is nothing to release), from the loop or inside this call. lost is not called after. */
void leader_release(leader *l, void (*done)(void *ud), void *ud);
void leader_free(leader *l);

#endif

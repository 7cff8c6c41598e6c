/* fence_ack: the operator's early end of the drain fence (api/fence.h, "Operator"), pure. Whether
 * the router Leases of a list let a swap's resident go before the fence F is over, and if not,
 * which Lease holds it up and why; and the table of when this replica first observed each Lease's
 * current resourceVersion, which a Lease's expiry counts from. No I/O and no clock here (times
 * are arguments, monotonic ms of this replica), so every case is a unit test (test_fence_ack). */
#ifndef MP_POOL_FENCE_ACK_H
#define MP_POOL_FENCE_ACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/records.h"

/* One router Lease and when this replica first observed it at its resourceVersion. */
typedef struct fence_ack_lease {
    const api_router_lease *lease;
    uint64_t seen_ms;
} fence_ack_lease;

typedef enum {
    FENCE_ACK_CONFIRMED = 0, /* every Lease acknowledges the swap or has expired */
    FENCE_ACK_UNACKED,       /* holder lacks the swap's entry and has not expired yet */
    FENCE_ACK_NO_EXPIRY,     /* holder lacks the entry and has no duration: it never expires */
    /* No router Lease (that counts for the pool's namespace): nothing says routers stopped (one
     * that registers elsewhere, a namespace set apart by mistake, or a router of a version that
     * does not register would be unseen), so the fence runs its course. */
    FENCE_ACK_NO_ROUTERS,
} fence_ack_result;

typedef struct fence_ack_verdict {
    fence_ack_result result;
    const api_router_lease *holder; /* the first Lease that holds the fence up; NULL if confirmed */
    uint64_t expires_ms;            /* FENCE_ACK_UNACKED: when holder counts as expired */
} fence_ack_verdict;

/* When lease, first observed at its resourceVersion at seen_ms, counts as expired: unchanged for
 * its duration D and the fence F (seen_ms + D * 1000 + fence_ms); 0 for a Lease without a
 * duration, which never expires. */
uint64_t fence_ack_expiry(const api_router_lease *lease, uint64_t seen_ms, long fence_ms);

/* The rule, over every router Lease of one list, for the swap of pool ns/pool whose resident is
 * resident (status.residentMember): each Lease that counts for ns (one without an
 * API_FRONTS_ANNOTATION, or whose names ns) holds the entry "ns/pool=resident" in its
 * API_FENCED_ANNOTATION, or has expired at now_ms (now_ms >= its fence_ack_expiry). No Lease that
 * counts does not confirm (FENCE_ACK_NO_ROUTERS). An empty or NULL resident is never acknowledged.
 */
fence_ack_verdict fence_ack_check(const fence_ack_lease *leases, size_t n, uint64_t now_ms,
                                  long fence_ms, const char *ns, const char *pool,
                                  const char *resident);

/* When this replica first observed each Lease at its current resourceVersion, by a key of the
 * caller's (the store key). */
typedef struct fence_seen fence_seen;

/* NULL when out of memory. */
fence_seen *fence_seen_new(void);
void fence_seen_free(fence_seen *t);
/* Lease key observed at version rv (NULL reads as "") at now_ms, from an informer event or a list
 * answer: *seen_ms is when this replica first observed it at rv. A version it did not hold for key
 * counts from now_ms and replaces the one held. 0, or -ENOMEM: not remembered, and *seen_ms is
 * now_ms (a later first observation only makes the Lease expire later: a caller may go on). */
int fence_seen_note(fence_seen *t, const char *key, const char *rv, uint64_t now_ms,
                    uint64_t *seen_ms);
/* The Lease is gone (deleted): its entry goes. */
void fence_seen_forget(fence_seen *t, const char *key);

#endif

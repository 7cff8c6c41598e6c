/* view: what the router knows of a pool and its members from its watch caches (the pool's status
 * and annotations, the members' InferenceServices and their ready Pods), read for the decision
 * (rt_hold) and for the words of its 503s. Reads records only: no I/O, no state. */
#ifndef MP_ROUTER_VIEW_H
#define MP_ROUTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/records.h"
#include "informer/store.h"
#include "router/hold.h"
#include "router/podcheck.h"

/* The pool's swapBudget in ms: its spec's, the default when unset or unparsable. */
uint64_t rt_view_budget_ms(const api_pool *o);

/* Why a REJECT, as the 503's message: for DEGRADED the pool's phase with the message of the
 * condition that says why (MembersValid when False, else SlotAllocated when False); for DROPPED the
 * dropped message (rt_view_dropped's); else the member's phase ("missing" when not cached). m: the
 * member as rt_view_member saw it. */
void rt_view_reject_message(const api_pool *o, const rt_hold_member *m, rt_hold_reject why,
                            const char *dropped, char *buf, size_t len);

/* The pool dropped its last request (Swapping False/RequestDropped): true, with why in buf (the
 * SwapDeferred message, which names the resident's probe error). */
bool rt_view_dropped(const api_pool *o, char *buf, size_t len);

/* The port a request goes to on pod: its own, else the runtime's of its member. 0: none. */
int rt_view_pod_port(const api_pod *pod, const api_isvc *isvc);

/* A member's ready Pods (Ready, running, not terminating, with an IP and a port), in name order
 * (so round-robin is stable across events); at most 64. */
typedef struct rt_view_targets {
    const api_isvc *isvc; /* NULL: not cached */
    const api_pod *pods[64];
    size_t n;
} rt_view_targets;
/* isvcs and pods: the caches (pods indexed by API_INDEX_SERVICE); refuted: the Pods a read has
 * refuted at their address (router/podcheck.h), not ready whatever the cache says; NULL: none. */
void rt_view_ready_pods(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                        const char *ns, const char *member, rt_view_targets *t);

/* Member name of pool o as the caches show it, for rt_hold: exists, absence_unsure (the member
 * cache, at isvcs_rv, has not caught up with the pool), phase, up and ready_pods; the queue's
 * fields are zero. */
rt_hold_member rt_view_member(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                              const char *isvcs_rv, const api_pool *o, const char *name);

/* Member is resident in the cache, with no swap (or one that has not begun to drain it) and a
 * ready Pod: a held request for it that runs out of its budget lacked only the drain fence's read
 * ("unconfirmed"), not a swap. */
bool rt_view_unconfirmed(const store *isvcs, const store *pods, const rt_podcheck *refuted,
                         const api_pool *o, const char *member);

#endif

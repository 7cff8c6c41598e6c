/* fence: the drain fence, the one rule the operator and the routers keep together so that a
 * request on its way to a resident never meets it unloaded. Both take the same --drain-fence F. */
#ifndef MP_API_FENCE_H
#define MP_API_FENCE_H

#include <stdbool.h>
#include <stddef.h>

/* The rule. Operator: a swap's resident is unloaded only on an idle probe sent at least F after
 * this replica first saw the swap (pendingMember set), or sooner once every router replica has
 * acknowledged the swap (below). Router: it stops forwarding to a resident once it sees
 * pendingMember, and forwards only on a read of the pool from the API server that was sent less
 * than F/2 ago and showed that member resident. So a request forwarded on such a read reaches the
 * Pod before the probe that could let it go. */

/* F when not configured (0). */
#define API_DRAIN_FENCE_DEFAULT_MS 2000
/* The smallest F accepted: the router's half of it must outlast a read of the pool. */
#define API_DRAIN_FENCE_MIN_MS 100

/* F in force for a configured value: the default when not set (0 or less). */
static inline long api_fence_ms(long configured_ms)
{
    return configured_ms > 0 ? configured_ms : API_DRAIN_FENCE_DEFAULT_MS;
}

/* The router's window: how long after sending a read of the pool it may forward on it. */
static inline long api_fence_window_ms(long fence_ms)
{
    return fence_ms / 2;
}

/* Acknowledged swaps: the fence ended early.
 *
 * Registration. Each router replica keeps a coordination.k8s.io/v1 Lease of its own, labelled
 * API_ROUTER_LEASE_LABEL, in the operator's namespace, with spec.leaseDurationSeconds D. Its
 * registration is valid until D after it sent its last write of that Lease that succeeded, by its
 * own monotonic clock; it forwards nothing to any member while its registration is not valid, and
 * a forward must be sending before the registration's end as before the fence window's. A read of
 * a pool counts for the fence only when sent after the registration in force began (the answer to
 * the first successful write after none was valid). Every write of the Lease carries the
 * resourceVersion it read last (a write that timed out can never land after a later one).
 *
 * Acknowledgement. The Lease's annotation API_FENCED_ANNOTATION lists entries "NS/POOL=MEMBER"
 * separated by one space. A replica writes an entry once its caches show the pool's swap with its
 * drain begun (pendingMember set, not api_status_awaits_probe) and MEMBER resident, it sends
 * nothing more to MEMBER of that pool, and every request it sent there has ended, one without an
 * answer's head at least F/2 ago (its bytes have arrived or are lost). An answer's head is not
 * enough: a runtime may send it before its busy gauge counts the request; one still streaming
 * keeps the idle probe busy anyway, so waiting for it costs the swap nothing. From the send of
 * that write until a later write without the entry has succeeded, it sends nothing to MEMBER of
 * that pool; after that, only on a fence read sent after that success.
 *
 * Operator. Once it has seen a swap's drain begun, it may send the resident's idle probe before F
 * is over when a list of the router Leases from the API server (a quorum read, sent after it saw
 * the drain begun) shows, for every Lease, either the entry for the pool and its resident, or a
 * Lease this replica has seen unchanged (same resourceVersion) for D + F on its own clock (D: that
 * Lease's own spec.leaseDurationSeconds; a Lease without one never counts as stopped; a version
 * first seen in the list counts from then, and a replica that starts or takes over counts from
 * its own first sight): that replica's registration has ended and its last forward has reached the
 * Pod. No Lease at all does not confirm (a router registered elsewhere by mistake would be unseen);
 * a router that forwards without registering at all breaks the argument: upgrade the routers
 * before the operator, or run it with --fence-acks=false meanwhile. A router that fronts the pools
 * of one namespace only (--namespace) names it in its Lease's annotation API_FRONTS_ANNOTATION:
 * that Lease counts only for swaps of that namespace's pools (its caches hold no other pool, so it
 * forwards to no other member); a Lease without it counts for every pool, and a swap no Lease
 * counts for waits F as with none. A pool with no resident has no
 * entry to acknowledge: its swap waits F. Both sides name the Leases' namespace with
 * --router-lease-namespace (the operator's namespace), and must agree, as on F.
 *
 * Why no request reaches a Pod being unloaded: a router whose Lease was in that list acked (it
 * sends nothing to the resident until a later write commits, after the list, and then forwards
 * only on a read sent after that, which shows the swap) or has stopped; a router whose Lease was
 * not in the list registered after it, so its fence reads were sent after the swap was written and
 * show it. Clocks: each side measures only its own intervals on a monotonic clock; the rates may
 * differ by less than F/2 over D + F, and a forward sending by the end of a window or a
 * registration reaches the Pod within F/2, as for the fence itself. Deleting a live router's Lease
 * by hand breaks the argument (as deleting a leader's Lease would): routers re-create theirs. */

/* The label that marks a router replica's Lease (any value). */
#define API_ROUTER_LEASE_LABEL "modelpool-operator.dev/router"
/* The Lease annotation of the swaps a router acknowledges. */
#define API_FENCED_ANNOTATION "modelpool-operator.dev/fenced"
/* The Lease annotation of the one namespace whose pools a router fronts (absent: every namespace).
 */
#define API_FRONTS_ANNOTATION "modelpool-operator.dev/fronts-namespace"
/* D: a router's registration, and how often it renews it. */
#define API_ROUTER_LEASE_S 10
#define API_ROUTER_RENEW_MS 2000

/* Whether fenced (an API_FENCED_ANNOTATION value, NULL none) holds entry ns/pool=member. */
bool api_fenced_has(const char *fenced, const char *ns, const char *pool, const char *member);

/* Calls fn for each entry of fenced with its namespace, pool and member (not NUL-terminated:
 * pointers into fenced with lengths); stops when fn returns false. Malformed entries are skipped.
 */
typedef bool (*api_fenced_fn)(void *ud, const char *ns, size_t ns_len, const char *pool,
                              size_t pool_len, const char *member, size_t member_len);
void api_fenced_each(const char *fenced, api_fenced_fn fn, void *ud);

#endif

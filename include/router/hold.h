/* hold: the router's decision core for one pool, pure. From what the watch caches say of the pool
 * and its members, the drain fence's last read of the pool, and the requests this router holds for
 * them, it decides which members' requests go to a Pod now, which wait (for a swap, a grace or the
 * fence's read), which are answered 503 at once and why, and which member the router asks the pool
 * for. No I/O and no clock of its own: the rules of activation, fairness and the fence live here
 * and are unit-tested as tables; the router applies the decision. */
#ifndef MP_ROUTER_HOLD_H
#define MP_ROUTER_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One member of the pool (spec order), as the caches and this router see it. */
typedef struct rt_hold_member {
    const char *name;
    bool exists; /* its InferenceService is cached */
    /* Not cached, but the cache has not caught up with the pool (a pool applied with its
     * members): it may be on its way, so its requests wait rather than hear it is missing. */
    bool absence_unsure;
    const char *phase;      /* the InferenceService's status.phase */
    bool up;                /* spec.replicas (its default applied) is at least 1 */
    size_t ready_pods;      /* Pods Ready, running, not terminating, with an IP and a port */
    size_t waiting;         /* requests this router holds for it */
    uint64_t first_wait_ms; /* when the oldest of them arrived (monotonic); when waiting > 0 */
    size_t in_flight;       /* requests this router is forwarding to it now */
} rt_hold_member;

typedef struct rt_hold_pool {
    const char *phase;     /* status.phase */
    const char *resident;  /* status.residentMember */
    const char *pending;   /* status.pendingMember */
    const char *requested; /* the request annotation, someone's request not yet taken */
    /* The swap (pending) waits for the resident's idle probe before its drain begins (Swapping
     * True/AwaitingProbe, api_status_awaits_probe): the resident serves all its requests meanwhile.
     */
    bool awaiting_probe;
    /* This router's own request write has not shown in the cache yet: ask nothing more. */
    bool request_unseen;
    /* The pool dropped its last request because the resident's idle probe could not decide
     * (Swapping False/RequestDropped): a swap away from it would wedge the same way, so other
     * members' requests are refused until the pool says otherwise. */
    bool dropped;
    /* The pool is Degraded by a fault that does not concern its resident (api_status_fault_spares):
     * the operator changes no replicas while Degraded, so the resident still serves (its Pods
     * ready, through the drain fence's read as always); every other member is refused. */
    bool degraded_spares_resident;
    const rt_hold_member *members;
    size_t n_members;
    /* How long a busy resident keeps the slot before another member whose requests wait is
     * asked for. Its new requests go on until the operator takes that request (an operator that
     * is down, or a swap that stalls, must not make them wait for nothing); once taken, the
     * swap's drain has begun and the resident is not served anyway. */
    uint64_t grace_ms;
    uint64_t now_ms; /* the clock of first_wait_ms */
    /* The drain fence (the router's half): a request goes to the resident only within
     * fence_window_ms (half the operator's fence) after a read of the pool from the API server,
     * sent at fence_read_ms, showed fence_member resident with no swap (NULL: no such read). */
    const char *fence_member;
    uint64_t fence_read_ms;
    uint64_t fence_window_ms;
    /* The pool's waiting annotation (API_WAITING_ANNOTATION, from another replica or this one):
     * the member whose clients waited longest on a router that could not ask for it, and since
     * when on this clock (NULL: none, or one too old to matter, past the swap budget). Its writer
     * clears it once none of those clients waits any more; until then, named by a swap's target
     * or by the resident, it stays, and a resident it names is not asked away from within the
     * grace after this router saw it become resident (resident_since_ms, 0 unknown), so the
     * replica that named it can send its clients there first. */
    const char *waiting_member;
    uint64_t waiting_since_ms;
    uint64_t resident_since_ms;
    /* The API server refuses the fence's read (401/403): no request can go, none is asked for. */
    bool fence_refused;
    /* This replica's registration (api/fence.h) is valid until then (0: not registered): nothing
     * goes to any member without it, and a forward must be sending before it ends. */
    uint64_t registered_until_ms;
    /* This replica's acknowledgement of a swap away from the resident may still stand in its
     * Lease: nothing goes to the resident, and no read is asked for it, until a write without it
     * has succeeded (the registry marks the pool then). */
    bool resident_blocked;
} rt_hold_pool;

typedef enum {
    RT_HOLD_WAIT = 0, /* hold its requests (new ones too) */
    RT_HOLD_SERVE,    /* forward its requests to its ready Pods */
    RT_HOLD_REJECT,   /* answer its held requests, and new ones, 503 now */
    /* Servable as the caches say, but no read of the pool young enough for the drain fence
     * confirms it: hold its requests until one does (fence_read). */
    RT_HOLD_FENCE,
} rt_hold_verdict;

/* Why a REJECT: the pool is Degraded (every member but a resident its fault spares), the member
 * cannot load (Failed, Suspended, or WaitingForGPU as the swap's target), the pool cannot swap away
 * from its resident, or the API server refuses the fence's read. */
typedef enum {
    RT_REJECT_NONE = 0,
    RT_REJECT_DEGRADED,
    RT_REJECT_MEMBER_PHASE,
    RT_REJECT_DROPPED,       /* not the resident, and the pool dropped its last request (dropped) */
    RT_REJECT_FENCE_REFUSED, /* fence_refused: every member */
} rt_hold_reject;

typedef struct rt_hold_decision {
    /* Member index to request through the pool, or -1: the member whose requests waited longest
     * and that cannot be served, once no swap is in flight and nobody else's request waits in the
     * annotation, and the resident is idle here or the grace is over. Never the resident while it
     * is up (it is starting: the pool would only clear such a request, and it would be asked
     * again and again). */
    ptrdiff_t activate;
    /* Member index to name in the pool's waiting annotation, or -1: this router's head, when a
     * swap in flight or another's request keeps it from asking, and no older waiter is named
     * there. The replica that asks next then asks for it if it waited longest (activate may be
     * such a member, with no waiter here). */
    ptrdiff_t advertise;
    /* Decide again at this time even without an event (a grace ends); 0 none. */
    uint64_t wake_at_ms;
    /* Read the pool for the drain fence now (unless a read is in flight or backs off): requests
     * wait for it (FENCE), or the read that lets them go is three quarters of its window old, so a
     * steady stream does not stop for the next one; and always while the read is refused, to see
     * the right granted. */
    bool fence_read;
    /* A forward to the serving member must be sending by this time (the fence window's end). */
    uint64_t send_by_ms;
} rt_hold_decision;

/* Fills verdicts[i] (and reasons[i]) for each of pool->n_members members and *out. Members
 * without waiters get a verdict too: the one a new request for them would get. */
void rt_hold_decide(const rt_hold_pool *pool, rt_hold_verdict *verdicts, rt_hold_reject *reasons,
                    rt_hold_decision *out);

/* The member this replica acknowledges in pool's swap (api/fence.h): the resident, once the
 * swap's drain has begun (pending set and not awaiting its probe) and nothing this replica sent to
 * the resident is outstanding (outstanding 0: every forward there has ended, and one that ended
 * without an answer's head did so half a fence ago); NULL otherwise. An answer's head is not
 * enough: a runtime's busy gauge may not count a request whose head it sent until its first
 * engine step. */
const char *rt_hold_ack(const char *resident, const char *pending, bool awaiting_probe,
                        size_t outstanding);

/* Reads a waiting annotation, "MEMBER@MS" (MS: Unix time in ms): the member into member (len
 * bytes) and MS into *since_unix_ms. False for anything else (then nothing is named). */
bool rt_hold_waiting_parse(const char *s, char *member, size_t len, uint64_t *since_unix_ms);

/* Retry-After for a request whose hold ran out, in whole seconds: what is left of this pool's
 * typical swap (estimate_ms, 0 when none was seen) since the swap began (swap_started_ms, 0 when
 * none is in flight), else a tenth of the budget, at most 30 s; never more than the budget (in
 * whole seconds, rounded down), and at least 1 (so over a budget under a second only). */
uint32_t rt_hold_retry_after_s(uint64_t estimate_ms, uint64_t swap_started_ms, uint64_t now_ms,
                               uint64_t budget_ms);

/* Whether the API server's answer code to a drain-fence read (a get of pool ns/pool) refuses the
 * router's rights (401: its credentials, 403: its role lacks get on modelpools), which no retry
 * mends: true with the reason, naming the missing right, written to buf (clients and /readyz get
 * it). Any other answer is not a refusal (false, buf untouched). */
bool rt_hold_fence_refused(long code, const char *ns, char *buf, size_t len);

#endif

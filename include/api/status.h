/* status: the ModelPool status both binaries read (the operator writes it, the router serves by
 * it): its types, the phases, and the condition types and reasons one side writes and the other
 * reads. The names are the API's (DESIGN.md "Status"); a change here is a change of the CRD. */
#ifndef MP_API_STATUS_H
#define MP_API_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* status.phase of a pool. */
#define API_PHASE_PENDING "Pending"
#define API_PHASE_READY "Ready"
#define API_PHASE_SWAPPING "Swapping"
#define API_PHASE_DEGRADED "Degraded"

/* Condition types, and the reasons read across the two binaries. */
#define API_COND_MEMBERS_VALID "MembersValid"
#define API_COND_SLOT_ALLOCATED "SlotAllocated"
#define API_COND_SWAP_DEFERRED "SwapDeferred"
#define API_COND_SWAPPING "Swapping"
#define API_COND_TARGET_READY "TargetReady"
/* Swapping False: the swap's request was dropped (swapBudget passed, the resident unprobeable). */
#define API_REASON_REQUEST_DROPPED "RequestDropped"
/* Swapping True: the swap's drain has not begun, its resident's idle probe cannot decide. */
#define API_REASON_AWAITING_PROBE "AwaitingProbe"

/* A Pod's status.phase. */
typedef enum {
    API_POD_PENDING = 0,
    API_POD_RUNNING,
    API_POD_SUCCEEDED, /* terminal: no longer holds the GPU */
    API_POD_FAILED,    /* terminal: no longer holds the GPU */
    API_POD_UNKNOWN,
} api_pod_phase;

/* metav1.Condition. Times are ms since the Unix epoch; the plan only ever stamps whole seconds,
 * which is what the API server keeps, so a written status reads back equal. */
typedef struct {
    char *type;
    char *status; /* "True", "False", "Unknown" */
    char *reason;
    char *message;
    int64_t last_transition_ms;
} api_condition;

typedef struct {
    char *name;
    char *phase; /* mirrors the member's status.phase; NULL when it has none or is missing */
    bool resident;
    /* The pool is bringing this member to 0 (a previous resident or target, a member up when the
     * pool first saw it, a request that lost to another): its replicas are not a request. Cleared
     * once the member is at 0; scaling it up after that is a request. */
    bool releasing;
} api_member_status;

/* ModelPool status. In a snapshot it is borrowed (so a plan's status can be fed back as is); in a
 * plan's result it is owned by the plan. */
typedef struct {
    char *phase; /* Pending | Ready | Swapping | Degraded */
    char *resident_member;
    char *pending_member;
    int64_t observed_generation;
    api_member_status *members;
    size_t n_members;
    api_condition *conditions;
    size_t n_conditions;
} api_status;

/* The condition of type in st; NULL when it has none. */
const api_condition *api_status_cond(const api_status *st, const char *type);

/* The swap's drain has not begun (#26): pendingMember is set and Swapping is True/AwaitingProbe,
 * because the resident's idle probe cannot decide (no probe for its runtime, or it fails) and the
 * pool does not opt into unloading it. The resident serves meanwhile: routers forward to it while a
 * read shows this, and the operator's drain fence counts from when it first sees the pool without
 * it. */
bool api_status_awaits_probe(const api_status *st);

/* The faults of a pool's spec as the operator writes them in MembersValid's message (rule 5),
 * printf formats, "; " between faults; api_status_fault_spares reads them back. In those marked
 * NAMED the first conversion is the member the fault is about. */
#define API_FAULT_NO_MEMBERS "spec.members is empty"
#define API_FAULT_EMPTY_NAME "spec.members[%zu] has an empty name"
#define API_FAULT_DUPLICATE /* NAMED */ "member %s is listed %zu times"
#define API_FAULT_DEFAULT /* NAMED */ "default %s is not in spec.members"
#define API_FAULT_BUDGET "swapBudget \"%s\" is not a positive duration such as 300s or 5m"
#define API_FAULT_UNLOAD_AFTER                                                                     \
    "annotation modelpool-operator.dev/unprobeable-unload-after \"%s\" is not a positive "         \
    "duration such as 10m"
#define API_FAULT_POLICY "swapPolicy %s is not supported (sticky is)"
#define API_FAULT_RESIDENT_REMOVED /* NAMED */                                                     \
    "residentMember %s was removed from spec.members (add it back, move the slot to another "      \
    "member, then remove it)"
#define API_FAULT_PENDING_REMOVED /* NAMED */                                                      \
    "pendingMember %s was removed from spec.members (add it back until the swap ends)"
#define API_FAULT_CLAIMED /* NAMED */ "member %s is also claimed by pool %s"
#define API_FAULT_MISSING /* NAMED */ "InferenceService %s not found in namespace %s"

/* A Degraded pool's fault spares member: the operator changes no replicas while Degraded, so a
 * router may serve a resident the fault is not about. True only when MembersValid is False (a spec
 * fault, written with the intent kept as it was) and every clause of its message (the faults, "; "
 * between them, as the operator's rule 5 writes them) is a fault of a known shape that names no
 * member or another member than this one. Any other Degraded (a swap's target that fails, with
 * SlotAllocated False), a message empty or with a clause of another shape (an older or newer
 * operator, a field value that holds "; ") concerns every member: false (fail closed). */
bool api_status_fault_spares(const api_status *st, const char *member);

#endif

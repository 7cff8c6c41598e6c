/* plan: the ModelPool reconciler's decision core. A pure function from a snapshot of one pool
 * (spec, status, members, their Pods, idle-probe results, the time) to an ordered plan of actions.
 * No I/O, no globals, no clock: the rules of DESIGN.md live here and are unit-tested as tables. */
#ifndef MP_POOL_PLAN_H
#define MP_POOL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/defaults.h"
#include "api/status.h"

/* A probe result justifies a scale-down for this long only: a member idle a minute ago may be busy
 * now. Older results are probed again; a busy or failed result is re-probed once it is this old. */
#define PLAN_PROBE_TTL_MS 2000

/* ---- Input: a snapshot the controller fills from its informer cache. Every pointer is
 * borrowed: the plan copies what it keeps. NULL and "" are the same (absent) for strings. ---- */

typedef enum {
    PLAN_PROBE_NONE = 0, /* not probed yet */
    PLAN_PROBE_IDLE,
    PLAN_PROBE_BUSY,
    PLAN_PROBE_ERROR,       /* probe_message says why */
    PLAN_PROBE_UNSUPPORTED, /* the prober had no way to ask this pod; probe_message says why */
} plan_probe_result;

typedef struct {
    const char *name;
    api_pod_phase phase;
    bool terminating;       /* metadata.deletionTimestamp is set (still holds the GPU) */
    bool container_running; /* some container is in state running */
    bool ready;             /* status.conditions has Ready=True */
    const char *waiting;    /* why it does not run, if its status says (ImagePullBackOff, ...) */
    const char *ip;         /* status.podIP */
    int32_t port;           /* the port its Pod spec names for the server container, 0 if none */
    /* The controller's last idle probe of this pod (key it by pod UID so a new pod starts over). */
    plan_probe_result probe;
    int64_t probed_at_ms;  /* when its answer came (its age); same clock as plan_snapshot.now_ms */
    int64_t probe_sent_ms; /* when that probe was sent (the drain fence); same clock */
    const char *probe_message;
} plan_pod;

/* One entry of spec.members, in declaration order, with what the cache knows about it. Duplicate
 * or empty names are passed as given: rejecting them is the plan's job. */
typedef struct {
    const char *name; /* inferenceServiceRef.name */
    bool exists;      /* the InferenceService exists in the pool's namespace */
    /* Not in the cache, but the cache may not have caught up with the pool yet (a pool applied
     * with its members): neither synced past the pool's resourceVersion nor confirmed absent by a
     * GET. The plan then decides nothing (no status write, no Event, no replica change). */
    bool absence_unconfirmed;
    int32_t replicas;          /* spec.replicas, or API_REPLICAS_UNSET */
    const char *phase;         /* status.phase */
    const char *runtime;       /* spec.runtime; absent means llamacpp */
    const char *idle_endpoint; /* annotation inference.llmkube.dev/idle-endpoint */
    int32_t endpoint_port;     /* spec.endpoint.port, 0 if unset */
    int32_t container_port;    /* spec.containerPort, 0 if unset */
    const char *claimed_by;    /* another ModelPool listing this member too, or NULL */
    const plan_pod *pods;      /* Pods labelled inference.llmkube.dev/service=<name> */
    size_t n_pods;
} plan_member;

/* A replica write the API server refused for a reason other than a failed precondition
 * (admission denial, RBAC, an invalid value), as the controller remembers it for this pool until a
 * later write of that member succeeds. member NULL: none. The plan reports it (SwapDeferred
 * True/WriteRefused naming the member and message, one Warning Event per episode) and keeps
 * planning the write, which the controller retries with backoff. */
typedef struct {
    const char *member;
    int32_t replicas;
    const char *message; /* the API server's message */
} plan_refusal;

typedef struct {
    const char *ns;
    const char *name;
    int64_t generation; /* metadata.generation */
    const plan_member *members;
    size_t n_members;
    /* Members the pool has recorded (status.members, residentMember, pendingMember) that
     * spec.members no longer lists, with what the cache knows of them (claimed_by unused): their
     * Pods hold the slot until gone, whatever the spec says now (rule 1), and one still up is
     * drained and brought to 0. */
    const plan_member *removed;
    size_t n_removed;
    const char *default_member; /* spec.default */
    const char *swap_budget;    /* spec.swapBudget, a Go duration; absent means 300s */
    const char *swap_policy;    /* spec.swapPolicy; absent means sticky */
    /* Annotation modelpool-operator.dev/unprobeable-unload-after, a Go duration: a swap whose
     * resident cannot be probed (no idle probe, or its probe fails) unloads it once the swap has
     * waited this long, instead of dropping the request after swapBudget. NULL: not set. */
    const char *unload_after;
    api_status status;    /* the pool's current status (zeroed if it has none) */
    plan_refusal refused; /* zeroed when no write was refused */
    /* A request through the pool (annotation modelpool-operator.dev/request): a member name,
     * taken as the newest request and then cleared; NULL when there is none. */
    const char *requested;
    /* A router's withdrawal (annotation modelpool-operator.dev/withdraw): a member name. The swap
     * to it is cancelled while nothing has been unloaded for it (the resident still up, the target
     * not started), then the annotation is cleared; NULL when there is none. */
    const char *withdrawn;
    /* The drain fence of a swap (pendingMember set; the rule is api/fence.h's): a member is
     * unloaded on an idle probe sent at or after this time only, same clock as now_ms; 0 when
     * there is none. */
    int64_t drain_after_ms;
    int64_t now_ms; /* wall clock, ms since the Unix epoch */
} plan_snapshot;

/* ---- Output: actions in the order the controller must apply them. It stops at the first that
 * fails and re-plans; the status write is always first, so intent is persisted before acting. */

typedef enum {
    PLAN_WRITE_STATUS,   /* write plan_result.status (PUT /status with resourceVersion) */
    PLAN_EVENT,          /* emit an Event on the pool */
    PLAN_PROBE,          /* probe these running pods of member, then re-plan */
    PLAN_SCALE,          /* set member's spec.replicas (scale subresource) */
    PLAN_CLEAR_REQUEST,  /* remove the request annotation if it still names member */
    PLAN_CLEAR_WITHDRAW, /* remove the withdraw annotation if it still names member */
} plan_action_kind;

/* What an EVENT action tells the controller besides the Event itself (its metrics and clocks). */
typedef enum {
    PLAN_FACT_NONE = 0,
    PLAN_FACT_SWAP_COMPLETED, /* a swap completed: plan_result.swap_ms */
    PLAN_FACT_SWAP_DEFERRED,  /* a swap waits on a member: plan_result.deferred_reason */
} plan_fact;

typedef struct {
    char *name;
    char *ip;
    int32_t port; /* where its server listens: the Pod spec's port, else plan_action.port */
} plan_probe_pod;

typedef struct {
    plan_action_kind kind;
    char *member;     /* PROBE, SCALE, CLEAR_REQUEST, CLEAR_WITHDRAW */
    int32_t replicas; /* SCALE; PROBE: what the member is brought to once found idle */
    /* PROBE: how to ask: runtime (normalized, e.g. "llamacpp"), the port to use, and for generic
     * the annotation's path; the prober knows each runtime's endpoint and metric. */
    char *runtime;
    int32_t port;
    char *idle_path;
    plan_probe_pod *pods;
    size_t n_pods;
    /* EVENT; reason also on SCALE: NoRunningPod or Idle (to 0), HeldBack (a starting target to 0,
     * unprobed), SlotFree (0 to 1), TooManyReplicas
     * (above 1 to 1) */
    bool warning; /* type Warning, else Normal */
    char *reason;
    char *message;
    plan_fact fact; /* EVENT */
} plan_action;

typedef struct {
    api_status status; /* the full desired status; written only if a PLAN_WRITE_STATUS is listed */
    plan_action *actions;
    size_t n_actions;
    int64_t requeue_after_ms; /* > 0: re-plan after this long even without an event */
    /* A swap this plan completes (PLAN_FACT_SWAP_COMPLETED): how long it took, since the Swapping
     * condition became True (so a swap begun before a restart is timed too); -1 unknown. */
    int64_t swap_ms;
    /* A swap deferred (PLAN_FACT_SWAP_DEFERRED): the condition's reason (PodsBusy, ...). */
    char *deferred_reason;
    /* A drain this plan holds back for the drain fence: when the fence ends (snapshot clock), 0
     * when none is held. The wait is by design, not part of the operator's reaction. */
    int64_t fenced_until_ms;
} plan_result;

/* Decides what to do for one pool. Returns 0 with *out set (free with plan_free), -EINVAL for a
 * NULL argument, -ENOMEM. Planning again on the same snapshot with the plan's status applied yields
 * no new status write and no event. */
int plan_build(const plan_snapshot *snap, plan_result **out);
void plan_free(plan_result *p);

/* The plan sets member to replicas, now (SCALE) or once its probe says idle (PROBE): whether a
 * write the controller saw refused is still wanted. */
bool plan_wants_scale(const plan_result *p, const char *member, int32_t replicas);

/* Field-by-field equality of two statuses (NULL and "" alike): the test for "status changed". */
bool plan_status_equal(const api_status *a, const api_status *b);

#endif

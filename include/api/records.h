/* records: the compact typed records both binaries' caches hold (a Pod, an InferenceService, a
 * ModelPool; and a router's Lease, which the operator reads), decoded once at the informer
 * boundary, with the store codecs and index functions that make them, and the patches both write
 * (the operator's status, scale and annotation clears; the router's request and withdrawal). This
 * module owns the JSON names of these kinds both ways; nothing else in either binary touches an
 * API object's JSON. */
#ifndef MP_API_RECORDS_H
#define MP_API_RECORDS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/defaults.h"
#include "api/fence.h"
#include "api/status.h"
#include "informer/store.h"

#define API_GROUP "inference.llmkube.dev"
#define API_VERSION "v1alpha1"
#define API_SERVICE_LABEL "inference.llmkube.dev/service"
#define API_IDLE_ANNOTATION "inference.llmkube.dev/idle-endpoint"
/* A request for a member through its pool (a router, or `kubectl annotate` by hand): the race-free
 * way to switch, since the member's replicas change only once the slot is free. */
#define API_REQUEST_ANNOTATION "modelpool-operator.dev/request"
/* A router's withdrawal of the swap its request started (its waiting clients all left): the
 * member, written with the pool's resourceVersion as a precondition while that router saw the swap
 * as its own; the operator cancels the swap if nothing was unloaded yet, and removes it. */
#define API_WITHDRAW_ANNOTATION "modelpool-operator.dev/withdraw"
/* Between router replicas only (the operator ignores it): "MEMBER@MS", the member whose clients
 * have waited longest on a router that could not ask for it (a swap in flight, or another request
 * first), and since when (Unix time, ms). A router about to ask for a member of its own asks for
 * this one instead when its clients waited longer, and does not ask away from it, once resident,
 * within its grace; the writer clears it once none of those clients waits. So the replica slower
 * to the API server, which loses every race to ask, still gets its turn. */
#define API_WAITING_ANNOTATION "modelpool-operator.dev/waiting"
/* On a ModelPool, a Go duration: a resident that cannot be probed is unloaded once a swap has
 * waited this long (an opt-in; without it the request is dropped after swapBudget). */
#define API_UNLOAD_AFTER_ANNOTATION "modelpool-operator.dev/unprobeable-unload-after"
/* For the router, on a member InferenceService: the model name its server answers to (a request's
 * model is rewritten to it), and other names clients may ask for it by (comma-separated). */
#define API_SERVED_ANNOTATION "modelpool-operator.dev/served-model"
#define API_ALIASES_ANNOTATION "modelpool-operator.dev/model-aliases"

/* Every record is one allocation: the struct, then its arrays, then its strings. A string field is
 * NULL when the object has no such string (a field of another type reads as absent); "" stays "".
 * name is never NULL (the store refuses an object without one). */

/* A Pod labelled with API_SERVICE_LABEL. */
typedef struct api_pod {
    const char *name, *ns, *uid, *rv;
    const char *member; /* the API_SERVICE_LABEL label */
    const char *ip;     /* status.podIP */
    int32_t port;       /* the port its spec names: the one named http, else the first; 0 none */
    api_pod_phase phase;
    bool running;     /* some container status is in state running */
    bool terminating; /* metadata.deletionTimestamp is set */
    bool ready;       /* status.conditions has Ready=True */
    /* Why it does not run, when its status says: a container's state.waiting.reason
     * (ImagePullBackOff, CrashLoopBackOff, ...), else the reason of a PodScheduled condition that
     * is False (Unschedulable); NULL otherwise. */
    const char *waiting;
} api_pod;

/* A member InferenceService. */
typedef struct api_isvc {
    const char *name, *ns, *uid, *rv;
    const char *phase;         /* status.phase */
    const char *runtime;       /* spec.runtime */
    const char *idle_endpoint; /* annotation API_IDLE_ANNOTATION */
    const char *served_model;  /* annotation API_SERVED_ANNOTATION */
    const char *aliases;       /* annotation API_ALIASES_ANNOTATION, as written */
    int32_t replicas;          /* spec.replicas (a number, cut to int32), or API_REPLICAS_UNSET */
    /* spec.replicas is a whole number in [0, INT32_MAX]: a patch may test it as its value. */
    bool replicas_exact;
    int32_t endpoint_port;  /* spec.endpoint.port, 0 if unset */
    int32_t container_port; /* spec.containerPort, 0 if unset */
} api_isvc;

/* A ModelPool: the spec, the status the plan reads (in the plan's own form, strings and arrays in
 * the record), and the request annotation. */
typedef struct api_pool {
    const char *name, *ns, *uid, *rv;
    int64_t generation;
    const char *default_member; /* spec.default */
    const char *swap_budget;    /* spec.swapBudget */
    const char *swap_policy;    /* spec.swapPolicy */
    const char *requested;      /* annotation API_REQUEST_ANNOTATION */
    const char *withdrawn;      /* annotation API_WITHDRAW_ANNOTATION */
    const char *waiting;        /* annotation API_WAITING_ANNOTATION, as written */
    const char *unload_after;   /* annotation API_UNLOAD_AFTER_ANNOTATION */
    /* spec.members[].inferenceServiceRef.name in order; an entry without one is NULL. */
    const char *const *members;
    size_t n_members;
    api_status status; /* zeroed without a status object; entries without a name are left out */
} api_pool;

/* A router replica's coordination.k8s.io/v1 Lease, labelled API_ROUTER_LEASE_LABEL: its
 * registration and the swaps it acknowledges (api/fence.h). */
#define API_LEASE_GROUP "coordination.k8s.io"
#define API_LEASE_VERSION "v1"
typedef struct api_router_lease {
    const char *name, *ns, *rv;
    /* spec.leaseDurationSeconds (cut to int32); 0 when absent, not a number, or not positive */
    int32_t duration_s;
    const char *fenced; /* annotation API_FENCED_ANNOTATION, as written */
    const char *fronts; /* annotation API_FRONTS_ANNOTATION: NULL, or the one namespace it fronts */
} api_router_lease;

/* The store codecs of the three caches, and of the operator's cache of router Leases. */
extern const store_codec api_pod_codec;
extern const store_codec api_isvc_codec;
extern const store_codec api_pool_codec;
extern const store_codec api_router_lease_codec;

/* Decoders, for tests and fuzzers: a record (free it with free()) or NULL with *err -ENOMEM, or
 * -EINVAL when obj is not an object with a metadata.name string. */
api_pod *api_pod_decode(const cJSON *obj, int *err);
api_isvc *api_isvc_decode(const cJSON *obj, int *err);
api_pool *api_pool_decode(const cJSON *obj, int *err);
api_router_lease *api_router_lease_decode(const cJSON *obj, int *err);

/* spec.replicas with its default applied: what the member then runs (1 when unset). */
int32_t api_isvc_replicas(const api_isvc *isvc);

/* Index names: Pods by "namespace/<service label>", pools by "namespace/<member name>". */
#define API_INDEX_SERVICE "service"
#define API_INDEX_MEMBER "member"
int api_index_pod_service(const void *pod, store_index_out *out, void *ud);
int api_index_pool_members(const void *pool, store_index_out *out, void *ud);
/* Pools by "namespace/<name>" of each member their status records (status.members, residentMember,
 * pendingMember) that their spec no longer lists: such a member's Pods hold the pool's slot until
 * they are gone, so their events concern the pool. */
#define API_INDEX_REMOVED "removed"
int api_index_pool_removed(const void *pool, store_index_out *out, void *ud);

/* The names api_index_pool_removed emits, each once, into names (room for API_REMOVED_MAX);
 * borrowed from the record. Returns how many. */
#define API_REMOVED_MAX(pool) ((pool)->status.n_members + 2)
size_t api_removed_names(const api_pool *pool, const char **names);

/* The body that sets isvc's spec.replicas to replicas, guarded so that it applies only if the
 * replicas are still what the operator last saw. When the record has a uid and an exact
 * spec.replicas, a JSON patch (*json_patch = true) that first tests both: only another object under
 * the name or a concurrent change of the replicas makes it fail (422 Invalid), not the member
 * controller's status writes, which would turn a resourceVersion precondition into a 409 on nearly
 * every request. Otherwise a merge patch with the record's resourceVersion as the precondition.
 * NULL when out of memory or the record has neither. */
char *api_scale_patch(const api_isvc *isvc, int32_t replicas, bool *json_patch);

/* The JSON merge patch that sets the whole status to s on the object at resource_version
 * (a precondition: the server answers 409 Conflict if the object has changed since). Fields that
 * s leaves empty are written as null so the patch removes them. NULL when out of memory. */
char *api_status_patch(const api_status *s, const char *resource_version);

/* RFC 3339 <-> ms since the epoch (UTC, whole seconds written; fractions read and dropped).
 * Parse returns 0 or -EINVAL. */
int api_time_parse(const char *s, int64_t *ms);
void api_time_format(int64_t ms, char out[32]);

/* The resourceVersion of an object the API server answered a write with; NULL if none. */
const char *api_answer_version(const cJSON *body);

/* The JSON patch that removes the pool's request annotation if it still names member (a test
 * operation first). NULL when out of memory. */
char *api_request_clear_patch(const char *member);
/* The merge patch that sets the pool's request annotation to member (the router's request), with
 * resource_version (if not NULL) as a precondition: a router whose cache is behind (another replica
 * asked for another member meanwhile) gets 409 rather than overwriting that request. NULL when out
 * of memory. */
char *api_request_set_patch(const char *member, const char *resource_version);
/* The merge patch that sets the pool's waiting annotation to value (NULL: removes it), with
 * resource_version as the precondition. NULL when out of memory. */
char *api_waiting_patch(const char *value, const char *resource_version);
/* The JSON patch that removes the pool's withdraw annotation if it still names member. NULL when
 * out of memory. */
char *api_withdraw_clear_patch(const char *member);
/* The merge patch that withdraws (the router's): with resource_version as the precondition, it
 * removes the request annotation (request false: the pool still shows it untaken) or sets the
 * withdraw annotation to member (the operator took it). NULL when out of memory. */
char *api_withdraw_patch(const char *member, bool untaken, const char *resource_version);

#endif

/* snapshot: fills the plan's input for one ModelPool from the informer caches (pools, member
 * InferenceServices, their Pods) and the controller's memory of idle probes. Reads only; the
 * index functions here are the ones the controller registers on those caches. */
#ifndef MP_POOL_SNAPSHOT_H
#define MP_POOL_SNAPSHOT_H

#include <cjson/cJSON.h>

#include "informer/store.h"
#include "pool/plan.h"

#define POOL_GROUP "inference.llmkube.dev"
#define POOL_VERSION "v1alpha1"
#define POOL_SERVICE_LABEL "inference.llmkube.dev/service"
#define POOL_IDLE_ANNOTATION "inference.llmkube.dev/idle-endpoint"
/* A request for a member through its pool (a router, or `kubectl annotate` by hand): the race-free
 * way to switch, since the member's replicas change only once the slot is free. */
#define POOL_REQUEST_ANNOTATION "modelpool-operator.dev/request"
#define POOL_REQUEST_ANNOTATION_POINTER "modelpool-operator.dev~1request" /* as a JSON pointer */

/* Index names: Pods by "namespace/<service label>", pools by "namespace/<member name>". */
#define POOL_INDEX_SERVICE "service"
#define POOL_INDEX_MEMBER "member"
int pool_index_pod_service(const cJSON *pod, store_index_out *out, void *ud);
int pool_index_pool_members(const cJSON *pool, store_index_out *out, void *ud);

/* Trim functions (store_trim_fn) for the controller's caches: each keeps exactly the fields this
 * module, the controller and pool/status.c read, and drops the rest (most of a Pod). Memory
 * follows what is cached; a field read anywhere in the pool module must be kept here. */
void pool_trim_pod(cJSON *pod, void *ud);
void pool_trim_isvc(cJSON *isvc, void *ud);
void pool_trim_pool(cJSON *pool, void *ud);

/* The controller's last idle probe of a Pod, looked up by the Pod's UID (a new Pod starts over).
 * Its age is counted on the monotonic clock: a wall clock stepped back or forth must not make a
 * stale "idle" look fresh. */
typedef struct pool_probe_memo {
    plan_probe_result result;
    int64_t at_mono_ms; /* when it was probed, on the clock of pool_snapshot_build's now_mono_ms */
    const char *message;
} pool_probe_memo;
typedef const pool_probe_memo *(*pool_probe_lookup_fn)(void *ud, const char *pod_uid);

typedef struct pool_sources {
    const store *pools; /* with the POOL_INDEX_MEMBER index */
    const store *isvcs;
    const store *pods; /* with the POOL_INDEX_SERVICE index */
    pool_probe_lookup_fn probe;
    void *probe_ud;
} pool_sources;

typedef struct pool_snapshot {
    plan_snapshot snap; /* what plan_build takes */
    plan_member *members;
    plan_pod **pods; /* one array per member */
    char **claims;   /* per member: the other pool claiming it, owned */
} pool_snapshot;

/* Fills out for pool at now_ms (wall clock, ms, what the plan stamps in conditions); now_mono_ms
 * is the same instant on the monotonic clock of the probe memos, whose times reach the plan as
 * now_ms minus their monotonic age. Strings are borrowed from the caches: use out before the
 * caches change, then pool_snapshot_release. 0 or -ENOMEM. */
int pool_snapshot_build(const cJSON *pool, const pool_sources *src, int64_t now_ms,
                        int64_t now_mono_ms, pool_snapshot *out);
void pool_snapshot_release(pool_snapshot *s);

#endif

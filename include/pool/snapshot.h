/* snapshot: fills the plan's input for one ModelPool from the informer caches' records (pools,
 * member InferenceServices, their Pods; api/records.h) and the controller's memory of idle
 * probes. Reads only. */
#ifndef MP_POOL_SNAPSHOT_H
#define MP_POOL_SNAPSHOT_H

#include "api/records.h"
#include "informer/store.h"
#include "pool/plan.h"
#include "pool/prober.h"

/* The last idle probe of a Pod, looked up by the Pod's UID (a new Pod starts over); NULL if none
 * (pool/prober.h keeps them). */
typedef const prober_memo *(*pool_probe_lookup_fn)(void *ud, const char *pod_uid);

typedef struct pool_sources {
    const store *pools; /* api_pool records, with the API_INDEX_MEMBER index */
    const store *isvcs; /* api_isvc records */
    const store *pods;  /* api_pod records, with the API_INDEX_SERVICE index */
    pool_probe_lookup_fn probe;
    void *probe_ud;
    /* The isvcs cache has caught up with the pool, or a GET confirmed what it lacks: a member it
     * lacks is missing. false: plan_member.absence_unconfirmed. */
    bool absence_confirmed;
} pool_sources;

typedef struct pool_snapshot {
    plan_snapshot snap;   /* what plan_build takes */
    plan_member *members; /* spec.members, then the removed ones (snap.removed) */
    size_t n_all;
    plan_pod **pods; /* one array per member */
    char **claims;   /* per member: the other pool claiming it, owned */
} pool_snapshot;

/* Fills out for pool at now_ms (wall clock, ms, what the plan stamps in conditions); now_mono_ms
 * is the same instant on the monotonic clock of the probe memos, whose times reach the plan as
 * now_ms minus their monotonic age. Strings are borrowed from the caches: use out before the
 * caches change, then pool_snapshot_release. 0 or -ENOMEM. */
int pool_snapshot_build(const api_pool *pool, const pool_sources *src, int64_t now_ms,
                        int64_t now_mono_ms, pool_snapshot *out);
void pool_snapshot_release(pool_snapshot *s);

#endif

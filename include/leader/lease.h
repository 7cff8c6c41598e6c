/* lease: the pure half of leader election on a coordination.k8s.io/v1 Lease, as client-go does it:
 * read the record, decide the next step from what we observed and when, and build the object to
 * write. No I/O and no clock here (times are arguments), so every rule is a unit test. */
#ifndef MP_LEADER_LEASE_H
#define MP_LEADER_LEASE_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* The fields of a Lease the election reads. Strings are borrowed from the cJSON object. */
typedef struct lease_record {
    const char *holder;           /* spec.holderIdentity; NULL or "" when free */
    int64_t duration_s;           /* spec.leaseDurationSeconds (0 when absent) */
    int64_t transitions;          /* spec.leaseTransitions */
    const char *acquire_time;     /* spec.acquireTime, as written */
    const char *resource_version; /* metadata.resourceVersion */
} lease_record;

/* Reads a Lease object. 0, or -EINVAL when it is not an object or has no resourceVersion. */
int lease_record_read(const cJSON *lease, lease_record *out);

typedef enum {
    LEASE_WAIT,   /* another holder's lease is still valid: try again later */
    LEASE_CREATE, /* no Lease exists: create it, holding it */
    LEASE_TAKE,   /* free or expired: write ourselves as the new holder */
    LEASE_RENEW,  /* ours: write a new renewTime */
} lease_step;

/* The next step for identity me. rec NULL means no Lease exists. The validity of another holder's
 * lease is judged on our clock, never on the times written in it (clocks differ between nodes):
 * it is valid until observed_ms + duration, where observed_ms is when we first saw the record as it
 * is now (any change of resourceVersion restarts that), on the same monotonic clock as now_ms. */
lease_step lease_decide(const lease_record *rec, const char *me, int64_t observed_ms,
                        int64_t now_ms);

/* The Lease to write, as JSON (malloc'd; NULL when out of memory). rv is the resourceVersion
 * precondition (NULL to create). holder "" releases the lease. Times are RFC 3339 MicroTime. */
typedef struct lease_spec {
    const char *holder;
    int64_t duration_s;
    int64_t transitions;
    const char *acquire_time;
    const char *renew_time;
} lease_spec;
char *lease_body(const char *ns, const char *name, const char *rv, const lease_spec *spec);

/* Formats wall-clock microseconds since the epoch as MicroTime, "2006-01-02T15:04:05.000000Z". */
void lease_time_format(int64_t wall_us, char out[32]);

#endif

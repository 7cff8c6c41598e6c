/* status: ModelPool status between its JSON form (the API object) and plan_status (the plan's
 * form), and the RFC 3339 times conditions carry. Pure conversions, no I/O. */
#ifndef MP_POOL_STATUS_H
#define MP_POOL_STATUS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "pool/plan.h"

/* Reads obj's "status" into out. Strings are borrowed from obj (out must not outlive it); the
 * members and conditions arrays are malloc'd: free them with pool_status_release. Fields of the
 * wrong type are ignored, as a missing status is: the plan then rewrites them. 0 or -ENOMEM. */
int pool_status_read(const cJSON *obj, plan_status *out);
void pool_status_release(plan_status *s);

/* The JSON merge patch that sets the whole status to s on the object at resource_version
 * (a precondition: the server answers 409 Conflict if the object has changed since). Fields that
 * s leaves empty are written as null so the patch removes them. NULL when out of memory. */
char *pool_status_patch(const plan_status *s, const char *resource_version);

/* RFC 3339 <-> ms since the epoch (UTC, whole seconds written; fractions read and dropped).
 * Parse returns 0 or -1. */
int pool_time_parse(const char *s, int64_t *ms);
void pool_time_format(int64_t ms, char out[32]);

#endif

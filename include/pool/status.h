/* status: plan_status (the plan's form of a ModelPool status) to the merge patch that writes it,
 * and the RFC 3339 times conditions carry (pool/records.h decodes the status). Pure, no I/O. */
#ifndef MP_POOL_STATUS_H
#define MP_POOL_STATUS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "pool/plan.h"

/* The JSON merge patch that sets the whole status to s on the object at resource_version
 * (a precondition: the server answers 409 Conflict if the object has changed since). Fields that
 * s leaves empty are written as null so the patch removes them. NULL when out of memory. */
char *pool_status_patch(const plan_status *s, const char *resource_version);

/* RFC 3339 <-> ms since the epoch (UTC, whole seconds written; fractions read and dropped).
 * Parse returns 0 or -1. */
int pool_time_parse(const char *s, int64_t *ms);
void pool_time_format(int64_t ms, char out[32]);

#endif

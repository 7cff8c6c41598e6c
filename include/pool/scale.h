/* scale: the PATCH that sets a member's spec.replicas, guarded so that it applies only if the
 * replicas are still what the operator last saw. Pure: builds the body from the cached object. */
#ifndef MP_POOL_SCALE_H
#define MP_POOL_SCALE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* The body for isvc (as cached) with spec.replicas set to replicas. When the cached object has a
 * uid and a spec.replicas, a JSON patch (*json_patch = true) that first tests both: only another
 * object under the name or a concurrent change of the replicas makes it fail (422 Invalid), not
 * the member controller's status writes, which would turn a resourceVersion precondition into a
 * 409 on nearly every request. Otherwise a merge patch with the object's resourceVersion as the
 * precondition. NULL when out of memory or the object has neither. */
char *pool_scale_patch(const cJSON *isvc, int32_t replicas, bool *json_patch);

#endif

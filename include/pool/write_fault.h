/* write_fault: what a failed API write of the controller means for the pool. A failed precondition
 * is routine (the world moved since the plan: plan again from a fresher cache); a refusal on the
 * write's merits (admission, RBAC, an invalid value) will not go away by sending it again and must
 * be reported; anything else is a passing fault the backoff retries. Pure. */
#ifndef MP_POOL_WRITE_FAULT_H
#define MP_POOL_WRITE_FAULT_H

#include <stdbool.h>

#include "kube/error.h"

typedef enum {
    POOL_WRITE_PRECONDITION, /* 409 Conflict, or a scale's JSON patch test failed */
    POOL_WRITE_REFUSED,      /* admission denial, RBAC 403, invalid value (400, 403, 422, ...) */
    POOL_WRITE_TRANSIENT,    /* no answer, 401, 404, 408, 429, 5xx */
} pool_write_fault;

/* The API server's whole message for a JSON patch that does not apply, a failed "test" operation
 * included (apiserver's patcher answers NewGenericServerResponse(422): the reason Invalid, this
 * message, and no details at all). A validation or admission 422 names the object instead. */
#define POOL_PATCH_NOT_APPLIED_MESSAGE                                                             \
    "the server rejected our request due to an error in our request"

/* err is a failed write's error (kind != KUBE_OK); json_patch_test: the write was a JSON patch
 * with test operations (its 422 "not applied" is then a failed precondition). */
pool_write_fault pool_write_fault_of(const kube_error *err, bool json_patch_test);

#endif

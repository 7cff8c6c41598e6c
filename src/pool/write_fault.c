/* write_fault: the HTTP code decides, except for 422, which both a failed JSON patch test and a
 * refusal (validation, ValidatingAdmissionPolicy) answer with reason Invalid: only the message
 * tells them apart (seen against kube-apiserver v1.34: a failed test reads exactly
 * POOL_PATCH_NOT_APPLIED_MESSAGE; a denial names the object and the policy). */
#include "pool/write_fault.h"

#include <string.h>

pool_write_fault pool_write_fault_of(const kube_error *err, bool json_patch_test)
{
    if (err->kind != KUBE_ERR_HTTP)
        return POOL_WRITE_TRANSIENT;
    long code = err->http_code;
    if (code == 409)
        return POOL_WRITE_PRECONDITION;
    if (code == 422 && json_patch_test && err->message &&
        strcmp(err->message, POOL_PATCH_NOT_APPLIED_MESSAGE) == 0)
        return POOL_WRITE_PRECONDITION;
    /* 401: a token that expired (it is re-read); 404: the object is gone, which the next plan
     * sees; 408 and 429: the server asks us to come back. */
    if (code >= 400 && code < 500 && code != 401 && code != 404 && code != 408 && code != 429)
        return POOL_WRITE_REFUSED;
    return POOL_WRITE_TRANSIENT;
}

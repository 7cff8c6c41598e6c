/* Tests of how a failed write is classified: the answers are the ones kube-apiserver v1.34 gave
 * (a failed JSON patch test, a ValidatingAdmissionPolicy denial, a schema violation, RBAC). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "pool/write_fault.h"

static pool_write_fault fault_of(long code, const char *status_json, bool tested)
{
    kube_error err = {0};
    kube_error_from_http(&err, code, status_json, strlen(status_json));
    pool_write_fault f = pool_write_fault_of(&err, tested);
    kube_error_clear(&err);
    return f;
}

static const char failed_test[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
    "\"the server rejected our request due to an error in our request\",\"reason\":\"Invalid\","
    "\"details\":{},\"code\":422}";
static const char vap_denied[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
    "\"inferenceservices.inference.llmkube.dev \\\"llama-8b\\\" is forbidden: "
    "ValidatingAdmissionPolicy 'no-scale' with binding 'no-scale' denied request: replicas 5 is "
    "not allowed here\",\"reason\":\"Invalid\",\"details\":{\"name\":\"llama-8b\"},\"code\":422}";
static const char schema_invalid[] =
    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"InferenceService.inference.llmkube."
    "dev \\\"llama-8b\\\" is invalid: spec.replicas: Invalid value: -3\",\"reason\":\"Invalid\","
    "\"code\":422}";
static const char forbidden[] =
    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"inferenceservices.inference."
    "llmkube.dev \\\"a\\\" is forbidden: User \\\"x\\\" cannot patch resource\",\"reason\":"
    "\"Forbidden\",\"code\":403}";
static const char conflict[] = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"the "
                               "object has been modified\",\"reason\":\"Conflict\",\"code\":409}";

static void test_preconditions(void **state)
{
    (void)state;
    assert_int_equal(fault_of(409, conflict, false), POOL_WRITE_PRECONDITION);
    assert_int_equal(fault_of(409, conflict, true), POOL_WRITE_PRECONDITION);
    assert_int_equal(fault_of(422, failed_test, true), POOL_WRITE_PRECONDITION);
}

static void test_refusals(void **state)
{
    (void)state;
    /* The same 422 from a write without test operations is not a precondition of ours. */
    assert_int_equal(fault_of(422, failed_test, false), POOL_WRITE_REFUSED);
    assert_int_equal(fault_of(422, vap_denied, true), POOL_WRITE_REFUSED);
    assert_int_equal(fault_of(422, schema_invalid, true), POOL_WRITE_REFUSED);
    assert_int_equal(fault_of(403, forbidden, true), POOL_WRITE_REFUSED);
    assert_int_equal(fault_of(400, "admission webhook denied the request", false),
                     POOL_WRITE_REFUSED);
}

static void test_transient(void **state)
{
    (void)state;
    assert_int_equal(fault_of(500, "oops", true), POOL_WRITE_TRANSIENT);
    assert_int_equal(fault_of(503, "", false), POOL_WRITE_TRANSIENT);
    assert_int_equal(fault_of(429, "", false), POOL_WRITE_TRANSIENT);
    assert_int_equal(fault_of(404, "", true), POOL_WRITE_TRANSIENT);
    assert_int_equal(fault_of(401, "", false), POOL_WRITE_TRANSIENT);
    kube_error err = {0};
    kube_error_set(&err, KUBE_ERR_TRANSPORT, "connection reset");
    assert_int_equal(pool_write_fault_of(&err, true), POOL_WRITE_TRANSIENT);
    kube_error_clear(&err);
}

TEST_MAIN(cmocka_unit_test(test_preconditions), cmocka_unit_test(test_refusals),
          cmocka_unit_test(test_transient))

/* Tests of the pure leader-election rules: reading a Lease, deciding the next step from what was
 * observed and when, and the Lease object written for each step. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "leader/lease.h"

static cJSON *lease_json(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    return o;
}

static void test_record_read(void **state)
{
    (void)state;
    cJSON *o = lease_json("{\"metadata\":{\"resourceVersion\":\"42\"},\"spec\":{\"holderIdentity\":"
                          "\"a_1\",\"leaseDurationSeconds\":15,\"leaseTransitions\":3,"
                          "\"acquireTime\":\"2026-12-02T21:00:00.000000Z\"}}");
    lease_record r;
    assert_int_equal(lease_record_read(o, &r), 0);
    assert_string_equal(r.resource_version, "42");
    assert_string_equal(r.holder, "a_1");
    assert_int_equal(r.duration_s, 15);
    assert_int_equal(r.transitions, 3);
    assert_string_equal(r.acquire_time, "2026-12-02T21:00:00.000000Z");
    cJSON_Delete(o);

    /* A fresh Lease with an empty spec is free. */
    o = lease_json("{\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{}}");
    assert_int_equal(lease_record_read(o, &r), 0);
    assert_null(r.holder);
    assert_int_equal(r.duration_s, 0);
    assert_int_equal(lease_decide(&r, "me", 0, 0), LEASE_TAKE);
    cJSON_Delete(o);

    /* Not a Lease: no resourceVersion, or not an object. */
    o = lease_json("{\"spec\":{\"holderIdentity\":\"a\"}}");
    assert_int_equal(lease_record_read(o, &r), -EINVAL);
    cJSON_Delete(o);
    o = lease_json("[1]");
    assert_int_equal(lease_record_read(o, &r), -EINVAL);
    cJSON_Delete(o);
    assert_int_equal(lease_record_read(NULL, &r), -EINVAL);
}

static void test_decide(void **state)
{
    (void)state;
    assert_int_equal(lease_decide(NULL, "me", 0, 0), LEASE_CREATE);

    lease_record r = {.holder = "other", .duration_s = 15, .resource_version = "7"};
    /* Another holder is trusted for the whole duration from when we saw the record change... */
    assert_int_equal(lease_decide(&r, "me", 1000, 1000), LEASE_WAIT);
    assert_int_equal(lease_decide(&r, "me", 1000, 15999), LEASE_WAIT);
    /* ...and taken over once it has not moved for that long. */
    assert_int_equal(lease_decide(&r, "me", 1000, 16000), LEASE_TAKE);
    assert_int_equal(lease_decide(&r, "me", 1000, 99000), LEASE_TAKE);

    /* Our own record is renewed whatever its age; a free one is taken at once. */
    r.holder = "me";
    assert_int_equal(lease_decide(&r, "me", 1000, 1000), LEASE_RENEW);
    assert_int_equal(lease_decide(&r, "me", 1000, 99000), LEASE_RENEW);
    r.holder = "";
    assert_int_equal(lease_decide(&r, "me", 1000, 1000), LEASE_TAKE);
    r.holder = NULL;
    assert_int_equal(lease_decide(&r, "me", 1000, 1000), LEASE_TAKE);

    /* A released lease (duration 1 s, holder kept by an older client) expires after 1 s. */
    r.holder = "other";
    r.duration_s = 1;
    assert_int_equal(lease_decide(&r, "me", 1000, 1999), LEASE_WAIT);
    assert_int_equal(lease_decide(&r, "me", 1000, 2000), LEASE_TAKE);

    /* An identity that merely starts like ours is someone else. */
    r.holder = "me_2";
    r.duration_s = 15;
    assert_int_equal(lease_decide(&r, "me", 0, 1), LEASE_WAIT);
}

static void test_body(void **state)
{
    (void)state;
    lease_spec sp = {.holder = "pod-a_1f",
                     .duration_s = 15,
                     .transitions = 2,
                     .acquire_time = "2026-12-02T21:00:00.000001Z",
                     .renew_time = "2026-12-02T21:00:02.500000Z"};
    char *s = lease_body("modelpool-system", "modelpool-operator", "99", &sp);
    assert_non_null(s);
    assert_string_equal(
        s, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
           "\"modelpool-operator\",\"namespace\":\"modelpool-system\",\"resourceVersion\":\"99\"},"
           "\"spec\":{\"holderIdentity\":\"pod-a_1f\",\"leaseDurationSeconds\":15,"
           "\"leaseTransitions\":2,\"acquireTime\":\"2026-12-02T21:00:00.000001Z\","
           "\"renewTime\":\"2026-12-02T21:00:02.500000Z\"}}");
    free(s);

    /* Create: no resourceVersion precondition. Release: empty holder. */
    sp = (lease_spec){.holder = "", .duration_s = 1};
    s = lease_body("ns", "n", NULL, &sp);
    assert_non_null(s);
    assert_string_equal(s, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                           "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\"},\"spec\":{"
                           "\"holderIdentity\":\"\",\"leaseDurationSeconds\":1,"
                           "\"leaseTransitions\":0}}");
    free(s);
}

static void test_time_format(void **state)
{
    (void)state;
    char out[32];
    lease_time_format(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000000Z");
    lease_time_format(1796245200123456LL, out);
    assert_string_equal(out, "2026-12-02T21:00:00.123456Z");
    lease_time_format(1796245200000001LL, out);
    assert_string_equal(out, "2026-12-02T21:00:00.000001Z");
}

TEST_MAIN(cmocka_unit_test(test_record_read), cmocka_unit_test(test_decide),
          cmocka_unit_test(test_body), cmocka_unit_test(test_time_format))

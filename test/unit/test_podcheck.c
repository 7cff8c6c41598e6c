/* Unit tests for rt_podcheck_judge: what a read of a member Pod says of the cached one at its
 * address (router/podcheck.h), and for the refuted set's memory against the cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "router/podcheck.h"

static api_pod t_pod(const char *uid, const char *ip)
{
    return (api_pod){.name = "m-a-x",
                     .ns = "ns",
                     .uid = uid,
                     .ip = ip,
                     .phase = API_POD_RUNNING,
                     .running = true,
                     .ready = true};
}

static void test_judge(void **state)
{
    (void)state;
    const char *why = NULL;
    api_pod same = t_pod("u1", "10.0.0.7");
    assert_int_equal(rt_podcheck_judge(200, &same, "u1", "10.0.0.7", &why), RT_POD_SAME);
    assert_null(why);
    /* Not ready (a restarting container) is still the Pod at its address: the forward may fail,
     * it cannot reach another Pod. */
    api_pod unready = same;
    unready.ready = unready.running = false;
    assert_int_equal(rt_podcheck_judge(200, &unready, "u1", "10.0.0.7", &why), RT_POD_SAME);

    struct {
        long code;
        const api_pod *read;
        rt_pod_verdict want;
    } rows[] = {
        {404, NULL, RT_POD_GONE},    {200, NULL, RT_POD_UNKNOWN}, /* an answer that is not a Pod */
        {0, NULL, RT_POD_UNKNOWN},                                /* no answer */
        {403, NULL, RT_POD_UNKNOWN}, {500, NULL, RT_POD_UNKNOWN}, {429, NULL, RT_POD_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        why = NULL;
        assert_int_equal(rt_podcheck_judge(rows[i].code, rows[i].read, "u1", "10.0.0.7", &why),
                         rows[i].want);
        assert_non_null(why);
    }
    /* A read of a Pod that no longer is the cached one at that address. */
    api_pod other_uid = t_pod("u2", "10.0.0.7");
    api_pod terminating = t_pod("u1", "10.0.0.7");
    terminating.terminating = true;
    api_pod failed = t_pod("u1", "10.0.0.7");
    failed.phase = API_POD_FAILED;
    api_pod succeeded = t_pod("u1", "10.0.0.7");
    succeeded.phase = API_POD_SUCCEEDED;
    api_pod moved = t_pod("u1", "10.0.0.9");
    api_pod no_ip = t_pod("u1", NULL);
    api_pod no_uid = t_pod(NULL, "10.0.0.7");
    const api_pod *gone[] = {&other_uid, &terminating, &failed, &succeeded,
                             &moved,     &no_ip,       &no_uid};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        why = NULL;
        assert_int_equal(rt_podcheck_judge(200, gone[i], "u1", "10.0.0.7", &why), RT_POD_GONE);
        assert_non_null(why);
    }
    /* A cached Pod without a UID or address is never confirmed. */
    assert_int_equal(rt_podcheck_judge(200, &same, NULL, "10.0.0.7", &why), RT_POD_GONE);
    assert_int_equal(rt_podcheck_judge(200, &same, "u1", NULL, &why), RT_POD_GONE);
}

static void test_podref(void **state)
{
    (void)state;
    rt_podref r = {0};
    api_pod p = t_pod("u1", "10.0.0.7");
    assert_int_equal(rt_podref_set(&r, &p), 0);
    assert_string_equal(r.ns, "ns");
    assert_string_equal(r.name, "m-a-x");
    assert_string_equal(r.uid, "u1");
    assert_string_equal(r.ip, "10.0.0.7");
    api_pod q = t_pod("u2", "10.0.0.8");
    assert_int_equal(rt_podref_set(&r, &q), 0); /* the old copies are freed */
    assert_string_equal(r.uid, "u2");
    rt_podref_clear(&r);
    assert_null(r.name);
    rt_podref_clear(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_podref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

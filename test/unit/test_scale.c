/* Tests of the member scale PATCH: a JSON patch testing uid and replicas when the cache has both,
 * else a merge patch guarded by the resourceVersion, and nothing for an object with neither. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "api/records.h"

static char *patch_of(const char *isvc_json, int32_t replicas, bool *json_patch)
{
    cJSON *obj = cJSON_Parse(isvc_json);
    assert_non_null(obj);
    /* The cases leave the name out; the cache never holds an object without one. */
    cJSON *meta = cJSON_GetObjectItem(obj, "metadata");
    if (!cJSON_GetObjectItem(meta, "name"))
        cJSON_AddStringToObject(meta, "name", "m");
    int err = 0;
    api_isvc *isvc = api_isvc_decode(obj, &err);
    cJSON_Delete(obj);
    assert_non_null(isvc);
    char *body = api_scale_patch(isvc, replicas, json_patch);
    free(isvc);
    return body;
}

static void test_json_patch_tests_uid_and_replicas(void **state)
{
    (void)state;
    bool jp = false;
    char *b = patch_of("{\"metadata\":{\"uid\":\"u-1\",\"resourceVersion\":\"7\"},"
                       "\"spec\":{\"replicas\":1},\"status\":{\"phase\":\"Ready\"}}",
                       0, &jp);
    assert_true(jp);
    assert_string_equal(b, "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"u-1\"},"
                           "{\"op\":\"test\",\"path\":\"/spec/replicas\",\"value\":1},"
                           "{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":0}]");
    free(b);
}

static void test_merge_patch_without_replicas_or_uid(void **state)
{
    (void)state;
    static const char *const cases[] = {
        /* replicas absent (the member runs 1): a JSON patch cannot test for absence */
        "{\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"4\\\"2\"},\"spec\":{}}",
        /* no uid in the cache */
        "{\"metadata\":{\"resourceVersion\":\"4\\\"2\"},\"spec\":{\"replicas\":0}}",
        /* replicas not a whole number: not trusted as a test value */
        "{\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"4\\\"2\"},\"spec\":{\"replicas\":0.5}}",
        "{\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"4\\\"2\"},\"spec\":{\"replicas\":-1}}",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool jp = true;
        char *b = patch_of(cases[i], 1, &jp);
        assert_false(jp);
        /* The resourceVersion is escaped as a JSON string. */
        assert_string_equal(b, "{\"metadata\":{\"resourceVersion\":\"4\\\"2\"},"
                               "\"spec\":{\"replicas\":1}}");
        free(b);
    }
}

static void test_nothing_to_guard_with(void **state)
{
    (void)state;
    bool jp;
    assert_null(patch_of("{\"metadata\":{},\"spec\":{}}", 1, &jp));
    assert_null(patch_of("{\"metadata\":{\"resourceVersion\":\"\"}}", 1, &jp));
    assert_null(patch_of("{\"metadata\":{}}", 0, &jp));
}

TEST_MAIN(cmocka_unit_test(test_json_patch_tests_uid_and_replicas),
          cmocka_unit_test(test_merge_patch_without_replicas_or_uid),
          cmocka_unit_test(test_nothing_to_guard_with))

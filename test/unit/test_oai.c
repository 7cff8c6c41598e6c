/* Tests of the OpenAI-format bodies: each error kind's status, type and code (null where OpenAI
 * sends null), messages that need escaping, and the model list with residency and aliases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include <cjson/cJSON.h>

#include "router/oai.h"

static const struct {
    rt_oai_err err;
    unsigned status;
    const char *type, *code;
} test_errs[] = {
    {RT_OAI_BAD_REQUEST, 400, "invalid_request_error", NULL},
    {RT_OAI_MODEL_NOT_FOUND, 404, "invalid_request_error", "model_not_found"},
    {RT_OAI_NOT_FOUND, 404, "invalid_request_error", NULL},
    {RT_OAI_METHOD_NOT_ALLOWED, 405, "invalid_request_error", "method_not_allowed"},
    {RT_OAI_TOO_LARGE, 413, "invalid_request_error", "request_too_large"},
    {RT_OAI_BAD_GATEWAY, 502, "server_error", "upstream_error"},
    {RT_OAI_MODEL_LOADING, 503, "server_error", "model_loading"},
    {RT_OAI_POOL_UNAVAILABLE, 503, "server_error", "pool_unavailable"},
    {RT_OAI_OVERLOADED, 503, "server_error", "overloaded"},
    {RT_OAI_TIMEOUT, 408, "invalid_request_error", "request_timeout"},
};

/* Parses an error body and checks its shape: exactly message, type, param (null), code. */
static void test_check_error(const char *body, const char *message, const char *type,
                             const char *code)
{
    assert_non_null(body);
    cJSON *root = cJSON_Parse(body);
    assert_non_null(root);
    assert_int_equal(cJSON_GetArraySize(root), 1);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    assert_true(cJSON_IsObject(e));
    assert_int_equal(cJSON_GetArraySize(e), 4);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message")),
                        message);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "type")), type);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "param")));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    if (code)
        assert_string_equal(cJSON_GetStringValue(c), code);
    else
        assert_true(cJSON_IsNull(c));
    cJSON_Delete(root);
}

static void test_error_kinds(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(test_errs) / sizeof(test_errs[0]); i++) {
        assert_int_equal(rt_oai_status(test_errs[i].err), test_errs[i].status);
        char *b = rt_oai_error(test_errs[i].err, "something went wrong");
        test_check_error(b, "something went wrong", test_errs[i].type, test_errs[i].code);
        free(b);
    }
    /* A value outside the enum is a plain 400, never a read past the table. */
    assert_int_equal(rt_oai_status((rt_oai_err)99), 400);
    char *b = rt_oai_error((rt_oai_err)99, "x");
    test_check_error(b, "x", "invalid_request_error", NULL);
    free(b);
}

static void test_error_escaping(void **state)
{
    (void)state;
    static const char msg[] = "The model `a\"b\\c\n\x01` does not exist: caf\xc3\xa9";
    char *b = rt_oai_error(RT_OAI_MODEL_NOT_FOUND, msg);
    test_check_error(b, msg, "invalid_request_error", "model_not_found");
    assert_null(strchr(b, '\n')); /* one line: escaped, not raw */
    free(b);
    b = rt_oai_error(RT_OAI_BAD_REQUEST, NULL);
    test_check_error(b, "", "invalid_request_error", NULL);
    free(b);
    b = rt_oai_error_custom("server_error", NULL, "custom");
    test_check_error(b, "custom", "server_error", NULL);
    free(b);
}

static void test_models(void **state)
{
    (void)state;
    static const char *const aliases[] = {"small", "fast\"one"};
    const rt_oai_model models[] = {
        {"llama-8b", "gpu0", "ai", "llama-8b", true, aliases, 2},
        {"qwen-32b", "gpu0", NULL, "qwen-32b", false, NULL, 0},
    };
    char *b = rt_oai_models(models, 2);
    assert_non_null(b);
    cJSON *root = cJSON_Parse(b);
    assert_non_null(root);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "object")),
                        "list");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    assert_int_equal(cJSON_GetArraySize(data), 4);
    static const struct {
        const char *id, *member, *alias_of;
        bool resident;
        int naliases; /* -1: no "aliases" (an alias's entry) */
    } want[] = {
        {"llama-8b", "llama-8b", NULL, true, 2},
        {"small", "llama-8b", "llama-8b", true, -1},
        {"fast\"one", "llama-8b", "llama-8b", true, -1},
        {"qwen-32b", "qwen-32b", NULL, false, 0},
    };
    for (int i = 0; i < 4; i++) {
        const cJSON *m = cJSON_GetArrayItem(data, i);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "id")),
                            want[i].id);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "object")),
                            "model");
        const cJSON *created = cJSON_GetObjectItemCaseSensitive(m, "created");
        assert_true(cJSON_IsNumber(created));
        assert_int_equal(created->valueint, 0);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "owned_by")),
                            "gpu0");
        const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "modelpool");
        assert_true(cJSON_IsObject(mp));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mp, "pool")),
                            "gpu0");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mp, "member")),
                            want[i].member);
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(mp, "resident");
        assert_true(cJSON_IsBool(res));
        assert_int_equal(cJSON_IsTrue(res), want[i].resident);
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(mp, "namespace");
        if (i < 3)
            assert_string_equal(cJSON_GetStringValue(ns), "ai");
        else
            assert_null(ns);
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(mp, "alias_of");
        const cJSON *al = cJSON_GetObjectItemCaseSensitive(mp, "aliases");
        if (want[i].alias_of) {
            assert_string_equal(cJSON_GetStringValue(of), want[i].alias_of);
            assert_null(al);
        } else {
            assert_null(of);
            assert_true(cJSON_IsArray(al));
            assert_int_equal(cJSON_GetArraySize(al), want[i].naliases);
            for (int k = 0; k < want[i].naliases; k++)
                assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(al, k)), aliases[k]);
        }
    }
    cJSON_Delete(root);
    free(b);
}

static void test_models_empty(void **state)
{
    (void)state;
    char *b = rt_oai_models(NULL, 0);
    assert_non_null(b);
    assert_string_equal(b, "{\"object\":\"list\",\"data\":[]}");
    free(b);
}

TEST_MAIN(cmocka_unit_test(test_error_kinds), cmocka_unit_test(test_error_escaping),
          cmocka_unit_test(test_models), cmocka_unit_test(test_models_empty))

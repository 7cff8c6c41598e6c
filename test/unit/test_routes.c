/* test_routes: the router's model-name table (src/router/routes.c) over real caches of pool and
 * InferenceService records: own names, served names and aliases, ambiguity across pools, and a
 * rebuild after a change. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/records.h"
#include "router/routes.h"

static void put(store *s, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    assert_int_equal(store_put(s, o, NULL), 0);
}

static void test_lookup(void **state)
{
    (void)state;
    store *pools = store_new(&pool_obj_codec), *isvcs = store_new(&pool_isvc_codec);
    assert_non_null(pools);
    assert_non_null(isvcs);
    put(pools, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"spec\":{\"members\":["
               "{\"inferenceServiceRef\":{\"name\":\"a\"}},{\"inferenceServiceRef\":{\"name\":"
               "\"b\"}}]},\"status\":{\"residentMember\":\"a\"}}");
    put(isvcs, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\",\"annotations\":{"
               "\"modelpool-operator.dev/served-model\":\"Org/A-7B\","
               "\"modelpool-operator.dev/model-aliases\":\" gpt-a , a-chat,,a\"}}}");
    put(isvcs, "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\"}}");
    rt_routes *r = rt_routes_new(pools, isvcs);
    assert_non_null(r);
    rt_route rt;
    const char *other;
    assert_int_equal(rt_routes_lookup(r, "a", &rt, &other), 0);
    assert_string_equal(rt.pool, "p");
    assert_string_equal(rt.ns, "ml");
    assert_string_equal(rt.member, "a");
    assert_string_equal(rt.served, "Org/A-7B");
    assert_int_equal(rt_routes_lookup(r, "gpt-a", &rt, &other), 0);
    assert_string_equal(rt.member, "a");
    assert_int_equal(rt_routes_lookup(r, "a-chat", &rt, &other), 0);
    assert_int_equal(rt_routes_lookup(r, "Org/A-7B", &rt, &other), 0);
    assert_int_equal(rt_routes_lookup(r, "b", &rt, &other), 0);
    assert_null(rt.served);
    assert_int_equal(rt_routes_lookup(r, "c", &rt, &other), -ENOENT);
    assert_int_equal(rt_routes_lookup(r, "", &rt, &other), -ENOENT);

    rt_oai_model *v;
    size_t n;
    assert_int_equal(rt_routes_models(r, &v, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].id, "a") == 0) {
            assert_true(v[i].resident);
            assert_int_equal(v[i].naliases, 3); /* served name, gpt-a, a-chat */
        } else {
            assert_false(v[i].resident);
            assert_int_equal(v[i].naliases, 0);
        }
    }
    free(v);

    /* a second pool claims the alias gpt-a: ambiguous, named in the answer; after the change */
    put(pools, "{\"metadata\":{\"name\":\"q\",\"namespace\":\"ml\"},\"spec\":{\"members\":["
               "{\"inferenceServiceRef\":{\"name\":\"c\"}}]}}");
    put(isvcs, "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\",\"annotations\":{"
               "\"modelpool-operator.dev/model-aliases\":\"gpt-a\"}}}");
    assert_int_equal(rt_routes_lookup(r, "c", &rt, &other), -ENOENT); /* not rebuilt yet */
    rt_routes_invalidate(r);
    assert_int_equal(rt_routes_lookup(r, "c", &rt, &other), 0);
    assert_string_equal(rt.pool, "q");
    assert_int_equal(rt_routes_lookup(r, "gpt-a", &rt, &other), -EEXIST);
    assert_non_null(other);
    assert_int_equal(rt_routes_lookup(r, "a", &rt, &other), 0);

    rt_routes_free(r);
    store_free(pools);
    store_free(isvcs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of the caches builder both binaries use: the three resources, the records' codecs, the
 * indexes the lookups rely on (the removed-member index only when asked), nothing started. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_json.h"

#include "api/caches.h"
#include "api/records.h"

typedef struct tc {
    ev_loop *loop;
    kube_client *client;
} tc;

static int tc_setup(void **state)
{
    tc *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    kube_config cfg = {0};
    kube_error err = {0};
    assert_non_null(cfg.server = strdup("http://127.0.0.1:1")); /* never called: nothing starts */
    assert_non_null(t->loop = ev_new());
    t->client = kube_client_new(t->loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(t->client);
    *state = t;
    return 0;
}

static int tc_teardown(void **state)
{
    tc *t = *state;
    kube_client_free(t->client);
    ev_free(t->loop);
    free(t);
    return 0;
}

/* What the operator builds: all three, every index, records decoded by the API codecs. */
static void test_operator(void **state)
{
    tc *t = *state;
    api_caches c;
    api_caches_config cfg = {.namespace_ = "ns", .index_removed = true};
    assert_int_equal(api_caches_init(&c, t->loop, t->client, &cfg), 0);
    assert_string_equal(informer_name(c.pools), "modelpools." API_GROUP);
    assert_string_equal(informer_name(c.isvcs), "inferenceservices." API_GROUP);
    assert_string_equal(informer_name(c.pods), "pods");
    assert_false(api_caches_synced(&c));
    char waiting[512];
    api_caches_waiting(&c, waiting, sizeof(waiting));
    assert_non_null(strstr(waiting, "modelpools"));
    assert_non_null(strstr(waiting, "pods"));

    test_store_put(informer_store(c.pools),
                   "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"1\"},"
                   "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}}]},"
                   "\"status\":{\"residentMember\":\"gone\"}}");
    test_store_put(informer_store(c.pods),
                   "{\"metadata\":{\"name\":\"a-1\",\"namespace\":\"ns\",\"labels\":{"
                   "\"" API_SERVICE_LABEL "\":\"a\"}}}");
    const api_pool *pool = store_get(informer_store(c.pools), "ns/p");
    assert_non_null(pool);
    assert_int_equal(pool->n_members, 1);
    assert_int_equal(store_index_count(informer_store(c.pools), API_INDEX_MEMBER, "ns/a"), 1);
    assert_int_equal(store_index_count(informer_store(c.pools), API_INDEX_REMOVED, "ns/gone"), 1);
    assert_int_equal(store_index_count(informer_store(c.pods), API_INDEX_SERVICE, "ns/a"), 1);
    api_caches_free(&c);
    assert_null(c.pools);
}

/* What the router builds: no removed-member index. */
static void test_router(void **state)
{
    tc *t = *state;
    api_caches c;
    api_caches_config cfg = {.pool_selector = "tier=gpu"};
    assert_int_equal(api_caches_init(&c, t->loop, t->client, &cfg), 0);
    assert_int_equal(
        store_index_each(informer_store(c.pools), API_INDEX_REMOVED, "ns/x", NULL, NULL), -ENOENT);
    assert_int_equal(
        store_index_each(informer_store(c.pools), API_INDEX_MEMBER, "ns/x", NULL, NULL), 0);
    api_caches_stop(&c); /* not started: nothing to stop */
    api_caches_free(&c);
    api_caches_free(&c); /* freed caches are zeroed: freeing again is a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_operator, tc_setup, tc_teardown),
        cmocka_unit_test_setup_teardown(test_router, tc_setup, tc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

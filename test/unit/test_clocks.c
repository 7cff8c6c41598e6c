/* Tests of the reaction clocks: which watch events start path a and b, which scale stops them
 * (and records a sample in modelpool_reaction_seconds), and that a pool costs an entry only while
 * a clock runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_json.h"
#include "test_main.h"

#include "api/records.h"
#include "informer/store.h"
#include "metrics/metrics.h"
#include "pool/clocks.h"
#include "pool/pool_metrics.h"

typedef struct fixture {
    metrics *reg;
    pool_metrics *pm;
    pool_clocks *clocks;
    store *pools;
} fixture;

/* A pool record of ns/p with members a, b, c; status and request annotation as given (NULL: none).
 */
static api_pool *pool_of(const char *resident, const char *pending, const char *phase,
                         const char *request)
{
    char doc[1024];
    char ann[128] = "";
    if (request)
        snprintf(ann, sizeof(ann), ",\"annotations\":{\"%s\":\"%s\"}", API_REQUEST_ANNOTATION,
                 request);
    snprintf(
        doc, sizeof(doc),
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"%s},"
        "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
        "{\"inferenceServiceRef\":{\"name\":\"b\"}},{\"inferenceServiceRef\":{\"name\":\"c\"}}]},"
        "\"status\":{\"phase\":\"%s\",\"residentMember\":\"%s\",\"pendingMember\":\"%s\"}}",
        ann, phase ? phase : "Ready", resident ? resident : "", pending ? pending : "");
    cJSON *obj = cJSON_Parse(doc);
    assert_non_null(obj);
    int err = 0;
    api_pool *p = api_pool_decode(obj, &err);
    cJSON_Delete(obj);
    assert_non_null(p);
    return p;
}

/* Puts the pool into the cache with the given status (replacing the one there). */
static void cache_pool(fixture *f, const char *resident, const char *pending)
{
    char doc[1024];
    snprintf(doc, sizeof(doc),
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},"
             "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
             "{\"inferenceServiceRef\":{\"name\":\"b\"}}]},"
             "\"status\":{\"residentMember\":\"%s\",\"pendingMember\":\"%s\"}}",
             resident, pending);
    test_store_put(f->pools, doc);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->reg = metrics_new();
    f->pm = pool_metrics_new(f->reg);
    f->clocks = pool_clocks_new(f->pm);
    f->pools = store_new(&api_pool_codec);
    assert_non_null(f->clocks);
    assert_int_equal(store_add_index(f->pools, API_INDEX_MEMBER, api_index_pool_members, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pool_clocks_free(f->clocks);
    pool_metrics_free(f->pm);
    metrics_free(f->reg);
    store_free(f->pools);
    free(f);
    return 0;
}

/* The reaction histogram's series (_count or _sum) of path ("a" or "b") so far. */
static double series(const fixture *f, const char *suffix, const char *path)
{
    size_t len = 0;
    char *text = metrics_render(f->reg, &len);
    assert_non_null(text);
    char needle[96];
    snprintf(needle, sizeof(needle), "modelpool_reaction_seconds_%s{path=\"%s\"} ", suffix, path);
    const char *at = strstr(text, needle);
    double n = at ? strtod(at + strlen(needle), NULL) : 0;
    free(text);
    return n;
}

/* Samples of path ("a" or "b") recorded so far. */
static double samples(const fixture *f, const char *path)
{
    return series(f, "count", path);
}

static void test_request_annotation(void **state)
{
    fixture *f = *state;
    api_pool *none = pool_of("a", NULL, NULL, NULL);
    api_pool *req_b = pool_of("a", NULL, NULL, "b");
    api_pool *req_x = pool_of("a", NULL, NULL, "x");
    api_pool *req_a = pool_of("a", NULL, NULL, "a");
    api_pool *degraded = pool_of("a", NULL, "Degraded", "b");
    api_pool *pending_b = pool_of("a", "b", "Swapping", "b");

    /* No clock for a name that is no member, the settled resident, a Degraded pool, or the
     * target already pending: no scale-down would answer them. */
    pool_clocks_pool_updated(f->clocks, none, req_x, 100);
    pool_clocks_pool_updated(f->clocks, none, req_a, 100);
    pool_clocks_pool_updated(f->clocks, none, degraded, 100);
    pool_clocks_pool_updated(f->clocks, none, pending_b, 100);
    assert_int_equal(pool_clocks_running(f->clocks), 0);

    pool_clocks_pool_updated(f->clocks, none, req_b, 100);
    assert_int_equal(pool_clocks_running(f->clocks), 1);
    /* The same request seen again (another update) does not restart it. */
    pool_clocks_pool_updated(f->clocks, req_b, req_b, 5000);

    /* Scaling the requested member down, or anything up, does not end path a. */
    pool_clocks_scaling(f->clocks, "ns/p", "b", 0, 200);
    pool_clocks_scaling(f->clocks, "ns/p", "b", 1, 200);
    assert_int_equal(samples(f, "a"), 0);
    assert_int_equal(samples(f, "b"), 0);
    /* The incumbent's scale-down does, and the entry goes with it. */
    pool_clocks_scaling(f->clocks, "ns/p", "a", 0, 300);
    assert_int_equal(samples(f, "a"), 1);
    assert_int_equal(pool_clocks_running(f->clocks), 0);

    free(none);
    free(req_b);
    free(req_x);
    free(req_a);
    free(degraded);
    free(pending_b);
}

static void test_member_up_and_pod_gone(void **state)
{
    fixture *f = *state;
    cache_pool(f, "a", "");
    /* A member nobody pools, or NULL, starts nothing. */
    pool_clocks_member_up(f->clocks, f->pools, "ns", "zzz", 10);
    pool_clocks_member_up(f->clocks, f->pools, "ns", NULL, 10);
    pool_clocks_member_up(f->clocks, f->pools, "other", "b", 10);
    assert_int_equal(pool_clocks_running(f->clocks), 0);
    pool_clocks_member_up(f->clocks, f->pools, "ns", "b", 10);
    assert_int_equal(pool_clocks_running(f->clocks), 1);

    /* A Pod gone while no swap is pending starts no path b. */
    pool_clocks_pod_gone(f->clocks, f->pools, "ns", "a", 20);
    pool_clocks_scaling(f->clocks, "ns/p", "b", 1, 30);
    assert_int_equal(samples(f, "b"), 0);

    /* During a swap to b: the target's own Pod starts nothing, the incumbent's does. */
    cache_pool(f, "a", "b");
    pool_clocks_pod_gone(f->clocks, f->pools, "ns", "b", 40);
    pool_clocks_scaling(f->clocks, "ns/p", "b", 1, 50);
    assert_int_equal(samples(f, "b"), 0);
    pool_clocks_pod_gone(f->clocks, f->pools, "ns", "a", 60);
    pool_clocks_scaling(f->clocks, "ns/p", "a", 0, 70);  /* path a ends */
    assert_int_equal(pool_clocks_running(f->clocks), 1); /* path b still runs */
    pool_clocks_scaling(f->clocks, "ns/p", "b", 1, 80);
    assert_int_equal(samples(f, "a"), 1);
    assert_int_equal(samples(f, "b"), 1);
    assert_int_equal(pool_clocks_running(f->clocks), 0);
}

static void test_deferred_and_stop(void **state)
{
    fixture *f = *state;
    cache_pool(f, "a", "b");
    pool_clocks_member_up(f->clocks, f->pools, "ns", "b", 10);
    /* A wait for a busy member is not the operator's reaction: no sample, entry gone. */
    pool_clocks_deferred(f->clocks, "ns/p");
    assert_int_equal(pool_clocks_running(f->clocks), 0);
    pool_clocks_scaling(f->clocks, "ns/p", "a", 0, 20);
    assert_int_equal(samples(f, "a"), 0);

    /* Deferred keeps a running path b. */
    pool_clocks_member_up(f->clocks, f->pools, "ns", "b", 30);
    pool_clocks_pod_gone(f->clocks, f->pools, "ns", "a", 40);
    pool_clocks_deferred(f->clocks, "ns/p");
    assert_int_equal(pool_clocks_running(f->clocks), 1);
    /* A completed swap (or a deleted pool) stops both without a sample. */
    pool_clocks_stop(f->clocks, "ns/p");
    pool_clocks_stop(f->clocks, "ns/unknown");
    assert_int_equal(pool_clocks_running(f->clocks), 0);
    pool_clocks_scaling(f->clocks, "ns/p", "b", 1, 50);
    assert_int_equal(samples(f, "b"), 0);
}

static void test_fenced(void **state)
{
    fixture *f = *state;
    cache_pool(f, "a", "b");
    /* Requested at 10 us; the drain fence holds the probe until 2,000,010 us; the scale-down at
     * 2,000,510 us: the reaction is the 500 us after the fence, not the fence. */
    pool_clocks_member_up(f->clocks, f->pools, "ns", "b", 10);
    pool_clocks_fenced(f->clocks, "ns/p", 2000010);
    pool_clocks_fenced(f->clocks, "ns/p", 1000); /* an earlier end moves nothing back */
    pool_clocks_scaling(f->clocks, "ns/p", "a", 0, 2000510);
    assert_int_equal(samples(f, "a"), 1);
    assert_true(series(f, "sum", "a") > 0.00049 && series(f, "sum", "a") < 0.00051);
    /* No clock running: nothing to move, nothing kept. */
    pool_clocks_fenced(f->clocks, "ns/p", 3000000);
    pool_clocks_fenced(NULL, "ns/p", 1);
    assert_int_equal(pool_clocks_running(f->clocks), 0);
}

static void test_null(void **state)
{
    (void)state;
    /* Without metrics there are no clocks, and every call is a no-op. */
    assert_null(pool_clocks_new(NULL));
    pool_clocks_scaling(NULL, "ns/p", "a", 0, 1);
    pool_clocks_deferred(NULL, "ns/p");
    pool_clocks_stop(NULL, "ns/p");
    pool_clocks_member_up(NULL, NULL, "ns", "a", 1);
    pool_clocks_pod_gone(NULL, NULL, "ns", "a", 1);
    assert_int_equal(pool_clocks_running(NULL), 0);
    pool_clocks_free(NULL);
}

TEST_MAIN(cmocka_unit_test_setup_teardown(test_request_annotation, setup, teardown),
          cmocka_unit_test_setup_teardown(test_member_up_and_pod_gone, setup, teardown),
          cmocka_unit_test_setup_teardown(test_deferred_and_stop, setup, teardown),
          cmocka_unit_test_setup_teardown(test_fenced, setup, teardown),
          cmocka_unit_test(test_null))

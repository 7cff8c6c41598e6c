/* test_router_view: the router's reading of its caches (src/router/view.c) over real caches of
 * pool, InferenceService and Pod records: which Pods a request may go to and in what order, a
 * member as rt_hold sees it, the swapBudget, and the words of each 503. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_json.h"
#include "test_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "router/view.h"

/* A Pod of member m: ready and running unless said otherwise. */
static void put_pod(store *s, const char *name, const char *m, const char *ip, bool ready,
                    bool terminating)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"labels\":{"
             "\"inference.llmkube.dev/service\":\"%s\"}%s},"
             "\"spec\":{\"containers\":[{\"ports\":[{\"containerPort\":9000}]}]},"
             "\"status\":{\"podIP\":\"%s\",\"containerStatuses\":[{\"state\":{\"running\":{}}}],"
             "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
             name, m, terminating ? ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"" : "", ip,
             ready ? "True" : "False");
    test_store_put(s, json);
}

static api_pool *pool(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    int err = 0;
    api_pool *p = api_pool_decode(o, &err);
    cJSON_Delete(o);
    assert_non_null(p);
    return p;
}

typedef struct {
    store *isvcs, *pods;
} caches;

static caches fill(void)
{
    caches c = {store_new(&api_isvc_codec), store_new(&api_pod_codec)};
    assert_non_null(c.isvcs);
    assert_non_null(c.pods);
    assert_int_equal(store_add_index(c.pods, API_INDEX_SERVICE, api_index_pod_service, NULL), 0);
    test_store_put(c.isvcs,
                   "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\",\"resourceVersion\":\"10\"},"
                   "\"spec\":{\"replicas\":1},\"status\":{\"phase\":\"Ready\"}}");
    test_store_put(c.isvcs,
                   "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\",\"resourceVersion\":\"11\"},"
                   "\"spec\":{\"replicas\":0},\"status\":{\"phase\":\"Stopped\"}}");
    put_pod(c.pods, "a-2", "a", "10.0.0.2", true, false);
    put_pod(c.pods, "a-1", "a", "10.0.0.1", true, false);
    put_pod(c.pods, "a-3", "a", "10.0.0.3", false, false); /* not ready */
    put_pod(c.pods, "a-4", "a", "10.0.0.4", true, true);   /* terminating */
    put_pod(c.pods, "a-5", "a", "", true, false);          /* no IP yet */
    put_pod(c.pods, "b-1", "b", "10.0.1.1", false, false);
    return c;
}

static void drop(caches *c)
{
    store_free(c->isvcs);
    store_free(c->pods);
}

static const char pool_json[] =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"resourceVersion\":\"20\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
    "{\"inferenceServiceRef\":{\"name\":\"b\"}},{\"inferenceServiceRef\":{\"name\":\"c\"}}]},"
    "\"status\":{\"phase\":\"Ready\",\"residentMember\":\"a\"}}";

static void test_ready_pods(void **state)
{
    (void)state;
    caches c = fill();
    rt_view_targets t;
    rt_view_ready_pods(c.isvcs, c.pods, NULL, "ml", "a", &t);
    assert_non_null(t.isvc);
    assert_int_equal(t.n, 2); /* not the unready, terminating or address-less ones */
    assert_string_equal(t.pods[0]->name, "a-1");
    assert_string_equal(t.pods[1]->name, "a-2");
    assert_int_equal(rt_view_pod_port(t.pods[0], t.isvc), 9000);
    rt_view_ready_pods(c.isvcs, c.pods, NULL, "ml", "b", &t);
    assert_int_equal(t.n, 0);
    rt_view_ready_pods(c.isvcs, c.pods, NULL, "ml", "c", &t);
    assert_null(t.isvc);
    assert_int_equal(t.n, 0);
    drop(&c);
}

static void test_member(void **state)
{
    (void)state;
    caches c = fill();
    api_pool *o = pool(pool_json);
    rt_hold_member m = rt_view_member(c.isvcs, c.pods, NULL, "30", o, "a");
    assert_true(m.exists);
    assert_true(m.up);
    assert_string_equal(m.phase, "Ready");
    assert_int_equal(m.ready_pods, 2);
    assert_int_equal(m.waiting, 0);
    m = rt_view_member(c.isvcs, c.pods, NULL, "30", o, "b");
    assert_true(m.exists);
    assert_false(m.up);
    assert_int_equal(m.ready_pods, 0);
    /* c is not cached: missing once the member cache has caught up with the pool (rv 20) */
    m = rt_view_member(c.isvcs, c.pods, NULL, "30", o, "c");
    assert_false(m.exists);
    assert_false(m.absence_unsure);
    m = rt_view_member(c.isvcs, c.pods, NULL, "19", o, "c");
    assert_true(m.absence_unsure);
    assert_true(rt_view_unconfirmed(c.isvcs, c.pods, NULL, o, "a"));
    assert_false(rt_view_unconfirmed(c.isvcs, c.pods, NULL, o, "b"));
    free(o);
    o = pool("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"status\":{\"phase\":"
             "\"Swapping\",\"residentMember\":\"a\",\"pendingMember\":\"b\"}}");
    assert_false(rt_view_unconfirmed(c.isvcs, c.pods, NULL, o, "a")); /* a swap: still loading */
    free(o);
    /* #26: a swap that has not begun to drain a (it awaits a's probe): a still serves */
    o = pool("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"status\":{\"phase\":"
             "\"Swapping\",\"residentMember\":\"a\",\"pendingMember\":\"b\",\"conditions\":[{"
             "\"type\":\"Swapping\",\"status\":\"True\",\"reason\":\"AwaitingProbe\"}]}}");
    assert_true(rt_view_unconfirmed(c.isvcs, c.pods, NULL, o, "a"));
    free(o);
    drop(&c);
}

static void test_budget(void **state)
{
    (void)state;
    const struct {
        const char *budget;
        uint64_t ms;
    } t[] = {{NULL, 300000},   {"", 300000},      {"90s", 90000},
             {"1m30s", 90000}, {"bogus", 300000}, {"0s", 300000}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char json[256];
        snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"p\"},\"spec\":{%s%s%s}}",
                 t[i].budget ? "\"swapBudget\":\"" : "", t[i].budget ? t[i].budget : "",
                 t[i].budget ? "\"" : "");
        api_pool *o = pool(json);
        assert_int_equal(rt_view_budget_ms(o), t[i].ms);
        free(o);
    }
    assert_int_equal(rt_view_budget_ms(NULL), 300000);
}

/* The pool p of ml, Degraded, with the conditions conds (a JSON array's items). */
#define DEGRADED(conds)                                                                            \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"status\":{\"phase\":\"Degraded\","      \
    "\"conditions\":[" conds "]}}"

/* The 503's words for each reason rt_hold gives. */
static void test_reject_message(void **state)
{
    (void)state;
    char buf[512], dropped[512];
    api_pool *o = pool(DEGRADED("{\"type\":\"SlotAllocated\",\"status\":\"False\",\"reason\":"
                                "\"SpecInvalid\",\"message\":\"member x is claimed by pool q\"}"));
    rt_hold_member m = {.name = "b", .exists = true, .phase = "Failed"};
    rt_view_reject_message(o, &m, RT_REJECT_DEGRADED, NULL, buf, sizeof(buf));
    assert_string_equal(buf, "pool ml/p is Degraded: member x is claimed by pool q");
    rt_view_reject_message(o, &m, RT_REJECT_MEMBER_PHASE, NULL, buf, sizeof(buf));
    assert_string_equal(buf, "member b of pool ml/p is Failed");
    m.exists = false;
    rt_view_reject_message(o, &m, RT_REJECT_MEMBER_PHASE, NULL, buf, sizeof(buf));
    assert_string_equal(buf, "member b of pool ml/p is missing");
    assert_false(rt_view_dropped(o, dropped, sizeof(dropped)));
    free(o);

    /* a spec fault: MembersValid names it, the slot's condition is left as it was */
    static const struct {
        const char *json, *want;
    } faults[] = {
        {DEGRADED("{\"type\":\"SlotAllocated\",\"status\":\"False\",\"reason\":\"NoResident\","
                  "\"message\":\"no member requested\"},{\"type\":\"MembersValid\",\"status\":"
                  "\"False\",\"reason\":\"MissingMembers\",\"message\":\"member m-x does not "
                  "exist\"}"),
         "pool ml/p is Degraded: member m-x does not exist"},
        {DEGRADED("{\"type\":\"SlotAllocated\",\"status\":\"True\",\"reason\":\"Resident\","
                  "\"message\":\"a holds the slot\"},{\"type\":\"MembersValid\",\"status\":"
                  "\"False\",\"reason\":\"MemberInMultiplePools\",\"message\":\"member x is "
                  "claimed by pool q\"}"),
         "pool ml/p is Degraded: member x is claimed by pool q"},
    };
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        o = pool(faults[i].json);
        rt_view_reject_message(o, &m, RT_REJECT_DEGRADED, NULL, buf, sizeof(buf));
        assert_string_equal(buf, faults[i].want);
        free(o);
    }

    o = pool("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"status\":{\"phase\":\"Ready\","
             "\"residentMember\":\"a\",\"conditions\":[{\"type\":\"Swapping\",\"status\":\"False\","
             "\"reason\":\"RequestDropped\"},{\"type\":\"SwapDeferred\",\"status\":\"True\","
             "\"reason\":\"IdleCheckFailed\",\"message\":\"pod a-1: 500\"}]}}");
    assert_true(rt_view_dropped(o, dropped, sizeof(dropped)));
    assert_string_equal(dropped, "pool ml/p cannot swap away from its resident a: pod a-1: 500");
    rt_view_reject_message(o, &m, RT_REJECT_DROPPED, dropped, buf, sizeof(buf));
    assert_string_equal(buf, dropped);
    free(o);
}

TEST_MAIN(cmocka_unit_test(test_ready_pods), cmocka_unit_test(test_member),
          cmocka_unit_test(test_budget), cmocka_unit_test(test_reject_message))

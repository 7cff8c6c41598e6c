/* The drain fence's early end against the scripted responder (api/fence.h, "Operator"): a pool
 * whose resident m1 is being drained (pendingMember m0) behind a fence of a minute. With its Lease
 * cache showing the one router acknowledging the swap, the controller lists the router Leases from
 * the API server (no resourceVersion: a quorum read, by their label); when that list confirms, m1
 * is probed (its Pod is the responder itself) and scaled to 0 long before the fence would end, and
 * the outcome is counted acknowledged. When the list shows a second router that has not
 * acknowledged, or the cache already shows one, nothing is probed: the swap waits its fence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "loop_run.h"
#include "scripted_http.h"

#include "kube/client.h"
#include "metrics/metrics.h"
#include "pool/manager.h"

static const char list_pools[] =
    "{\"kind\":\"ModelPoolList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\",\"metadata\":{"
    "\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
    "\"uid\":\"u-p\",\"resourceVersion\":\"90\",\"generation\":1},\"spec\":{\"default\":\"m0\","
    "\"members\":[{\"inferenceServiceRef\":{\"name\":\"m0\"}},{\"inferenceServiceRef\":{\"name\":"
    "\"m1\"}}]},\"status\":{\"phase\":\"Swapping\",\"residentMember\":\"m1\",\"pendingMember\":"
    "\"m0\",\"observedGeneration\":1,\"members\":[{\"name\":\"m1\",\"resident\":true,"
    "\"releasing\":true},{\"name\":\"m0\"}]}}]}";

static const char list_isvcs[] =
    "{\"kind\":\"InferenceServiceList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\","
    "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"m0\","
    "\"namespace\":\"ns\",\"uid\":\"u-m0\",\"resourceVersion\":\"91\"},\"spec\":{\"replicas\":0,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Stopped\"}},{\"metadata\":{\"name\":\"m1\","
    "\"namespace\":\"ns\",\"uid\":\"u-m1\",\"resourceVersion\":\"92\"},\"spec\":{\"replicas\":1,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Ready\"}}]}";

/* m1's one Pod, running and ready, its server on the responder's port. */
static char *list_pods(int port)
{
    char *body;
    assert_true(
        asprintf(&body,
                 "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
                 "\"100\"},\"items\":[{\"metadata\":{\"name\":\"m1-x\",\"namespace\":\"ns\","
                 "\"uid\":\"u-x\",\"resourceVersion\":\"93\",\"labels\":{"
                 "\"inference.llmkube.dev/service\":\"m1\"}},\"spec\":{\"containers\":[{\"name\":"
                 "\"server\",\"ports\":[{\"name\":\"http\",\"containerPort\":%d}]}]},\"status\":{"
                 "\"phase\":\"Running\",\"podIP\":\"127.0.0.1\",\"containerStatuses\":[{\"name\":"
                 "\"server\",\"state\":{\"running\":{}}}],\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"True\"}]}}]}",
                 port) > 0);
    char *http = srv_http("200 OK", "", body);
    free(body);
    return http;
}

/* A router's Lease: r1 acknowledges the swap away from m1, r2 acknowledges an earlier one. */
#define LEASE_ACKED                                                                                \
    "{\"metadata\":{\"name\":\"r1\",\"namespace\":\"sys\",\"resourceVersion\":\"50\","             \
    "\"labels\":{\"modelpool-operator.dev/router\":\"r1\"},\"annotations\":{"                      \
    "\"modelpool-operator.dev/fenced\":\"ns/p=m1\"}},\"spec\":{\"leaseDurationSeconds\":10}}"
#define LEASE_UNACKED                                                                              \
    "{\"metadata\":{\"name\":\"r2\",\"namespace\":\"sys\",\"resourceVersion\":\"51\","             \
    "\"labels\":{\"modelpool-operator.dev/router\":\"r2\"},\"annotations\":{"                      \
    "\"modelpool-operator.dev/fenced\":\"ns/p=m0\"}},\"spec\":{\"leaseDurationSeconds\":10}}"
#define LEASE_LIST(items)                                                                          \
    "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"             \
    "\"resourceVersion\":\"100\"},\"items\":[" items "]}"

enum {
    LISTS = 8,
    STATUS = 4,
    EVENTS = 4,
    PROBES = 2,
    SCRIPT_MAX = LISTS + 1 + STATUS + EVENTS + PROBES + 1
};

static bool request_is(const char *req, const char *what)
{
    const char *hit = strstr(req, what);
    return hit && hit < strstr(req, "\r\n");
}

/* Runs the manager (as the leader, a fence of a minute, the router Leases of "sys") against the
 * script: the lists (the Lease cache's from cached_leases) with watches that stay quiet, the
 * quorum list of the Leases answered with listed_leases, status writes and Events answered OK, m1's
 * idle probe answered idle, and the scale of m1 that ends the run; for at most run_ms. The counter
 * of fences acknowledged is left in *acked. */
static void run_script(srv *s, srv_reply *r, ev_loop *loop, const char *cached_leases,
                       const char *listed_leases, uint64_t run_ms, int *acked)
{
    static const char *const lists[LISTS] = {
        "GET /apis/inference.llmkube.dev/v1alpha1/modelpools?limit=",
        "GET /apis/inference.llmkube.dev/v1alpha1/inferenceservices?limit=",
        "GET /api/v1/pods?limit=",
        "GET /apis/coordination.k8s.io/v1/namespaces/sys/leases?limit=",
        "/modelpools?watch=1",
        "/inferenceservices?watch=1",
        "/api/v1/pods?watch=1",
        "/leases?watch=1",
    };
    size_t n = 0;
    for (size_t i = 0; i < LISTS; i++)
        r[n++] = (srv_reply){.match = lists[i], .delay_ms = i >= 4 ? 60000 : 0};
    r[n++] = (srv_reply){.match = "GET /apis/coordination.k8s.io/v1/namespaces/sys/leases?"
                                  "labelSelector="};
    for (int i = 0; i < STATUS; i++)
        r[n++] = (srv_reply){.match = "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                                      "modelpools/p/status "};
    for (int i = 0; i < EVENTS; i++)
        r[n++] = (srv_reply){.match = "POST /api/v1/namespaces/ns/events "};
    for (int i = 0; i < PROBES; i++)
        r[n++] = (srv_reply){.match = "GET /slots "};
    r[n++] = (srv_reply){.match = "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                                  "inferenceservices/m1 ",
                         .stop = true};
    srv_start(s, loop, r, n);
    r[0].pieces[0] = srv_own(s, srv_http("200 OK", "", list_pools));
    r[1].pieces[0] = srv_own(s, srv_http("200 OK", "", list_isvcs));
    r[2].pieces[0] = srv_own(s, list_pods(s->port));
    r[3].pieces[0] = srv_own(s, srv_http("200 OK", "", cached_leases));
    r[LISTS].pieces[0] = srv_own(s, srv_http("200 OK", "", listed_leases));
    const char *status_ok =
        srv_own(s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"90\"}}"));
    const char *created = srv_own(s, srv_http("201 Created", "", "{}"));
    const char *idle = srv_own(s, srv_http("200 OK", "", "[{\"id\":0,\"is_processing\":false}]"));
    size_t at = LISTS + 1;
    for (int i = 0; i < STATUS; i++)
        r[at++].pieces[0] = status_ok;
    for (int i = 0; i < EVENTS; i++)
        r[at++].pieces[0] = created;
    for (int i = 0; i < PROBES; i++)
        r[at++].pieces[0] = idle;
    r[at].pieces[0] =
        srv_own(s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"130\"}}"));

    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", s->port) > 0);
    kube_client *client = kube_client_new(loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(client);
    metrics *reg = metrics_new();
    pool_manager_opts opts = {
        .instance = "test", .drain_fence_ms = 60000, .router_lease_ns = "sys", .metrics = reg};
    pool_manager *pm = pool_manager_new(loop, client, &opts);
    assert_non_null(pm);
    assert_int_equal(pool_manager_start(pm), 0);
    pool_manager_lead(pm);
    /* Without an acknowledgement nothing ends the run: a timer does. */
    if (!acked)
        assert_true(ev_timer_add(loop, run_ms, test_loop_stop, NULL) != 0);
    test_loop_run(loop, run_ms + 5000);
    size_t len;
    char *text = metrics_render(reg, &len);
    const char *at_acked = strstr(text, "modelpool_drain_fence_total{outcome=\"acknowledged\"} ");
    assert_non_null(at_acked);
    if (acked)
        *acked = atoi(at_acked + strlen("modelpool_drain_fence_total{outcome=\"acknowledged\"} "));
    else
        assert_non_null(strstr(text, "modelpool_drain_fence_total{outcome=\"acknowledged\"} 0\n"));
    free(text);
    pool_manager_free(pm);
    metrics_free(reg);
    kube_client_free(client);
}

/* How many requests of s start with what, and the index of the first (-1 none). */
static int count(const srv *s, const char *what, int *first)
{
    int n = 0;
    *first = -1;
    for (int i = 0; i < s->nrequests; i++)
        if (request_is(s->requests[i], what)) {
            if (*first < 0)
                *first = i;
            n++;
        }
    return n;
}

static void test_acknowledged_ends_the_fence(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    int acked = -1;
    run_script(&s, r, loop, LEASE_LIST(LEASE_ACKED), LEASE_LIST(LEASE_ACKED), 20000, &acked);
    /* The run ended on m1's stop, well inside the fence of a minute. */
    int list, probe, stop;
    assert_int_equal(count(&s, "leases?labelSelector=", &list), 1);
    assert_int_equal(count(&s, "GET /slots ", &probe), 1);
    assert_int_equal(count(&s, "/inferenceservices/m1 ", &stop), 1);
    assert_true(list < probe && probe < stop);
    /* The quorum read: by the label, without a resourceVersion (nor a limit: the whole list). */
    assert_non_null(strstr(s.requests[list],
                           "GET /apis/coordination.k8s.io/v1/namespaces/sys/"
                           "leases?labelSelector=modelpool-operator.dev%2Frouter "));
    assert_non_null(strstr(s.requests[stop], "/spec/replicas\",\"value\":0"));
    assert_int_equal(acked, 1);
    srv_stop(&s);
    ev_free(loop);
}

/* The cache shows r1 acknowledging, but the API server also holds r2, which has not: no probe. */
static void test_unacknowledged_router_in_the_list_holds_it(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    run_script(&s, r, loop, LEASE_LIST(LEASE_ACKED), LEASE_LIST(LEASE_ACKED "," LEASE_UNACKED),
               3000, NULL);
    int first;
    assert_int_equal(count(&s, "leases?labelSelector=", &first), 1);
    assert_int_equal(count(&s, "GET /slots ", &first), 0);
    assert_int_equal(count(&s, "/inferenceservices/m1 ", &first), 0);
    srv_stop(&s);
    ev_free(loop);
}

/* The cache shows r2, which has not acknowledged: nothing is asked, nothing probed. */
static void test_unacknowledged_router_in_the_cache_asks_nothing(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    run_script(&s, r, loop, LEASE_LIST(LEASE_ACKED "," LEASE_UNACKED), LEASE_LIST(LEASE_ACKED),
               3000, NULL);
    int first;
    assert_int_equal(count(&s, "leases?labelSelector=", &first), 0);
    assert_int_equal(count(&s, "GET /slots ", &first), 0);
    assert_int_equal(count(&s, "/inferenceservices/m1 ", &first), 0);
    srv_stop(&s);
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_acknowledged_ends_the_fence),
          cmocka_unit_test(test_unacknowledged_router_in_the_list_holds_it),
          cmocka_unit_test(test_unacknowledged_router_in_the_cache_asks_nothing))

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
#include "manager_script.h"
#include "scripted_http.h"

#include "kube/client.h"
#include "metrics/metrics.h"
#include "pool/manager.h"

/* m1's one Pod, running and ready, its server on the responder's port (malloc'd). */
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
    return body;
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
    STATUS = 4,
    EVENTS = 4,
    PROBES = 2,
    SCRIPT_MAX = MS_LISTS_LEASES + 1 + STATUS + EVENTS + PROBES + 1
};

/* Runs the manager (as the leader, a fence of a minute, the router Leases of "sys") against the
 * script: the lists (the Lease cache's from cached_leases) with watches that stay quiet, the
 * quorum list of the Leases answered with listed_leases, status writes and Events answered OK, m1's
 * idle probe answered idle, and the scale of m1 that ends the run; for at most run_ms. The counter
 * of fences acknowledged is left in *acked. */
static void run_script(srv *s, srv_reply *r, ev_loop *loop, const char *cached_leases,
                       const char *listed_leases, uint64_t run_ms, int *acked)
{
    srv_start(s, loop, r, SCRIPT_MAX);
    char *pods = list_pods(s->port);
    size_t n =
        ms_lists(s, r, MS_POOLS(MS_DRAINING_M1), MS_ISVCS("1", "Ready"), pods, cached_leases);
    free(pods);
    r[n++] = (srv_reply){.match = "GET /apis/coordination.k8s.io/v1/namespaces/sys/leases?"
                                  "labelSelector=",
                         .pieces = {srv_own(s, srv_http("200 OK", "", listed_leases))}};
    n += ms_writes(s, r + n, STATUS, EVENTS);
    const char *idle = srv_own(s, srv_http("200 OK", "", "[{\"id\":0,\"is_processing\":false}]"));
    for (int i = 0; i < PROBES; i++)
        r[n++] = (srv_reply){.match = "GET /slots ", .pieces = {idle}};
    n += ms_scale(s, r + n, "m1");
    assert_int_equal(n, SCRIPT_MAX);

    kube_client *client = ms_client(s, loop);
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
        if (ms_request_is(s->requests[i], what)) {
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

/* Runs the script for 3 s with these Leases, where a router has not acknowledged: the quorum list
 * of the Leases is asked lists times, nothing is probed, m1 is not stopped. */
static void check_held(const char *cached_leases, const char *listed_leases, int lists)
{
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    run_script(&s, r, loop, cached_leases, listed_leases, 3000, NULL);
    int first;
    assert_int_equal(count(&s, "leases?labelSelector=", &first), lists);
    assert_int_equal(count(&s, "GET /slots ", &first), 0);
    assert_int_equal(count(&s, "/inferenceservices/m1 ", &first), 0);
    srv_stop(&s);
    ev_free(loop);
}

/* The cache shows r1 acknowledging, but the API server also holds r2, which has not: no probe. */
static void test_unacknowledged_router_in_the_list_holds_it(void **state)
{
    (void)state;
    check_held(LEASE_LIST(LEASE_ACKED), LEASE_LIST(LEASE_ACKED "," LEASE_UNACKED), 1);
}

/* The cache shows r2, which has not acknowledged: nothing is asked, nothing probed. */
static void test_unacknowledged_router_in_the_cache_asks_nothing(void **state)
{
    (void)state;
    check_held(LEASE_LIST(LEASE_ACKED "," LEASE_UNACKED), LEASE_LIST(LEASE_ACKED), 0);
}

TEST_MAIN(cmocka_unit_test(test_acknowledged_ends_the_fence),
          cmocka_unit_test(test_unacknowledged_router_in_the_list_holds_it),
          cmocka_unit_test(test_unacknowledged_router_in_the_cache_asks_nothing))

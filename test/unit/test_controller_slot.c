/* The controller reads the pool's Pods from the API server right before it starts a member, and
 * starts it only when none is live there, whatever its Pod cache says: the chaos run (seed
 * 178053688) saw a target started beside a member whose Pod the operator's cache had not seen (a
 * watch cut and waiting out its backoff). Against the scripted responder: the caches show a pool
 * swapping to m0 with no Pod anywhere; the API server shows a Pod of m1 live twice (Running, then
 * Running and terminating), then none live (a Succeeded one): m0 is scaled to 1 only after the
 * third read. */
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
#include "pool/manager.h"

static const char list_no_pods[] = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                                   "\"resourceVersion\":\"100\"},\"items\":[]}";

/* The API server's answer to the read before the start: a Pod of m1 in phase, terminating or not.
 */
static char *pods_of_m1(const char *phase, bool terminating)
{
    char *body;
    assert_true(asprintf(&body,
                         "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                         "\"resourceVersion\":\"120\"},\"items\":[{\"metadata\":{\"name\":\"m1-x\","
                         "\"namespace\":\"ns\",\"uid\":\"u-x\",\"resourceVersion\":\"110\",%s"
                         "\"labels\":{\"app\":\"m1\",\"inference.llmkube.dev/service\":\"m1\"}},"
                         "\"status\":{\"phase\":\"%s\"}}]}",
                         terminating ? "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"," : "",
                         phase) > 0);
    char *http = srv_http("200 OK", "", body);
    free(body);
    return http;
}

/* Runs the manager (as the leader) against the scripted API server until a reply with stop is
 * picked (or 20 s), then frees it. */
static void run_manager(srv *s, ev_loop *loop)
{
    kube_client *client = ms_client(s, loop);
    pool_manager_opts opts = {.instance = "test"};
    pool_manager *pm = pool_manager_new(loop, client, &opts);
    assert_non_null(pm);
    assert_int_equal(pool_manager_start(pm), 0);
    pool_manager_lead(pm);
    test_loop_run(loop, 20000);
    pool_manager_free(pm);
    kube_client_free(client);
}

enum {
    STATUS = 6,
    EVENTS = 6,
    READS_MAX = 3,
    SCRIPT_MAX = MS_LISTS + READS_MAX + STATUS + EVENTS + 1
};

/* Runs the manager against the API server's script: the lists of pools, members and (no) Pods with
 * watches that stay quiet, the reads of the pool's Pods answered by reads[] in turn (each freed
 * with s), status writes and Events answered OK, and the scale of `member` that ends the run. r
 * holds the script; the requests seen stay in s until srv_stop. */
static void run_script(srv *s, srv_reply *r, ev_loop *loop, const char *pools, const char *isvcs,
                       char *const *reads, size_t n_reads, const char *member)
{
    assert_true(n_reads <= READS_MAX);
    srv_start(s, loop, r, MS_LISTS + n_reads + STATUS + EVENTS + 1);
    size_t n = ms_lists(s, r, pools, isvcs, list_no_pods, NULL);
    for (size_t i = 0; i < n_reads; i++)
        r[n++] = (srv_reply){.match = "GET /api/v1/namespaces/ns/pods?labelSelector=",
                             .pieces = {srv_own(s, reads[i])}};
    n += ms_writes(s, r + n, STATUS, EVENTS);
    n += ms_scale(s, r + n, member);
    run_manager(s, loop);
}

/* The requests s saw: every read of the pool's Pods asked for selector, and the scale of the
 * member (its path) came once, after reads of them, and asked for replicas. */
static void check_reads_then_scale(const srv *s, const char *selector, int reads,
                                   const char *member, const char *replicas)
{
    int seen = 0, scales = 0;
    for (int i = 0; i < s->nrequests; i++) {
        if (ms_request_is(s->requests[i], "GET /api/v1/namespaces/ns/pods?labelSelector=")) {
            assert_non_null(strstr(s->requests[i], selector));
            seen++;
        }
        if (ms_request_is(s->requests[i], member)) {
            assert_int_equal(seen, reads);
            assert_non_null(strstr(s->requests[i], replicas));
            scales++;
        }
    }
    assert_int_equal(scales, 1);
}

static void test_start_waits_for_the_api_servers_pods(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    char *answers[] = {pods_of_m1("Running", false), pods_of_m1("Running", true),
                       pods_of_m1("Succeeded", false)};
    run_script(&s, r, loop,
               MS_POOLS("\"phase\":\"Swapping\",\"pendingMember\":\"m0\",\"observedGeneration\":1"),
               MS_ISVCS("0", "Stopped"), answers, 3, "m0");

    /* The start came last, after three reads of the pool's Pods, and asked for one replica. */
    check_reads_then_scale(&s,
                           "labelSelector=inference.llmkube.dev%2Fservice%20in%20%28m0%2Cm1%29 ", 3,
                           "/inferenceservices/m0 ", "/spec/replicas\",\"value\":1");

    srv_stop(&s);
    ev_free(loop);
}

/* A stop without an idle probe (the Pod cache shows m1 at 1 replica with no running Pod, so the
 * plan says NoRunningPod) is read first too: the API server shows m1's Pod with a running
 * container (it may be serving), so the stop is held; the next read finds it Pending, not
 * running, and m1 is scaled to 0 only then. */
static void test_unprobed_stop_waits_for_the_api_servers_pods(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    const char *running =
        "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"120\"},"
        "\"items\":[{\"metadata\":{\"name\":\"m1-x\",\"namespace\":\"ns\",\"uid\":\"u-x\","
        "\"labels\":{\"inference.llmkube.dev/service\":\"m1\"}},\"status\":{\"phase\":\"Running\","
        "\"containerStatuses\":[{\"name\":\"server\",\"state\":{\"running\":{}}}]}}]}";
    const char *pending =
        "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"121\"},"
        "\"items\":[{\"metadata\":{\"name\":\"m1-y\",\"namespace\":\"ns\",\"uid\":\"u-y\","
        "\"labels\":{\"inference.llmkube.dev/"
        "service\":\"m1\"}},\"status\":{\"phase\":\"Pending\"}}]}";
    char *answers[] = {srv_http("200 OK", "", running), srv_http("200 OK", "", pending)};
    run_script(&s, r, loop, MS_POOLS(MS_DRAINING_M1), MS_ISVCS("1", "Ready"), answers, 2, "m1");

    /* The stop came after two reads of m1's own Pods, and set m1 to 0. */
    check_reads_then_scale(&s, "labelSelector=inference.llmkube.dev%2Fservice%3Dm1 ", 2,
                           "/inferenceservices/m1 ", "/spec/replicas\",\"value\":0");

    srv_stop(&s);
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_start_waits_for_the_api_servers_pods),
          cmocka_unit_test(test_unprobed_stop_waits_for_the_api_servers_pods))

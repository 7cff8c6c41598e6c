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
#include "scripted_http.h"

#include "kube/client.h"
#include "pool/manager.h"

static const char list_pools[] =
    "{\"kind\":\"ModelPoolList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\",\"metadata\":{"
    "\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
    "\"uid\":\"u-p\",\"resourceVersion\":\"90\",\"generation\":1},\"spec\":{\"default\":\"m0\","
    "\"members\":[{\"inferenceServiceRef\":{\"name\":\"m0\"}},{\"inferenceServiceRef\":{\"name\":"
    "\"m1\"}}]},\"status\":{\"phase\":\"Swapping\",\"pendingMember\":\"m0\",\"observedGeneration\":"
    "1}}]}";

static const char list_isvcs[] =
    "{\"kind\":\"InferenceServiceList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\","
    "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"m0\","
    "\"namespace\":\"ns\",\"uid\":\"u-m0\",\"resourceVersion\":\"91\"},\"spec\":{\"replicas\":0,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Stopped\"}},{\"metadata\":{\"name\":\"m1\","
    "\"namespace\":\"ns\",\"uid\":\"u-m1\",\"resourceVersion\":\"92\"},\"spec\":{\"replicas\":0,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Stopped\"}}]}";

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

static bool request_is(const char *req, const char *what)
{
    const char *hit = strstr(req, what);
    return hit && hit < strstr(req, "\r\n");
}

/* Runs the manager (as the leader) against the scripted API server until a reply with stop is
 * picked (or 20 s), then frees it. */
static void run_manager(srv *s, ev_loop *loop)
{
    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", s->port) > 0);
    kube_client *client = kube_client_new(loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(client);
    pool_manager_opts opts = {.instance = "test"};
    pool_manager *pm = pool_manager_new(loop, client, &opts);
    assert_non_null(pm);
    assert_int_equal(pool_manager_start(pm), 0);
    pool_manager_lead(pm);
    test_loop_run(loop, 20000);
    pool_manager_free(pm);
    kube_client_free(client);
}

enum { STATUS = 6, EVENTS = 6, READS_MAX = 3, SCRIPT_MAX = 6 + READS_MAX + STATUS + EVENTS + 1 };

/* Runs the manager against the API server's script: the lists of pools, members and (no) Pods with
 * watches that stay quiet, the reads of the pool's Pods answered by reads[] in turn (each freed
 * with s), status writes and Events answered OK, and the scale of `member` that ends the run. r
 * holds the script; the requests seen stay in s until srv_stop. */
static void run_script(srv *s, srv_reply *r, ev_loop *loop, const char *pools, const char *isvcs,
                       char *const *reads, size_t n_reads, const char *member)
{
    static const char *const lists[] = {
        "GET /apis/inference.llmkube.dev/v1alpha1/modelpools?limit=",
        "GET /apis/inference.llmkube.dev/v1alpha1/inferenceservices?limit=",
        "GET /api/v1/pods?limit=",
        "/modelpools?watch=1",
        "/inferenceservices?watch=1",
        "/api/v1/pods?watch=1",
    };
    assert_true(n_reads <= READS_MAX);
    char *scale;
    assert_true(asprintf(&scale,
                         "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                         "inferenceservices/%s ",
                         member) > 0);
    size_t n = 0;
    for (size_t i = 0; i < 6; i++)
        r[n++] = (srv_reply){.match = lists[i], .delay_ms = i >= 3 ? 60000 : 0};
    for (size_t i = 0; i < n_reads; i++)
        r[n++] = (srv_reply){.match = "GET /api/v1/namespaces/ns/pods?labelSelector="};
    for (int i = 0; i < STATUS; i++)
        r[n++] = (srv_reply){.match = "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                                      "modelpools/p/status "};
    for (int i = 0; i < EVENTS; i++)
        r[n++] = (srv_reply){.match = "POST /api/v1/namespaces/ns/events "};
    r[n++] = (srv_reply){.match = scale, .stop = true};
    srv_start(s, loop, r, n);
    srv_own(s, scale);
    r[0].pieces[0] = srv_own(s, srv_http("200 OK", "", pools));
    r[1].pieces[0] = srv_own(s, srv_http("200 OK", "", isvcs));
    r[2].pieces[0] = srv_own(s, srv_http("200 OK", "", list_no_pods));
    for (size_t i = 0; i < n_reads; i++)
        r[6 + i].pieces[0] = srv_own(s, reads[i]);
    /* The status write's answer has the version the cache has: nothing to wait for. */
    const char *status_ok =
        srv_own(s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"90\"}}"));
    const char *created = srv_own(s, srv_http("201 Created", "", "{}"));
    for (size_t i = 6 + n_reads; i < 6 + n_reads + STATUS; i++)
        r[i].pieces[0] = status_ok;
    for (size_t i = 6 + n_reads + STATUS; i < 6 + n_reads + STATUS + EVENTS; i++)
        r[i].pieces[0] = created;
    r[n - 1].pieces[0] =
        srv_own(s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"130\"}}"));
    run_manager(s, loop);
}

static void test_start_waits_for_the_api_servers_pods(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    srv s;
    srv_reply r[SCRIPT_MAX];
    char *answers[] = {pods_of_m1("Running", false), pods_of_m1("Running", true),
                       pods_of_m1("Succeeded", false)};
    run_script(&s, r, loop, list_pools, list_isvcs, answers, 3, "m0");

    /* The start came last, after three reads of the pool's Pods, and asked for one replica. */
    int reads = 0, starts = 0;
    for (int i = 0; i < s.nrequests; i++) {
        if (request_is(s.requests[i], "GET /api/v1/namespaces/ns/pods?labelSelector=")) {
            assert_non_null(strstr(s.requests[i],
                                   "labelSelector=inference.llmkube.dev%2Fservice%20in%20%28m0%"
                                   "2Cm1%29 "));
            reads++;
        }
        if (request_is(s.requests[i], "/inferenceservices/m0 ")) {
            assert_int_equal(reads, 3);
            assert_non_null(strstr(s.requests[i], "/spec/replicas\",\"value\":1"));
            starts++;
        }
    }
    assert_int_equal(starts, 1);

    srv_stop(&s);
    ev_free(loop);
}

static const char list_pools_draining[] =
    "{\"kind\":\"ModelPoolList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\",\"metadata\":{"
    "\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
    "\"uid\":\"u-p\",\"resourceVersion\":\"90\",\"generation\":1},\"spec\":{\"default\":\"m0\","
    "\"members\":[{\"inferenceServiceRef\":{\"name\":\"m0\"}},{\"inferenceServiceRef\":{\"name\":"
    "\"m1\"}}]},\"status\":{\"phase\":\"Swapping\",\"residentMember\":\"m1\",\"pendingMember\":"
    "\"m0\",\"observedGeneration\":1,\"members\":[{\"name\":\"m1\",\"resident\":true,"
    "\"releasing\":true},{\"name\":\"m0\"}]}}]}";

static const char list_isvcs_m1_up[] =
    "{\"kind\":\"InferenceServiceList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\","
    "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"m0\","
    "\"namespace\":\"ns\",\"uid\":\"u-m0\",\"resourceVersion\":\"91\"},\"spec\":{\"replicas\":0,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Stopped\"}},{\"metadata\":{\"name\":\"m1\","
    "\"namespace\":\"ns\",\"uid\":\"u-m1\",\"resourceVersion\":\"92\"},\"spec\":{\"replicas\":1,"
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Ready\"}}]}";

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
    run_script(&s, r, loop, list_pools_draining, list_isvcs_m1_up, answers, 2, "m1");

    /* The stop came after two reads of m1's own Pods, and set m1 to 0. */
    int reads = 0, stops = 0;
    for (int i = 0; i < s.nrequests; i++) {
        if (request_is(s.requests[i], "GET /api/v1/namespaces/ns/pods?labelSelector=")) {
            assert_non_null(
                strstr(s.requests[i], "labelSelector=inference.llmkube.dev%2Fservice%3Dm1 "));
            reads++;
        }
        if (request_is(s.requests[i], "/inferenceservices/m1 ")) {
            assert_int_equal(reads, 2);
            assert_non_null(strstr(s.requests[i], "/spec/replicas\",\"value\":0"));
            stops++;
        }
    }
    assert_int_equal(stops, 1);

    srv_stop(&s);
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_start_waits_for_the_api_servers_pods),
          cmocka_unit_test(test_unprobed_stop_waits_for_the_api_servers_pods))

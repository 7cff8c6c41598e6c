/* manager_script: the pool manager's script against the scripted responder, shared by the
 * controller tests (see manager_script.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "manager_script.h"

size_t ms_lists(srv *s, srv_reply *r, const char *pools, const char *isvcs, const char *pods,
                const char *leases)
{
    static const char *const lists[] = {
        "GET /apis/inference.llmkube.dev/v1alpha1/modelpools?limit=",
        "GET /apis/inference.llmkube.dev/v1alpha1/inferenceservices?limit=",
        "GET /api/v1/pods?limit=",
        "GET /apis/coordination.k8s.io/v1/namespaces/sys/leases?limit=",
    };
    static const char *const watches[] = {
        "/modelpools?watch=1",
        "/inferenceservices?watch=1",
        "/api/v1/pods?watch=1",
        "/leases?watch=1",
    };
    const char *bodies[] = {pools, isvcs, pods, leases};
    size_t kinds = leases ? 4 : 3, n = 0;
    for (size_t i = 0; i < kinds; i++)
        r[n++] = (srv_reply){.match = lists[i],
                             .pieces = {srv_own(s, srv_http("200 OK", "", bodies[i]))}};
    for (size_t i = 0; i < kinds; i++)
        r[n++] = (srv_reply){.match = watches[i], .delay_ms = 60000};
    return n;
}

size_t ms_writes(srv *s, srv_reply *r, int status, int events)
{
    const char *status_ok =
        srv_own(s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"90\"}}"));
    const char *created = srv_own(s, srv_http("201 Created", "", "{}"));
    size_t n = 0;
    for (int i = 0; i < status; i++)
        r[n++] = (srv_reply){.match = "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                                      "modelpools/p/status ",
                             .pieces = {status_ok}};
    for (int i = 0; i < events; i++)
        r[n++] = (srv_reply){.match = "POST /api/v1/namespaces/ns/events ", .pieces = {created}};
    return n;
}

size_t ms_scale(srv *s, srv_reply *r, const char *member)
{
    char *scale;
    assert_true(asprintf(&scale,
                         "PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/ns/"
                         "inferenceservices/%s ",
                         member) > 0);
    *r =
        (srv_reply){.match = srv_own(s, scale),
                    .pieces = {srv_own(
                        s, srv_http("200 OK", "", "{\"metadata\":{\"resourceVersion\":\"130\"}}"))},
                    .stop = true};
    return 1;
}

bool ms_request_is(const char *req, const char *what)
{
    const char *hit = strstr(req, what);
    return hit && hit < strstr(req, "\r\n");
}

kube_client *ms_client(srv *s, ev_loop *loop)
{
    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", s->port) > 0);
    kube_client *client = kube_client_new(loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(client);
    return client;
}

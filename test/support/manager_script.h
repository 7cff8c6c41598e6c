/* manager_script: what the controller tests (test_controller_*.c) script alike for the pool manager
 * against the scripted responder: the pool p of ns with its members m0 and m1, the lists and quiet
 * watches of a starting manager, the answers to its status writes and Events, the scale of a
 * member that ends the run, and a kube client of the responder. Part of the test-support library
 * (test/support); failures fail the test (cmocka asserts). */
#ifndef MP_TEST_MANAGER_SCRIPT_H
#define MP_TEST_MANAGER_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/client.h"
#include "loop/ev.h"
#include "scripted_http.h"

/* The ModelPoolList of p (default m0, members m0 and m1) with the status status (an object's
 * members). */
#define MS_POOLS(status)                                                                           \
    "{\"kind\":\"ModelPoolList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\",\"metadata\":{" \
    "\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","  \
    "\"uid\":\"u-p\",\"resourceVersion\":\"90\",\"generation\":1},\"spec\":{\"default\":\"m0\","   \
    "\"members\":[{\"inferenceServiceRef\":{\"name\":\"m0\"}},{\"inferenceServiceRef\":{\"name\":" \
    "\"m1\"}}]},\"status\":{" status "}}]}"

/* p's status while its resident m1 is drained (releasing) for the pending m0. */
#define MS_DRAINING_M1                                                                             \
    "\"phase\":\"Swapping\",\"residentMember\":\"m1\",\"pendingMember\":\"m0\","                   \
    "\"observedGeneration\":1,\"members\":[{\"name\":\"m1\",\"resident\":true,"                    \
    "\"releasing\":true},{\"name\":\"m0\"}]"

/* The InferenceServiceList of m0 (llamacpp, 0 replicas, Stopped) and m1 (llamacpp, m1_replicas,
 * in phase m1_phase). */
#define MS_ISVCS(m1_replicas, m1_phase)                                                            \
    "{\"kind\":\"InferenceServiceList\",\"apiVersion\":\"inference.llmkube.dev/v1alpha1\","        \
    "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[{\"metadata\":{\"name\":\"m0\","        \
    "\"namespace\":\"ns\",\"uid\":\"u-m0\",\"resourceVersion\":\"91\"},\"spec\":{\"replicas\":0,"  \
    "\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Stopped\"}},{\"metadata\":{\"name\":"       \
    "\"m1\","                                                                                      \
    "\"namespace\":\"ns\",\"uid\":\"u-m1\",\"resourceVersion\":\"92\"},\"spec\":{"                 \
    "\"replicas\":" m1_replicas ",\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"" m1_phase     \
    "\"}}]}"

/* How many replies ms_lists sets: without and with the router Leases. */
enum { MS_LISTS = 6, MS_LISTS_LEASES = 8 };

/* Once s is started: the replies to a starting manager's lists from r[0] on, the pools, members
 * and Pods (and, where leases is not NULL, the router Leases of sys) answered 200 with these
 * bodies, then their watches, which stay quiet for a minute. Returns how many it set. */
size_t ms_lists(srv *s, srv_reply *r, const char *pools, const char *isvcs, const char *pods,
                const char *leases);
/* Once s is started: from r[0] on, status writes of p's status answered with the version the
 * cache has (nothing to wait for), then events Events answered 201. Returns status + events. */
size_t ms_writes(srv *s, srv_reply *r, int status, int events);
/* Once s is started: r[0] the scale of member (its PATCH), answered, which stops the loop.
 * Returns 1. */
size_t ms_scale(srv *s, srv_reply *r, const char *member);

/* Whether what is in the request line of req. */
bool ms_request_is(const char *req, const char *what);

/* A kube client of s (kube_client_free it). */
kube_client *ms_client(srv *s, ev_loop *loop);

#endif

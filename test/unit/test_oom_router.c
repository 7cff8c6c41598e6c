/* The out-of-memory test (test/support/oom_case.h) over the router's pure parts: model names
 * resolved from the caches and the /v1/models list, the header list sent to a member (curl's own
 * allocations are not failed, the forwarder's are) and the copy of a Pod a request went to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "api/records.h"
#include "router/fwd_headers.h"
#include "router/oai.h"
#include "router/podcheck.h"
#include "router/routes.h"

#include "oom_case.h"

/* The router's model names from the caches: lookups and the /v1/models list. */
static const char *const routes_pools[] = {
    "{\"metadata\":{\"namespace\":\"home\",\"name\":\"p\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
    "{\"inferenceServiceRef\":{\"name\":\"b\"}}]},\"status\":{\"residentMember\":\"a\"}}",
    "{\"metadata\":{\"namespace\":\"team\",\"name\":\"q\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"c\"}}]}}",
};

static const char *const routes_isvcs[] = {
    "{\"metadata\":{\"namespace\":\"home\",\"name\":\"a\",\"annotations\":{"
    "\"modelpool-operator.dev/served-model\":\"Org/Model-7B\","
    "\"modelpool-operator.dev/model-aliases\":\"small, fast\"}}}",
    "{\"metadata\":{\"namespace\":\"home\",\"name\":\"b\"}}",
    "{\"metadata\":{\"namespace\":\"team\",\"name\":\"c\"}}",
};

static int sc_routes(char **out)
{
    store *pools = NULL, *isvcs = NULL;
    int rc = oom_store_fill(&pools, &api_pool_codec, NULL, NULL, routes_pools, 2);
    if (rc == 0)
        rc = oom_store_fill(&isvcs, &api_isvc_codec, NULL, NULL, routes_isvcs, 3);
    rt_routes *r = rc == 0 ? rt_routes_new(pools, isvcs, "home") : NULL;
    if (rc == 0 && !r)
        rc = -ENOMEM;
    char *text = rc == 0 ? oom_answer("%s", "") : NULL;
    static const char *const names[] = {"small", "Org/Model-7B", "b", "team/c", "c", "nothing"};
    for (size_t i = 0; rc == 0 && i < sizeof(names) / sizeof(names[0]); i++) {
        rt_route route = {0};
        const char *other = NULL;
        int lrc = rt_routes_lookup(r, names[i], &route, &other);
        if (lrc == -ENOMEM) {
            rc = lrc;
            break;
        }
        char *more = oom_answer("%s %s=%d:%s/%s/%s", text, names[i], lrc, lrc ? "-" : route.ns,
                                lrc ? "-" : route.pool, lrc ? "-" : route.member);
        free(text);
        text = more;
    }
    rt_oai_model *models = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = rt_routes_models(r, &models, &n);
    char *list = rc == 0 ? rt_oai_models(models, n) : NULL;
    if (rc == 0 && !list)
        rc = -ENOMEM;
    if (rc == 0)
        *out = oom_answer("%s|%s", text, list);
    free(list);
    free(models);
    free(text);
    rt_routes_free(r);
    store_free(pools);
    store_free(isvcs);
    return rc;
}

/* The router's forwarding side: the header list sent to a member (curl's own allocations are not
 * failed, the forwarder's are) and the copy of a Pod a request was sent to. */
static int sc_forward(char **out)
{
    static const fwd_header h[] = {{"Connection", "close, X-Drop"},
                                   {"X-Drop", "1"},
                                   {"Content-Type", "application/json"},
                                   {"X-Empty", ""},
                                   {"X-Forwarded-For", "1.1.1.1"}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/chat/completions",
                       .headers = h,
                       .nheaders = sizeof(h) / sizeof(h[0]),
                       .client_addr = "10.0.0.1"};
    struct curl_slist *l = NULL;
    int rc = fwd_build_headers(&l, &req);
    if (rc < 0) {
        curl_slist_free_all(l);
        return rc;
    }
    api_pod pod = {.ns = "ns", .name = "a-0", .uid = "u-1", .ip = "10.1.0.7"};
    rt_podref r = {0};
    if ((rc = rt_podref_set(&r, &pod)) < 0) {
        curl_slist_free_all(l);
        return rc;
    }
    char lines[512] = "";
    size_t n = 0;
    for (const struct curl_slist *i = l; i; i = i->next)
        n += (size_t)snprintf(lines + n, sizeof(lines) - n, "%s|", i->data);
    *out = oom_answer("%s %s/%s %s %s", lines, r.ns, r.name, r.uid, r.ip);
    curl_slist_free_all(l);
    rt_podref_clear(&r);
    return 0;
}

OOM_TEST(routes)
OOM_TEST(forward)

OOM_MAIN(cmocka_unit_test(test_routes), cmocka_unit_test(test_forward))

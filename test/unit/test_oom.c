/* The out-of-memory test, as SQLite's: each scenario over the pure modules and the decoders runs
 * once to learn its answer, then again with the 1st, 2nd, ... Nth allocation failing (once, then
 * from the Nth on), until a run completes without a failure injected. Each run must either give
 * the same answer or report an error (a negative errno, NULL, a kube_error): never crash, never
 * leak (ASan/LSan and valgrind check the leaks at exit), never succeed with a wrong answer.
 * OOM_SHOW=1 in the environment prints each scenario's answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "api/records.h"
#include "informer/expect.h"
#include "informer/informer.h"
#include "informer/store.h"
#include "informer/workqueue.h"
#include "kube/config.h"
#include "kube/error.h"
#include "kube/event.h"
#include "kube/watchdec.h"
#include "leader/lease.h"
#include "loop/ev.h"
#include "metrics/metrics.h"
#include "oom_alloc.h"
#include "pool/fence_ack.h"
#include "pool/plan.h"
#include "pool/pool_metrics.h"
#include "pool/probe.h"
#include "pool/snapshot.h"
#include "router/fwd_headers.h"
#include "router/model.h"
#include "router/oai.h"
#include "router/podcheck.h"
#include "router/routes.h"
#include "util/strmap.h"

/* A scenario: 0 with its answer in *out (text, malloc'd with the allocator paused), or < 0 for an
 * error it reported. */
typedef int (*oom_scenario)(char **out);

/* The answer's text, written with injection paused (the test's own bookkeeping). */
static char *answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *answer(const char *fmt, ...)
{
    oom_pause(true);
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    assert_true(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    oom_pause(false);
    return s;
}

static void run(const char *name, oom_scenario sc)
{
    char *want = NULL;
    oom_arm(0, false);
    assert_int_equal(sc(&want), 0);
    assert_non_null(want);
    if (getenv("OOM_SHOW"))
        printf("%s\n", want);
    unsigned long runs = 0;
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (unsigned long n = 1;; n++) {
            char *got = NULL;
            oom_arm(n, persistent);
            int rc = sc(&got);
            bool injected = oom_injected();
            oom_arm(0, false);
            runs++;
            if (rc == 0) {
                if (!got || strcmp(got, want) != 0)
                    fail_msg("%s: failing allocation %lu%s: success with a wrong answer:\n%s\n"
                             "instead of\n%s",
                             name, n, persistent ? " on" : "", got ? got : "(none)", want);
            } else if (!injected) {
                fail_msg("%s: run %lu failed (%d) with no failure injected", name, n, rc);
            }
            free(got);
            if (!injected)
                break;
        }
    }
    free(want);
    printf("%s: %lu runs\n", name, runs);
}

/* Records, stores and their indexes, the snapshot, the plan and the status patch: the operator's
 * whole pure path from the caches' JSON to the write. */
static const char *const pools_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"p\",\"generation\":2,\"resourceVersion\":\"5\"}"
    ","
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
    "{\"inferenceServiceRef\":{\"name\":\"b\"}},{\"inferenceServiceRef\":{\"name\":\"gone\"}}],"
    "\"default\":\"b\",\"swapBudget\":\"60s\"},"
    "\"status\":{\"phase\":\"Ready\",\"residentMember\":\"a\",\"conditions\":[{\"type\":"
    "\"SlotAllocated\",\"status\":\"True\",\"reason\":\"Resident\",\"message\":\"a holds it\","
    "\"lastTransitionTime\":\"2026-12-02T19:08:52Z\"}],\"members\":[{\"name\":\"a\",\"phase\":"
    "\"Ready\",\"resident\":true}]}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"other\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"b\"}}]}}",
};
static const char *const isvcs_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\",\"resourceVersion\":\"7\","
    "\"annotations\":{\"inference.llmkube.dev/idle-endpoint\":\"/idle\"}},"
    "\"spec\":{\"replicas\":1,\"runtime\":\"generic\",\"endpoint\":{\"port\":9000}},"
    "\"status\":{\"phase\":\"Ready\"}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b\",\"resourceVersion\":\"8\"},"
    "\"spec\":{\"replicas\":1,\"runtime\":\"vllm\"},\"status\":{\"phase\":\"Ready\"}}",
};
static const char *const pods_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a-1\",\"uid\":\"u1\","
    "\"labels\":{\"inference.llmkube.dev/service\":\"a\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"server\",\"image\":\"x\","
    "\"ports\":[{\"name\":\"http\",\"containerPort\":9090,\"protocol\":\"TCP\"}]}]},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.5\","
    "\"containerStatuses\":[{\"state\":{\"running\":{}}}]}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b-1\",\"uid\":\"u2\","
    "\"labels\":{\"inference.llmkube.dev/service\":\"b\"}},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.6\","
    "\"containerStatuses\":[{\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\"}}}]}}",
};

static int fill(store **out, const store_codec *codec, const char *index, store_index_fn fn,
                const char *const *json, size_t n)
{
    store *s = store_new(codec);
    if (!s)
        return -ENOMEM;
    int rc = index ? store_add_index(s, index, fn, NULL) : 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        cJSON *o = cJSON_Parse(json[i]);
        rc = o ? store_put(s, o, NULL) : -ENOMEM; /* good JSON: NULL is out of memory */
    }
    if (rc < 0) {
        store_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static const prober_memo memo = {.verdict = PROBE_IDLE, .at_mono_ms = 1000, .sent_mono_ms = 400};
static const prober_memo *lookup(void *ud, const char *uid)
{
    (void)ud;
    return strcmp(uid, "u1") == 0 ? &memo : NULL;
}

/* A swap asked for through the annotation: b wanted, a resident, idle by its probe. */
static const char *const swap_pools_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"p\",\"generation\":3,\"resourceVersion\":\"9\","
    "\"annotations\":{\"modelpool-operator.dev/request\":\"b\"}},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
    "{\"inferenceServiceRef\":{\"name\":\"b\"}}],\"default\":\"a\",\"swapBudget\":\"60s\"},"
    "\"status\":{\"phase\":\"Ready\",\"residentMember\":\"a\",\"observedGeneration\":3,"
    "\"conditions\":[{\"type\":\"SlotAllocated\",\"status\":\"True\",\"reason\":\"Resident\","
    "\"message\":\"a holds it\",\"lastTransitionTime\":\"2026-12-02T19:08:52Z\"}],"
    "\"members\":[{\"name\":\"a\",\"phase\":\"Ready\",\"resident\":true},{\"name\":\"b\","
    "\"resident\":false}]}}",
};
static const char *const swap_isvcs_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\",\"resourceVersion\":\"7\","
    "\"annotations\":{\"inference.llmkube.dev/idle-endpoint\":\"/idle\"}},"
    "\"spec\":{\"replicas\":1,\"runtime\":\"generic\",\"endpoint\":{\"port\":9000}},"
    "\"status\":{\"phase\":\"Ready\"}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b\",\"resourceVersion\":\"8\"},"
    "\"spec\":{\"replicas\":0,\"runtime\":\"llamacpp\"},\"status\":{\"phase\":\"Pending\"}}",
};

typedef struct {
    const char *const *pools, *const *isvcs, *const *pods;
    size_t npools, nisvcs, npods;
} plan_world;

static int plan_in(const plan_world *w, char **out)
{
    store *pools = NULL, *isvcs = NULL, *pods = NULL;
    int rc = fill(&pools, &api_pool_codec, API_INDEX_MEMBER, api_index_pool_members, w->pools,
                  w->npools);
    if (rc == 0)
        rc = fill(&isvcs, &api_isvc_codec, NULL, NULL, w->isvcs, w->nisvcs);
    if (rc == 0)
        rc = fill(&pods, &api_pod_codec, API_INDEX_SERVICE, api_index_pod_service, w->pods,
                  w->npods);
    pool_snapshot snap;
    if (rc == 0) {
        pool_sources src = {pools, isvcs, pods, lookup, NULL, true};
        rc = pool_snapshot_build(store_get(pools, "ns/p"), &src, 1764763200000LL, 4000, &snap);
    }
    if (rc == 0) {
        plan_result *p = NULL;
        rc = plan_build(&snap.snap, &p);
        char *patch = rc == 0 ? api_status_patch(&p->status, "5") : NULL;
        if (rc == 0 && !patch)
            rc = -ENOMEM;
        if (rc == 0) {
            char *acts = answer("%s", patch);
            for (size_t i = 0; i < p->n_actions; i++) {
                const plan_action *a = &p->actions[i];
                char *more = answer("%s\n%d %s %d %s %s %s %zu", acts, (int)a->kind,
                                    a->member ? a->member : "-", (int)a->replicas,
                                    a->runtime ? a->runtime : "-", a->reason ? a->reason : "-",
                                    a->message ? a->message : "-", a->n_pods);
                free(acts);
                acts = more;
            }
            *out = answer("%s\nrequeue %lld", acts, (long long)p->requeue_after_ms);
            free(acts);
        }
        free(patch);
        plan_free(p);
        pool_snapshot_release(&snap);
    }
    store_free(pools);
    store_free(isvcs);
    store_free(pods);
    return rc;
}

/* Claimed and missing members: Degraded. */
static int sc_plan(char **out)
{
    plan_world w = {pools_json, isvcs_json, pods_json, 2, 2, 2};
    return plan_in(&w, out);
}

/* A swap asked for: the probe of the resident, the scale down, the status. */
static int sc_plan_swap(char **out)
{
    plan_world w = {swap_pools_json, swap_isvcs_json, pods_json, 1, 2, 1};
    return plan_in(&w, out);
}

/* The three records from real objects as kubectl prints them (test/unit/fixtures/records): decoded,
 * then read back field by field. */
static char *fixture(const char *name)
{
    oom_pause(true);
    char path[512];
    snprintf(path, sizeof(path), "%s/test/unit/fixtures/records/%s", MP_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *text = calloc(1, 1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    assert_true(n > 0 && n < (1 << 16) - 1);
    fclose(f);
    oom_pause(false);
    return text;
}

static int sc_records(char **out)
{
    char *texts[] = {fixture("pod.json"), fixture("inferenceservice.json"),
                     fixture("modelpool.json")};
    cJSON *docs[3];
    for (int i = 0; i < 3; i++)
        docs[i] = cJSON_Parse(texts[i]);
    int rc = docs[0] && docs[1] && docs[2] ? 0 : -ENOMEM;
    int err = 0;
    api_pod *pod = rc == 0 ? api_pod_decode(docs[0], &err) : NULL;
    api_isvc *isvc = rc == 0 ? api_isvc_decode(docs[1], &err) : NULL;
    api_pool *pool = rc == 0 ? api_pool_decode(docs[2], &err) : NULL;
    if (rc == 0 && (!pod || !isvc || !pool))
        rc = err ? err : -ENOMEM;
    if (rc == 0) {
        char *members = answer("%s", "");
        for (size_t i = 0; i < pool->n_members; i++) {
            char *more = answer("%s %s", members, pool->members[i] ? pool->members[i] : "-");
            free(members);
            members = more;
        }
        const char *removed[16];
        size_t nremoved = api_removed_names(pool, removed);
        *out =
            answer("%s %s %s %s %s %d %d %d %d %s|%s %s %s %s %d|%s %s%s %zu %zu %zu", pod->name,
                   pod->ns, pod->member ? pod->member : "-", pod->ip ? pod->ip : "-", pod->rv,
                   pod->port, (int)pod->phase, pod->running, pod->ready,
                   pod->waiting ? pod->waiting : "-", isvc->name, isvc->phase ? isvc->phase : "-",
                   isvc->runtime ? isvc->runtime : "-", isvc->rv, (int)isvc->replicas, pool->name,
                   pool->ns, members, pool->status.n_members, pool->status.n_conditions, nremoved);
        free(members);
    }
    free(pod);
    free(isvc);
    free(pool);
    for (int i = 0; i < 3; i++) {
        cJSON_Delete(docs[i]);
        free(texts[i]);
    }
    return rc;
}

/* The drain fence's early end: a router's Lease decoded from its fixture, the first observations of
 * it and of another Lease noted (and one forgotten), and the rule over both. */
static int sc_fence_ack(char **out)
{
    char *text = fixture("lease.json");
    cJSON *doc = cJSON_Parse(text);
    free(text);
    int err = 0, rc = 0;
    api_router_lease *acked = doc ? api_router_lease_decode(doc, &err) : NULL;
    cJSON_Delete(doc);
    api_router_lease other = {.name = "r2", .ns = "modelpool-system", .rv = "7", .duration_s = 10};
    fence_seen *t = fence_seen_new();
    uint64_t seen[4] = {0};
    if (!acked || !t)
        rc = err ? err : -ENOMEM;
    if (rc == 0)
        rc = fence_seen_note(t, "modelpool-system/a", acked->rv, 1000, &seen[0]);
    if (rc == 0)
        rc = fence_seen_note(t, "modelpool-system/r2", other.rv, 2000, &seen[1]);
    if (rc == 0)
        rc = fence_seen_note(t, "modelpool-system/a", acked->rv, 3000, &seen[2]);
    if (rc == 0) {
        fence_seen_forget(t, "modelpool-system/r2");
        rc = fence_seen_note(t, "modelpool-system/r2", other.rv, 4000, &seen[3]);
    }
    if (rc == 0) {
        fence_ack_lease leases[] = {{acked, seen[2]}, {&other, seen[3]}};
        fence_ack_verdict early =
            fence_ack_check(leases, 2, 5000, 2000, "default", "shared-gpu", "llama-8b");
        fence_ack_verdict late =
            fence_ack_check(leases, 2, 16000, 2000, "default", "shared-gpu", "llama-8b");
        *out = answer("%llu %llu %llu %llu %d %s %llu %d", (unsigned long long)seen[0],
                      (unsigned long long)seen[1], (unsigned long long)seen[2],
                      (unsigned long long)seen[3], (int)early.result,
                      early.holder ? early.holder->name : "-", (unsigned long long)early.expires_ms,
                      (int)late.result);
    }
    fence_seen_free(t);
    free(acked);
    return rc;
}

/* The scale and request patches of records decoded from the cache's JSON. */
static int sc_patches(char **out)
{
    cJSON *o = cJSON_Parse(isvcs_json[0]);
    if (!o)
        return -ENOMEM;
    int err = 0;
    api_isvc *isvc = api_isvc_decode(o, &err);
    cJSON_Delete(o);
    if (!isvc)
        return err ? err : -ENOMEM;
    bool jp = false;
    char *scale = api_scale_patch(isvc, 0, &jp);
    char *req = api_request_set_patch("a", "5");
    char *clr = api_request_clear_patch("a");
    char *wd = api_withdraw_patch("a", true, "6");
    char *wdc = api_withdraw_clear_patch("a");
    int rc = scale && req && clr && wd && wdc ? 0 : -ENOMEM;
    if (rc == 0)
        *out = answer("%s %d\n%s\n%s\n%s\n%s", scale, jp, req, clr, wd, wdc);
    free(scale);
    free(req);
    free(clr);
    free(wd);
    free(wdc);
    free(isvc);
    return rc;
}

/* Watch events cut at every few bytes, decoded and put in a store, then the relist diff. */
static int sc_watch(char **out)
{
    static const char stream[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"1\"}}}\n\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"2\"},\"x\":[1,2,3]}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\","
        "\"resourceVersion\":\"3\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Gone\","
        "\"message\":\"too old resource version\"}}\n";
    store *s = store_new(NULL);
    if (!s)
        return -ENOMEM;
    kube_wdec d;
    kube_wdec_init(&d, 0);
    kube_error err = {0};
    char *types = answer("%s", "");
    int rc = 0;
    for (size_t at = 0; at < sizeof(stream) - 1 && rc == 0; at += 7) {
        size_t n = sizeof(stream) - 1 - at < 7 ? sizeof(stream) - 1 - at : 7;
        rc = kube_wdec_feed(&d, stream + at, n, &err) < 0 ? -ENOMEM : 0;
        kube_wdec_event ev;
        int got;
        while (rc == 0 && (got = kube_wdec_next(&d, &ev, &err)) == 1) {
            char *more = answer("%s %s", types, ev.type);
            free(types);
            types = more;
            if (strcmp(ev.type, "ERROR") == 0) {
                kube_error_from_status(&err, ev.object, 0);
                cJSON_Delete(ev.object);
                if (err.kind == KUBE_ERR_NOMEM) {
                    rc = -ENOMEM;
                    break;
                }
                more = answer("%s %ld %s %s", types, err.http_code, err.reason ? err.reason : "-",
                              err.message);
                free(types);
                types = more;
                kube_error_clear(&err);
            } else {
                rc = store_put(s, ev.object, NULL);
            }
        }
        if (rc == 0 && got < 0)
            rc = err.kind == KUBE_ERR_NOMEM ? -ENOMEM : -EINVAL;
    }
    if (rc == 0 && kube_wdec_finish(&d, &err) < 0)
        rc = -EINVAL;
    /* A relist that drops a and changes b. */
    if (rc == 0) {
        cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\","
                               "\"resourceVersion\":\"4\"}}");
        store_item it = {0};
        rc = o ? store_decode(s, o, &it) : -ENOMEM;
        informer_change *ch = NULL;
        size_t nch = 0;
        if (rc == 0)
            rc = informer_diff(s, &it, 1, &ch, &nch);
        if (rc == 0) {
            char *more = answer("%s | %zu changes, %zu cached", types, nch, store_count(s));
            free(types);
            types = more;
            informer_changes_free(ch, nch);
        }
        store_item_release(s, &it);
    }
    kube_error_clear(&err);
    kube_wdec_free(&d);
    store_free(s);
    if (rc == 0)
        *out = types;
    else
        free(types);
    return rc;
}

/* A kubeconfig parsed from YAML (client certificate and key inline), then copied. */
static int sc_kubeconfig(char **out)
{
    static const char text[] = "apiVersion: v1\n"
                               "kind: Config\n"
                               "current-context: dev\n"
                               "clusters:\n"
                               "- name: c\n"
                               "  cluster:\n"
                               "    server: https://127.0.0.1:6443\n"
                               "    insecure-skip-tls-verify: true\n"
                               "users:\n"
                               "- name: u\n"
                               "  user:\n"
                               "    token: abc\n"
                               "contexts:\n"
                               "- name: dev\n"
                               "  context:\n"
                               "    cluster: c\n"
                               "    user: u\n"
                               "    namespace: team\n";
    kube_config cfg = {0}, copy = {0};
    kube_error err = {0};
    int rc = kube_config_parse(&cfg, text, sizeof(text) - 1, "/tmp/kubeconfig", NULL, &err);
    if (rc == 0)
        rc = kube_config_copy(&copy, &cfg, &err);
    if (rc == 0) {
        const char *token = NULL;
        rc = kube_config_token(&copy, 0, &token, &err);
        if (rc == 0)
            *out = answer("%s %s %s", copy.server, copy.namespace_ ? copy.namespace_ : "-",
                          token ? token : "-");
    }
    if (rc < 0 && (err.kind == KUBE_OK || !err.message || !strstr(err.message, "out of memory")))
        fail_msg("kubeconfig: failed but did not say out of memory: %s", err.message);
    kube_error_clear(&err);
    kube_config_clear(&cfg);
    kube_config_clear(&copy);
    return rc < 0 ? -ENOMEM : 0;
}

/* A kubeconfig read from its file, one context per way of authenticating (files relative to it,
 * inline data, a token file), then the service account's in-cluster files. */
static char *kcfg_text(const kube_config *c)
{
    return answer("%s %s %s %s %s %s %s %zu %zu %s %d", c->origin, c->server, c->namespace_,
                  c->context ? c->context : "-", c->ca_file ? "ca-file" : "-",
                  c->cert_file ? "cert-file" : "-", c->key_file ? "key-file" : "-",
                  c->cert_data_len, c->key_data_len, c->token_file ? "token-file" : "-",
                  c->insecure);
}

static int sc_kubeconfig_file(char **out)
{
    static const char *const contexts[] = {"token-file", "cert-files", "cert-data", "insecure"};
    char *text = answer("%s", "");
    int rc = 0;
    kube_error err = {0};
    for (size_t i = 0; rc == 0 && i < sizeof(contexts) / sizeof(contexts[0]); i++) {
        kube_config cfg = {0};
        rc = kube_config_load_file(&cfg, MP_SOURCE_DIR "/test/unit/fixtures/kube/kubeconfig.yaml",
                                   contexts[i], &err);
        const char *token = NULL;
        if (rc == 0)
            rc = kube_config_token(&cfg, 1, &token, &err);
        if (rc == 0) {
            char *one = kcfg_text(&cfg);
            char *more = answer("%s\n%s %s", text, one, token ? token : "-");
            free(one);
            free(text);
            text = more;
        }
        kube_config_clear(&cfg);
    }
    if (rc == 0) {
        char root[] = "/tmp/test_oom.XXXXXX";
        oom_pause(true);
        assert_non_null(mkdtemp(root));
        static const char *const files[][2] = {{"token", "sa-token-1\n"},
                                               {"ca.crt", "-----BEGIN CERTIFICATE-----\n"},
                                               {"namespace", "ops\n"}};
        for (size_t i = 0; i < 3; i++) {
            char path[64];
            snprintf(path, sizeof(path), "%s/%s", root, files[i][0]);
            FILE *f = fopen(path, "w");
            assert_non_null(f);
            fputs(files[i][1], f);
            fclose(f);
        }
        setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        oom_pause(false);
        kube_config cfg = {0};
        rc = kube_config_load_incluster(&cfg, root, &err);
        if (rc == 0) {
            char *one = kcfg_text(&cfg);
            char *more = answer("%s\n%s %s", text, one, cfg.token);
            free(one);
            free(text);
            text = more;
        }
        kube_config_clear(&cfg);
        oom_pause(true);
        for (size_t i = 0; i < 3; i++) {
            char path[64];
            snprintf(path, sizeof(path), "%s/%s", root, files[i][0]);
            unlink(path);
        }
        rmdir(root);
        oom_pause(false);
    }
    if (rc < 0 &&
        (err.kind == KUBE_OK || !err.message ||
         !(strstr(err.message, "out of memory") || strstr(err.message, strerror(ENOMEM)))))
        fail_msg("kubeconfig file: failed but did not say out of memory: %s", err.message);
    kube_error_clear(&err);
    if (rc == 0)
        *out = text;
    else
        free(text);
    return rc < 0 ? -ENOMEM : 0;
}

/* The work queue on a loop: keys handed out in order, a failure requeued after its backoff, a
 * duplicate add merged. A requeue that runs out of memory is reported by wq_done. */
typedef struct {
    ev_loop *loop;
    char log[64];
    int rc;
    bool failed_once;
} wq_ctx;

static void wq_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    (void)waited_ms;
    wq_ctx *c = ud;
    bool fail = strcmp(key, "b") == 0 && !c->failed_once;
    c->failed_once |= fail;
    strncat(c->log, key, sizeof(c->log) - strlen(c->log) - 1);
    int rc = wq_done(q, key, fail ? WQ_FAILURE : WQ_SUCCESS);
    if (rc < 0)
        c->rc = rc;
    wq_stats st;
    wq_stats_get(q, &st);
    if (c->rc < 0 || st.depth + st.in_flight + st.waiting == 0)
        ev_stop(c->loop);
}

static void wq_guard(ev_loop *loop, void *ud)
{
    ((wq_ctx *)ud)->rc = -ETIMEDOUT;
    ev_stop(loop);
}

static int sc_workqueue(char **out)
{
    wq_ctx c = {.loop = ev_new()};
    if (!c.loop)
        return -ENOMEM;
    wq_config cfg = {.base_delay_ms = 1, .max_delay_ms = 4};
    wq *q = wq_new(c.loop, &cfg, wq_process, &c);
    int rc = q ? 0 : -ENOMEM;
    static const char *const keys[] = {"a", "b", "c", "a"};
    for (size_t i = 0; rc == 0 && i < 4; i++)
        rc = wq_add(q, keys[i]);
    if (rc == 0) {
        oom_pause(true);
        uint64_t guard = ev_timer_add(c.loop, 5000, wq_guard, &c);
        oom_pause(false);
        assert_true(guard != 0);
        rc = ev_run(c.loop);
        if (c.rc == -ETIMEDOUT)
            fail_msg("workqueue: keys left unhandled (%s so far)", c.log);
        if (rc == 0)
            rc = c.rc;
        if (rc == 0)
            *out = answer("%s", c.log);
    }
    wq_free(q);
    ev_free(c.loop);
    return rc < 0 ? rc : 0;
}

/* A registry with a counter, a labelled gauge and a histogram, rendered. */
static int sc_metrics(char **out)
{
    metrics *m = metrics_new();
    if (!m)
        return -ENOMEM;
    static const char *const labels[] = {"namespace", "pool", NULL};
    static const double buckets[] = {0.1, 1, 10};
    metrics_family *c =
        metrics_family_new(m, METRICS_COUNTER, "t_total", "a counter", NULL, NULL, 0);
    metrics_family *g = metrics_family_new(m, METRICS_GAUGE, "t_gauge", "a gauge", labels, NULL, 0);
    metrics_family *h =
        metrics_family_new(m, METRICS_HISTOGRAM, "t_seconds", "a histogram", labels, buckets, 3);
    int rc = c && g && h ? 0 : -ENOMEM;
    const char *v1[] = {"ns", "p"}, *v2[] = {"ns", "q\"x"};
    if (rc == 0)
        rc = metrics_add(c, NULL, 2);
    if (rc == 0)
        rc = metrics_set(g, v1, 3);
    if (rc == 0)
        rc = metrics_set(g, v2, 4);
    if (rc == 0)
        rc = metrics_observe(h, v1, 0.5);
    if (rc == 0)
        rc = metrics_delete(g, v2);
    if (rc == 0) {
        size_t len = 0;
        char *text = metrics_render(m, &len);
        if (!text)
            rc = -ENOMEM;
        else
            *out = answer("%s", text);
        free(text);
    }
    metrics_free(m);
    return rc;
}

/* strmap grows opportunistically: inserting never fails, lookups find everything. */
typedef struct {
    strmap_node node;
    char key[16];
} entry;

static int sc_strmap(char **out)
{
    strmap m;
    int rc = strmap_init(&m);
    if (rc < 0)
        return rc;
    enum { N = 200 };
    entry *e = calloc(N, sizeof(*e));
    if (!e) {
        strmap_fini(&m);
        return -ENOMEM;
    }
    for (int i = 0; i < N; i++) {
        snprintf(e[i].key, sizeof(e[i].key), "k%d", i);
        strmap_insert(&m, &e[i].node, e[i].key);
    }
    size_t found = 0;
    for (int i = 0; i < N; i++)
        found += strmap_get(&m, e[i].key) == &e[i].node;
    for (int i = 0; i < N; i += 2)
        strmap_remove(&m, &e[i].node);
    *out = answer("%zu %zu", found, m.count);
    strmap_fini(&m);
    free(e);
    return 0;
}

/* The API client's error values, events, leases, the router's JSON bodies and model rewrite. */
static int sc_bodies(char **out)
{
    kube_error e = {0}, copy = {0};
    static const char status[] =
        "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\",\"message\":\"changed\"}";
    /* Out of memory, the Status body cannot be parsed: the message then quotes the body, but the
     * reason is still the code's, which is what callers branch on. */
    kube_error_from_http(&e, 409, status, sizeof(status) - 1);
    int rc = kube_error_copy(&copy, &e);
    kube_object_ref about = {
        .api_version = "v1", .kind = "ModelPool", .namespace_ = "ns", .name = "p", .uid = "u"};
    kube_event ev = {.reason = "Swapped", .message = "a to b", .component = "mp", .instance = "i"};
    char *event = kube_event_json(&about, &ev, 1764763200000LL, 42);
    lease_spec ls = {.holder = "me", .duration_s = 15, .acquire_time = "t0", .renew_time = "t1"};
    char *lease = lease_body("ns", "l", "9", &ls);
    lease_record rec;
    cJSON *lj = lease ? cJSON_Parse(lease) : NULL;
    int lrc = lj ? lease_record_read(lj, &rec) : -1;
    char *oerr = rt_oai_error(RT_OAI_MODEL_LOADING, "loading \"b\"");
    static const char *const aliases[] = {"x"};
    rt_oai_model models[] = {{"a", "p", "ns", "a", true, aliases, 1},
                             {"b", "p", NULL, "b", false, NULL, 0}};
    char *list = rt_oai_models(models, 2);
    static const char body[] = "{\"model\":\"x\",\"stream\":true}";
    char *rew = NULL;
    size_t rew_len = 0;
    int rwrc = rt_model_rewrite(body, sizeof(body) - 1, 9, 12, "a-long-name", 11, &rew, &rew_len);
    if (e.kind == KUBE_ERR_NOMEM || rc < 0 || !event || !lease || !lj || lrc < 0 || !oerr ||
        !list || rwrc < 0)
        rc = -ENOMEM;
    else
        *out = answer("%s %ld|%s|%s %s|%s|%s|%.*s", copy.reason, copy.http_code, event, rec.holder,
                      rec.resource_version, oerr, list, (int)rew_len, rew);
    cJSON_Delete(lj);
    kube_error_clear(&e);
    kube_error_clear(&copy);
    free(event);
    free(lease);
    free(oerr);
    free(list);
    free(rew);
    return rc;
}

/* Writes awaited in the cache, by owner. */
static int sc_expect(char **out)
{
    store *s = store_new(NULL);
    expects *x = s ? expects_new() : NULL;
    int rc = x ? 0 : -ENOMEM;
    for (int i = 0; i < 3 && rc == 0; i++) {
        char owner[8], key[8];
        snprintf(owner, sizeof(owner), "o%d", i % 2);
        snprintf(key, sizeof(key), "k%d", i);
        rc = expects_add(x, owner, s, key, "1", "2", 0);
    }
    if (rc == 0) {
        bool p0 = expects_pending(x, "o0", 10, 1000);
        expects_forget(x, "o0");
        *out = answer("%d %d %d", p0, expects_pending(x, "o0", 10, 1000),
                      expects_pending(x, "o1", 10, 1000));
    }
    expects_free(x);
    store_free(s);
    return rc;
}

/* The idle probe's readers: a failed allocation may make an answer an error, never idle. */
static int sc_probe(char **out)
{
    static const struct {
        const char *runtime, *body;
    } answers[] = {
        {"llamacpp", "[{\"id\":0,\"is_processing\":false},{\"id\":1,\"is_processing\":false}]"},
        {"llamacpp", "[{\"is_processing\":false},{\"is_processing\":true}]"},
        {"vllm", "vllm:num_requests_running{model_name=\"a\"} 0.0\n"},
        {"vllm", "vllm:num_requests_running{model_name=\"b\"} 2.0 1700000000\n"},
    };
    char *verdicts = answer("%s", "");
    int rc = 0;
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        char msg[256];
        probe_verdict v = probe_judge(answers[i].runtime, 200, answers[i].body,
                                      strlen(answers[i].body), msg, sizeof(msg));
        if (v == PROBE_ERROR) /* the reader's failure, said in msg */
            rc = -ENOMEM;
        char *more = answer("%s %s: %s;", verdicts, probe_verdict_name(v), msg);
        free(verdicts);
        verdicts = more;
    }
    if (rc == 0)
        *out = verdicts;
    else
        free(verdicts);
    return rc;
}

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
    int rc = fill(&pools, &api_pool_codec, NULL, NULL, routes_pools, 2);
    if (rc == 0)
        rc = fill(&isvcs, &api_isvc_codec, NULL, NULL, routes_isvcs, 3);
    rt_routes *r = rc == 0 ? rt_routes_new(pools, isvcs, "home") : NULL;
    if (rc == 0 && !r)
        rc = -ENOMEM;
    char *text = rc == 0 ? answer("%s", "") : NULL;
    static const char *const names[] = {"small", "Org/Model-7B", "b", "team/c", "c", "nothing"};
    for (size_t i = 0; rc == 0 && i < sizeof(names) / sizeof(names[0]); i++) {
        rt_route route = {0};
        const char *other = NULL;
        int lrc = rt_routes_lookup(r, names[i], &route, &other);
        if (lrc == -ENOMEM) {
            rc = lrc;
            break;
        }
        char *more = answer("%s %s=%d:%s/%s/%s", text, names[i], lrc, lrc ? "-" : route.ns,
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
        *out = answer("%s|%s", text, list);
    free(list);
    free(models);
    free(text);
    rt_routes_free(r);
    store_free(pools);
    store_free(isvcs);
    return rc;
}

/* The operator's metrics: recording is best effort (a failed allocation loses a sample, never
 * the process), so this one checks for crashes and leaks only. */
static int sc_pool_metrics(char **out)
{
    metrics *reg = metrics_new();
    pool_metrics *pm = reg ? pool_metrics_new(reg) : NULL;
    if (!pm) {
        metrics_free(reg);
        return -ENOMEM;
    }
    static const char *const members[] = {"a", "b"};
    pool_metrics_members(pm, "ns", "p", members, 2, "a");
    pool_metrics_swap_done(pm, "ns", "p", 1500);
    pool_metrics_deferred(pm, "ns", "p", "PodsBusy");
    pool_metrics_reconciled(pm, true, 3);
    pool_metrics_reaction(pm, POOL_REACTION_A, 1200);
    size_t len = 0;
    free(metrics_render(reg, &len));
    pool_metrics_forget(pm, "ns", "p");
    pool_metrics_free(pm);
    metrics_free(reg);
    *out = answer("%s", "done");
    return 0;
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
    *out = answer("%s %s/%s %s %s", lines, r.ns, r.name, r.uid, r.ip);
    curl_slist_free_all(l);
    rt_podref_clear(&r);
    return 0;
}

#define OOM_TEST(name)                                                                             \
    static void test_##name(void **state)                                                          \
    {                                                                                              \
        (void)state;                                                                               \
        run(#name, sc_##name);                                                                     \
    }
OOM_TEST(plan)
OOM_TEST(plan_swap)
OOM_TEST(records)
OOM_TEST(fence_ack)
OOM_TEST(patches)
OOM_TEST(watch)
OOM_TEST(kubeconfig)
OOM_TEST(kubeconfig_file)
OOM_TEST(metrics)
OOM_TEST(strmap)
OOM_TEST(bodies)
OOM_TEST(expect)
OOM_TEST(workqueue)
OOM_TEST(probe)
OOM_TEST(routes)
OOM_TEST(forward)
OOM_TEST(pool_metrics)

int main(void)
{
    oom_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),         cmocka_unit_test(test_plan_swap),
        cmocka_unit_test(test_records),      cmocka_unit_test(test_fence_ack),
        cmocka_unit_test(test_patches),      cmocka_unit_test(test_watch),
        cmocka_unit_test(test_kubeconfig),   cmocka_unit_test(test_kubeconfig_file),
        cmocka_unit_test(test_metrics),      cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_bodies),       cmocka_unit_test(test_expect),
        cmocka_unit_test(test_workqueue),    cmocka_unit_test(test_probe),
        cmocka_unit_test(test_routes),       cmocka_unit_test(test_forward),
        cmocka_unit_test(test_pool_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

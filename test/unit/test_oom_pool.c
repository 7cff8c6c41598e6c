/* The out-of-memory test (test/support/oom_case.h) over the operator's pure path, from the caches'
 * JSON to the write: records decoded from real objects and read back, the scale and request
 * patches, the snapshot and the plan with its status patch (a Degraded pool, a swap asked for),
 * the idle probe's readers, the metrics registry and the operator's metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "metrics/metrics.h"
#include "pool/fence_ack.h"
#include "pool/plan.h"
#include "pool/pool_metrics.h"
#include "pool/probe.h"
#include "pool/snapshot.h"

#include "oom_case.h"

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
    int rc = oom_store_fill(&pools, &api_pool_codec, API_INDEX_MEMBER, api_index_pool_members,
                            w->pools, w->npools);
    if (rc == 0)
        rc = oom_store_fill(&isvcs, &api_isvc_codec, NULL, NULL, w->isvcs, w->nisvcs);
    if (rc == 0)
        rc = oom_store_fill(&pods, &api_pod_codec, API_INDEX_SERVICE, api_index_pod_service,
                            w->pods, w->npods);
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
            char *acts = oom_answer("%s", patch);
            for (size_t i = 0; i < p->n_actions; i++) {
                const plan_action *a = &p->actions[i];
                char *more = oom_answer("%s\n%d %s %d %s %s %s %zu", acts, (int)a->kind,
                                        a->member ? a->member : "-", (int)a->replicas,
                                        a->runtime ? a->runtime : "-", a->reason ? a->reason : "-",
                                        a->message ? a->message : "-", a->n_pods);
                free(acts);
                acts = more;
            }
            *out = oom_answer("%s\nrequeue %lld", acts, (long long)p->requeue_after_ms);
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
        char *members = oom_answer("%s", "");
        for (size_t i = 0; i < pool->n_members; i++) {
            char *more = oom_answer("%s %s", members, pool->members[i] ? pool->members[i] : "-");
            free(members);
            members = more;
        }
        const char *removed[16];
        size_t nremoved = api_removed_names(pool, removed);
        *out = oom_answer("%s %s %s %s %s %d %d %d %d %s|%s %s %s %s %d|%s %s%s %zu %zu %zu",
                          pod->name, pod->ns, pod->member ? pod->member : "-",
                          pod->ip ? pod->ip : "-", pod->rv, pod->port, (int)pod->phase,
                          pod->running, pod->ready, pod->waiting ? pod->waiting : "-", isvc->name,
                          isvc->phase ? isvc->phase : "-", isvc->runtime ? isvc->runtime : "-",
                          isvc->rv, (int)isvc->replicas, pool->name, pool->ns, members,
                          pool->status.n_members, pool->status.n_conditions, nremoved);
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
        *out = oom_answer("%llu %llu %llu %llu %d %s %llu %d", (unsigned long long)seen[0],
                          (unsigned long long)seen[1], (unsigned long long)seen[2],
                          (unsigned long long)seen[3], (int)early.result,
                          early.holder ? early.holder->name : "-",
                          (unsigned long long)early.expires_ms, (int)late.result);
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
        *out = oom_answer("%s %d\n%s\n%s\n%s\n%s", scale, jp, req, clr, wd, wdc);
    free(scale);
    free(req);
    free(clr);
    free(wd);
    free(wdc);
    free(isvc);
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
    char *verdicts = oom_answer("%s", "");
    int rc = 0;
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        char msg[256];
        probe_verdict v = probe_judge(answers[i].runtime, 200, answers[i].body,
                                      strlen(answers[i].body), msg, sizeof(msg));
        if (v == PROBE_ERROR) /* the reader's failure, said in msg */
            rc = -ENOMEM;
        char *more = oom_answer("%s %s: %s;", verdicts, probe_verdict_name(v), msg);
        free(verdicts);
        verdicts = more;
    }
    if (rc == 0)
        *out = verdicts;
    else
        free(verdicts);
    return rc;
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
            *out = oom_answer("%s", text);
        free(text);
    }
    metrics_free(m);
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
    *out = oom_answer("%s", "done");
    return 0;
}

OOM_TEST(plan)
OOM_TEST(plan_swap)
OOM_TEST(records)
OOM_TEST(fence_ack)
OOM_TEST(patches)
OOM_TEST(probe)
OOM_TEST(metrics)
OOM_TEST(pool_metrics)

OOM_MAIN(cmocka_unit_test(test_plan), cmocka_unit_test(test_plan_swap),
         cmocka_unit_test(test_records), cmocka_unit_test(test_fence_ack),
         cmocka_unit_test(test_patches), cmocka_unit_test(test_probe),
         cmocka_unit_test(test_metrics), cmocka_unit_test(test_pool_metrics))

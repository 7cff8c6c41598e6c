/* Tests of the cache record decoders on real API objects (captured from the test control plane
 * with kubectl get -o json: test/unit/fixtures/records), then the same objects with fields of the
 * wrong type, fields missing, huge strings and unknown fields; a router's Lease; the index
 * functions over records; the patches this module encodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include <errno.h>

#include "api/records.h"

#define FIXTURES MP_SOURCE_DIR "/test/unit/fixtures/records/"

static cJSON *fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), FIXTURES "%s", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *o = cJSON_Parse(buf);
    assert_non_null(o);
    return o;
}

/* Replaces the member at a dotted path ("spec.replicas") of obj with v (created as needed). */
static void set_path(cJSON *obj, const char *path, cJSON *v)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL, *part = strtok_r(buf, ".", &save);
    while (part) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, part);
            cJSON_AddItemToObject(obj, part, v);
            return;
        }
        cJSON *child = cJSON_GetObjectItemCaseSensitive(obj, part);
        if (!cJSON_IsObject(child)) {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, part);
            child = cJSON_AddObjectToObject(obj, part);
        }
        obj = child;
        part = next;
    }
}

static void test_pod_fixture(void **state)
{
    (void)state;
    cJSON *o = fixture("pod.json");
    int err = 0;
    api_pod *p = api_pod_decode(o, &err);
    assert_non_null(p);
    assert_string_equal(p->name, "qwen-7b-0");
    assert_string_equal(p->ns, "default");
    assert_string_equal(p->uid, "63c4af6b-e92d-4fbb-8bfd-3abc9167b63e");
    assert_string_equal(p->rv, "225");
    assert_string_equal(p->member, "qwen-7b");
    assert_string_equal(p->ip, "10.1.2.3");
    assert_int_equal(p->port, 8080); /* named http, though the sidecar's 9100 comes first */
    assert_int_equal(p->phase, API_POD_RUNNING);
    assert_true(p->running); /* the server runs; the sidecar waits */
    assert_true(p->terminating);
    assert_false(p->ready); /* no Ready condition */
    free(p);
    set_path(o, "status.conditions",
             cJSON_Parse("[{\"type\":\"Initialized\",\"status\":\"True\"},"
                         "{\"type\":\"Ready\",\"status\":\"True\"}]"));
    assert_non_null(p = api_pod_decode(o, &err));
    assert_true(p->ready);
    free(p);
    set_path(o, "status.conditions", cJSON_Parse("[{\"type\":\"Ready\",\"status\":\"False\"}]"));
    assert_non_null(p = api_pod_decode(o, &err));
    assert_false(p->ready);
    free(p);
    /* Why it does not run: a container's waiting reason, else an unscheduled Pod's reason. */
    set_path(o, "status.containerStatuses",
             cJSON_Parse("[{\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\"}}}]"));
    assert_non_null(p = api_pod_decode(o, &err));
    assert_string_equal(p->waiting, "ImagePullBackOff");
    assert_false(p->running);
    free(p);
    set_path(o, "status.containerStatuses", cJSON_Parse("[]"));
    set_path(o, "status.conditions",
             cJSON_Parse("[{\"type\":\"PodScheduled\",\"status\":\"False\","
                         "\"reason\":\"Unschedulable\"}]"));
    assert_non_null(p = api_pod_decode(o, &err));
    assert_string_equal(p->waiting, "Unschedulable");
    free(p);
    set_path(o, "status.conditions", cJSON_Parse("[]"));
    assert_non_null(p = api_pod_decode(o, &err));
    assert_null(p->waiting);
    free(p);
    cJSON_Delete(o);
}

static void test_isvc_fixture(void **state)
{
    (void)state;
    cJSON *o = fixture("inferenceservice.json");
    int err = 0;
    api_isvc *m = api_isvc_decode(o, &err);
    assert_non_null(m);
    assert_string_equal(m->name, "isvc-minimal");
    assert_string_equal(m->ns, "default");
    assert_non_null(m->uid);
    assert_non_null(m->rv);
    assert_int_equal(m->replicas, 1); /* the CRD's default, applied by the API server */
    assert_true(m->replicas_exact);
    assert_string_equal(m->runtime, "llamacpp");
    assert_string_equal(m->idle_endpoint, "/idle");
    assert_int_equal(m->endpoint_port, 8081);
    assert_int_equal(m->container_port, 0);
    assert_null(m->phase);
    assert_null(m->served_model);
    assert_null(m->aliases);
    free(m);
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                                                  "annotations");
    assert_non_null(ann);
    cJSON_AddStringToObject(ann, API_SERVED_ANNOTATION, "Org/M");
    cJSON_AddStringToObject(ann, API_ALIASES_ANNOTATION, "m1, m2");
    assert_non_null(m = api_isvc_decode(o, &err));
    assert_string_equal(m->served_model, "Org/M");
    assert_string_equal(m->aliases, "m1, m2");
    free(m);
    cJSON_Delete(o);
}

static void test_pool_fixture(void **state)
{
    (void)state;
    cJSON *o = fixture("modelpool.json");
    int err = 0;
    api_pool *p = api_pool_decode(o, &err);
    assert_non_null(p);
    assert_string_equal(p->name, "full");
    assert_string_equal(p->ns, "default");
    assert_int_equal(p->generation, 1);
    assert_string_equal(p->default_member, "qwen-7b");
    assert_string_equal(p->swap_budget, "1h30m");
    assert_string_equal(p->swap_policy, "sticky");
    assert_string_equal(p->requested, "qwen-7b");
    assert_int_equal(p->n_members, 2);
    assert_string_equal(p->members[0], "llama-8b");
    assert_string_equal(p->members[1], "qwen-7b");
    const api_status *s = &p->status;
    assert_string_equal(s->phase, "Swapping");
    assert_string_equal(s->resident_member, "llama-8b");
    assert_string_equal(s->pending_member, "qwen-7b");
    assert_int_equal(s->observed_generation, 1);
    assert_int_equal(s->n_members, 2);
    assert_true(s->members[0].resident);
    assert_false(s->members[0].releasing);
    assert_string_equal(s->members[1].phase, "Stopped");
    assert_true(s->members[1].releasing);
    assert_int_equal(s->n_conditions, 2);
    assert_string_equal(s->conditions[1].type, "SwapDeferred");
    assert_string_equal(s->conditions[1].reason, "PodsBusy");
    assert_int_equal(s->conditions[1].last_transition_ms, 1735689600000LL);
    free(p);
    cJSON_Delete(o);
}

/* A field of the wrong type reads as absent, never as a failure. */
/* A router's Lease: what the operator's fence reads of it (api/fence.h). */
static void test_router_lease_fixture(void **state)
{
    (void)state;
    cJSON *o = fixture("lease.json");
    int err = 0;
    api_router_lease *l = api_router_lease_decode(o, &err);
    assert_non_null(l);
    assert_string_equal(l->name, "modelpool-router-7d9f8-x2k4q");
    assert_string_equal(l->ns, "modelpool-system");
    assert_string_equal(l->rv, "200");
    assert_int_equal(l->duration_s, 10);
    assert_string_equal(l->fenced, "default/shared-gpu=llama-8b team-a/pool=qwen-7b");
    assert_null(l->fronts); /* a router of every namespace */
    free(l);
    /* A duration that is no positive number reads as none (such a Lease never expires). */
    static const char *const no_duration[] = {"0", "-5", "\"10\"", "null", "{}"};
    for (size_t i = 0; i < sizeof(no_duration) / sizeof(no_duration[0]); i++) {
        set_path(o, "spec.leaseDurationSeconds", cJSON_Parse(no_duration[i]));
        assert_non_null(l = api_router_lease_decode(o, &err));
        assert_int_equal(l->duration_s, 0);
        free(l);
    }
    set_path(o, "spec.leaseDurationSeconds", cJSON_Parse("1e12"));
    assert_non_null(l = api_router_lease_decode(o, &err));
    assert_int_equal(l->duration_s, INT32_MAX);
    free(l);
    set_path(o, "metadata.annotations",
             cJSON_Parse("{\"modelpool-operator.dev/fronts-namespace\":\"team-a\"}"));
    assert_non_null(l = api_router_lease_decode(o, &err));
    assert_string_equal(l->fronts, "team-a");
    assert_null(l->fenced);
    free(l);
    set_path(o, "metadata.annotations", cJSON_Parse("{\"modelpool-operator.dev/fenced\":7}"));
    assert_non_null(l = api_router_lease_decode(o, &err));
    assert_null(l->fenced);
    free(l);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "spec");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                                            "annotations");
    assert_non_null(l = api_router_lease_decode(o, &err));
    assert_int_equal(l->duration_s, 0);
    assert_null(l->fenced);
    free(l);
    cJSON_Delete(o);
    o = cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}");
    err = 0;
    assert_null(api_router_lease_decode(o, &err));
    assert_int_equal(err, -EINVAL);
    cJSON_Delete(o);
    /* The codec keys by namespace/name and versions by resourceVersion. */
    store *s = store_new(&api_router_lease_codec);
    assert_int_equal(store_put(s, fixture("lease.json"), NULL), 0);
    const api_router_lease *r = store_get(s, "modelpool-system/modelpool-router-7d9f8-x2k4q");
    assert_non_null(r);
    assert_string_equal(store_version(s, r), "200");
    store_free(s);
}

static void test_wrong_types(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        const char *json;
    } pod_cases[] = {
        {"metadata.uid", "7"},          {"metadata.labels", "[]"},          {"status.podIP", "{}"},
        {"status.phase", "true"},       {"spec.containers", "\"x\""},       {"status", "null"},
        {"metadata.namespace", "null"}, {"status.containerStatuses", "{}"},
    };
    for (size_t i = 0; i < sizeof(pod_cases) / sizeof(pod_cases[0]); i++) {
        cJSON *o = fixture("pod.json");
        set_path(o, pod_cases[i].path, cJSON_Parse(pod_cases[i].json));
        int err = 0;
        api_pod *p = api_pod_decode(o, &err);
        assert_non_null(p);
        assert_string_equal(p->name, "qwen-7b-0");
        if (strcmp(pod_cases[i].path, "metadata.uid") == 0)
            assert_null(p->uid);
        if (strcmp(pod_cases[i].path, "metadata.labels") == 0)
            assert_null(p->member);
        if (strcmp(pod_cases[i].path, "status.podIP") == 0)
            assert_null(p->ip);
        if (strcmp(pod_cases[i].path, "status.phase") == 0)
            assert_int_equal(p->phase, API_POD_PENDING);
        if (strcmp(pod_cases[i].path, "spec.containers") == 0)
            assert_int_equal(p->port, 0);
        if (strcmp(pod_cases[i].path, "status.containerStatuses") == 0)
            assert_false(p->running);
        free(p);
        cJSON_Delete(o);
    }

    cJSON *o = fixture("inferenceservice.json");
    set_path(o, "spec.replicas", cJSON_CreateString("two"));
    set_path(o, "spec.endpoint", cJSON_CreateNumber(3));
    set_path(o, "spec.runtime", cJSON_CreateFalse());
    int err = 0;
    api_isvc *m = api_isvc_decode(o, &err);
    assert_non_null(m);
    assert_int_equal(m->replicas, API_REPLICAS_UNSET);
    assert_int_equal(api_isvc_replicas(m), 1);
    assert_false(m->replicas_exact);
    assert_int_equal(m->endpoint_port, 0);
    assert_null(m->runtime);
    free(m);
    /* Numbers out of int32 range are cut, and are no exact test value. */
    set_path(o, "spec.replicas", cJSON_CreateNumber(1e12));
    set_path(o, "spec.containerPort", cJSON_CreateNumber(-1e12));
    m = api_isvc_decode(o, &err);
    assert_int_equal(m->replicas, INT32_MAX);
    assert_false(m->replicas_exact);
    assert_int_equal(m->container_port, INT32_MIN);
    free(m);
    set_path(o, "spec.replicas", cJSON_CreateNumber(0.5));
    m = api_isvc_decode(o, &err);
    assert_int_equal(m->replicas, 0);
    assert_false(m->replicas_exact);
    free(m);
    cJSON_Delete(o);

    o = fixture("modelpool.json");
    set_path(o, "metadata.generation", cJSON_CreateString("1"));
    set_path(o, "spec.members",
             cJSON_Parse("[{\"inferenceServiceRef\":{\"name\":5}},\"x\","
                         "{\"inferenceServiceRef\":{\"name\":\"a\"}}]"));
    set_path(o, "status.members", cJSON_Parse("[{\"phase\":\"Ready\"},{\"name\":\"x\"},7]"));
    set_path(o, "status.conditions", cJSON_Parse("{\"type\":\"bad\"}"));
    set_path(o, "status.observedGeneration", cJSON_CreateString("x"));
    set_path(o, "metadata.annotations", cJSON_CreateNumber(1));
    api_pool *p = api_pool_decode(o, &err);
    assert_non_null(p);
    assert_int_equal(p->generation, 0);
    /* Every entry keeps its place: the plan rejects a nameless member, it is not skipped here. */
    assert_int_equal(p->n_members, 3);
    assert_null(p->members[0]);
    assert_null(p->members[1]);
    assert_string_equal(p->members[2], "a");
    assert_int_equal(p->status.n_members, 1);
    assert_string_equal(p->status.members[0].name, "x");
    assert_int_equal(p->status.n_conditions, 0);
    assert_int_equal(p->status.observed_generation, 0);
    assert_null(p->requested);
    free(p);
    set_path(o, "status", cJSON_CreateString("Ready"));
    p = api_pool_decode(o, &err);
    assert_null(p->status.phase);
    assert_int_equal(p->status.n_members, 0);
    free(p);
    cJSON_Delete(o);
}

/* The least an object can be: a name. Everything else reads as absent. */
static void test_missing_fields(void **state)
{
    (void)state;
    cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"n\"}}");
    int err = 0;
    api_pod *pod = api_pod_decode(o, &err);
    assert_non_null(pod);
    assert_null(pod->ns);
    assert_null(pod->uid);
    assert_null(pod->rv);
    assert_null(pod->member);
    assert_null(pod->ip);
    assert_int_equal(pod->port, 0);
    assert_int_equal(pod->phase, API_POD_PENDING);
    assert_false(pod->running);
    assert_false(pod->terminating);
    free(pod);
    api_isvc *isvc = api_isvc_decode(o, &err);
    assert_int_equal(isvc->replicas, API_REPLICAS_UNSET);
    assert_int_equal(api_isvc_replicas(isvc), 1);
    assert_null(isvc->runtime);
    free(isvc);
    api_pool *pool = api_pool_decode(o, &err);
    assert_int_equal(pool->n_members, 0);
    assert_null(pool->status.phase);
    assert_int_equal(pool->status.n_conditions, 0);
    free(pool);
    cJSON_Delete(o);

    /* No name, or not an object: refused with -EINVAL. */
    static const char *const refused[] = {"{\"metadata\":{\"namespace\":\"ns\"}}",
                                          "{\"metadata\":{\"name\":7}}", "[]", "\"x\"", "null"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        o = cJSON_Parse(refused[i]);
        err = 0;
        assert_null(api_pod_decode(o, &err));
        assert_int_equal(err, -EINVAL);
        err = 0;
        assert_null(api_isvc_decode(o, &err));
        assert_int_equal(err, -EINVAL);
        err = 0;
        assert_null(api_pool_decode(o, &err));
        assert_int_equal(err, -EINVAL);
        cJSON_Delete(o);
    }
}

/* Huge strings are copied whole; unknown fields cost nothing. */
static void test_huge_and_unknown(void **state)
{
    (void)state;
    enum { BIG = 1 << 20 };
    char *big = malloc(BIG + 1);
    assert_non_null(big);
    memset(big, 'x', BIG);
    big[BIG] = '\0';
    cJSON *o = fixture("modelpool.json");
    set_path(o, "spec.default", cJSON_CreateString(big));
    set_path(o, "status.conditions", cJSON_Parse("[{\"type\":\"A\"}]"));
    cJSON_AddStringToObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "conditions"), 0),
        "message", big);
    set_path(o, "spec.unknownField", cJSON_Parse("{\"deep\":[1,2,{\"x\":\"y\"}]}"));
    set_path(o, "extra", cJSON_CreateString(big));
    int err = 0;
    api_pool *p = api_pool_decode(o, &err);
    assert_non_null(p);
    assert_int_equal(strlen(p->default_member), BIG);
    assert_int_equal(strlen(p->status.conditions[0].message), BIG);
    assert_string_equal(p->members[1], "qwen-7b");
    free(p);
    cJSON_Delete(o);

    o = fixture("pod.json");
    set_path(o, "metadata.name", cJSON_CreateString(big));
    set_path(o, "status.somethingNew", cJSON_CreateTrue());
    api_pod *pod = api_pod_decode(o, &err);
    assert_non_null(pod);
    assert_int_equal(strlen(pod->name), BIG);
    assert_string_equal(pod->member, "qwen-7b");
    free(pod);
    cJSON_Delete(o);
    free(big);
}

typedef struct seen {
    char v[4][64];
    size_t n;
} seen;

static bool count_each(const char *key, const void *rec, void *ud)
{
    (void)rec;
    seen *s = ud;
    snprintf(s->v[s->n++ % 4], sizeof(s->v[0]), "%s", key);
    return true;
}

static void test_indexes_and_codecs(void **state)
{
    (void)state;
    store *pods = store_new(&api_pod_codec);
    store *pools = store_new(&api_pool_codec);
    assert_int_equal(store_add_index(pods, API_INDEX_SERVICE, api_index_pod_service, NULL), 0);
    assert_int_equal(store_add_index(pools, API_INDEX_MEMBER, api_index_pool_members, NULL), 0);
    assert_int_equal(store_put(pods, fixture("pod.json"), NULL), 0);
    assert_int_equal(store_put(pools, fixture("modelpool.json"), NULL), 0);
    seen s = {0};
    assert_int_equal(store_index_each(pods, API_INDEX_SERVICE, "default/qwen-7b", count_each, &s),
                     0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.v[0], "default/qwen-7b-0");
    assert_int_equal(store_index_count(pools, API_INDEX_MEMBER, "default/llama-8b"), 1);
    assert_int_equal(store_index_count(pools, API_INDEX_MEMBER, "default/qwen-7b"), 1);
    assert_string_equal(store_version(pods, store_get(pods, "default/qwen-7b-0")), "225");
    /* A Pod without the label is in no bucket. */
    cJSON *o = fixture("pod.json");
    set_path(o, "metadata.name", cJSON_CreateString("other"));
    set_path(o, "metadata.labels", cJSON_Parse("{\"app\":\"x\"}"));
    assert_int_equal(store_put(pods, o, NULL), 0);
    assert_int_equal(store_count(pods), 2);
    assert_int_equal(store_index_count(pods, API_INDEX_SERVICE, "default/qwen-7b"), 1);
    store_free(pods);
    store_free(pools);
}

static void test_patches(void **state)
{
    (void)state;
    char *b = api_request_clear_patch("qwen-\"7b\"");
    assert_string_equal(
        b, "[{\"op\":\"test\",\"path\":\"/metadata/annotations/modelpool-operator.dev~1request\","
           "\"value\":\"qwen-\\\"7b\\\"\"},{\"op\":\"remove\",\"path\":\"/metadata/annotations/"
           "modelpool-operator.dev~1request\"}]");
    free(b);
    b = api_request_set_patch("b\"1", NULL);
    assert_string_equal(
        b, "{\"metadata\":{\"annotations\":{\"modelpool-operator.dev/request\":\"b\\\"1\"}}}");
    free(b);
    b = api_request_set_patch("b", "42");
    assert_string_equal(b,
                        "{\"metadata\":{\"annotations\":{\"modelpool-operator.dev/request\":\"b\"},"
                        "\"resourceVersion\":\"42\"}}");
    free(b);
    b = api_waiting_patch("c@1700000000000", "43");
    assert_string_equal(b, "{\"metadata\":{\"annotations\":{\"modelpool-operator.dev/waiting\":"
                           "\"c@1700000000000\"},\"resourceVersion\":\"43\"}}");
    free(b);
    b = api_waiting_patch(NULL, "44");
    assert_string_equal(b, "{\"metadata\":{\"annotations\":{\"modelpool-operator.dev/waiting\":"
                           "null},\"resourceVersion\":\"44\"}}");
    free(b);
    cJSON *answer = cJSON_Parse("{\"metadata\":{\"resourceVersion\":\"77\"}}");
    assert_string_equal(api_answer_version(answer), "77");
    cJSON_Delete(answer);
    assert_null(api_answer_version(NULL));
}

/* Words of the vocabulary (phases, condition types and reasons, runtimes) are shared by every
 * record, not copied into each; other values are the record's own, and the content is the same. */
static void test_shared_words(void **state)
{
    (void)state;
    cJSON *o = fixture("modelpool.json");
    int err = 0;
    api_pool *a = api_pool_decode(o, &err), *b = api_pool_decode(o, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_equal(a->status.phase, b->status.phase);
    assert_ptr_equal(a->status.conditions[1].type, b->status.conditions[1].type);
    assert_ptr_equal(a->status.conditions[1].reason, b->status.conditions[1].reason);
    assert_ptr_equal(a->swap_policy, b->swap_policy);
    assert_ptr_equal(a->status.members[1].phase, b->status.members[1].phase);
    /* A value outside the vocabulary lives in the record (its block), like names and messages. */
    assert_ptr_not_equal(a->name, b->name);
    assert_ptr_not_equal(a->status.conditions[1].message, b->status.conditions[1].message);
    free(a);
    free(b);
    cJSON *status = cJSON_GetObjectItem(o, "status");
    cJSON_ReplaceItemInObject(status, "phase", cJSON_CreateString("NoSuchPhase"));
    a = api_pool_decode(o, &err);
    b = api_pool_decode(o, &err);
    assert_string_equal(a->status.phase, "NoSuchPhase");
    assert_ptr_not_equal(a->status.phase, b->status.phase);
    free(a);
    free(b);
    cJSON_Delete(o);

    o = fixture("inferenceservice.json");
    api_isvc *i = api_isvc_decode(o, &err), *j = api_isvc_decode(o, &err);
    assert_non_null(i);
    assert_non_null(j);
    assert_string_equal(i->runtime, "llamacpp");
    assert_ptr_equal(i->runtime, j->runtime);
    free(i);
    free(j);
    cJSON_Delete(o);
}

TEST_MAIN(cmocka_unit_test(test_pod_fixture), cmocka_unit_test(test_isvc_fixture),
          cmocka_unit_test(test_pool_fixture), cmocka_unit_test(test_router_lease_fixture),
          cmocka_unit_test(test_wrong_types), cmocka_unit_test(test_missing_fields),
          cmocka_unit_test(test_huge_and_unknown), cmocka_unit_test(test_indexes_and_codecs),
          cmocka_unit_test(test_patches), cmocka_unit_test(test_shared_words))

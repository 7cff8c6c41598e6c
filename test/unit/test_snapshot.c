/* Tests of the bridge between API objects and the plan: status patch/decode round trips, RFC
 * 3339 times, and snapshots built from the records of real-shaped objects (pods by label, claims by
 * other pools, probe memory by Pod UID, fields of the wrong type). */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_json.h"
#include "test_main.h"

#include "api/records.h"
#include "informer/store.h"
#include "pool/snapshot.h"

/* doc's status as the ModelPool decoder reads it (doc gets a name, which every cached object has).
 */
static api_pool *status_of(cJSON *doc)
{
    cJSON *meta = cJSON_GetObjectItem(doc, "metadata");
    if (!meta)
        meta = cJSON_AddObjectToObject(doc, "metadata");
    cJSON_AddStringToObject(meta, "name", "p");
    int err = 0;
    api_pool *p = api_pool_decode(doc, &err);
    assert_non_null(p);
    return p;
}

static void test_time(void **state)
{
    (void)state;
    int64_t ms = 0;
    assert_int_equal(api_time_parse("2026-12-02T19:08:52Z", &ms), 0);
    char out[32];
    api_time_format(ms, out);
    assert_string_equal(out, "2026-12-02T19:08:52Z");
    assert_int_equal(api_time_parse("2026-12-02T19:08:52.123456Z", &ms), 0);
    api_time_format(ms, out);
    assert_string_equal(out, "2026-12-02T19:08:52Z");
    assert_int_equal(api_time_parse("2026-12-02 19:08:52", &ms), -EINVAL);
    assert_int_equal(api_time_parse("2026-12-02T19:08:52+01:00", &ms), -EINVAL);
    assert_int_equal(api_time_parse(NULL, &ms), -EINVAL);
}

static void test_status_round_trip(void **state)
{
    (void)state;
    api_member_status members[] = {{"a", "Ready", true, false}, {"b", NULL, false, true}};
    api_condition conds[] = {
        {"SlotAllocated", "True", "Resident", "a holds the slot", 1764702532000}};
    api_status st = {.phase = "Ready",
                     .resident_member = "a",
                     .observed_generation = 3,
                     .members = members,
                     .n_members = 2,
                     .conditions = conds,
                     .n_conditions = 1};
    char *patch = api_status_patch(&st, "42");
    assert_non_null(patch);
    cJSON *doc = cJSON_Parse(patch);
    free(patch);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metadata"), "resourceVersion")->valuestring,
        "42");
    /* Absent fields are explicit nulls, so a merge patch removes what was there. */
    assert_true(
        cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "status"), "pendingMember")));
    api_pool *rec = status_of(doc);
    const api_status *back = &rec->status;
    assert_true(plan_status_equal(&st, back));
    assert_false(back->members[0].releasing);
    assert_true(back->members[1].releasing);
    assert_int_equal(back->conditions[0].last_transition_ms, 1764702532000);
    free(rec);
    cJSON_Delete(doc);

    /* Wrong types and missing names read as absent instead of failing. */
    doc =
        cJSON_Parse("{\"status\":{\"phase\":3,\"members\":[{\"phase\":\"Ready\"},{\"name\":\"x\"}],"
                    "\"conditions\":{\"type\":\"bad\"}}}");
    rec = status_of(doc);
    back = &rec->status;
    assert_null(back->phase);
    assert_int_equal(back->n_members, 1);
    assert_string_equal(back->members[0].name, "x");
    assert_int_equal(back->n_conditions, 0);
    free(rec);
    cJSON_Delete(doc);
}

static const char *pools_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"p\",\"generation\":2,\"resourceVersion\":\"5\"}"
    ","
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}},"
    "{\"inferenceServiceRef\":{\"name\":\"b\"}},{\"inferenceServiceRef\":{\"name\":\"gone\"}}],"
    "\"default\":\"a\",\"swapBudget\":\"60s\"},"
    "\"status\":{\"phase\":\"Ready\",\"residentMember\":\"a\"}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"other\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"b\"}}]}}",
    "{\"metadata\":{\"namespace\":\"elsewhere\",\"name\":\"p\"},"
    "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"a\"}}]}}",
};
static const char *isvcs_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\","
    "\"annotations\":{\"inference.llmkube.dev/idle-endpoint\":\"/idle\"}},"
    "\"spec\":{\"replicas\":1,\"runtime\":\"generic\",\"endpoint\":{\"port\":9000}},"
    "\"status\":{\"phase\":\"Ready\"}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b\"},\"spec\":{\"replicas\":\"two\","
    "\"containerPort\":7000}}",
};
static const char *pods_json[] = {
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a-1\",\"uid\":\"u1\","
    "\"labels\":{\"inference.llmkube.dev/service\":\"a\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"sidecar\"},{\"name\":\"server\",\"image\":\"x\","
    "\"ports\":[{\"name\":\"metrics\",\"containerPort\":9100},"
    "{\"name\":\"http\",\"containerPort\":9090,\"protocol\":\"TCP\"}]}]},"
    "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.5\","
    "\"containerStatuses\":[{\"state\":{\"running\":{}}}]}}",
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a-old\",\"uid\":\"u0\","
    "\"deletionTimestamp\":\"2026-12-02T00:00:00Z\","
    "\"labels\":{\"inference.llmkube.dev/service\":\"a\"}},\"status\":{\"phase\":\"Failed\"}}",
    ("{\"metadata\":{\"namespace\":\"elsewhere\",\"name\":\"a-x\",\"uid\":\"u9\","
     "\"labels\":{\"inference.llmkube.dev/service\":\"a\"}},\"status\":{\"phase\":\"Running\"}}"),
};

/* Probed at 1000 ms on the monotonic clock; the snapshot is built at 4000 ms on it. */
static const prober_memo test_memo = {.verdict = PROBE_BUSY,
                                      .at_mono_ms = 1000,
                                      .sent_mono_ms = 400,
                                      .message = "1 of 1 slots processing"};
#define TEST_WALL_MS 1764763200000LL
#define TEST_MONO_MS 4000

static const prober_memo *test_lookup(void *ud, const char *uid)
{
    (void)ud;
    return strcmp(uid, "u1") == 0 ? &test_memo : NULL;
}

static const plan_pod *find_pod(const plan_member *m, const char *name)
{
    for (size_t i = 0; i < m->n_pods; i++)
        if (strcmp(m->pods[i].name, name) == 0)
            return &m->pods[i];
    return NULL;
}

/* The controller's three caches: pools as given, the members and Pods of isvcs_json and
 * pods_json. */
typedef struct {
    store *pools, *isvcs, *pods;
} caches;

static caches fill(store *pools)
{
    caches c = {
        pools, test_store_fill(&api_isvc_codec, NULL, NULL, isvcs_json, 2),
        test_store_fill(&api_pod_codec, API_INDEX_SERVICE, api_index_pod_service, pods_json, 3)};
    return c;
}

static void caches_free(caches *c)
{
    store_free(c->pools);
    store_free(c->isvcs);
    store_free(c->pods);
}

/* The snapshot of the pool key from the three caches, as the controller builds it; whether the
 * caches are known to have caught up with the pool (absences confirmed). */
static void build(const caches *c, const char *key, bool confirmed, pool_snapshot *snap)
{
    pool_sources src = {c->pools, c->isvcs, c->pods, test_lookup, NULL, confirmed};
    assert_int_equal(
        pool_snapshot_build(store_get(c->pools, key), &src, TEST_WALL_MS, TEST_MONO_MS, snap), 0);
}

/* The snapshot from the records the controller's caches hold. */
static void test_snapshot(void **state)
{
    (void)state;
    caches c = fill(
        test_store_fill(&api_pool_codec, API_INDEX_MEMBER, api_index_pool_members, pools_json, 3));
    pool_snapshot snap;
    build(&c, "ns/p", false, &snap);
    const plan_snapshot *s = &snap.snap;
    assert_string_equal(s->ns, "ns");
    assert_string_equal(s->name, "p");
    assert_int_equal(s->generation, 2);
    assert_string_equal(s->default_member, "a");
    assert_string_equal(s->swap_budget, "60s");
    assert_int_equal(s->now_ms, TEST_WALL_MS);
    assert_string_equal(s->status.resident_member, "a");
    assert_int_equal(s->n_members, 3);

    const plan_member *a = &s->members[0];
    assert_true(a->exists);
    assert_int_equal(a->replicas, 1);
    assert_string_equal(a->phase, "Ready");
    assert_string_equal(a->runtime, "generic");
    assert_string_equal(a->idle_endpoint, "/idle");
    assert_int_equal(a->endpoint_port, 9000);
    assert_null(a->claimed_by);     /* the pool in another namespace does not count */
    assert_int_equal(a->n_pods, 2); /* the Pod in another namespace does not count */
    const plan_pod *p1 = find_pod(a, "a-1");
    assert_non_null(p1);
    assert_int_equal(p1->phase, API_POD_RUNNING);
    assert_true(p1->container_running);
    assert_false(p1->terminating);
    assert_string_equal(p1->ip, "127.0.0.5");
    assert_int_equal(p1->port, 9090); /* the port named http, where the Pod spec lists several */
    assert_int_equal(p1->probe, PLAN_PROBE_BUSY);
    /* 3 s old by the monotonic clock, whatever the wall clock says: that age in wall time. */
    assert_int_equal(p1->probed_at_ms, TEST_WALL_MS - 3000);
    assert_int_equal(p1->probe_sent_ms, TEST_WALL_MS - 3600); /* sent 600 ms before its answer */
    const plan_pod *p0 = find_pod(a, "a-old");
    assert_non_null(p0);
    assert_int_equal(p0->phase, API_POD_FAILED);
    assert_true(p0->terminating);
    assert_false(p0->container_running);
    assert_int_equal(p0->port, 0); /* no spec: the member's port applies */
    assert_int_equal(p0->probe, PLAN_PROBE_NONE);

    const plan_member *b = &s->members[1];
    assert_true(b->exists);
    assert_int_equal(b->replicas, API_REPLICAS_UNSET); /* "two" is not a number */
    assert_int_equal(b->container_port, 7000);
    assert_string_equal(b->claimed_by, "other");
    assert_int_equal(b->n_pods, 0);

    assert_false(s->members[2].exists);
    /* #26: a cache not known to have caught up with the pool: its lack is not yet an absence */
    assert_true(s->members[2].absence_unconfirmed);
    assert_false(a->absence_unconfirmed);
    pool_snapshot_release(&snap);
    build(&c, "ns/p", true, &snap);
    assert_false(snap.snap.members[2].exists);
    assert_false(snap.snap.members[2].absence_unconfirmed);
    pool_snapshot_release(&snap);
    caches_free(&c);
}

static bool count_each(const char *key, const void *rec, void *ud)
{
    (void)key;
    (void)rec;
    ++*(size_t *)ud;
    return true;
}

/* Members the status records that the spec no longer lists come with their Pods (rule 1), and the
 * pool is indexed under them, so their Pods' events reach it. */
static void test_snapshot_removed(void **state)
{
    (void)state;
    store *pools = store_new(&api_pool_codec);
    assert_non_null(pools);
    assert_int_equal(store_add_index(pools, API_INDEX_MEMBER, api_index_pool_members, NULL), 0);
    assert_int_equal(store_add_index(pools, API_INDEX_REMOVED, api_index_pool_removed, NULL), 0);
    test_store_put(pools, "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"q\"},"
                          "\"spec\":{\"members\":[{\"inferenceServiceRef\":{\"name\":\"b\"}}]},"
                          "\"status\":{\"residentMember\":\"b\",\"pendingMember\":\"c\","
                          "\"members\":[{\"name\":\"a\",\"releasing\":true},{\"name\":\"b\"},"
                          "{\"name\":\"c\"}]}}");
    caches c = fill(pools);
    pool_snapshot snap;
    build(&c, "ns/q", false, &snap);
    const plan_snapshot *s = &snap.snap;
    assert_int_equal(s->n_members, 1);
    assert_string_equal(s->members[0].name, "b");
    assert_int_equal(s->n_removed, 2);
    const plan_member *a = &s->removed[0];
    assert_string_equal(a->name, "a");
    assert_true(a->exists);
    assert_int_equal(a->replicas, 1);
    assert_int_equal(a->n_pods, 2);
    assert_non_null(find_pod(a, "a-1"));
    assert_int_equal(find_pod(a, "a-1")->probe, PLAN_PROBE_BUSY);
    assert_null(a->claimed_by);
    assert_string_equal(s->removed[1].name, "c");
    assert_false(s->removed[1].exists);
    pool_snapshot_release(&snap);

    size_t n = 0;
    store_index_each(pools, API_INDEX_REMOVED, "ns/a", count_each, &n);
    store_index_each(pools, API_INDEX_REMOVED, "ns/c", count_each, &n);
    assert_int_equal(n, 2);
    n = 0;
    store_index_each(pools, API_INDEX_REMOVED, "ns/b", count_each, &n);
    store_index_each(pools, API_INDEX_MEMBER, "ns/a", count_each, &n); /* no claim on a */
    assert_int_equal(n, 0);
    caches_free(&c);
}

TEST_MAIN(cmocka_unit_test(test_time), cmocka_unit_test(test_status_round_trip),
          cmocka_unit_test(test_snapshot), cmocka_unit_test(test_snapshot_removed))

/* Unit tests for the informer's pure parts: the relist diff (what a 410 relist delivers), the
 * reflector-style backoff, the watch timeout and what a caller waiting for a sync is told. The
 * list/watch machinery itself is tested end to end against a real kube-apiserver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer/informer.h"

static cJSON *obj_new(const char *ns, const char *name, const char *rv)
{
    char buf[256];
    if (ns)
        snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
                 ns, name, rv);
    else
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
                 name, rv);
    cJSON *o = cJSON_Parse(buf);
    assert_non_null(o);
    return o;
}

static const char *rv_of(const cJSON *o)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion"));
}

/* A list's items as the informer holds them once decoded (items consumed; nameless ones left
 * out, as the informer leaves them out). */
typedef struct test_list {
    store_item *v;
    size_t n;
} test_list;

static test_list list_of(const store *s, cJSON *items)
{
    test_list l = {calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof(store_item)), 0};
    assert_non_null(l.v);
    cJSON *item;
    while (items && (item = cJSON_DetachItemFromArray(items, 0)))
        if (store_decode(s, item, &l.v[l.n]) == 0)
            l.n++;
    cJSON_Delete(items);
    return l;
}

static void list_free(const store *s, test_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        store_item_release(s, &l->v[i]);
    free(l->v);
}

static const informer_change *find(const informer_change *ch, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ch[i].key, key) == 0)
            return &ch[i];
    return NULL;
}

static void test_diff_first_list_is_all_adds(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    cJSON *items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, obj_new("ns", "a", "1"));
    cJSON_AddItemToArray(items, obj_new(NULL, "node", "2"));
    informer_change *ch;
    size_t n;
    test_list l = list_of(s, items);
    assert_int_equal(informer_diff(s, l.v, l.n, &ch, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ch[0].kind, INFORMER_ADDED);
    assert_string_equal(ch[0].key, "ns/a");
    assert_ptr_equal(ch[0].rec, l.v[0].rec);
    assert_int_equal(ch[1].kind, INFORMER_ADDED);
    assert_string_equal(ch[1].key, "node");
    informer_changes_free(ch, n);
    list_free(s, &l);
    store_free(s);
}

static void test_diff_relist(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_put(s, obj_new("ns", "same", "10"), NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "changed", "11"), NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "gone", "12"), NULL), 0);
    assert_int_equal(store_put(s, obj_new("other", "gone", "13"), NULL), 0);

    cJSON *items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, obj_new("ns", "changed", "20"));
    cJSON_AddItemToArray(items, obj_new("ns", "same", "10"));
    cJSON_AddItemToArray(items, obj_new("ns", "new", "21"));
    cJSON_AddItemToArray(items, obj_new("ns", "changed", "99")); /* duplicate: first wins */
    cJSON_AddItemToArray(items, cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}"));

    informer_change *ch;
    size_t n;
    test_list l = list_of(s, items);
    assert_int_equal(informer_diff(s, l.v, l.n, &ch, &n), 0);
    assert_int_equal(n, 4);
    /* Listed order first, deletions after. */
    assert_int_equal(ch[0].kind, INFORMER_UPDATED);
    assert_string_equal(ch[0].key, "ns/changed");
    assert_string_equal(rv_of(ch[0].rec), "20");
    assert_int_equal(ch[1].kind, INFORMER_ADDED);
    assert_string_equal(ch[1].key, "ns/new");
    assert_int_equal(ch[2].kind, INFORMER_DELETED);
    assert_int_equal(ch[3].kind, INFORMER_DELETED);
    const informer_change *g1 = find(ch, n, "ns/gone"), *g2 = find(ch, n, "other/gone");
    assert_non_null(g1);
    assert_non_null(g2);
    /* A deletion carries the cached object. */
    assert_ptr_equal(g1->rec, store_get(s, "ns/gone"));
    assert_null(find(ch, n, "ns/same"));
    informer_changes_free(ch, n);
    list_free(s, &l);
    store_free(s);
}

static void test_diff_empty_list_deletes_all(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_put(s, obj_new("ns", "a", "1"), NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "b", "2"), NULL), 0);
    informer_change *ch;
    size_t n;
    /* An empty list (no items, or "items": []). */
    assert_int_equal(informer_diff(s, NULL, 0, &ch, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ch[0].kind, INFORMER_DELETED);
    assert_int_equal(ch[1].kind, INFORMER_DELETED);
    informer_changes_free(ch, n);
    test_list l = list_of(s, cJSON_CreateArray());
    assert_int_equal(informer_diff(s, l.v, l.n, &ch, &n), 0);
    assert_int_equal(n, 2);
    informer_changes_free(ch, n);
    list_free(s, &l);
    store_free(s);
}

static void test_diff_missing_version_is_an_update(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_put(s, cJSON_Parse("{\"metadata\":{\"name\":\"a\"}}"), NULL), 0);
    cJSON *items = cJSON_Parse("[{\"metadata\":{\"name\":\"a\"}}]");
    informer_change *ch;
    size_t n;
    test_list l = list_of(s, items);
    assert_int_equal(informer_diff(s, l.v, l.n, &ch, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ch[0].kind, INFORMER_UPDATED);
    informer_changes_free(ch, n);
    list_free(s, &l);
    store_free(s);
}

static void test_diff_large(void **state)
{
    (void)state;
    enum { N = 5000 };
    store *s = store_new(NULL);
    cJSON *items = cJSON_CreateArray();
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "o%d", i);
        assert_int_equal(store_put(s, obj_new("ns", name, "1"), NULL), 0);
        /* Keep the even ones, half of them changed; drop the odd ones; add as many new. */
        if (i % 2 == 0)
            cJSON_AddItemToArray(items, obj_new("ns", name, i % 4 ? "2" : "1"));
        snprintf(name, sizeof(name), "n%d", i);
        if (i % 2)
            cJSON_AddItemToArray(items, obj_new("ns", name, "1"));
    }
    informer_change *ch;
    size_t n;
    test_list l = list_of(s, items);
    assert_int_equal(informer_diff(s, l.v, l.n, &ch, &n), 0);
    size_t count[3] = {0};
    for (size_t i = 0; i < n; i++)
        count[ch[i].kind]++;
    assert_int_equal(count[INFORMER_ADDED], N / 2);
    assert_int_equal(count[INFORMER_UPDATED], N / 4);
    assert_int_equal(count[INFORMER_DELETED], N / 2);
    informer_changes_free(ch, n);
    list_free(s, &l);
    store_free(s);
}

static void test_backoff(void **state)
{
    (void)state;
    informer_backoff b;
    informer_backoff_init(&b);
    uint64_t now = 1000000;
    /* r = 0: the step itself, doubling from 0.8 s to the 30 s cap. */
    const uint64_t want[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(informer_backoff_next(&b, now, 0.0), want[i]);
        now += 1000;
    }
    /* Jitter stays below twice the step. */
    assert_true(informer_backoff_next(&b, now, 0.999999) < 60000);
    assert_true(informer_backoff_next(&b, now, 0.5) == 45000);
    /* Two healthy minutes reset it; less does not. */
    now += 2 * 60 * 1000 - 1;
    assert_int_equal(informer_backoff_next(&b, now, 0.0), 30000);
    now += 2 * 60 * 1000;
    assert_int_equal(informer_backoff_next(&b, now, 0.0), 800);
    assert_int_equal(informer_backoff_next(&b, now, 0.5), 2400);
}

static void test_watch_timeout(void **state)
{
    (void)state;
    assert_int_equal(informer_watch_timeout_s(0.0), 300);
    assert_int_equal(informer_watch_timeout_s(0.5), 450);
    assert_int_equal(informer_watch_timeout_s(0.9999999), 600);
    for (double r = 0; r < 1.0; r += 0.01) {
        long t = informer_watch_timeout_s(r);
        assert_true(t >= 300 && t <= 600);
    }
}

/* Names for people, and what is waited for before a first list (the last error is tested end to
 * end: a list of a resource whose CRD is missing). No informer is started, so no client is needed.
 */
static void test_names_and_waiting(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    informer_config crd = {
        .group = "inference.llmkube.dev", .version = "v1alpha1", .resource = "inferenceservices"};
    informer_config core = {.group = "", .version = "v1", .resource = "pods"};
    informer *a = informer_new(loop, NULL, &crd, NULL), *b = informer_new(loop, NULL, &core, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(informer_name(a), "inferenceservices.inference.llmkube.dev");
    assert_string_equal(informer_name(b), "pods");
    assert_null(informer_last_error(a));

    const informer *const both[] = {a, b};
    char buf[128];
    informer_waiting(both, 2, buf, sizeof(buf));
    assert_string_equal(buf, "the first list of inferenceservices.inference.llmkube.dev; pods");
    informer_waiting(both, 0, buf, sizeof(buf));
    assert_string_equal(buf, "");
    char small[10];
    informer_waiting(both, 2, small, sizeof(small)); /* cut, never overrun */
    assert_string_equal(small, "the first");

    informer_free(a);
    informer_free(b);
    ev_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_first_list_is_all_adds),
        cmocka_unit_test(test_diff_relist),
        cmocka_unit_test(test_diff_empty_list_deletes_all),
        cmocka_unit_test(test_diff_missing_version_is_an_update),
        cmocka_unit_test(test_diff_large),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_watch_timeout),
        cmocka_unit_test(test_names_and_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for the informer cache store: CRUD by key, secondary indexes (multi-valued and
 * changing on update), codecs (trimmed JSON, a caller's record), and a store large enough to make
 * the hash tables grow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer/store.h"

static cJSON *obj_new(const char *ns, const char *name, const char *app, const char *members)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{%s%s%s\"name\":\"%s\",\"resourceVersion\":\"1\","
             "\"labels\":{\"app\":\"%s\"}},\"spec\":{\"members\":[%s]}}",
             ns ? "\"namespace\":\"" : "", ns ? ns : "", ns ? "\"," : "", name, app,
             members ? members : "");
    cJSON *o = cJSON_Parse(buf);
    assert_non_null(o);
    return o;
}

static int index_app(const void *obj, store_index_out *out, void *ud)
{
    (void)ud;
    const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
    const char *app = cJSON_GetStringValue(cJSON_GetObjectItem(labels, "app"));
    return app && *app ? store_index_emit(out, app) : 0;
}

static int index_members(const void *obj, store_index_out *out, void *ud)
{
    (void)ud;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "spec"), "members"))
    {
        int rc = store_index_emit(out, cJSON_GetStringValue(m));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int index_fail_on_bad(const void *obj, store_index_out *out, void *ud)
{
    (void)out;
    (void)ud;
    const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
    const char *app = cJSON_GetStringValue(cJSON_GetObjectItem(labels, "app"));
    return app && strcmp(app, "bad") == 0 ? -EPROTO : 0;
}

typedef struct {
    char keys[16][64];
    size_t n;
} seen;

static bool collect(const char *key, const void *obj, void *ud)
{
    (void)obj;
    seen *s = ud;
    assert_true(s->n < 16);
    snprintf(s->keys[s->n++], sizeof(s->keys[0]), "%s", key);
    return true;
}

static bool seen_has(const seen *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], key) == 0)
            return true;
    return false;
}

static bool stop_after_one(const char *key, const void *obj, void *ud)
{
    (void)key;
    (void)obj;
    (*(size_t *)ud)++;
    return false;
}

static const char *rv_of(const cJSON *o)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion"));
}

static void test_key_of(void **state)
{
    (void)state;
    cJSON *a = obj_new("ns", "a", "x", NULL), *b = obj_new(NULL, "b", "x", NULL);
    cJSON *c = cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}");
    char *ka = store_key_of(a), *kb = store_key_of(b);
    assert_string_equal(ka, "ns/a");
    assert_string_equal(kb, "b");
    assert_null(store_key_of(c));
    free(ka);
    free(kb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

static void test_crud(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_non_null(s);
    assert_int_equal(store_put(s, obj_new("ns", "a", "x", NULL), NULL), 0);
    assert_int_equal(store_put(s, obj_new(NULL, "cluster", "x", NULL), NULL), 0);
    assert_int_equal(store_count(s), 2);
    assert_non_null(store_get(s, "ns/a"));
    assert_non_null(store_get(s, "cluster"));
    assert_null(store_get(s, "a"));

    /* Replace: the old object comes back to the caller. */
    cJSON *newer = obj_new("ns", "a", "x", NULL);
    cJSON_SetValuestring(
        cJSON_GetObjectItem(cJSON_GetObjectItem(newer, "metadata"), "resourceVersion"), "2");
    void *old = NULL;
    assert_int_equal(store_put(s, newer, &old), 0);
    assert_non_null(old);
    assert_string_equal(rv_of(old), "1");
    assert_string_equal(rv_of(store_get(s, "ns/a")), "2");
    store_release(s, old);
    assert_int_equal(store_count(s), 2);

    /* A new key hands back no old object. */
    old = (void *)1;
    assert_int_equal(store_put(s, obj_new("other", "a", "x", NULL), &old), 0);
    assert_null(old);

    /* No name: refused (the object is consumed either way). */
    cJSON *nameless = cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}");
    assert_int_equal(store_put(s, nameless, NULL), -EINVAL);
    assert_int_equal(store_count(s), 3);

    assert_int_equal(store_delete(s, "ns/a", &old), 0);
    assert_string_equal(rv_of(old), "2");
    store_release(s, old);
    assert_int_equal(store_delete(s, "ns/a", &old), -ENOENT);
    assert_null(old);
    assert_int_equal(store_delete(s, "cluster", NULL), 0);
    assert_int_equal(store_count(s), 1);

    seen all = {0};
    store_each(s, collect, &all);
    assert_int_equal(all.n, 1);
    assert_string_equal(all.keys[0], "other/a");
    store_free(s);
}

static void test_index_registration(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_add_index(s, "app", index_app, NULL), 0);
    assert_int_equal(store_add_index(s, "app", index_app, NULL), -EEXIST);
    assert_int_equal(store_put(s, obj_new("ns", "a", "x", NULL), NULL), 0);
    assert_int_equal(store_add_index(s, "members", index_members, NULL), -EBUSY);
    seen v = {0};
    assert_int_equal(store_index_each(s, "nope", "x", collect, &v), -ENOENT);
    assert_int_equal(store_index_count(s, "nope", "x"), 0);
    store_free(s);
}

static void test_index_values(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_add_index(s, "app", index_app, NULL), 0);
    assert_int_equal(store_add_index(s, "members", index_members, NULL), 0);

    /* Multi-valued, with a duplicate value that counts once. */
    assert_int_equal(store_put(s, obj_new("ns", "p1", "pool", "\"m1\",\"m2\",\"m1\""), NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "p2", "pool", "\"m2\",\"m3\""), NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "solo", "web", NULL), NULL), 0);

    assert_int_equal(store_index_count(s, "members", "m1"), 1);
    assert_int_equal(store_index_count(s, "members", "m2"), 2);
    assert_int_equal(store_index_count(s, "members", "m3"), 1);
    assert_int_equal(store_index_count(s, "members", "m4"), 0);
    assert_int_equal(store_index_count(s, "app", "pool"), 2);
    assert_int_equal(store_index_count(s, "app", "web"), 1);

    seen v = {0};
    assert_int_equal(store_index_each(s, "members", "m2", collect, &v), 0);
    assert_int_equal(v.n, 2);
    assert_true(seen_has(&v, "ns/p1"));
    assert_true(seen_has(&v, "ns/p2"));

    /* Changing values: p1 leaves m1 and m2 and joins m4; its label changes too. */
    assert_int_equal(store_put(s, obj_new("ns", "p1", "web", "\"m4\""), NULL), 0);
    assert_int_equal(store_index_count(s, "members", "m1"), 0);
    assert_int_equal(store_index_count(s, "members", "m2"), 1);
    assert_int_equal(store_index_count(s, "members", "m4"), 1);
    assert_int_equal(store_index_count(s, "app", "pool"), 1);
    assert_int_equal(store_index_count(s, "app", "web"), 2);

    /* Delete drops every value of the object. */
    assert_int_equal(store_delete(s, "ns/p2", NULL), 0);
    assert_int_equal(store_index_count(s, "members", "m2"), 0);
    assert_int_equal(store_index_count(s, "members", "m3"), 0);
    assert_int_equal(store_index_count(s, "app", "pool"), 0);

    /* A visitor can stop early. */
    size_t visits = 0;
    assert_int_equal(store_index_count(s, "app", "web"), 2);
    assert_int_equal(store_index_each(s, "app", "web", stop_after_one, &visits), 0);
    assert_int_equal(visits, 1);
    visits = 0;
    store_each(s, stop_after_one, &visits);
    assert_int_equal(visits, 1);
    store_free(s);
}

static void test_index_error_leaves_store_unchanged(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_add_index(s, "app", index_app, NULL), 0);
    assert_int_equal(store_add_index(s, "check", index_fail_on_bad, NULL), 0);
    assert_int_equal(store_put(s, obj_new("ns", "a", "good", NULL), NULL), 0);

    assert_int_equal(store_put(s, obj_new("ns", "a", "bad", NULL), NULL), -EPROTO);
    assert_int_equal(store_count(s), 1);
    assert_int_equal(store_index_count(s, "app", "good"), 1);
    assert_int_equal(store_index_count(s, "app", "bad"), 0);
    store_free(s);
}

static void test_trim_default(void **state)
{
    (void)state;
    store *s = store_new(&store_codec_json_trimmed);
    cJSON *o =
        cJSON_Parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"managedFields\":[{"
                    "\"manager\":\"k\"}],"
                    "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":\"{}\","
                    "\"keep\":\"me\"}},\"spec\":{\"x\":1}}");
    assert_int_equal(store_put(s, o, NULL), 0);
    const cJSON *meta = cJSON_GetObjectItem(store_get(s, "ns/a"), "metadata");
    assert_null(cJSON_GetObjectItem(meta, "managedFields"));
    const cJSON *ann = cJSON_GetObjectItem(meta, "annotations");
    assert_null(cJSON_GetObjectItem(ann, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ann, "keep")), "me");
    assert_non_null(cJSON_GetObjectItem(store_get(s, "ns/a"), "spec"));

    /* Objects without those fields pass through unchanged. */
    assert_int_equal(store_put(s, obj_new(NULL, "plain", "x", NULL), NULL), 0);
    assert_non_null(store_get(s, "plain"));
    store_free(s);
}

/* A caller's own codec: a record of the name and resourceVersion only, decoded once; the store
 * keys it, compares versions through it and frees it. */
typedef struct test_rec {
    char rv[16];
} test_rec;

static void *rec_decode(cJSON **obj, void *ud, int *err)
{
    (void)ud;
    const char *rv = rv_of(*obj);
    if (!rv) {
        *err = -EBADMSG;
        return NULL;
    }
    test_rec *r = calloc(1, sizeof(*r));
    if (!r) {
        *err = -ENOMEM;
        return NULL;
    }
    snprintf(r->rv, sizeof(r->rv), "%s", rv);
    return r;
}

static int rec_frees;

static void rec_free(void *rec)
{
    rec_frees++;
    free(rec);
}

static const char *rec_version(const void *rec)
{
    return ((const test_rec *)rec)->rv;
}

static void test_codec_custom(void **state)
{
    (void)state;
    static const store_codec codec = {rec_decode, rec_free, rec_version, NULL, false};
    rec_frees = 0;
    store *s = store_new(&codec);
    assert_int_equal(store_put(s, obj_new("ns", "a", "x", "\"m\""), NULL), 0);
    assert_string_equal(((const test_rec *)store_get(s, "ns/a"))->rv, "1");
    assert_string_equal(store_version(s, store_get(s, "ns/a")), "1");
    /* The codec's own refusal comes back as its error, and nothing is stored. */
    assert_int_equal(store_put(s, cJSON_Parse("{\"metadata\":{\"name\":\"b\"}}"), NULL), -EBADMSG);
    assert_null(store_get(s, "ns/b"));
    /* A replaced record is freed by the codec. */
    assert_int_equal(store_put(s, obj_new("ns", "a", "x", NULL), NULL), 0);
    assert_int_equal(rec_frees, 1);
    store_item it;
    assert_int_equal(store_decode(s, obj_new("ns", "c", "x", NULL), &it), 0);
    assert_string_equal(it.key, "ns/c");
    store_item_release(s, &it);
    assert_int_equal(rec_frees, 2);
    store_free(s);
    assert_int_equal(rec_frees, 3);
}

static int index_bucket(const void *obj, store_index_out *out, void *ud)
{
    (void)ud;
    const char *name =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "name"));
    char v[16];
    snprintf(v, sizeof(v), "b%d", atoi(name + 1) % 7);
    return store_index_emit(out, v);
}

static bool count_visit(const char *key, const void *obj, void *ud)
{
    (void)key;
    (void)obj;
    (*(size_t *)ud)++;
    return true;
}

static void test_many(void **state)
{
    (void)state;
    enum { N = 20000 };
    store *s = store_new(NULL);
    assert_int_equal(store_add_index(s, "bucket", index_bucket, NULL), 0);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "o%d", i);
        assert_int_equal(store_put(s, obj_new(i % 2 ? "odd" : "even", name, "x", NULL), NULL), 0);
    }
    assert_int_equal(store_count(s), N);
    size_t total = 0;
    for (int b = 0; b < 7; b++) {
        char v[8];
        snprintf(v, sizeof(v), "b%d", b);
        total += store_index_count(s, "bucket", v);
    }
    assert_int_equal(total, N);

    /* Delete every even one; the index follows. */
    char key[48];
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof(key), "even/o%d", i);
        assert_int_equal(store_delete(s, key, NULL), 0);
    }
    assert_int_equal(store_count(s), N / 2);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "%s/o%d", i % 2 ? "odd" : "even", i);
        assert_true((store_get(s, key) != NULL) == (i % 2 == 1));
    }
    size_t visited = 0;
    store_each(s, count_visit, &visited);
    assert_int_equal(visited, N / 2);
    total = 0;
    for (int b = 0; b < 7; b++) {
        char v[8];
        snprintf(v, sizeof(v), "b%d", b);
        total += store_index_count(s, "bucket", v);
    }
    assert_int_equal(total, N / 2);
    store_free(s);
}

TEST_MAIN(cmocka_unit_test(test_key_of), cmocka_unit_test(test_crud),
          cmocka_unit_test(test_index_registration), cmocka_unit_test(test_index_values),
          cmocka_unit_test(test_index_error_leaves_store_unchanged),
          cmocka_unit_test(test_trim_default), cmocka_unit_test(test_codec_custom),
          cmocka_unit_test(test_many))

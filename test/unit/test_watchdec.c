/* Tests of the watch stream decoder: events cut at every possible point, many in one chunk,
 * bookmarks, ERROR events carrying a Status, garbage, oversize events and blank lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "kube/watchdec.h"

/* Four events with the blank lines and CRLFs a proxy might add. */
static const char test_stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\"}}}\n"
    "\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\"},"
    "\"spec\":{\"note\":\"multi-byte \\u00e9 and a \\n escaped newline\"}}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"c\","
    "\"resourceVersion\":\"12\"}}}\n"
    "  \n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"d\"}}}\n";

static const char *const test_types[] = {"ADDED", "MODIFIED", "BOOKMARK", "DELETED"};
static const char *const test_names[] = {"a", "b", "c", "d"};

typedef struct {
    int n;
    char types[64][16];
    char names[64][16];
} test_seen;

static const char *test_name(const cJSON *obj)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
}

/* Pulls every available event; returns next()'s last result (0 or -1). */
static int test_drain(kube_wdec *d, test_seen *seen, kube_error *err)
{
    kube_wdec_event ev;
    int r;
    while ((r = kube_wdec_next(d, &ev, err)) == 1) {
        assert_true(seen->n < 64);
        snprintf(seen->types[seen->n], sizeof(seen->types[0]), "%s", ev.type);
        const char *name = test_name(ev.object);
        snprintf(seen->names[seen->n], sizeof(seen->names[0]), "%s", name ? name : "");
        seen->n++;
        cJSON_Delete(ev.object);
    }
    return r;
}

static void test_expect_all(const test_seen *seen)
{
    assert_int_equal(seen->n, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(seen->types[i], test_types[i]);
        assert_string_equal(seen->names[i], test_names[i]);
    }
}

/* d made with max_event and fed len bytes of text at once: what its first kube_wdec_next says. */
static int test_first(kube_wdec *d, size_t max_event, const char *text, size_t len,
                      kube_wdec_event *ev, kube_error *err)
{
    kube_wdec_init(d, max_event);
    assert_int_equal(kube_wdec_feed(d, text, len, err), 0);
    return kube_wdec_next(d, ev, err);
}

static void test_feed_pieces(const size_t *cuts, size_t ncuts)
{
    kube_wdec d;
    kube_error err = {0};
    test_seen seen = {0};
    kube_wdec_init(&d, 0);
    size_t len = strlen(test_stream), at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        assert_int_equal(kube_wdec_feed(&d, test_stream + at, to - at, &err), 0);
        assert_int_equal(test_drain(&d, &seen, &err), 0);
        at = to;
    }
    assert_int_equal(kube_wdec_finish(&d, &err), 0);
    test_expect_all(&seen);
    kube_wdec_free(&d);
}

static void test_every_split_point(void **state)
{
    (void)state;
    size_t len = strlen(test_stream);
    for (size_t i = 0; i <= len; i++)
        test_feed_pieces(&i, 1);
    /* Three pieces: every pair of cut points. */
    for (size_t i = 0; i <= len; i += 3)
        for (size_t j = i; j <= len; j++) {
            size_t cuts[2] = {i, j};
            test_feed_pieces(cuts, 2);
        }
}

static void test_byte_by_byte(void **state)
{
    (void)state;
    size_t len = strlen(test_stream);
    size_t *cuts = malloc(len * sizeof(*cuts));
    assert_non_null(cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    test_feed_pieces(cuts, len);
    free(cuts);
}

static void test_many_events_one_chunk(void **state)
{
    (void)state;
    char *big = NULL;
    size_t biglen = 0;
    FILE *f = open_memstream(&big, &biglen);
    assert_non_null(f);
    for (int i = 0; i < 1000; i++)
        fprintf(f, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p%d\"}}}\n", i);
    fclose(f);
    kube_wdec d;
    kube_error err = {0};
    /* The total is far above max_event: only single events count against it. */
    kube_wdec_init(&d, 256);
    assert_int_equal(kube_wdec_feed(&d, big, biglen, &err), 0);
    kube_wdec_event ev;
    int n = 0;
    while (kube_wdec_next(&d, &ev, &err) == 1) {
        char want[16];
        snprintf(want, sizeof(want), "p%d", n++);
        assert_string_equal(test_name(ev.object), want);
        cJSON_Delete(ev.object);
    }
    assert_int_equal(n, 1000);
    assert_int_equal(kube_wdec_finish(&d, &err), 0);
    kube_wdec_free(&d);
    free(big);
}

static void test_bookmark(void **state)
{
    (void)state;
    static const char s[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ModelPool\",\"apiVersion\":"
        "\"inference.llmkube.dev/v1alpha1\",\"metadata\":{\"resourceVersion\":"
        "\"4242\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n";
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    assert_int_equal(test_first(&d, 0, s, strlen(s), &ev, &err), 1);
    assert_string_equal(ev.type, "BOOKMARK");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(ev.object, "metadata");
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion")), "4242");
    cJSON_Delete(ev.object);
    assert_int_equal(kube_wdec_next(&d, &ev, &err), 0);
    kube_wdec_free(&d);
}

static void test_error_event(void **state)
{
    (void)state;
    static const char s[] =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
        "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (52)\",\"reason\":"
        "\"Expired\",\"code\":410}}\n";
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    assert_int_equal(test_first(&d, 0, s, strlen(s), &ev, &err), 1);
    assert_string_equal(ev.type, "ERROR");
    kube_error_from_status(&err, ev.object, 200);
    assert_int_equal(err.kind, KUBE_ERR_HTTP);
    assert_int_equal(err.http_code, 410);
    assert_string_equal(err.reason, "Expired");
    assert_string_equal(err.message, "too old resource version: 1 (52)");
    kube_error_clear(&err);
    cJSON_Delete(ev.object);
    assert_int_equal(kube_wdec_finish(&d, &err), 0);
    kube_wdec_free(&d);
}

/* Each line must be rejected, and the decoder must stay failed afterwards. */
static void test_garbage(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "not json at all\n",
        "{\"type\":\"ADDED\",\"object\":{\"a\":1}} trailing\n",
        "{\"type\":\"ADDED\"}\n",
        "{\"type\":\"ADDED\",\"object\":\"a string\"}\n",
        "{\"type\":\"EXPLODED\",\"object\":{}}\n",
        "{\"object\":{}}\n",
        "[1,2,3]\n",
        "{\"type\":\"ADDED\",\"object\":{\"a\":\n",
        "\x01\x02\xff\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        kube_wdec d;
        kube_error err = {0};
        kube_wdec_event ev;
        assert_int_equal(test_first(&d, 0, bad[i], strlen(bad[i]), &ev, &err), -1);
        assert_int_equal(err.kind, KUBE_ERR_DECODE);
        assert_non_null(strstr(err.message, "watch stream"));
        assert_null(ev.object);
        kube_error_clear(&err);
        static const char good[] = "{\"type\":\"ADDED\",\"object\":{}}\n";
        assert_int_equal(kube_wdec_feed(&d, good, strlen(good), &err), -1);
        kube_error_clear(&err);
        assert_int_equal(kube_wdec_next(&d, &ev, &err), -1);
        kube_error_clear(&err);
        kube_wdec_free(&d);
    }
}

static void test_oversize(void **state)
{
    (void)state;
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    char chunk[40];
    memset(chunk, 'x', sizeof(chunk));

    /* An unterminated event growing past the limit fails while it arrives. */
    kube_wdec_init(&d, 100);
    assert_int_equal(kube_wdec_feed(&d, chunk, sizeof(chunk), &err), 0);
    assert_int_equal(kube_wdec_feed(&d, chunk, sizeof(chunk), &err), 0);
    assert_int_equal(kube_wdec_feed(&d, chunk, sizeof(chunk), &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_DECODE);
    assert_non_null(strstr(err.message, "larger than 100 bytes"));
    kube_error_clear(&err);
    kube_wdec_free(&d);

    /* A complete line over the limit that arrived in one chunk fails when pulled. */
    char line[200];
    int n =
        snprintf(line, sizeof(line), "{\"type\":\"ADDED\",\"object\":{\"pad\":\"%0120d\"}}\n", 0);
    assert_int_equal(test_first(&d, 100, line, (size_t)n, &ev, &err), -1);
    assert_non_null(strstr(err.message, "larger than 100 bytes"));
    kube_error_clear(&err);
    kube_wdec_free(&d);

    /* Exactly at the limit is fine. */
    assert_int_equal(test_first(&d, (size_t)n - 1, line, (size_t)n, &ev, &err), 1);
    cJSON_Delete(ev.object);
    kube_wdec_free(&d);
}

static void test_empty_lines(void **state)
{
    (void)state;
    static const char s[] = "\n\n   \r\n\t\n";
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    kube_wdec_init(&d, 0);
    assert_int_equal(kube_wdec_next(&d, &ev, &err), 0);
    assert_int_equal(kube_wdec_feed(&d, s, strlen(s), &err), 0);
    assert_int_equal(kube_wdec_next(&d, &ev, &err), 0);
    assert_int_equal(kube_wdec_feed(&d, "  ", 2, &err), 0);
    assert_int_equal(kube_wdec_finish(&d, &err), 0);
    kube_wdec_free(&d);
}

static void test_ends_inside_event(void **state)
{
    (void)state;
    static const char s[] = "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"MOD";
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    assert_int_equal(test_first(&d, 0, s, strlen(s), &ev, &err), 1);
    cJSON_Delete(ev.object);
    assert_int_equal(kube_wdec_next(&d, &ev, &err), 0);
    assert_int_equal(kube_wdec_finish(&d, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_DECODE);
    assert_non_null(strstr(err.message, "ended inside an event"));
    kube_error_clear(&err);
    kube_wdec_free(&d);
}

TEST_MAIN(cmocka_unit_test(test_every_split_point), cmocka_unit_test(test_byte_by_byte),
          cmocka_unit_test(test_many_events_one_chunk), cmocka_unit_test(test_bookmark),
          cmocka_unit_test(test_error_event), cmocka_unit_test(test_garbage),
          cmocka_unit_test(test_oversize), cmocka_unit_test(test_empty_lines),
          cmocka_unit_test(test_ends_inside_event))

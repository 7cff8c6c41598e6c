/* Tests of the metrics registry: the exposition text byte for byte, escaping, histograms,
 * removal by label, bad declarations, and the per-pool series of pool_metrics. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "metrics/metrics.h"
#include "pool/pool_metrics.h"

static char *render(metrics *m)
{
    size_t len = 0;
    char *text = metrics_render(m, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    return text;
}

static void test_counter_gauge_text(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const char *const lv[] = {"verb", "code", NULL};
    metrics_family *c = metrics_family_new(m, METRICS_COUNTER, "x_requests_total",
                                           "Requests.\nTwo lines \\ here.", lv, NULL, 0);
    metrics_family *g = metrics_family_new(m, METRICS_GAUGE, "x_depth", "Depth.", NULL, NULL, 0);
    assert_non_null(c);
    assert_non_null(g);
    assert_int_equal(metrics_add(c, (const char *[]){"GET", "200"}, 1), 0);
    assert_int_equal(metrics_add(c, (const char *[]){"GET", "200"}, 2), 0);
    assert_int_equal(metrics_set(g, NULL, 0.25), 0);
    char *text = render(m);
    assert_string_equal(text, "# HELP x_requests_total Requests.\\nTwo lines \\\\ here.\n"
                              "# TYPE x_requests_total counter\n"
                              "x_requests_total{verb=\"GET\",code=\"200\"} 3\n"
                              "# HELP x_depth Depth.\n"
                              "# TYPE x_depth gauge\n"
                              "x_depth 0.25\n");
    free(text);
    assert_true(metrics_value(c, (const char *[]){"GET", "200"}) == 3);
    assert_true(metrics_value(c, (const char *[]){"PUT", "200"}) == 0);
    /* Counters only go up; histograms take observations only. */
    assert_int_equal(metrics_add(c, (const char *[]){"GET", "200"}, -1), -EINVAL);
    assert_int_equal(metrics_observe(c, (const char *[]){"GET", "200"}, 1), -EINVAL);
    assert_int_equal(metrics_add(g, NULL, -1), 0);
    assert_true(metrics_value(g, NULL) == -0.75);
    metrics_free(m);
}

/* Values print in the shortest form that reads back the same double. */
static void test_number_format(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const char *const one[] = {"k", NULL};
    metrics_family *f = metrics_family_new(m, METRICS_GAUGE, "x", "", one, NULL, 0);
    assert_int_equal(metrics_set(f, (const char *[]){"a"}, 0.008015), 0);
    assert_int_equal(metrics_set(f, (const char *[]){"b"}, 0.1 + 0.2), 0);
    assert_int_equal(metrics_set(f, (const char *[]){"c"}, 1e20), 0);
    assert_int_equal(metrics_set(f, (const char *[]){"d"}, -3), 0);
    char *text = render(m);
    assert_non_null(strstr(text, "x{k=\"a\"} 0.008015\n"));
    assert_non_null(strstr(text, "x{k=\"b\"} 0.30000000000000004\n"));
    assert_non_null(strstr(text, "x{k=\"c\"} 1e+20\n"));
    assert_non_null(strstr(text, "x{k=\"d\"} -3\n"));
    free(text);
    metrics_free(m);
}

static void test_label_escaping(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const char *const lv[] = {"pool", NULL};
    metrics_family *g = metrics_family_new(m, METRICS_GAUGE, "x", "", lv, NULL, 0);
    assert_int_equal(metrics_set(g, (const char *[]){"a\"b\\c\nd"}, 1), 0);
    char *text = render(m);
    assert_non_null(strstr(text, "x{pool=\"a\\\"b\\\\c\\nd\"} 1\n"));
    free(text);
    metrics_free(m);
}

static void test_histogram_text(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const double b[] = {0.5, 1, 2.5};
    static const char *const lv[] = {"path", NULL};
    metrics_family *h = metrics_family_new(m, METRICS_HISTOGRAM, "x_seconds", "H.", lv, b, 3);
    assert_non_null(h);
    const char *a[] = {"a"};
    assert_int_equal(metrics_observe(h, a, 0.5), 0); /* le is inclusive */
    assert_int_equal(metrics_observe(h, a, 0.75), 0);
    assert_int_equal(metrics_observe(h, a, 10), 0);
    char *text = render(m);
    assert_string_equal(text, "# HELP x_seconds H.\n"
                              "# TYPE x_seconds histogram\n"
                              "x_seconds_bucket{path=\"a\",le=\"0.5\"} 1\n"
                              "x_seconds_bucket{path=\"a\",le=\"1\"} 2\n"
                              "x_seconds_bucket{path=\"a\",le=\"2.5\"} 2\n"
                              "x_seconds_bucket{path=\"a\",le=\"+Inf\"} 3\n"
                              "x_seconds_sum{path=\"a\"} 11.25\n"
                              "x_seconds_count{path=\"a\"} 3\n");
    free(text);
    assert_true(metrics_value(h, a) == 3);
    assert_int_equal(metrics_set(h, a, 1), -EINVAL);
    metrics_free(m);
}

static void test_bad_declarations(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const double unsorted[] = {1, 0.5};
    static const char *const bad_label[] = {"a-b", NULL};
    static const char *const colon_label[] = {"a:b", NULL};
    assert_null(metrics_family_new(m, METRICS_GAUGE, "9x", "", NULL, NULL, 0));
    assert_null(metrics_family_new(m, METRICS_GAUGE, "", "", NULL, NULL, 0));
    assert_null(metrics_family_new(m, METRICS_GAUGE, "x", "", bad_label, NULL, 0));
    assert_null(metrics_family_new(m, METRICS_GAUGE, "x", "", colon_label, NULL, 0));
    assert_null(metrics_family_new(m, METRICS_HISTOGRAM, "x", "", NULL, unsorted, 2));
    assert_null(metrics_family_new(m, METRICS_HISTOGRAM, "x", "", NULL, NULL, 0));
    assert_non_null(metrics_family_new(m, METRICS_GAUGE, "ns:x_total", "", NULL, NULL, 0));
    metrics_free(m);
}

static void test_remove_by_labels(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    static const char *const pl[] = {"namespace", "pool", NULL};
    static const char *const ml[] = {"namespace", "pool", "member", NULL};
    static const char *const other[] = {"pool", NULL};
    metrics_family *swaps = metrics_family_new(m, METRICS_COUNTER, "s", "", pl, NULL, 0);
    metrics_family *res = metrics_family_new(m, METRICS_GAUGE, "r", "", ml, NULL, 0);
    metrics_family *o = metrics_family_new(m, METRICS_GAUGE, "o", "", other, NULL, 0);
    metrics_add(swaps, (const char *[]){"ns", "p"}, 1);
    metrics_add(swaps, (const char *[]){"ns", "p2"}, 1); /* a prefix of p2 is p: must stay */
    metrics_set(res, (const char *[]){"ns", "p", "a"}, 1);
    metrics_set(res, (const char *[]){"ns", "p", "b"}, 0);
    metrics_set(res, (const char *[]){"ns", "p2", "a"}, 1);
    metrics_set(o, (const char *[]){"p"}, 1); /* other label names: untouched */
    metrics_remove(m, (const char *[]){"namespace", "pool"}, (const char *[]){"ns", "p"}, 2);
    assert_int_equal(metrics_series_count(swaps), 1);
    assert_int_equal(metrics_series_count(res), 1);
    assert_int_equal(metrics_series_count(o), 1);
    assert_true(metrics_value(swaps, (const char *[]){"ns", "p2"}) == 1);
    metrics_delete(res, (const char *[]){"ns", "p2", "b"}); /* absent: nothing happens */
    assert_int_equal(metrics_series_count(res), 1);
    metrics_delete(res, (const char *[]){"ns", "p2", "a"});
    assert_int_equal(metrics_series_count(res), 0);
    assert_int_equal(metrics_series_count(swaps), 1);
    metrics_free(m);
}

static int test_collects;

static void test_collector(void *ud)
{
    test_collects++;
    metrics_set(ud, NULL, 42);
}

static void test_collect_before_render(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    metrics_family *g = metrics_family_new(m, METRICS_GAUGE, "g", "", NULL, NULL, 0);
    assert_int_equal(metrics_on_collect(m, test_collector, g), 0);
    test_collects = 0;
    char *text = render(m);
    assert_int_equal(test_collects, 1);
    assert_non_null(strstr(text, "\ng 42\n"));
    free(text);
    metrics_free(m);
}

static void test_pool_metrics_members(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    pool_metrics *pm = pool_metrics_new(m);
    assert_non_null(pm);
    const char *three[] = {"a", "b", "c"};
    pool_metrics_members(pm, "ns", "p", three, 3, "b");
    char *text = render(m);
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p\",member=\"b\"} 1\n"));
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p\",member=\"a\"} 0\n"));
    free(text);
    /* A member dropped from the spec loses its series; a new resident is 1 alone. */
    const char *two[] = {"a", "c"};
    pool_metrics_members(pm, "ns", "p", two, 2, "c");
    text = render(m);
    assert_null(strstr(text, "member=\"b\""));
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p\",member=\"c\"} 1\n"));
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p\",member=\"a\"} 0\n"));
    free(text);
    /* Empty names are members too (an invalid spec still gets its gauges right). */
    const char *with_empty[] = {"", "a"};
    pool_metrics_members(pm, "ns", "p", with_empty, 2, "a");
    text = render(m);
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p\",member=\"\"} 0\n"));
    assert_null(strstr(text, "member=\"c\""));
    free(text);
    /* No resident: every member 0. */
    pool_metrics_members(pm, "ns", "p", two, 2, NULL);
    text = render(m);
    assert_null(strstr(text, "member=\"c\"} 1"));
    free(text);
    pool_metrics_swap_done(pm, "ns", "p", 12500);
    pool_metrics_deferred(pm, "ns", "p", "PodsBusy");
    pool_metrics_reaction(pm, POOL_REACTION_A, 1500);
    pool_metrics_fence_ended(pm, true);
    pool_metrics_fence_ended(pm, true);
    text = render(m);
    assert_non_null(strstr(text, "modelpool_drain_fence_total{outcome=\"acknowledged\"} 2\n"));
    assert_non_null(strstr(text, "modelpool_drain_fence_total{outcome=\"waited\"} 0\n"));
    assert_non_null(strstr(text, "modelpool_swaps_total{namespace=\"ns\",pool=\"p\"} 1\n"));
    assert_non_null(strstr(
        text, "modelpool_swap_duration_seconds_bucket{namespace=\"ns\",pool=\"p\",le=\"20\"} 1\n"));
    assert_non_null(strstr(
        text,
        "modelpool_swap_deferrals_total{namespace=\"ns\",pool=\"p\",reason=\"PodsBusy\"} 1\n"));
    assert_non_null(strstr(text, "modelpool_reaction_seconds_bucket{path=\"a\",le=\"0.002\"} 1\n"));
    assert_non_null(strstr(text, "modelpool_reaction_seconds_bucket{path=\"a\",le=\"0.001\"} 0\n"));
    free(text);
    /* Another pool, whose name p is a prefix of, and one known only by its swaps. */
    pool_metrics_members(pm, "ns", "p2", two, 2, "a");
    pool_metrics_deferred(pm, "ns", "p2", "IdleCheckFailed");
    pool_metrics_swap_done(pm, "ns", "q", 1000);
    /* Two deferral reasons for p: both go with it. */
    pool_metrics_deferred(pm, "ns", "p", "IdleCheckUnsupported");
    pool_metrics_deferred(pm, "ns", "p", "PodsBusy");
    /* A deleted pool leaves nothing behind; the process-wide series and other pools' stay. */
    pool_metrics_forget(pm, "ns", "p");
    text = render(m);
    assert_null(strstr(text, "pool=\"p\""));
    assert_non_null(
        strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"p2\",member=\"a\"} 1\n"));
    assert_non_null(strstr(text, "reason=\"IdleCheckFailed\"} 1\n"));
    free(text);
    pool_metrics_forget(pm, "ns", "q");
    pool_metrics_forget(pm, "ns", "p2");
    text = render(m);
    assert_null(strstr(text, "pool=\""));
    assert_non_null(strstr(text, "modelpool_reaction_seconds_count{path=\"a\"} 1\n"));
    assert_non_null(strstr(text, "modelpool_reconcile_total{result=\"success\"} 0\n"));
    free(text);
    /* NULL pool_metrics: every call is a no-op. */
    pool_metrics_members(NULL, "ns", "p", two, 2, "a");
    pool_metrics_fence_ended(NULL, false);
    pool_metrics_forget(NULL, "ns", "p");
    pool_metrics_free(pm);
    metrics_free(m);
}

static void list_two(void *ud, metrics_emitter *out)
{
    int *calls = ud;
    (*calls)++;
    metrics_emit(out, (const char *[]){"x", "q\"uote"}, 1);
    metrics_emit(out, (const char *[]){"y", ""}, 0.5);
}

static void test_listed_family(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    int calls = 0;
    static const char *const labels[] = {"a", "b", NULL};
    metrics_family *f = metrics_family_listed(m, METRICS_GAUGE, "listed_gauge", "Kept elsewhere.",
                                              labels, list_two, &calls);
    assert_non_null(f);
    /* No histograms, and a list function is needed. */
    assert_null(metrics_family_listed(m, METRICS_HISTOGRAM, "h", "", NULL, list_two, &calls));
    assert_null(metrics_family_listed(m, METRICS_GAUGE, "g", "", NULL, NULL, NULL));
    /* Its series are the caller's: recording and removing by label do not touch them. */
    assert_int_equal(metrics_set(f, (const char *[]){"x", "y"}, 1), -EINVAL);
    assert_int_equal(metrics_add(f, (const char *[]){"x", "y"}, 1), -EINVAL);
    assert_int_equal(metrics_series_count(f), 0);
    metrics_remove(m, (const char *[]){"a"}, (const char *[]){"x"}, 1);
    assert_int_equal(calls, 0);
    char *text = render(m);
    assert_int_equal(calls, 1);
    assert_non_null(strstr(text, "# TYPE listed_gauge gauge\n"
                                 "listed_gauge{a=\"x\",b=\"q\\\"uote\"} 1\n"
                                 "listed_gauge{a=\"y\",b=\"\"} 0.5\n"));
    free(text);
    metrics_free(m);
}

/* How many times needle occurs in text. */
static size_t occurrences(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *at = text; (at = strstr(at, needle)); at++)
        n++;
    return n;
}

static void test_pool_metrics_duplicates(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    pool_metrics *pm = pool_metrics_new(m);
    assert_non_null(pm);
    /* A member listed twice (an invalid spec) has one gauge, as one series would. */
    const char *dup[] = {"a", "b", "a"};
    pool_metrics_members(pm, "ns", "d", dup, 3, "a");
    pool_metrics_members(pm, "ns", "d", dup, 3, "a"); /* again: nothing changes */
    char *text = render(m);
    assert_int_equal(occurrences(text, "pool=\"d\",member=\"a\"} 1\n"), 1);
    assert_int_equal(occurrences(text, "pool=\"d\",member=\"b\"} 0\n"), 1);
    free(text);
    /* A resident that is no member: every member 0. */
    pool_metrics_members(pm, "ns", "d", dup, 3, "zz");
    text = render(m);
    assert_int_equal(occurrences(text, "pool=\"d\",member="), 2);
    assert_null(strstr(text, "pool=\"d\",member=\"a\"} 1"));
    free(text);
    /* A pool deferred before any plan has no gauges but its counter, and forgetting it works. */
    pool_metrics_deferred(pm, "ns", "e", "PodsBusy");
    text = render(m);
    assert_null(strstr(text, "modelpool_pool_resident{namespace=\"ns\",pool=\"e\""));
    assert_non_null(strstr(text, "pool=\"e\",reason=\"PodsBusy\"} 1\n"));
    free(text);
    pool_metrics_members(pm, "ns", "e", dup, 2, "b");
    pool_metrics_forget(pm, "ns", "e");
    pool_metrics_forget(pm, "ns", "d");
    text = render(m);
    assert_null(strstr(text, "pool=\""));
    free(text);
    pool_metrics_free(pm);
    metrics_free(m);
}

TEST_MAIN(cmocka_unit_test(test_counter_gauge_text), cmocka_unit_test(test_label_escaping),
          cmocka_unit_test(test_number_format), cmocka_unit_test(test_histogram_text),
          cmocka_unit_test(test_bad_declarations), cmocka_unit_test(test_remove_by_labels),
          cmocka_unit_test(test_collect_before_render), cmocka_unit_test(test_pool_metrics_members),
          cmocka_unit_test(test_listed_family), cmocka_unit_test(test_pool_metrics_duplicates))

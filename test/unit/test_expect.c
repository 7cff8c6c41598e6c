/* Tests of the expectations of the controller's own writes: met by the write's resourceVersion or
 * a later one, not by any change of the object; per pool; a write with a numeric version never
 * expired by the ttl (only one without); forgotten with the pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "store_json.h"
#include "test_main.h"

#include "informer/expect.h"

static void test_rv_shows(void **state)
{
    (void)state;
    /* Numbers: the write's version or later. */
    assert_true(expect_rv_shows("120", "100", "120"));
    assert_true(expect_rv_shows("121", "100", "120"));
    assert_false(expect_rv_shows("110", "100", "120")); /* a change, but not ours yet */
    assert_false(expect_rv_shows("100", "100", "120"));
    assert_true(expect_rv_shows("1000", "99", "999")); /* numbers, not strings */
    /* Not numbers: ours exactly, else any change from before. */
    assert_true(expect_rv_shows("b", "a", "b"));
    assert_true(expect_rv_shows("c", "a", "b"));
    assert_false(expect_rv_shows("a", "a", "b"));
    assert_false(expect_rv_shows("12x", "12x", "13"));
    /* No version in the answer: any change from before. */
    assert_true(expect_rv_shows("101", "100", NULL));
    assert_false(expect_rv_shows("100", "100", NULL));
    /* The object is gone: nothing to wait for. */
    assert_true(expect_rv_shows(NULL, "100", "120"));
}

static store *obj_store(const char *key_name, const char *rv)
{
    store *s = store_new(NULL);
    assert_non_null(s);
    char json[200];
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
             key_name, rv);
    test_store_put(s, json);
    return s;
}

static void set_rv(store *s, const char *name, const char *rv)
{
    char json[200];
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
             name, rv);
    void *old = NULL;
    assert_int_equal(store_put(s, cJSON_Parse(json), &old), 0);
    store_release(s, old);
}

static void test_pending(void **state)
{
    (void)state;
    store *pools = obj_store("p", "100");
    store *isvcs = obj_store("m", "7");
    expects *x = expects_new();
    assert_non_null(x);
    assert_false(expects_pending(x, "ns/p", 0, 5000));

    /* p wrote its status (100 -> 120) and scaled m (7 -> 9). */
    assert_int_equal(expects_add(x, "ns/p", pools, "ns/p", "100", "120", 1000), 0);
    assert_int_equal(expects_add(x, "ns/p", isvcs, "ns/m", "7", "9", 1000), 0);
    assert_true(expects_pending(x, "ns/p", 1000, 5000));
    assert_false(expects_pending(x, "ns/q", 1000, 5000)); /* another pool waits for nothing */

    /* Someone else's change of the pool (110) does not meet ours. */
    set_rv(pools, "p", "110");
    assert_true(expects_pending(x, "ns/p", 1100, 5000));
    set_rv(pools, "p", "125");
    assert_true(expects_pending(x, "ns/p", 1200, 5000)); /* m still waits */
    set_rv(isvcs, "m", "9");
    assert_false(expects_pending(x, "ns/p", 1300, 5000));

    /* Unmet, a write with a numeric version is awaited past the ttl (a watch in backoff for a
     * minute leaves the cache that old); only the cache showing it ends the wait. */
    assert_int_equal(expects_add(x, "ns/p", isvcs, "ns/m", "9", "30", 2000), 0);
    assert_true(expects_pending(x, "ns/p", 7000, 5000));
    assert_true(expects_pending(x, "ns/p", 600000, 5000));
    set_rv(isvcs, "m", "30");
    assert_false(expects_pending(x, "ns/p", 600001, 5000));
    /* One answered without a comparable version expires after the ttl. */
    assert_int_equal(expects_add(x, "ns/p", isvcs, "ns/m", "30", NULL, 2000), 0);
    assert_true(expects_pending(x, "ns/p", 6999, 5000));
    assert_false(expects_pending(x, "ns/p", 7000, 5000));
    set_rv(isvcs, "m", "9");

    /* Forgotten with the pool. */
    assert_int_equal(expects_add(x, "ns/p", isvcs, "ns/m", "9", "30", 8000), 0);
    assert_int_equal(expects_add(x, "ns/q", isvcs, "ns/m", "9", "31", 8000), 0);
    expects_forget(x, "ns/p");
    assert_false(expects_pending(x, "ns/p", 8000, 5000));
    assert_true(expects_pending(x, "ns/q", 8000, 5000));

    expects_free(x); /* with one left: freed too (LSan) */
    store_free(pools);
    store_free(isvcs);
}

/* #26: a cache caught up with a pool's version, or not known to be. */
static void test_rv_at_least(void **state)
{
    (void)state;
    assert_true(expect_rv_at_least("120", "120"));
    assert_true(expect_rv_at_least("121", "120"));
    assert_false(expect_rv_at_least("119", "120"));
    assert_false(expect_rv_at_least(NULL, "120")); /* before the first list */
    assert_false(expect_rv_at_least("120", NULL));
    assert_false(expect_rv_at_least("abc", "120")); /* opaque: cannot be told */
    assert_false(expect_rv_at_least("120", "12x"));
}

TEST_MAIN(cmocka_unit_test(test_rv_shows), cmocka_unit_test(test_rv_at_least),
          cmocka_unit_test(test_pending))

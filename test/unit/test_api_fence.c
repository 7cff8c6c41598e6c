/* Tests of the drain fence's shared contract (api/fence.h): the window, and the router Lease's
 * fenced annotation read entry by entry, a malformed entry never matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/fence.h"

static void test_window(void **state)
{
    (void)state;
    assert_int_equal(api_fence_ms(0), API_DRAIN_FENCE_DEFAULT_MS);
    assert_int_equal(api_fence_ms(-5), API_DRAIN_FENCE_DEFAULT_MS);
    assert_int_equal(api_fence_ms(400), 400);
    assert_int_equal(api_fence_window_ms(2000), 1000);
}

static void test_has(void **state)
{
    (void)state;
    static const struct {
        const char *fenced, *ns, *pool, *member;
        bool has;
    } t[] = {
        {"a/p=m", "a", "p", "m", true},
        {"a/p=m b/q=n", "b", "q", "n", true},
        {"a/p=m  b/q=n ", "b", "q", "n", true},
        {" a/p=m", "a", "p", "m", true},
        {"a/p=m", "a", "p", "mm", false},
        {"a/p=mm", "a", "p", "m", false},
        {"a/p=m", "b", "p", "m", false},
        {"a/pp=m", "a", "p", "m", false},
        {"ab/p=m", "a", "p", "m", false},
        {"a/p=m", "a", "p", NULL, false},
        {NULL, "a", "p", "m", false},
        {"", "a", "p", "m", false},
        {"/p=m", "", "p", "m", false}, /* no namespace */
        {"a/=m", "a", "", "m", false}, /* no pool */
        {"a/p=", "a", "p", "", false}, /* no member */
        {"a/b/p=m", "a", "b/p", "m", false},
        {"a/p=m=n", "a", "p", "m=n", false},
        {"a=m/p", "a=m", "p", "", false},
        {"junk a/p=m", "a", "p", "m", true}, /* a malformed entry is skipped, not the rest */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (api_fenced_has(t[i].fenced, t[i].ns, t[i].pool, t[i].member) != t[i].has)
            fail_msg("row %zu: \"%s\" has %s/%s=%s: expected %d", i, t[i].fenced ? t[i].fenced : "",
                     t[i].ns, t[i].pool, t[i].member ? t[i].member : "(null)", t[i].has);
}

typedef struct seen {
    char all[256];
    int n, stop_after;
} seen;

static bool collect(void *ud, const char *ns, size_t ns_len, const char *pool, size_t pool_len,
                    const char *member, size_t member_len)
{
    seen *s = ud;
    size_t at = strlen(s->all);
    snprintf(s->all + at, sizeof(s->all) - at, "[%.*s|%.*s|%.*s]", (int)ns_len, ns, (int)pool_len,
             pool, (int)member_len, member);
    return ++s->n != s->stop_after;
}

static void test_each(void **state)
{
    (void)state;
    seen s = {.stop_after = -1};
    api_fenced_each("x/p1=m1 bad y/p.2=m-2", collect, &s);
    assert_string_equal(s.all, "[x|p1|m1][y|p.2|m-2]");
    seen one = {.stop_after = 1};
    api_fenced_each("x/p1=m1 y/p2=m2", collect, &one);
    assert_string_equal(one.all, "[x|p1|m1]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_has),
        cmocka_unit_test(test_each),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

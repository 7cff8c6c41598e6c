/* Unit tests for the one backoff (util/backoff: exponential, capped, jittered within the step) and
 * the one random generator (util/rng: a fixed seed replays its sequence). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/backoff.h"
#include "util/rng.h"

static void test_step_doubles_to_the_cap(void **state)
{
    (void)state;
    const uint64_t want[] = {100, 200, 400, 800, 1000, 1000};
    for (unsigned i = 0; i < 6; i++)
        assert_int_equal(util_backoff_step_ms(100, 1000, i), want[i]);
    assert_int_equal(util_backoff_step_ms(100, 1000, 4000000000u), 1000);
    assert_int_equal(util_backoff_step_ms(5, 1000 * 1000, 17), 5 * 131072);
}

static void test_jitter_stays_within_the_step(void **state)
{
    (void)state;
    assert_int_equal(util_backoff_ms(200, 10000, 0, 0), 100);
    assert_int_equal(util_backoff_ms(200, 10000, 0, 100), 200);
    assert_int_equal(util_backoff_ms(5, 100, 0, 3), 5); /* an odd step reaches its top */
    util_rng_seed(7);
    for (unsigned f = 0; f < 40; f++) {
        uint64_t step = util_backoff_step_ms(200, 10000, f);
        uint64_t d = util_backoff_ms(200, 10000, f, util_rng_next());
        assert_true(d >= step / 2 && d <= step);
    }
}

static void test_a_seed_replays_its_sequence(void **state)
{
    (void)state;
    uint64_t a[8], b[8];
    util_rng_seed(42);
    for (int i = 0; i < 8; i++)
        a[i] = util_rng_next();
    util_rng_seed(42);
    for (int i = 0; i < 8; i++) {
        b[i] = util_rng_next();
        assert_int_equal(a[i], b[i]);
    }
    assert_true(a[0] != a[1]);
    util_rng_seed(43);
    assert_true(util_rng_next() != a[0]);
    for (int i = 0; i < 1000; i++) {
        double u = util_rng_unit();
        assert_true(u >= 0.0 && u < 1.0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_doubles_to_the_cap),
        cmocka_unit_test(test_jitter_stays_within_the_step),
        cmocka_unit_test(test_a_seed_replays_its_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

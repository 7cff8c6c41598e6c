/* Tests of the Go duration parser: the forms Go accepts that we use, and every malformed one
 * refused rather than misread. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/duration.h"

static void test_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        int64_t ms;
    } t[] = {
        {"300s", 0, 300000},   {"5m", 0, 300000},
        {"1h30m", 0, 5400000}, {"1.5h", 0, 5400000},
        {"250ms", 0, 250},     {"+2s", 0, 2000},
        {"0", 0, 0},           {"1m0.5s", 0, 60500},
        {"1500us", 0, 1},      {".5s", 0, 500},
        {"2.s", 0, 2000},      {"10", -EINVAL, 0},
        {"", -EINVAL, 0},      {"-5s", -EINVAL, 0},
        {"s", -EINVAL, 0},     {"5x", -EINVAL, 0},
        {"5 s", -EINVAL, 0},   {"1e3s", -EINVAL, 0},
        {".s", -EINVAL, 0},    {"99999999999999999h", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int64_t ms = -1;
        int rc = duration_parse_ms(t[i].in, &ms);
        if (rc != t[i].rc || (rc == 0 && ms != t[i].ms))
            fail_msg("\"%s\": rc %d ms %lld", t[i].in, rc, (long long)ms);
    }
    int64_t ms;
    assert_int_equal(duration_parse_ms(NULL, &ms), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_router_intake: the router's rules for a request's way in (src/router/intake.c): its
 * Content-Length against the body limit and the body budget, and the budget's reservations (the
 * last eighth kept for small bodies). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include <errno.h>
#include <string.h>

#include "router/intake.h"
#include "router/model.h"

static void test_length(void **state)
{
    (void)state;
    const struct {
        const char *header;
        long long max_body, budget;
        int rc;
        int64_t len;
        const char *msg;
    } t[] = {
        {NULL, 100, 800, 0, -1, ""},
        {"0", 100, 800, 0, 0, ""},
        {"100", 100, 800, 0, 100, ""},
        {"101", 100, 800, -EFBIG, -1, "request body larger than 100 bytes"},
        /* the budget's room for one large body (its last eighth kept) is the lower limit */
        {"701", 1000, 800, -EFBIG, -1, "request body larger than 700 bytes"},
        {"700", 1000, 800, 0, 700, ""},
        {"", 100, 800, -EINVAL, -1, "bad Content-Length"},
        {"-1", 100, 800, -EINVAL, -1, "bad Content-Length"},
        {"12a", 100, 800, -EINVAL, -1, "bad Content-Length"},
        {"99999999999999999999999", 100, 800, -EINVAL, -1, "bad Content-Length"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int64_t len = 42;
        char msg[128] = "";
        int rc = rt_intake_length(t[i].header, t[i].max_body, t[i].budget, &len, msg, sizeof(msg));
        if (rc != t[i].rc || len != t[i].len || strcmp(msg, t[i].msg) != 0)
            fail_msg("%s: rc %d len %lld msg '%s'", t[i].header ? t[i].header : "(none)", rc,
                     (long long)len, msg);
    }
}

static void test_fits(void **state)
{
    (void)state;
    const uint64_t budget = 8 * RT_MODEL_BODY_EXACT_MAX * 8ULL; /* last eighth: 8 small bodies */
    const struct {
        uint64_t buffered;
        size_t reserved, want;
        int rc;
    } t[] = {
        {0, 0, 100, 0},
        {budget - 100, 0, 100, 0},      /* a small body may fill the budget */
        {budget - 99, 0, 100, -ENOSPC}, /* but not pass it */
        {budget - 99, 50, 100, 0},      /* only the growth counts */
        {budget, 100, 100, 0},          /* no growth: always fits */
        {budget - budget / 8 - RT_MODEL_BODY_EXACT_MAX - 1, 0, RT_MODEL_BODY_EXACT_MAX + 1, 0},
        /* a large body stays out of the last eighth */
        {budget - budget / 8 - RT_MODEL_BODY_EXACT_MAX, 0, RT_MODEL_BODY_EXACT_MAX + 1, -ENOSPC},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (rt_intake_fits(t[i].buffered, budget, t[i].reserved, t[i].want) != t[i].rc)
            fail_msg("row %zu: want %d", i, t[i].rc);
}

TEST_MAIN(cmocka_unit_test(test_length), cmocka_unit_test(test_fits))

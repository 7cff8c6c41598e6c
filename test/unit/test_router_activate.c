/* test_router_activate: when this router withdraws its request through the pool
 * (src/router/activate.c, #26): only once a client waiting for it left and nobody else waits, only
 * while the pool still shows the request (untaken) or its swap (taken), and once a version. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include "router/activate.h"

// clang-format off
static void test_withdrawal(void **state)
{
    (void)state;
    const struct {
        const char *title;
        rt_withdraw_view v;
        rt_withdraw_step want;
    } t[] = {
        {"nothing asked", {.asked = NULL, .asked_left = true}, RT_WITHDRAW_NONE},
        {"the pool shows neither: forgotten",
         {.asked = "b", .asked_left = true, .requested = "c", .pending = "c", .rv = "5"},
         RT_WITHDRAW_FORGET},
        {"untaken, its client left, none waits: the annotation goes",
         {.asked = "b", .asked_left = true, .requested = "b", .rv = "5"}, RT_WITHDRAW_UNTAKEN},
        {"taken (pending), its client left: withdraw annotation",
         {.asked = "b", .asked_left = true, .pending = "b", .rv = "5"}, RT_WITHDRAW_TAKEN},
        {"no client left: kept",
         {.asked = "b", .asked_left = false, .pending = "b", .rv = "5"}, RT_WITHDRAW_NONE},
        {"another still waits: kept",
         {.asked = "b", .asked_left = true, .waiting = 1, .pending = "b", .rv = "5"},
         RT_WITHDRAW_NONE},
        {"one is served: kept",
         {.asked = "b", .asked_left = true, .in_flight = 1, .pending = "b", .rv = "5"},
         RT_WITHDRAW_NONE},
        {"already withdrawn: nothing more",
         {.asked = "b", .asked_left = true, .pending = "b", .withdrawn = "b", .rv = "5"},
         RT_WITHDRAW_NONE},
        {"sent at this version (a 409): not again until the cache moves",
         {.asked = "b", .asked_left = true, .pending = "b", .rv = "5", .sent_at_rv = "5"},
         RT_WITHDRAW_NONE},
        {"the cache moved: sent again",
         {.asked = "b", .asked_left = true, .pending = "b", .rv = "6", .sent_at_rv = "5"},
         RT_WITHDRAW_TAKEN},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (rt_activate_withdrawal(&t[i].v) != t[i].want)
            fail_msg("%s: got %d, want %d", t[i].title, rt_activate_withdrawal(&t[i].v),
                     t[i].want);
}
// clang-format on

TEST_MAIN(cmocka_unit_test(test_withdrawal))

/* loop_run: the event loop run with a deadline (loop_run.h); a deadline that passes fails the
 * test. */
#include "loop_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

typedef struct {
    bool (*pred)(void *ud);
    void *ud;
    bool met, timed_out;
} waiter;

void test_loop_stop(ev_loop *loop, void *ud)
{
    (void)ud;
    ev_stop(loop);
}

static void expired(ev_loop *loop, void *ud)
{
    *(bool *)ud = true;
    ev_stop(loop);
}

void test_loop_run(ev_loop *loop, uint64_t ms)
{
    bool timed_out = false;
    uint64_t t = ev_timer_add(loop, ms, expired, &timed_out);
    assert_int_equal(ev_run(loop), 0);
    ev_timer_cancel(loop, t);
    if (timed_out)
        fail_msg("the loop ran %llu ms without finishing", (unsigned long long)ms);
}

static void waiter_check(ev_loop *loop, void *ud)
{
    waiter *w = ud;
    if (w->pred(w->ud)) {
        w->met = true;
        ev_stop(loop);
    } else {
        assert_true(ev_timer_add(loop, 1, waiter_check, w) > 0);
    }
}

void test_loop_run_until(ev_loop *loop, bool (*pred)(void *ud), void *ud, uint64_t ms)
{
    waiter w = {.pred = pred, .ud = ud};
    uint64_t g = ev_timer_add(loop, ms, expired, &w.timed_out);
    uint64_t t = ev_timer_add(loop, 0, waiter_check, &w);
    while (!w.met && !w.timed_out)
        assert_int_equal(ev_run(loop), 0);
    ev_timer_cancel(loop, g);
    ev_timer_cancel(loop, t);
    if (!w.met)
        fail_msg("the condition did not hold within %llu ms", (unsigned long long)ms);
}

void test_loop_run_for(ev_loop *loop, uint64_t ms)
{
    assert_true(ev_timer_add(loop, ms, test_loop_stop, NULL) > 0);
    test_loop_run(loop, 20000);
}

ev_loop *test_loop_new(void)
{
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    return loop;
}

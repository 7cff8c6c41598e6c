/* loop_run: the unit tests' ways of running the event loop with a deadline: until something stops
 * it, or until a condition holds. A deadline that passes fails the test (cmocka). Part of the
 * test-support library (test/support). */
#ifndef MP_TEST_LOOP_RUN_H
#define MP_TEST_LOOP_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "loop/ev.h"

/* Runs the loop until something stops it; the test fails if ms pass first. */
void test_loop_run(ev_loop *loop, uint64_t ms);

/* Runs the loop until pred(ud) holds (checked every millisecond); the test fails after ms. */
void test_loop_run_until(ev_loop *loop, bool (*pred)(void *ud), void *ud, uint64_t ms);

/* Runs the loop for ms, then stops it (a deadline of 20 s fails the test). */
void test_loop_run_for(ev_loop *loop, uint64_t ms);

/* A new loop; the test fails when there is none. */
ev_loop *test_loop_new(void);

/* A timer callback that stops the loop. */
void test_loop_stop(ev_loop *loop, void *ud);

#endif

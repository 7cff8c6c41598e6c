/* Unit tests for the work queue, driven by a real event loop: dedup, requeue while in flight,
 * backoff (through the computed delays, never by timing), forget on success, delayed adds, the
 * concurrency bound and shutdown. Tests assert order and counts; the loop stops when idle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "informer/workqueue.h"

enum { LOG_MAX = 64, HELD_MAX = 8 };

typedef struct ctx ctx;
/* Decides what to do with a key just handed out (the test's processor). */
typedef void (*behaviour_fn)(ctx *c, const char *key);

struct ctx {
    ev_loop *loop;
    wq *q;
    behaviour_fn behave;
    char log[LOG_MAX][32];
    size_t nlog;
    int nesting; /* > 0 while inside the process callback */
    size_t in_flight, max_in_flight;
    const char *held[HELD_MAX]; /* keys whose wq_done is still to come */
    size_t nheld;
    int fails_left;
    uint64_t backoffs[LOG_MAX];
    size_t nbackoffs;
    int drained;
    int polls; /* of a test waiting for hand-outs */
};

static void log_add(ctx *c, const char *prefix, const char *key)
{
    assert_true(c->nlog < LOG_MAX);
    snprintf(c->log[c->nlog++], sizeof(c->log[0]), "%s%s", prefix, key);
}

static void process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    (void)q;
    (void)waited_ms;
    ctx *c = ud;
    assert_int_equal(c->nesting, 0); /* never handed out from inside a callback */
    for (size_t i = 0; i < c->nheld; i++)
        assert_string_not_equal(c->held[i], key); /* never twice at once */
    c->nesting++;
    c->in_flight++;
    if (c->in_flight > c->max_in_flight)
        c->max_in_flight = c->in_flight;
    log_add(c, "", key);
    c->behave(c, key);
    c->nesting--;
}

static void finish(ctx *c, const char *key, wq_result r)
{
    c->in_flight--;
    assert_int_equal(wq_done(c->q, key, r), 0);
}

/* Stops the loop once the queue has nothing queued, in flight or waiting. */
static void idle_check(ev_loop *loop, void *ud)
{
    ctx *c = ud;
    wq_stats st;
    wq_stats_get(c->q, &st);
    if (st.depth || st.in_flight || st.waiting)
        assert_true(ev_timer_add(loop, 1, idle_check, c) != 0);
    else
        ev_stop(loop);
}

static void ctx_init(ctx *c, const wq_config *cfg, behaviour_fn behave)
{
    memset(c, 0, sizeof(*c));
    c->loop = ev_new();
    assert_non_null(c->loop);
    c->q = wq_new(c->loop, cfg, process, c);
    assert_non_null(c->q);
    c->behave = behave;
}

static void ctx_run(ctx *c)
{
    assert_true(ev_timer_add(c->loop, 1, idle_check, c) != 0);
    assert_int_equal(ev_run(c->loop), 0);
}

static void ctx_fini(ctx *c)
{
    wq_free(c->q);
    ev_free(c->loop);
}

/* Adds the keys (space-separated) in turn; each must be taken. */
static void add_keys(ctx *c, const char *keys)
{
    char copy[128];
    snprintf(copy, sizeof(copy), "%s", keys);
    for (char *save = NULL, *k = strtok_r(copy, " ", &save); k; k = strtok_r(NULL, " ", &save))
        assert_int_equal(wq_add(c->q, k), 0);
}

static void assert_log(const ctx *c, const char *const *want, size_t n)
{
    assert_int_equal(c->nlog, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(c->log[i], want[i]);
}

static void succeed_now(ctx *c, const char *key)
{
    finish(c, key, WQ_SUCCESS);
}

/* Holds the key; a loop timer completes it later, as a reconcile waiting on the API would. */
static void complete_held(ev_loop *loop, void *ud)
{
    (void)loop;
    ctx *c = ud;
    assert_true(c->nheld > 0);
    const char *key = c->held[0];
    memmove(c->held, c->held + 1, --c->nheld * sizeof(c->held[0]));
    log_add(c, "done ", key);
    finish(c, key, WQ_SUCCESS);
}

static void succeed_later(ctx *c, const char *key)
{
    assert_true(c->nheld < HELD_MAX);
    c->held[c->nheld++] = key; /* valid until wq_done */
    assert_true(ev_timer_add(c->loop, 0, complete_held, c) != 0);
}

static void test_dedup(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, succeed_now);
    add_keys(&c, "a b a a");
    assert_int_equal(wq_len(c.q), 2);
    ctx_run(&c);
    const char *want[] = {"a", "b"};
    assert_log(&c, want, 2);
    wq_stats st;
    wq_stats_get(c.q, &st);
    assert_int_equal(st.adds_total, 2);
    assert_int_equal(wq_len(c.q), 0);
    assert_int_equal(wq_done(c.q, "a", WQ_SUCCESS), -ENOENT);
    ctx_fini(&c);
}

/* The first time "a" is handed out, it is queued twice more and "b" once, while in flight. */
static void requeue_self(ctx *c, const char *key)
{
    if (strcmp(key, "a") == 0 && c->nlog == 1) {
        assert_int_equal(wq_add(c->q, "a"), 0);
        assert_int_equal(wq_add(c->q, "a"), 0);
        assert_int_equal(wq_add(c->q, "b"), 0);
    }
    succeed_later(c, key);
}

static void test_requeue_while_processing(void **state)
{
    (void)state;
    ctx c;
    wq_config cfg = {.concurrency = 4};
    ctx_init(&c, &cfg, requeue_self);
    assert_int_equal(wq_add(c.q, "a"), 0);
    ctx_run(&c);
    /* "b" goes out at once; "a" waits until its first run is done, then runs exactly once more. */
    const char *want[] = {"a", "b", "done a", "done b", "a", "done a"};
    assert_log(&c, want, 6);
    ctx_fini(&c);
}

static void test_concurrency_bound(void **state)
{
    (void)state;
    ctx c;
    wq_config cfg = {.concurrency = 2};
    ctx_init(&c, &cfg, succeed_later);
    const char *keys[] = {"k1", "k2", "k3", "k4", "k5"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(wq_add(c.q, keys[i]), 0);
    ctx_run(&c);
    assert_int_equal(c.max_in_flight, 2);
    /* FIFO order of hand-outs, each exactly once. */
    size_t handed = 0;
    for (size_t i = 0; i < c.nlog; i++)
        if (strncmp(c.log[i], "done", 4) != 0)
            assert_string_equal(c.log[i], keys[handed++]);
    assert_int_equal(handed, 5);
    ctx_fini(&c);
}

/* "slow" stays in flight (a reconcile waiting on a hung probe); every other key succeeds. */
static void hold_slow(ctx *c, const char *key)
{
    if (strcmp(key, "slow") == 0) {
        c->held[c->nheld++] = key;
        return;
    }
    finish(c, key, WQ_SUCCESS);
}

/* Once the other keys were handed out, completes "slow". */
static void release_slow(ev_loop *loop, void *ud)
{
    ctx *c = ud;
    if (c->nlog < 4) {
        if (++c->polls > 5000) /* polls, 1 ms apart: the others are stuck behind slow */
            fail_msg("only %zu hand-outs while slow is in flight", c->nlog);
        assert_true(ev_timer_add(loop, 1, release_slow, c) != 0);
        return;
    }
    complete_held(loop, c);
    assert_true(ev_timer_add(loop, 1, idle_check, c) != 0);
}

static void test_slow_key_holds_only_itself(void **state)
{
    (void)state;
    ctx c;
    wq_config cfg = {.concurrency = 2};
    ctx_init(&c, &cfg, hold_slow);
    add_keys(&c, "slow a b c");
    assert_true(ev_timer_add(c.loop, 1, release_slow, &c) != 0);
    assert_int_equal(ev_run(c.loop), 0);
    /* a, b and c went through the other slot while slow was in flight. */
    const char *want[] = {"slow", "a", "b", "c", "done slow"};
    assert_log(&c, want, 5);
    assert_int_equal(c.max_in_flight, 2);
    ctx_fini(&c);
}

static void test_add_from_callback_does_not_recurse(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, requeue_self);
    /* requeue_self adds keys from inside the callback; process() asserts nesting == 0. */
    assert_int_equal(wq_add(c.q, "a"), 0);
    ctx_run(&c);
    assert_int_equal(c.max_in_flight, 1);
    assert_int_equal(c.nlog, 6);
    ctx_fini(&c);
}

/* Fails while fails_left > 0, recording the backoff the failure is about to get. */
static void fail_then_succeed(ctx *c, const char *key)
{
    if (c->fails_left > 0) {
        c->fails_left--;
        c->backoffs[c->nbackoffs++] = wq_backoff_ms(c->q, key);
        finish(c, key, WQ_FAILURE);
    } else {
        finish(c, key, WQ_SUCCESS);
    }
}

static void test_backoff_doubles_and_caps(void **state)
{
    (void)state;
    ctx c;
    wq_config cfg = {.base_delay_ms = 1, .max_delay_ms = 8};
    ctx_init(&c, &cfg, fail_then_succeed);
    c.fails_left = 5;
    assert_int_equal(wq_backoff_ms(c.q, "k"), 1);
    assert_int_equal(wq_add(c.q, "k"), 0);
    ctx_run(&c);
    assert_int_equal(c.nlog, 6); /* five failures, then the success */
    const uint64_t want[] = {1, 2, 4, 8, 8};
    assert_int_equal(c.nbackoffs, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(c.backoffs[i], want[i]);
    wq_stats st;
    wq_stats_get(c.q, &st);
    assert_int_equal(st.retries_total, 5);
    /* Success forgot the failures. */
    assert_int_equal(wq_backoff_ms(c.q, "k"), 1);

    /* A later failure starts again from the base. */
    c.fails_left = 1;
    c.nbackoffs = 0;
    assert_int_equal(wq_add(c.q, "k"), 0);
    ctx_run(&c);
    assert_int_equal(c.nbackoffs, 1);
    assert_int_equal(c.backoffs[0], 1);
    ctx_fini(&c);
}

static void test_backoff_defaults(void **state)
{
    (void)state;
    assert_int_equal(wq_backoff_delay(NULL, 0), 5);
    assert_int_equal(wq_backoff_delay(NULL, 1), 10);
    assert_int_equal(wq_backoff_delay(NULL, 2), 20);
    assert_int_equal(wq_backoff_delay(NULL, 17), 5 * 131072);
    assert_int_equal(wq_backoff_delay(NULL, 18), 1000 * 1000);
    assert_int_equal(wq_backoff_delay(NULL, 4000000000u), 1000 * 1000);
    wq_config cfg = {.base_delay_ms = 100, .max_delay_ms = 250};
    assert_int_equal(wq_backoff_delay(&cfg, 1), 200);
    assert_int_equal(wq_backoff_delay(&cfg, 2), 250);
}

static void test_delayed_add(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, succeed_now);
    assert_int_equal(wq_add_after(c.q, "late", 3), 0);
    assert_int_equal(wq_add(c.q, "now"), 0);
    /* A second delayed add of the same key: the earlier deadline wins, the key runs once. */
    assert_int_equal(wq_add_after(c.q, "x", 60 * 60 * 1000), 0);
    assert_int_equal(wq_add_after(c.q, "x", 1), 0);
    assert_int_equal(wq_add_after(c.q, "x", 30 * 60 * 1000), 0);
    wq_stats st;
    wq_stats_get(c.q, &st);
    assert_int_equal(st.waiting, 2);
    assert_int_equal(st.depth, 1);
    ctx_run(&c);
    assert_int_equal(c.nlog, 3);
    assert_string_equal(c.log[0], "now");
    assert_true(strcmp(c.log[1], "x") == 0 || strcmp(c.log[2], "x") == 0);
    assert_true(strcmp(c.log[1], "late") == 0 || strcmp(c.log[2], "late") == 0);
    ctx_fini(&c);
}

/* The explicit requeue of a reconcile that wants another look later. */
static void requeue_after_once(ctx *c, const char *key)
{
    if (c->nlog == 1)
        assert_int_equal(wq_add_after(c->q, key, 2), 0);
    finish(c, key, WQ_SUCCESS);
}

static void test_requeue_after(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, requeue_after_once);
    assert_int_equal(wq_add(c.q, "p"), 0);
    ctx_run(&c);
    const char *want[] = {"p", "p"};
    assert_log(&c, want, 2);
    ctx_fini(&c);
}

static void on_drained(wq *q, void *ud)
{
    ctx *c = ud;
    assert_ptr_equal(q, c->q);
    c->drained++;
    log_add(c, "", "drained");
    ev_stop(c->loop);
}

/* Holds keys; when the second one is out, shuts the queue down with both still in flight. */
static void shutdown_on_second(ctx *c, const char *key)
{
    succeed_later(c, key);
    if (c->nheld == 2) {
        wq_shutdown(c->q, on_drained, c);
        assert_int_equal(c->drained, 0);
        assert_int_equal(wq_add(c->q, "late"), -ESHUTDOWN);
        assert_int_equal(wq_add_after(c->q, "late", 5), -ESHUTDOWN);
    }
}

static void test_shutdown_waits_for_in_flight(void **state)
{
    (void)state;
    ctx c;
    wq_config cfg = {.concurrency = 2};
    ctx_init(&c, &cfg, shutdown_on_second);
    add_keys(&c, "a b c");
    assert_int_equal(wq_add_after(c.q, "d", 60 * 60 * 1000), 0);
    assert_int_equal(ev_run(c.loop), 0); /* on_drained stops it */
    const char *want[] = {"a", "b", "done a", "done b", "drained"};
    assert_log(&c, want, 5);
    assert_int_equal(c.drained, 1);
    wq_stats st;
    wq_stats_get(c.q, &st);
    assert_int_equal(st.waiting, 0); /* "d" was dropped */
    ctx_fini(&c);
}

static void test_shutdown_idle_runs_hook_at_once(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, succeed_now);
    wq_shutdown(c.q, on_drained, &c);
    assert_int_equal(c.drained, 1);
    assert_int_equal(wq_add(c.q, "a"), -ESHUTDOWN);
    ctx_fini(&c);
}

/* Shutting down from inside the callback after finishing: the hook runs after the hand-out. */
static void finish_then_shutdown(ctx *c, const char *key)
{
    finish(c, key, WQ_SUCCESS);
    wq_shutdown(c->q, on_drained, c);
    assert_int_equal(c->drained, 0);
}

static void test_shutdown_from_callback(void **state)
{
    (void)state;
    ctx c;
    ctx_init(&c, NULL, finish_then_shutdown);
    add_keys(&c, "a b");
    assert_int_equal(ev_run(c.loop), 0);
    const char *want[] = {"a", "drained"};
    assert_log(&c, want, 2);
    ctx_fini(&c);
}

TEST_MAIN(cmocka_unit_test(test_dedup), cmocka_unit_test(test_requeue_while_processing),
          cmocka_unit_test(test_concurrency_bound),
          cmocka_unit_test(test_slow_key_holds_only_itself),
          cmocka_unit_test(test_add_from_callback_does_not_recurse),
          cmocka_unit_test(test_backoff_doubles_and_caps), cmocka_unit_test(test_backoff_defaults),
          cmocka_unit_test(test_delayed_add), cmocka_unit_test(test_requeue_after),
          cmocka_unit_test(test_shutdown_waits_for_in_flight),
          cmocka_unit_test(test_shutdown_idle_runs_hook_at_once),
          cmocka_unit_test(test_shutdown_from_callback))

/* Tests of the event loop: timer order, cancel, timers added from callbacks, fd readiness, and
 * clearing an fd from inside its own callback; errors alone, a peer's end of file alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_main.h"

#include "loop/ev.h"

typedef struct {
    int order[16];
    int n;
    ev_loop *loop;
    uint64_t victim;
} test_rec;

typedef struct {
    test_rec *rec;
    int tag;
} test_tag;

static void test_record(ev_loop *loop, void *ud)
{
    test_tag *t = ud;
    t->rec->order[t->rec->n++] = t->tag;
    if (t->tag == 99)
        ev_stop(loop);
}

static void test_timer_order(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    test_rec rec = {.loop = loop};
    test_tag t3 = {&rec, 3}, t1 = {&rec, 1}, t2 = {&rec, 2}, tc = {&rec, 7}, stop = {&rec, 99};
    assert_true(ev_timer_add(loop, 30, test_record, &t3) > 0);
    assert_true(ev_timer_add(loop, 0, test_record, &t1) > 0);
    assert_true(ev_timer_add(loop, 10, test_record, &t2) > 0);
    uint64_t cancelled = ev_timer_add(loop, 5, test_record, &tc);
    ev_timer_cancel(loop, cancelled);
    ev_timer_cancel(loop, 12345); /* unknown ids are ignored */
    assert_true(ev_timer_add(loop, 40, test_record, &stop) > 0);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(rec.n, 4);
    assert_int_equal(rec.order[0], 1);
    assert_int_equal(rec.order[1], 2);
    assert_int_equal(rec.order[2], 3);
    assert_int_equal(rec.order[3], 99);
    ev_free(loop);
}

static void test_count(ev_loop *loop, void *ud)
{
    (void)loop;
    (*(int *)ud)++;
}

/* Many timers, most cancelled in a scattered order: exactly the others fire, in deadline order;
 * an id whose timer fired or was cancelled cancels nothing later, though its slot is reused. */
static void test_timer_cancel_many(void **state)
{
    (void)state;
    enum { N = 10000 };
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    static uint64_t ids[N];
    int fired = 0;
    for (int i = 0; i < N; i++) {
        ids[i] = ev_timer_add(loop, (uint64_t)(i % 7), test_count, &fired);
        assert_true(ids[i] > 0);
    }
    for (int i = 0; i < N; i++) /* every index but multiples of 10, in a scattered order */
        if ((i * 7919) % N % 10)
            ev_timer_cancel(loop, ids[(i * 7919) % N]);
    test_rec rec = {.loop = loop};
    test_tag stop = {&rec, 99};
    assert_true(ev_timer_add(loop, 20, test_record, &stop) > 0);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(fired, N / 10);

    /* Stale ids: fired (ids[0]) and cancelled (ids[1]); the new timers reuse their slots. */
    int again = 0;
    uint64_t a = ev_timer_add(loop, 0, test_count, &again);
    uint64_t b = ev_timer_add(loop, 0, test_count, &again);
    assert_true(a != ids[0] && a != ids[1] && b != ids[0] && b != ids[1]);
    ev_timer_cancel(loop, ids[0]);
    ev_timer_cancel(loop, ids[1]);
    ev_timer_cancel(loop, a);
    ev_timer_cancel(loop, a); /* twice: still only a */
    rec.n = 0;
    assert_true(ev_timer_add(loop, 5, test_record, &stop) > 0);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(again, 1);
    ev_free(loop);
}

static int test_chain_left;

static void test_chain(ev_loop *loop, void *ud)
{
    (void)ud;
    if (--test_chain_left == 0)
        ev_stop(loop);
    else
        assert_true(ev_timer_add(loop, 0, test_chain, NULL) > 0);
}

static void test_timer_from_callback(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    test_chain_left = 100;
    ev_timer_add(loop, 0, test_chain, NULL);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(test_chain_left, 0);
    ev_free(loop);
}

typedef struct {
    int reads;
    char got;
} test_pipe;

static void test_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    test_pipe *p = ud;
    assert_true(events & EV_READ);
    assert_int_equal(read(fd, &p->got, 1), 1);
    p->reads++;
    ev_fd_clear(loop, fd);
    ev_stop(loop);
}

static void test_fd_ready(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    test_pipe p = {0};
    assert_int_equal(ev_fd_set(loop, fds[0], EV_READ, test_on_read, &p), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(p.reads, 1);
    assert_int_equal(p.got, 'x');
    assert_true(ev_fd_set(loop, -1, EV_READ, test_on_read, &p) < 0);
    close(fds[0]);
    close(fds[1]);
    ev_free(loop);
}

static void test_on_error(ev_loop *loop, int fd, int events, void *ud)
{
    test_pipe *p = ud;
    assert_true(events & EV_ERROR);
    p->reads++;
    ev_fd_clear(loop, fd);
    ev_stop(loop);
}

static void test_stop(ev_loop *loop, void *ud)
{
    (void)ud;
    ev_stop(loop);
}

/* EV_ERROR alone: bytes to read (or an end of file) do not wake the loop, a hang-up does. */
static void test_fd_error_only(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    test_pipe p = {0};
    assert_int_equal(ev_fd_set(loop, fds[0], EV_ERROR, test_on_error, &p), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    assert_true(ev_timer_add(loop, 0, test_stop, NULL) > 0); /* one turn: epoll saw the byte */
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(p.reads, 0);
    close(fds[1]); /* the writer hangs up */
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(p.reads, 1);
    close(fds[0]);
    ev_free(loop);
}

static void test_on_hangup(ev_loop *loop, int fd, int events, void *ud)
{
    test_pipe *p = ud;
    assert_true(events & EV_HANGUP);
    assert_false(events & EV_ERROR);
    p->reads++;
    ev_fd_clear(loop, fd);
    ev_stop(loop);
}

/* EV_HANGUP: bytes to read do not wake the loop; the peer's end of file does, though the bytes
 * before it are still unread. */
static void test_fd_hangup(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    test_pipe p = {0};
    assert_int_equal(ev_fd_set(loop, sv[0], EV_HANGUP, test_on_hangup, &p), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_true(ev_timer_add(loop, 0, test_stop, NULL) > 0);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(p.reads, 0);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    assert_int_equal(ev_run(loop), 0);
    assert_int_equal(p.reads, 1);
    close(sv[0]);
    close(sv[1]);
    ev_free(loop);
}

/* The wall clock is Unix time in ms: between two reads of time() around it. */
static void test_wall_clock(void **state)
{
    (void)state;
    time_t before = time(NULL);
    uint64_t ms = ev_wall_ms();
    time_t after = time(NULL);
    assert_true(ms >= (uint64_t)before * 1000 && ms < ((uint64_t)after + 1) * 1000);
}

TEST_MAIN(cmocka_unit_test(test_wall_clock), cmocka_unit_test(test_timer_order),
          cmocka_unit_test(test_timer_from_callback), cmocka_unit_test(test_timer_cancel_many),
          cmocka_unit_test(test_fd_ready), cmocka_unit_test(test_fd_error_only),
          cmocka_unit_test(test_fd_hangup))

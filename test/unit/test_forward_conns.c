/* Tests of fwd's connections and of a call's life against the loopback member (test/support:
 * fwd_upstream.h, fwd_client.h): the drain fence (the send deadline, connected() and fwd_confirm:
 * a new connection confirmed before its first byte, refused, confirmed late and kept), connection
 * reuse, cancel from inside data() and from the loop, fwd_free with a call in flight, and a call
 * started from inside a callback. Waits end on conditions, each under a deadline that fails the
 * test; no timing is asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "fwd_client.h"

/* The drain fence's send deadline: past it, an attempt fails once connected, before any byte of
 * the request goes out (the router puts such a request back); before it, nothing changes. */
static void test_send_deadline(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_request req = t_req(&t, "POST", "/v1/completions", "{}");
    req.send_by_ms = ev_now_ms() - 1;
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.bytes_up, 0);
    assert_non_null(t.r.error);
    assert_non_null(strstr(t.r.error, "drain fence"));
    assert_int_equal(u.nrequests, 0); /* the member saw no request */

    memset(&t.r, 0, sizeof(t.r));
    t.dones = 0;
    req.send_by_ms = ev_now_ms() + 60000;
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    assert_int_equal(u.nrequests, 1);
    t_teardown(&t);
}

/* Cancelled mid-stream: done never runs and the member sees its connection closed. */
static void t_cancel_mid_stream(bool by_timer)
{
    up u;
    t_cli t;
    t_setup(&t, &u, UP_STREAM, NULL);
    t.ping_pong = true;
    t.cancel_at = 3;
    t.cancel_by_timer = by_timer;
    u.stop_on_close = true;
    t_get(&t, "/stream");
    assert_null(t.call);
    assert_int_equal(t.events, 3);
    assert_int_equal(u.ncloses, 1);
    assert_int_equal(t.dones, 0);
    t_teardown(&t);
}

static void test_cancel_inside_data(void **state)
{
    (void)state;
    t_cancel_mid_stream(false);
}

static void test_cancel_from_loop(void **state)
{
    (void)state;
    t_cancel_mid_stream(true);
}

static void t_stop_at_request(void *ud)
{
    t_cli *t = ud;
    if (t->u->nrequests == 1)
        ev_stop(t->loop);
}

/* fwd_free with a call waiting for its answer: no done, the connection closed, nothing leaked. */
static void test_free_with_call_in_flight(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_SILENT, NULL);
    u.on_body = t_stop_at_request;
    u.on_body_ud = &t;
    fwd_request req = t_req(&t, "POST", "/", "x");
    req.more = true;
    req.content_length = -1;
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "y", 1, true), 0);
    t_run(&t);
    assert_int_equal(u.nrequests, 1);
    fwd_free(t.f);
    t.f = NULL;
    u.on_body = NULL;
    u.stop_on_close = true;
    t_run(&t);
    assert_int_equal(u.ncloses, 1);
    assert_int_equal(t.dones, 0);
    t_teardown(&t);
}

/* n calls in a row to the member, each started from the done() of the one before; each answered. */
static void calls_in_a_row(t_cli *t, int n)
{
    fwd_request req = t_req(t, "POST", "/v1/completions", "abc");
    t->req = &req;
    t->again = n - 1;
    t_call(t, &req);
    t->req = NULL;
    assert_int_equal(t->dones, n);
    assert_int_equal(t->r.outcome, FWD_OK);
    assert_string_equal(t->body, "ok POST 3");
}

static void test_connection_reuse(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    calls_in_a_row(&t, 3);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t);
}

/* With connected(): a new connection is confirmed before its first byte, once; the calls after
 * it reuse it without asking. */
static void test_connection_confirmed_once(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    t.confirm = true;
    calls_in_a_row(&t, 3);
    assert_int_equal(t.connects, 1);
    assert_int_equal(t.requests_at_connect, 0);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t);
}

/* A connection the caller refuses carries no byte: the call fails before any, with the reason. */
static void test_connection_refused_by_caller(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    t.confirm = true;
    t.refuse = "the Pod at this address is not the member's";
    fwd_header h[] = {{"Authorization", "Bearer secret"}};
    fwd_request req = t_req(&t, "POST", "/v1/completions", "abc");
    req.headers = h;
    req.nheaders = 1;
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.connects, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.bytes_up, 0);
    assert_string_equal(t.r.error, "the Pod at this address is not the member's");
    assert_int_equal(u.nrequests, 0);
    assert_int_equal(u.last_head[0], '\0');
    t_teardown(&t);
}

/* A kept connection that died is replaced by a new one, confirmed again. */
static void test_dead_connection_confirmed_again(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    t.confirm = true;
    u.reset_nth = 2;
    calls_in_a_row(&t, 2);
    assert_int_equal(u.naccepts, 2);
    assert_int_equal(t.connects, 2);
    t_teardown(&t);
}

/* Confirmed after send_by_ms: nothing sent, the result says late, and the connection is kept for
 * the next call to that address, which sends on it without connecting again. */
static void test_late_connection_kept_for_next_call(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    t.confirm = true;
    t.confirm_after_ms = 30;
    fwd_request req = t_req(&t, "POST", "/v1/completions", "abc");
    req.send_by_ms = ev_now_ms() + 5;
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_true(t.r.late);
    assert_int_equal(t.r.bytes_up, 0);
    assert_int_equal(u.nrequests, 0);
    assert_int_equal(t.connects, 1);

    req.send_by_ms = ev_now_ms() + 10000;
    t.dones = 0;
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_false(t.r.late);
    assert_string_equal(t.body, "ok POST 3");
    assert_int_equal(t.connects, 1); /* the kept connection, not a new one */
    assert_int_equal(u.naccepts, 1);
    assert_int_equal(u.nrequests, 1);
    t_teardown(&t);
}

static void test_start_inside_callback(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_request req = t_req(&t, "GET", "/", NULL);
    t.req = &req;
    t.again = 1;
    t.again_on_head = true;
    t.want_dones = 2;
    t_call(&t, &req);
    assert_int_equal(t.dones, 2);
    assert_int_equal(t.heads, 2);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.nrequests, 2);
    assert_string_equal(t.body, "ok GET 0ok GET 0");
    t_teardown(&t);
}

TEST_MAIN(cmocka_unit_test(test_send_deadline), cmocka_unit_test(test_cancel_inside_data),
          cmocka_unit_test(test_cancel_from_loop), cmocka_unit_test(test_free_with_call_in_flight),
          cmocka_unit_test(test_connection_reuse), cmocka_unit_test(test_connection_confirmed_once),
          cmocka_unit_test(test_connection_refused_by_caller),
          cmocka_unit_test(test_dead_connection_confirmed_again),
          cmocka_unit_test(test_late_connection_kept_for_next_call),
          cmocka_unit_test(test_start_inside_callback))

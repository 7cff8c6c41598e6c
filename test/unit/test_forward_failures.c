/* Tests of fwd's failure outcomes against the loopback member (test/support: fwd_upstream.h,
 * fwd_client.h): the second target after a refusal or a reset, curl's own retry on a dead
 * kept-alive connection, the replay cap, resets and malformed heads after the request went out, and
 * the upstream timeout (silence before and after the head; not a paced stream nor a paused client).
 * Waits end on conditions, each under a deadline that fails the test; no timing is asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "fwd_client.h"
#include "loopback.h"

/* The first target refuses; the second gets the request, body included, from the start. */
static void test_second_target_after_refusal(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_target tg[] = {{"127.0.0.1", test_closed_port_loopback()}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = tg,
                       .ntargets = 2,
                       .body = "hello",
                       .body_len = 3,
                       .more = true,
                       .content_length = -1};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "lo", 2, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 1);
    assert_string_equal(u.body, "hello");
    assert_string_equal(t.body, "ok POST 5");
    assert_int_equal(u.naccepts, 1);
    t_teardown(&t);
}

/* The first target takes the connection and resets it without an answer: the second answers. */
static void test_second_target_after_reset(void **state)
{
    (void)state;
    up u, bad;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    up_start(&bad, t.loop, UP_RESET_BEFORE);
    fwd_target tg[] = {{"127.0.0.1", bad.port}, {"127.0.0.1", u.port}};
    fwd_request req = t_req(&t, "POST", "/v1/completions", "hello");
    req.targets = tg;
    req.ntargets = 2;
    t_call(&t, &req);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 1);
    assert_int_equal(bad.nrequests, 1);
    assert_int_equal(u.nrequests, 1);
    assert_string_equal(u.body, "hello");
    up_stop(&bad);
    t_teardown(&t);
}

/* The member resets a kept-alive connection when the second request arrives on it: curl itself
 * tries a fresh connection, which needs the body from the start (fwd's seek callback). */
static void test_dead_kept_alive_connection(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    u.reset_nth = 2;
    u.body_pattern = true;
    char body[3000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)up_pattern(i);
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = &t.tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = sizeof(body)};
    t.req = &req;
    t.again = 1;
    t_call(&t, &req);
    assert_int_equal(t.dones, 2);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(u.nrequests, 3);
    assert_int_equal(u.naccepts, 2);
    assert_int_equal(u.body_len, sizeof(body));
    assert_false(u.body_bad);
    assert_int_equal(t.r.bytes_up, sizeof(body));
    assert_string_equal(t.body, "ok POST 3000");
    t_teardown(&t);
}

/* A body past the replay cap is not kept, so a failure before the answer is not retried. */
static void test_no_retry_past_replay_cap(void **state)
{
    (void)state;
    up u, bad;
    t_cli t;
    fwd_config cfg = {.replay_cap = 1000};
    t_setup(&t, &u, UP_OK, &cfg);
    up_start(&bad, t.loop, UP_RESET_BEFORE);
    fwd_target tg[] = {{"127.0.0.1", bad.port}, {"127.0.0.1", u.port}};
    char body[3000];
    memset(body, 'x', sizeof(body));
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .targets = tg,
                       .ntargets = 2,
                       .body = body,
                       .body_len = 500,
                       .more = true,
                       .content_length = sizeof(body)};
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, body + 500, sizeof(body) - 500, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(bad.nrequests, 1);
    assert_non_null(strstr(t.r.error, "replay cap"));
    assert_int_equal(u.naccepts, 0);
    up_stop(&bad);
    t_teardown(&t);
}

static void test_both_refuse(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_target tg[] = {{"127.0.0.1", test_closed_port_loopback()},
                       {"127.0.0.1", test_closed_port_loopback()},
                       {"127.0.0.1", u.port}}; /* a third is never tried */
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 3};
    t_call(&t, &req);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_int_equal(t.r.status, 0);
    assert_int_equal(t.r.target, 1);
    assert_non_null(t.r.error);
    assert_int_equal(u.naccepts, 0);
    t_teardown(&t);
}

static void test_reset_after_head(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_RESET_AFTER_HEAD, NULL);
    t.reset_on_head = true;
    fwd_target tg[] = {{"127.0.0.1", u.port}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 2};
    t_call(&t, &req);
    assert_int_equal(t.heads, 1);
    assert_int_equal(t.r.outcome, FWD_FAILED_AFTER_RESPONSE);
    assert_int_equal(t.r.status, 200);
    assert_non_null(t.r.error);
    assert_int_equal(u.nrequests, 1); /* a response had started: no second attempt */
    t_teardown(&t);
}

static void test_malformed_response_head(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_BAD_HEAD, NULL);
    t_get(&t, "/");
    assert_int_equal(t.heads, 0);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "malformed"));
    t_teardown(&t);
}

static void test_silent_before_head(void **state)
{
    (void)state;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 50};
    t_setup(&t, &u, UP_SILENT, &cfg);
    fwd_target tg[] = {{"127.0.0.1", u.port}, {"127.0.0.1", u.port}};
    fwd_request req = {.method = "GET", .path = "/", .targets = tg, .ntargets = 2};
    t_call(&t, &req);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "upstream timeout"));
    assert_int_equal(u.nrequests, 1); /* not retried */
    t_teardown(&t);
}

/* The upstream timeout counts silence after the head too: a stream that stops is cut. */
static void test_silent_after_head(void **state)
{
    (void)state;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 100};
    t_setup(&t, &u, UP_STREAM, &cfg);
    t.ping_pong = true;
    t.stall_at = 3;
    t_get(&t, "/stream");
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.events, 3);
    assert_int_equal(t.r.outcome, FWD_FAILED_AFTER_RESPONSE);
    assert_int_equal(t.r.status, 200);
    assert_non_null(strstr(t.r.error, "upstream timeout"));
    t_teardown(&t);
}

/* ...but not the whole answer's length: events 20 ms apart go on past the timeout in all. */
static void test_paced_stream_not_timed_out(void **state)
{
    (void)state;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 300};
    t_setup(&t, &u, UP_STREAM, &cfg);
    t.ping_pong = true;
    t.pace_ms = 20; /* 50 events: about 1 s */
    t_get(&t, "/stream");
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.events, UP_EVENTS);
    t_teardown(&t);
}

/* ...nor the time the caller held the answer back (a slow client is not a silent member). */
static void test_paused_client_not_timed_out(void **state)
{
    (void)state;
    up u;
    t_cli t;
    fwd_config cfg = {.idle_timeout_ms = 50};
    t_setup(&t, &u, UP_BULK, &cfg);
    u.bulk = 256u << 10;
    t.full_always = true;
    t.resume_after_ms = 150;
    t_get(&t, "/big");
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.blen, u.bulk);
    assert_true(t.pauses >= 2);
    t_teardown(&t);
}

TEST_MAIN(cmocka_unit_test(test_second_target_after_refusal),
          cmocka_unit_test(test_second_target_after_reset),
          cmocka_unit_test(test_dead_kept_alive_connection),
          cmocka_unit_test(test_no_retry_past_replay_cap), cmocka_unit_test(test_both_refuse),
          cmocka_unit_test(test_reset_after_head), cmocka_unit_test(test_malformed_response_head),
          cmocka_unit_test(test_silent_before_head), cmocka_unit_test(test_silent_after_head),
          cmocka_unit_test(test_paced_stream_not_timed_out),
          cmocka_unit_test(test_paused_client_not_timed_out))

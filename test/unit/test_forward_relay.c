/* Tests of fwd relaying a call whole against the loopback member (test/support: fwd_upstream.h,
 * fwd_client.h), both on one ev loop: plain and streamed bodies both ways, backpressure both
 * ways, hop-by-hop headers and X-Forwarded-For, an interim answer, and the requests fwd refuses to
 * start or to extend. Failures and retries: test_forward_failures.c; connections and the call's
 * life: test_forward_conns.c. Waits end on conditions, each under a deadline that fails the test;
 * no timing is asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "fwd_client.h"

static void test_get(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    t_get(&t, "/v1/models?x=1&y=%20");
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_null(t.r.error);
    assert_int_equal(t.r.status, 200);
    assert_int_equal(t.r.target, 0);
    assert_int_equal(t.heads, 1);
    assert_string_equal(t.body, "ok GET 0");
    assert_int_equal(t.r.bytes_down, 8);
    assert_int_equal(t.r.bytes_up, 0);
    assert_non_null(strstr(u.last_head, "GET /v1/models?x=1&y=%20 HTTP/1.1\r\n"));
    /* curl's own defaults are not added to what the client sent. */
    assert_null(strcasestr(u.last_head, "\r\nAccept:"));
    assert_null(strcasestr(u.last_head, "\r\nExpect:"));
    assert_null(strcasestr(u.last_head, "\r\nContent-Length:"));
    t_teardown(&t);
}

static void test_post(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    const char *body = "{\"model\":\"a\",\"prompt\":\"hi\"}";
    fwd_header h[] = {{"Content-Type", "application/json"}, {"Content-Length", "999"}};
    fwd_request req = {.method = "POST",
                       .path = "/v1/completions",
                       .headers = h,
                       .nheaders = 2,
                       .targets = &t.tg,
                       .ntargets = 1,
                       .body = body,
                       .body_len = 12,
                       .more = true,
                       .content_length = (int64_t)strlen(body)};
    t_start(&t, &req);
    /* The rest of the body arrives later, in two pieces. */
    assert_int_equal(fwd_body(t.call, body + 12, 5, false), 0);
    assert_int_equal(fwd_body(t.call, body + 17, strlen(body) - 17, false), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    char want[64];
    snprintf(want, sizeof(want), "ok POST %zu", strlen(body));
    assert_string_equal(t.body, want);
    assert_string_equal(u.body, body);
    assert_int_equal(t.r.bytes_up, strlen(body));
    assert_non_null(strstr(u.last_head, "POST /v1/completions HTTP/1.1\r\n"));
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
    assert_non_null(strcasestr(u.last_head, cl));
    assert_non_null(strcasestr(u.last_head, "\r\nContent-Type: application/json\r\n"));
    assert_null(strcasestr(u.last_head, "\r\nTransfer-Encoding:"));
    assert_null(strcasestr(u.last_head, "Content-Length: 999")); /* the client's, not sent */
    t_teardown(&t);
}

/* A body all here at the start, as the router has it once the model is read (more, with the
 * whole Content-Length): it goes out with the head (one write), curl adds no Content-Type of its
 * own, and the caller's empty end-of-body push afterwards is a no-op. */
static void test_post_whole_body(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    const char *body = "{\"model\":\"a\",\"prompt\":\"hi\"}";
    fwd_request req = t_req(&t, "POST", "/v1/completions", body);
    req.more = true;
    req.content_length = (int64_t)strlen(body);
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "", 0, false), 0);
    assert_int_equal(fwd_body(t.call, NULL, 0, true), 0);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.r.status, 200);
    assert_string_equal(u.body, body);
    assert_int_equal(t.r.bytes_up, strlen(body));
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
    assert_non_null(strcasestr(u.last_head, cl));
    assert_null(strcasestr(u.last_head, "\r\nContent-Type:"));
    assert_null(strcasestr(u.last_head, "\r\nExpect:"));
    assert_null(strcasestr(u.last_head, "\r\nTransfer-Encoding:"));
    t_teardown(&t);
}

/* 5 MiB of unknown length (chunked up), pushed a piece per loop turn; the member does not read
 * until fwd_body says "full", so the high-water mark and body_drained are crossed for sure. */
static void test_big_body_streamed_up(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    u.hold = true;
    u.body_pattern = true;
    fwd_request req = t_req(&t, "POST", "/v1/embeddings", NULL);
    req.more = true;
    req.content_length = -1;
    t_start(&t, &req);
    t.to_push = 5u << 20;
    t.piece = 48 << 10;
    t_push(&t);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.pushed, t.to_push);
    assert_int_equal(u.body_len, t.to_push);
    assert_false(u.body_bad);
    assert_int_equal(t.r.bytes_up, t.to_push);
    assert_true(t.fulls >= 1);
    assert_int_equal(t.drains, t.fulls);
    assert_non_null(strcasestr(u.last_head, "\r\nTransfer-Encoding: chunked\r\n"));
    char want[64];
    snprintf(want, sizeof(want), "ok POST %llu", (unsigned long long)t.to_push);
    assert_string_equal(t.body, want);
    t_teardown(&t);
}

/* The next piece goes only once the member has every byte before it. */
static void t_push_when_received(void *ud)
{
    t_cli *t = ud;
    if (t->u->body_len == t->pushed && t->pushed < t->to_push)
        t_push(t);
}

/* A body that trickles in: curl finds it empty between pieces, pauses the upload and is woken
 * by the next fwd_body. */
static void test_body_trickles_up(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    u.body_pattern = true;
    u.on_body = t_push_when_received;
    u.on_body_ud = &t;
    fwd_request req = t_req(&t, "POST", "/v1/embeddings", NULL);
    req.more = true;
    req.content_length = 20 * 1000;
    t_start(&t, &req);
    t.to_push = 20 * 1000;
    t.piece = 1000;
    t.push_one = true;
    t_push(&t);
    t_run(&t);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(u.body_len, t.to_push);
    assert_false(u.body_bad);
    assert_string_equal(t.body, "ok POST 20000");
    char cl[64];
    snprintf(cl, sizeof(cl), "\r\nContent-Length: %d\r\n", 20 * 1000);
    assert_non_null(strcasestr(u.last_head, cl));
    t_teardown(&t);
}

static void test_sse_ping_pong(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_STREAM, NULL);
    t.ping_pong = true;
    const char *body = "{\"model\":\"a\",\"stream\":true}";
    fwd_request req = t_req(&t, "POST", "/v1/chat/completions", body);
    t_call(&t, &req);
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.events, UP_EVENTS);
    assert_int_equal(u.stream_sent, UP_EVENTS + 1);
    assert_non_null(strstr(t.hdrs, "Content-Type: text/event-stream\n"));
    assert_null(strcasestr(t.hdrs, "Transfer-Encoding"));
    t_teardown(&t);
}

/* data() says "full" every time: nothing more arrives until fwd_resume, and every byte arrives
 * once and in order. */
static void test_response_backpressure(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_BULK, NULL);
    u.bulk = 3u << 20;
    t.full_always = true;
    t_get(&t, "/big");
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.blen, u.bulk);
    assert_int_equal(t.r.bytes_down, u.bulk);
    for (size_t i = 0; i < u.bulk; i++)
        if ((unsigned char)t.body[i] != up_pattern(i))
            fail_msg("byte %zu differs", i);
    assert_true(t.pauses >= 2);
    t_teardown(&t);
}

static void test_hop_by_hop_and_xff(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_header h[] = {
        {"Host", "client.example"},
        {"Connection", "keep-alive, X-Secret"},
        {"X-Secret", "s"},
        {"Keep-Alive", "300"},
        {"TE", "trailers"},
        {"Proxy-Authorization", "Basic eA=="},
        {"Upgrade", "h2c"},
        {"X-Forwarded-For", "10.0.0.1"},
        {"X-Keep", "yes"},
        {"Accept", "text/event-stream"},
        {"X-Forwarded-For", "10.0.0.2"},
        {"X-Empty", ""},
    };
    fwd_request req = t_req(&t, "GET", "/", NULL);
    req.headers = h;
    req.nheaders = sizeof(h) / sizeof(h[0]);
    req.client_addr = "192.0.2.7";
    t_call(&t, &req);
    assert_int_equal(t.r.outcome, FWD_OK);
    const char *gone[] = {"client.example", "\r\nConnection:", "X-Secret", "Keep-Alive",
                          "\r\nTE:",        "Proxy-",          "Upgrade"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        if (strcasestr(u.last_head, gone[i]))
            fail_msg("%s reached the member:\n%s", gone[i], u.last_head);
    assert_non_null(strstr(u.last_head, "\r\nX-Keep: yes\r\n"));
    assert_non_null(strstr(u.last_head, "\r\nAccept: text/event-stream\r\n"));
    assert_non_null(strstr(u.last_head, "\r\nX-Empty:"));
    assert_non_null(strstr(u.last_head, "\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2, 192.0.2.7\r\n"));
    int nxff = 0; /* the client's two lines are merged into the one above */
    for (const char *p = u.last_head; (p = strcasestr(p, "\r\nX-Forwarded-For:")); p++)
        nxff++;
    assert_int_equal(nxff, 1);
    char port[32];
    snprintf(port, sizeof(port), "\r\nHost: 127.0.0.1:%d\r\n", u.port);
    assert_non_null(strstr(u.last_head, port));
    /* The answer's hop-by-hop headers, and the one its Connection names, stay behind. */
    assert_non_null(strstr(t.hdrs, "X-End: yes\n"));
    assert_non_null(strstr(t.hdrs, "Content-Length: 8\n"));
    assert_null(strcasestr(t.hdrs, "Connection"));
    assert_null(strcasestr(t.hdrs, "Keep-Alive"));
    assert_null(strcasestr(t.hdrs, "X-Hop"));
    assert_null(strcasestr(t.hdrs, "Proxy-"));
    t_teardown(&t);
}

static void test_interim_response(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_EARLY_HINTS, NULL);
    t_get(&t, "/");
    assert_int_equal(t.r.outcome, FWD_OK);
    assert_int_equal(t.heads, 1);
    assert_int_equal(t.status, 201);
    assert_int_equal(t.r.status, 201);
    assert_string_equal(t.hdrs, "Content-Length: 2\nX-Final: 1\n");
    assert_string_equal(t.body, "ok");
    t_teardown(&t);
}

static void test_bad_input(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    fwd *f = fwd_new(loop, NULL);
    assert_non_null(f);
    fwd_target good = {"127.0.0.1", 80}, name = {"localhost", 80}, port = {"127.0.0.1", 0};
    fwd_header crlf[] = {{"X-A", "a\r\nX-Injected: 1"}};
    fwd_header space[] = {{"X A", "a"}};
    struct {
        fwd_request req;
        const char *why;
    } cases[] = {
        {{.method = "GET", .path = "/", .targets = &name, .ntargets = 1}, "numeric IP"},
        {{.method = "GET", .path = "/", .targets = &port, .ntargets = 1}, "port"},
        {{.method = "GET", .path = "/", .ntargets = 0}, "no target"},
        {{.method = "G T", .path = "/", .targets = &good, .ntargets = 1}, "method"},
        {{.method = "GET", .path = "/a b", .targets = &good, .ntargets = 1}, "path"},
        {{.method = "GET", .path = "x", .targets = &good, .ntargets = 1}, "path"},
        {{.method = "GET",
          .path = "/",
          .headers = crlf,
          .nheaders = 1,
          .targets = &good,
          .ntargets = 1},
         "header"},
        {{.method = "GET",
          .path = "/",
          .headers = space,
          .nheaders = 1,
          .targets = &good,
          .ntargets = 1},
         "header"},
        {{.method = "HEAD",
          .path = "/",
          .targets = &good,
          .ntargets = 1,
          .body = "x",
          .body_len = 1},
         "body"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fwd_call *c = NULL;
        assert_int_equal(fwd_start(f, &cases[i].req, &t_client, NULL, &c), -EINVAL);
        assert_null(c);
        const char *err = fwd_start_error(&cases[i].req, &t_client, -EINVAL);
        assert_ptr_equal(err, fwd_request_invalid(&cases[i].req, &t_client));
        if (!strstr(err, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say %s", i, err, cases[i].why);
    }
    fwd_free(f);
    ev_free(loop);
}

/* A body longer than its Content-Length is refused and fails the call. */
static void test_body_overrun(void **state)
{
    (void)state;
    up u;
    t_cli t;
    t_setup(&t, &u, UP_OK, NULL);
    fwd_request req = t_req(&t, "POST", "/", "ab");
    req.more = true;
    req.content_length = 4;
    t_start(&t, &req);
    assert_int_equal(fwd_body(t.call, "cde", 3, true), -EINVAL);
    t_run(&t);
    assert_int_equal(t.dones, 1);
    assert_int_equal(t.r.outcome, FWD_UPSTREAM_FAILED_BEFORE_RESPONSE);
    assert_non_null(strstr(t.r.error, "Content-Length"));
    t_teardown(&t);
}

TEST_MAIN(cmocka_unit_test(test_get), cmocka_unit_test(test_post),
          cmocka_unit_test(test_post_whole_body), cmocka_unit_test(test_big_body_streamed_up),
          cmocka_unit_test(test_body_trickles_up), cmocka_unit_test(test_sse_ping_pong),
          cmocka_unit_test(test_response_backpressure), cmocka_unit_test(test_hop_by_hop_and_xff),
          cmocka_unit_test(test_interim_response), cmocka_unit_test(test_bad_input),
          cmocka_unit_test(test_body_overrun))

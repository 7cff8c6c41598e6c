/* httpd's intake and a waiting client's end of file: the checks of a request's head (framing,
 * the path's encoding) as pure functions and as a server answers them; a client that half-closes
 * gets its answer after an interim 100 (HTTP/1.1) or a byte of urgent data it never reads
 * (HTTP/1.0), one that closes or resets is seen gone without an answer, whether it waits for its
 * answer or for its owner to read a body paused part way; httpd_req_abort's reply to a stalled
 * upload. Each client is a thread doing blocking I/O on a
 * raw socket while the loop runs the server; it tells the loop through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_main.h"

#include "httpd/httpd.h"
#include "httpd/intake.h"
#include "loop_run.h"
#include "loopback.h"

/* ---- the pure checks ---- */

static const char *framing(const char *const *kv)
{
    httpd_framing f = {0};
    for (; *kv; kv += 2)
        httpd_framing_add(&f, kv[0], kv[1]);
    return httpd_framing_check(&f);
}

static void test_framing(void **state)
{
    (void)state;
    assert_null(framing((const char *[]){"Host", "x", NULL}));
    assert_null(framing((const char *[]){"Content-Length", "5", NULL}));
    assert_null(framing((const char *[]){"content-length", "5", "Content-Length", "05", NULL}));
    assert_null(framing((const char *[]){"Transfer-Encoding", "Chunked", NULL}));
    assert_string_equal(
        framing((const char *[]){"Content-Length", "5", "Content-Length", "6", NULL}),
        "conflicting Content-Length headers");
    assert_string_equal(
        framing((const char *[]){"Content-Length", "5", "content-length", "", NULL}),
        "invalid Content-Length");
    assert_string_equal(framing((const char *[]){"Content-Length", "5, 5", NULL}),
                        "invalid Content-Length");
    assert_string_equal(framing((const char *[]){"Content-Length", "99999999999999999999", NULL}),
                        "invalid Content-Length");
    assert_string_equal(
        framing((const char *[]){"Content-Length", "5", "Transfer-Encoding", "chunked", NULL}),
        "both Content-Length and Transfer-Encoding");
    assert_non_null(framing((const char *[]){"Transfer-Encoding", "gzip, chunked", NULL}));
    assert_non_null(framing(
        (const char *[]){"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked", NULL}));
}

static void test_paths(void **state)
{
    (void)state;
    assert_null(httpd_intake_raw_path("/v1/chat/completions"));
    assert_null(httpd_intake_raw_path("/v1/models/a%20b?x=%2F%00"));
    assert_null(httpd_intake_raw_path("/v1/%2e%2E/%7e%25%c3%a9"));
    assert_non_null(httpd_intake_raw_path("/v1/chat%2Fcompletions"));
    assert_non_null(httpd_intake_raw_path("/v1/chat%2fcompletions"));
    assert_non_null(httpd_intake_raw_path("/v1/a%3bb"));
    assert_non_null(httpd_intake_raw_path("/v1/a%00"));
    assert_non_null(httpd_intake_raw_path("/v1/a%5Cb"));
    assert_non_null(httpd_intake_raw_path("/v1/a\\b"));
    assert_non_null(httpd_intake_raw_path("/v1/a%zz"));
    assert_non_null(httpd_intake_raw_path("/v1/a%2"));
    assert_null(httpd_intake_path("/v1/chat/completions"));
    assert_null(httpd_intake_path("/v1/.../..a/a../.x"));
    assert_null(httpd_intake_path("/"));
    assert_null(httpd_intake_path("")); /* read past its end before (ASan) */
    assert_null(httpd_intake_path("*"));
    assert_non_null(httpd_intake_path(".."));
    assert_non_null(httpd_intake_path("/v1/../x"));
    assert_non_null(httpd_intake_path("/v1/./x"));
    assert_non_null(httpd_intake_path("/v1/.."));
    assert_non_null(httpd_intake_path("/.."));
}

/* ---- a server, and a client thread ---- */

typedef struct srv {
    ev_loop *loop;
    httpd *h;
    httpd_req *r; /* the request held */
    int requests, closes;
    int bodies;  /* body chunks the owner took (HOLD_BODY: one, then it pauses) */
    bool urgent; /* the client received the urgent byte "!" out of band */
    char target[256];
    int mode;    /* what the server does with a request: see on_request */
    int wake[2]; /* client -> loop: a byte to act on, EOF when done */
    int port;
    /* The client's side. */
    const char *send;
    size_t send_len;
    int after; /* 0 read to EOF; 1 shutdown(SHUT_WR) then read; 2 close; 3 reset */
    bool client_done;
    char got[4096];
    size_t got_len;
} srv;

enum { HOLD = 0, ANSWER_ON_WAKE = 1, ABORT_ON_WAKE = 2, ANSWER_NOW = 3, HOLD_BODY = 4 };

static void on_close(void *ud)
{
    srv *s = ud;
    s->closes++;
    s->r = NULL;
    ev_stop(s->loop);
}

static void on_body(void *ud, const char *data, size_t len, bool end)
{
    (void)data, (void)len, (void)end;
    srv *s = ud;
    if (s->mode == HOLD_BODY && s->r) { /* the rest waits, unread, as a held request's does */
        httpd_req_body_pause(s->r);
        __atomic_add_fetch(&s->bodies, 1, __ATOMIC_SEQ_CST);
    }
}

static void on_request(void *ud, httpd_req *r)
{
    srv *s = ud;
    __atomic_add_fetch(&s->requests, 1, __ATOMIC_SEQ_CST);
    char *t = httpd_req_target(r);
    snprintf(s->target, sizeof(s->target), "%s", t ? t : "");
    free(t);
    s->r = r;
    assert_non_null(httpd_req_work(r, on_close, s));
    if (s->mode == ABORT_ON_WAKE || s->mode == HOLD_BODY)
        assert_int_equal(httpd_req_body(r, on_body, s), 0);
    if (s->mode == ANSWER_NOW) {
        httpd_reply rep = {.code = 200, .body = strdup("ok\n"), .len = 3};
        httpd_req_reply(r, &rep);
        s->r = NULL;
    }
}

/* A byte from the client: act on the held request; end of file: the client is done. */
static void on_wake(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    srv *s = ud;
    char c;
    if (read(fd, &c, 1) != 1) {
        ev_fd_clear(loop, fd);
        s->client_done = true;
        ev_stop(loop);
        return;
    }
    assert_non_null(s->r);
    if (s->mode == ANSWER_ON_WAKE) {
        httpd_reply rep = {.code = 200, .body = strdup("answered\n"), .len = 9};
        httpd_req_reply(s->r, &rep);
    } else {
        static const char body[] = "{\"error\":\"stalled\"}";
        httpd_header h[] = {{"Retry-After", "1"}};
        httpd_req_abort(s->r, 408, h, 1, body, sizeof(body) - 1);
    }
    s->r = NULL;
}

static bool has(const srv *s, const char *what)
{
    return memmem(s->got, s->got_len, what, strlen(what)) != NULL;
}

/* Until the server holds the request: its head was read (HOLD_BODY: its body paused). */
static void client_wait_held(srv *s)
{
    while (!__atomic_load_n(s->mode == HOLD_BODY ? &s->bodies : &s->requests, __ATOMIC_SEQ_CST))
        usleep(1000);
}

/* The urgent byte a half-closed HTTP/1.0 client is probed with, out of the bytes it reads. */
static bool client_urgent(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLPRI};
    char c = 0;
    return poll(&p, 1, 10000) == 1 && recv(fd, &c, 1, MSG_OOB) == 1 && c == '!';
}

static void *client(void *ud)
{
    srv *s = ud;
    int fd = test_connect_loopback(s->port);
    if (write(fd, s->send, s->send_len) != (ssize_t)s->send_len)
        abort();
    if (s->after == 1)
        shutdown(fd, SHUT_WR);
    bool woke = false;
    if (s->mode == ABORT_ON_WAKE) { /* its body partly sent: the server ends it now */
        client_wait_held(s);
        woke = write(s->wake[1], "x", 1) == 1;
    }
    if (s->after >= 2) {
        client_wait_held(s);
        if (s->after == 3) {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(fd);
        close(s->wake[1]);
        return NULL;
    }
    if (s->after == 1 && s->mode == ANSWER_ON_WAKE && strstr(s->send, "HTTP/1.0\r\n")) {
        s->urgent = client_urgent(fd);
        woke = true;
        if (write(s->wake[1], "x", 1) != 1)
            abort();
    }
    for (;;) {
        ssize_t n = read(fd, s->got + s->got_len, sizeof(s->got) - 1 - s->got_len);
        if (n <= 0)
            break;
        s->got_len += (size_t)n;
        s->got[s->got_len] = 0;
        /* The server answers once the client that half-closed has had its interim 100. */
        if (!woke && s->mode == ANSWER_ON_WAKE && has(s, "100 Continue\r\n\r\n")) {
            woke = true;
            if (write(s->wake[1], "x", 1) != 1)
                abort();
        }
    }
    close(fd);
    close(s->wake[1]);
    return NULL;
}

/* Done when the client is, and (after 2 and 3) the server saw it go. */
static bool client_finished(void *ud)
{
    srv *s = ud;
    return s->client_done && (s->after < 2 || s->closes);
}

/* Runs one client against a fresh server; the client's bytes in s->got. */
static void run_client(srv *s, int mode, const char *send, int after)
{
    memset(s, 0, sizeof(*s));
    s->loop = ev_new();
    assert_non_null(s->loop);
    char err[160];
    httpd_config cfg = {.bind = "127.0.0.1:0", .request = on_request, .ud = s};
    s->h = httpd_start_config(s->loop, &cfg, err, sizeof(err));
    assert_non_null(s->h);
    s->port = httpd_port(s->h);
    s->mode = mode;
    s->send = send;
    s->send_len = strlen(send);
    s->after = after;
    assert_int_equal(pipe(s->wake), 0);
    assert_int_equal(ev_fd_set(s->loop, s->wake[0], EV_READ, on_wake, s), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, client, s), 0);
    test_loop_run_until(s->loop, client_finished, s, 20000);
    pthread_join(t, NULL);
    /* Let MHD finish with the connection before the server stops. */
    uint64_t end = ev_now_ms() + 1000;
    while (httpd_pending(s->h) && ev_now_ms() < end) {
        ev_timer_add(s->loop, 5, test_loop_stop, NULL);
        ev_run(s->loop);
    }
    httpd_stop(s->h);
    close(s->wake[0]);
    ev_free(s->loop);
}

static const char req[] = "GET /held HTTP/1.1\r\nHost: x\r\n\r\n";
static const char req10[] = "GET /held HTTP/1.0\r\nHost: x\r\n\r\n";

/* A client that half-closes after its request gets an interim 100, then its answer. */
static void test_half_close_answered(void **state)
{
    (void)state;
    srv s;
    run_client(&s, ANSWER_ON_WAKE, req, 1);
    assert_int_equal(s.requests, 1);
    assert_int_equal(s.closes, 0);
    assert_true(has(&s, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
    assert_true(has(&s, "answered\n"));
}

/* HTTP/1.0 gets no interim 100: a half-closed client is probed with a byte of urgent data, which
 * its reads never see; its answer comes whole. */
static void test_half_close_http10_answered(void **state)
{
    (void)state;
    srv s;
    run_client(&s, ANSWER_ON_WAKE, req10, 1);
    assert_int_equal(s.requests, 1);
    assert_int_equal(s.closes, 0);
    assert_true(s.urgent);
    assert_memory_equal(s.got, "HTTP/1.1 200 OK\r\n", 17); /* nothing before it */
    assert_true(has(&s, "answered\n"));
}

/* A client that closes, or resets, while its request is held is seen gone at once, with no
 * answer from the owner: in HTTP/1.1 or 1.0, waiting for its answer or with its body paused part
 * way, the rest left unread (in httpd's buffer: a chunked body's last chunk; in the socket: a
 * body larger than httpd's buffer). */
static void test_close_and_reset_seen(void **state)
{
    (void)state;
    static char big[200 + 48 * 1024];
    int n = snprintf(big, sizeof(big),
                     "POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 48 * 1024);
    memset(big + n, 'x', 48 * 1024);
    big[n + 48 * 1024] = 0;
    static const char chunked[] = "POST /held HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                  "\r\n5\r\nhello\r\n0\r\n\r\n";
    const struct {
        int mode;
        const char *send;
    } cases[] = {{HOLD, req}, {HOLD, req10}, {HOLD_BODY, chunked}, {HOLD_BODY, big}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int after = 2; after <= 3; after++) {
            srv s;
            run_client(&s, cases[i].mode, cases[i].send, after);
            if (s.requests != 1 || s.closes != 1)
                fail_msg("case %zu, after %d: %d requests, %d closes", i, after, s.requests,
                         s.closes);
        }
}

/* Refused before the owner sees them: framing two readers could take two ways, ambiguous
 * paths. */
static void test_refused_heads(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab",
        "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /v1/chat%2Fcompletions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        "POST /v1/%2e%2e/admin HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        "POST /v1/../admin HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        "GET /v1/a%00b HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        srv s;
        run_client(&s, ANSWER_NOW, heads[i], 1);
        if (s.requests != 0 || !has(&s, "HTTP/1.1 400 "))
            fail_msg("%s: %d requests, got %s", heads[i], s.requests, s.got);
    }
    /* Identical lengths are one length. */
    srv s;
    run_client(&s, ANSWER_NOW,
               "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
               1);
    assert_int_equal(s.requests, 1);
    assert_true(has(&s, "HTTP/1.1 200 "));
}

/* What a proxy sends on: the decoded path and query, encoded again. */
static void test_target(void **state)
{
    (void)state;
    srv s;
    run_client(&s, ANSWER_NOW, "GET /v1/models/a%20b%25%7e?q=a%2Fb+c&k HTTP/1.1\r\nHost: x\r\n\r\n",
               1);
    assert_int_equal(s.requests, 1);
    assert_string_equal(s.target, "/v1/models/a%20b%25~?q=a%2Fb%20c&k");
}

/* A stalled upload ended by its owner: the reply goes out, then the connection closes. */
static void test_abort_stalled(void **state)
{
    (void)state;
    srv s;
    run_client(&s, ABORT_ON_WAKE,
               "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"messages\":", 0);
    assert_int_equal(s.closes, 0);
    assert_true(has(&s, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"));
    assert_true(has(&s, "Retry-After: 1\r\n"));
    assert_true(has(&s, "\r\n\r\n{\"error\":\"stalled\"}"));
}

TEST_MAIN(cmocka_unit_test(test_framing), cmocka_unit_test(test_paths),
          cmocka_unit_test(test_half_close_answered),
          cmocka_unit_test(test_half_close_http10_answered),
          cmocka_unit_test(test_close_and_reset_seen), cmocka_unit_test(test_refused_heads),
          cmocka_unit_test(test_target), cmocka_unit_test(test_abort_stalled))

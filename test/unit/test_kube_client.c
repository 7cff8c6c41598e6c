/* Tests of the kube client's transport behaviour against a tiny scripted HTTP responder on
 * loopback, for what a real API server cannot be made to do on demand: 503 with Retry-After,
 * 429, a reset connection, a chunked watch cut at odd points, cancels from inside callbacks.
 * Everything else is tested against a real kube-apiserver by the end-to-end suite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "loop_run.h"
#include "loopback.h"
#include "scripted_http.h"

#include <sys/socket.h>
#include <unistd.h>

#include "kube/client.h"
#include "util/scratch.h"

/* ---- the client side ---- */

typedef struct {
    ev_loop *loop;
    kube_client *client;
    srv s;              /* tc_serve's */
    srv_reply reply[4]; /* what s answers from */
    int done;
    kube_error err;
    long code;
    char *body; /* printed JSON of the answer */
    int events;
    char types[16][16];
    char names[16][16];
    int ends;
    kube_error end_err;
    kube_call *other;   /* a call for a callback to cancel */
    kube_call *self;    /* the watch itself */
    const char *follow; /* a path for a callback to call next */
    int follow_done;
    int in_scratch; /* answers and events whose tree was in a scratch region */
} tc;

static kube_client *tc_client(tc *t, ev_loop *loop, int port)
{
    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", port) > 0);
    cfg.token = strdup("test-token");
    cfg.user_agent = strdup("kube-test/1");
    kube_client *c = kube_client_new(loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(c);
    t->loop = loop;
    t->client = c;
    return c;
}

static void tc_clear(tc *t)
{
    kube_error_clear(&t->err);
    kube_error_clear(&t->end_err);
    free(t->body);
}

/* One scripted answer: the request line's substring that picks it, and the whole answer (status,
 * header lines, body); no status: no piece yet. Pieces, delays and what follows the answer may be
 * set in t->reply afterwards, before the loop runs. */
typedef struct {
    const char *match, *status, *headers, *body;
} tc_answer;

/* A new loop with t->s answering from answers on it, and t's client of t->s. */
static kube_client *tc_serve_n(tc *t, const tc_answer *answers, size_t n)
{
    assert_true(n <= sizeof(t->reply) / sizeof(*t->reply));
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    srv_start(&t->s, loop, t->reply, n);
    for (size_t i = 0; i < n; i++) {
        t->reply[i] = (srv_reply){.match = answers[i].match};
        if (answers[i].status)
            t->reply[i].pieces[0] =
                srv_own(&t->s, srv_http(answers[i].status, answers[i].headers, answers[i].body));
    }
    return tc_client(t, loop, t->s.port);
}

#define tc_serve(t, ...)                                                                           \
    tc_serve_n((t), (const tc_answer[]){__VA_ARGS__},                                              \
               sizeof((const tc_answer[]){__VA_ARGS__}) / sizeof(tc_answer))

/* Frees what tc_serve made, and what t recorded. */
static void tc_close(tc *t)
{
    kube_client_free(t->client);
    srv_stop(&t->s);
    tc_clear(t);
    ev_free(t->loop);
}

static void tc_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    tc *t = ud;
    t->done++;
    t->in_scratch += body && scratch_owns(body);
    kube_error_copy(&t->err, err);
    t->code = code;
    free(t->body);
    t->body = body ? cJSON_PrintUnformatted(body) : NULL;
    ev_stop(t->loop);
}

static void tc_run(tc *t)
{
    test_loop_run(t->loop, 10000);
}

static kube_request tc_get(const char *path)
{
    return (kube_request){.method = KUBE_GET, .path = path, .max_retries = -1};
}

/* Starts req with tc_done and runs the loop until it is done. */
static void tc_call(tc *t, const kube_request *req)
{
    kube_error err = {0};
    assert_non_null(kube_call_start(t->client, req, tc_done, t, &err));
    tc_run(t);
}

static void test_get_ok(void **state)
{
    (void)state;
    tc t = {0};
    tc_serve(&t, {"/pods/p?", "200 OK", "", "{\"kind\":\"Pod\"}"});
    kube_query q[] = {{"labelSelector", "app in (a,b)&x=y"}, {"limit", "5"}, {NULL, NULL}};
    kube_request req = tc_get("/api/v1/namespaces/default/pods/p");
    req.query = q;
    tc_call(&t, &req);
    assert_int_equal(t.done, 1);
    assert_int_equal(t.err.kind, KUBE_OK);
    assert_int_equal(t.code, 200);
    assert_string_equal(t.body, "{\"kind\":\"Pod\"}");
    assert_int_equal(t.in_scratch, 0); /* not asked for: parsed in the heap */
    assert_int_equal(t.s.nrequests, 1);
    const char *r = t.s.requests[0];
    assert_non_null(strstr(r, "GET /api/v1/namespaces/default/pods/p?labelSelector=app%20in%20%28a%"
                              "2Cb%29%26x%3Dy&limit=5 HTTP/1.1\r\n"));
    assert_non_null(strstr(r, "\r\nAuthorization: Bearer test-token\r\n"));
    assert_non_null(strstr(r, "\r\nAccept: application/json\r\n"));
    assert_non_null(strstr(r, "\r\nUser-Agent: kube-test/1\r\n"));
    tc_close(&t);
}

/* The first answer's callback starts the next call: it goes out on the same connection. */
static void tc_done_then_follow(void *ud, const kube_error *err, long code, const cJSON *body)
{
    tc *t = ud;
    (void)err;
    (void)code;
    (void)body;
    t->done++;
    kube_request req = {.method = KUBE_PATCH_MERGE,
                        .path = t->follow,
                        .body = "{\"spec\":{\"replicas\":0}}",
                        .max_retries = -1};
    kube_error e = {0};
    assert_non_null(kube_call_start(t->client, &req, tc_done, t, &e));
}

static void test_body_and_keepalive(void **state)
{
    (void)state;
    tc t = {.follow = "/b"};
    kube_client *c = tc_serve(&t, {"POST /a", "201 Created", "", "{}"},
                              {"PATCH /b", "200 OK", "", "{\"ok\":true}"});
    kube_request req = {.method = KUBE_POST, .path = "/a", .body = "{\"kind\":\"Event\"}"};
    kube_error err = {0};
    assert_non_null(kube_call_start(c, &req, tc_done_then_follow, &t, &err));
    tc_run(&t);
    assert_int_equal(t.done, 2);
    assert_int_equal(t.err.kind, KUBE_OK);
    assert_string_equal(t.body, "{\"ok\":true}");
    assert_int_equal(t.s.nrequests, 2);
    assert_non_null(strstr(t.s.requests[0], "\r\nContent-Type: application/json\r\n"));
    assert_non_null(strstr(t.s.requests[0], "\r\n\r\n{\"kind\":\"Event\"}"));
    assert_non_null(strstr(t.s.requests[1], "\r\nContent-Type: application/merge-patch+json\r\n"));
    assert_non_null(strstr(t.s.requests[1], "\r\n\r\n{\"spec\":{\"replicas\":0}}"));
    assert_int_equal(t.s.naccepts, 1); /* kept alive and reused */
    tc_close(&t);
}

/* Runs req to its end, which must be an answer of success after nrequests requests. */
static void tc_call_ok(tc *t, const kube_request *req, int nrequests)
{
    tc_call(t, req);
    assert_int_equal(t->done, 1);
    assert_int_equal(t->err.kind, KUBE_OK);
    assert_int_equal(t->s.nrequests, nrequests);
}

static void test_retry_503_retry_after(void **state)
{
    (void)state;
    tc t = {0};
    tc_serve(&t,
             {"/x", "503 Service Unavailable", "Retry-After: 1\r\n",
              "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"code\":503}"},
             {"/x", "200 OK", "", "{}"});
    kube_request req = tc_get("/x");
    tc_call_ok(&t, &req, 2);
    tc_close(&t);
}

static void test_retry_429(void **state)
{
    (void)state;
    tc t = {0};
    tc_serve(&t, {"/x", "429 Too Many Requests", "", "slow down"},
             {"/x", "429 Too Many Requests", "", "slow down"}, {"/x", "200 OK", "", "[1]"});
    kube_request req = tc_get("/x");
    tc_call_ok(&t, &req, 3);
    assert_string_equal(t.body, "[1]");
    tc_close(&t);
}

static void test_no_retry_404_and_retries_exhausted(void **state)
{
    (void)state;
    tc t = {0};
    tc_serve(&t,
             {"/missing", "404 Not Found", "",
              "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods "
              "\\\"p\\\" not found\",\"reason\":\"NotFound\",\"code\":404}"},
             {"/boom", "500 Internal Server Error", "", "boom"},
             {"/boom", "500 Internal Server Error", "", "boom"});
    kube_request req = tc_get("/missing");
    tc_call(&t, &req);
    assert_int_equal(t.done, 1);
    assert_true(kube_error_is(&t.err, "NotFound"));
    assert_string_equal(t.err.message, "pods \"p\" not found");
    assert_int_equal(t.code, 404);
    assert_non_null(t.body); /* the Status itself is handed over too */
    assert_int_equal(t.s.nrequests, 1);

    req = tc_get("/boom");
    req.max_retries = 1;
    tc_call(&t, &req);
    assert_int_equal(t.done, 2);
    assert_int_equal(t.err.kind, KUBE_ERR_HTTP);
    assert_int_equal(t.err.http_code, 500);
    assert_string_equal(t.err.message, "HTTP 500: boom");
    assert_int_equal(t.s.nrequests, 3);
    tc_close(&t);
}

static void test_connection_reset(void **state)
{
    (void)state;
    tc t = {0};
    tc_serve(&t, {.match = "/x"}, {"/x", "200 OK", "", "{}"});
    t.reply[0].then = SRV_RESET;
    kube_request req = tc_get("/x");
    tc_call_ok(&t, &req, 2);
    assert_int_equal(t.s.naccepts, 2);
    tc_close(&t);
}
static void test_transport_error(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_client(&t, ev_new(), test_closed_port_loopback());
    kube_request req = tc_get("/api/v1/nodes");
    req.max_retries = 1;
    tc_call(&t, &req);
    assert_int_equal(t.done, 1);
    assert_int_equal(t.err.kind, KUBE_ERR_TRANSPORT);
    assert_int_equal(t.err.http_code, 0);
    assert_non_null(strstr(t.err.message, "GET /api/v1/nodes: "));
    assert_non_null(strstr(t.err.message, "(after 2 attempts)"));
    kube_client_free(c);
    tc_clear(&t);
    ev_free(t.loop);
}

static const char *tc_name(const cJSON *obj)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
    return n ? n : "";
}

static void tc_event(void *ud, const char *type, cJSON *object)
{
    tc *t = ud;
    assert_true(t->events < 16);
    snprintf(t->types[t->events], sizeof(t->types[0]), "%s", type);
    snprintf(t->names[t->events], sizeof(t->names[0]), "%s", tc_name(object));
    t->in_scratch += scratch_owns(object);
    t->events++;
    cJSON_Delete(object);
}

static void tc_end(void *ud, const kube_error *err)
{
    tc *t = ud;
    t->ends++;
    kube_error_copy(&t->end_err, err);
    ev_stop(t->loop);
}

static const char tc_watch_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n";

/* Builds a chunked body from text cut into chunks at chunk_cuts, then cuts the raw bytes into
 * pieces at piece_cuts: events, chunks and TCP writes all end at different places. */
static void tc_chunked(srv *s, srv_reply *r, const char *text, const size_t *chunk_cuts,
                       size_t nchunk, const size_t *piece_cuts, size_t npiece, bool terminate)
{
    char *raw = NULL;
    size_t rawlen = 0;
    FILE *f = open_memstream(&raw, &rawlen);
    fputs(tc_watch_head, f);
    size_t at = 0, len = strlen(text);
    for (size_t i = 0; i <= nchunk; i++) {
        size_t to = i < nchunk ? chunk_cuts[i] : len;
        char *ch = srv_chunk(text + at, to - at);
        fputs(ch, f);
        free(ch);
        at = to;
    }
    if (terminate)
        fputs("0\r\n\r\n", f);
    fclose(f);
    at = 0;
    int p = 0;
    for (size_t i = 0; i <= npiece; i++) {
        size_t to = i < npiece ? strlen(tc_watch_head) + piece_cuts[i] : rawlen;
        r->pieces[p++] = srv_own(s, strndup(raw + at, to - at));
        at = to;
    }
    free(raw);
}

static const char tc_events[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";

/* t's answer i: tc_events in a chunked body cut at odd places (tc_chunked), then its end. */
static void tc_events_cut(tc *t, int i)
{
    static const size_t chunk_cuts[] = {1, 30, 31, 60, 130, 200};
    static const size_t piece_cuts[] = {2, 3, 40, 41, 90, 150, 151, 230};
    tc_chunked(&t->s, &t->reply[i], tc_events, chunk_cuts, 6, piece_cuts, 8, true);
}

static void test_watch_chunked(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t, {.match = "/api/v1/pods?watch=1"});
    tc_events_cut(&t, 0);
    kube_query q[] = {{"resourceVersion", "5"}, {"allowWatchBookmarks", "true"}, {NULL, NULL}};
    kube_error err = {0};
    assert_non_null(kube_watch_start(c, "/api/v1/pods", q, tc_event, tc_end, &t, &err));
    tc_run(&t);
    assert_int_equal(t.events, 4);
    assert_string_equal(t.types[0], "ADDED");
    assert_string_equal(t.names[0], "a");
    assert_string_equal(t.types[1], "MODIFIED");
    assert_string_equal(t.names[1], "b");
    assert_string_equal(t.types[2], "BOOKMARK");
    assert_string_equal(t.types[3], "ERROR");
    assert_int_equal(t.ends, 1);
    assert_int_equal(t.end_err.kind, KUBE_OK);
    assert_non_null(strstr(t.s.requests[0], "GET /api/v1/pods?watch=1&resourceVersion=5&"
                                            "allowWatchBookmarks=true&timeoutSeconds=300 "));
    tc_close(&t);
}

/* With scratch asked for, a list answer and every watch event are parsed in a scratch region, and
 * read the same. */
static void test_scratch_answers(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c =
        tc_serve(&t,
                 {"/api/v1/pods?limit", "200 OK", "",
                  "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\"}}]}"},
                 {.match = "/api/v1/pods?watch=1"});
    tc_events_cut(&t, 1);
    kube_query q[] = {{"limit", "500"}, {NULL, NULL}};
    kube_request req = tc_get("/api/v1/pods");
    req.query = q;
    req.list = true;
    req.scratch = true;
    tc_call(&t, &req);
    assert_int_equal(t.done, 1);
    assert_int_equal(t.in_scratch, 1);
    assert_string_equal(t.body,
                        "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\"}}]}");

    t.in_scratch = 0;
    kube_error err = {0};
    kube_call *w = kube_watch_start(c, "/api/v1/pods", NULL, tc_event, tc_end, &t, &err);
    assert_non_null(w);
    kube_watch_scratch(w);
    tc_run(&t);
    assert_int_equal(t.events, 4);
    assert_int_equal(t.in_scratch, 4);
    assert_string_equal(t.names[0], "a");
    assert_string_equal(t.names[1], "b");
    assert_string_equal(t.types[3], "ERROR");
    assert_int_equal(t.ends, 1);
    tc_close(&t);
}

static void test_watch_http_error_and_garbage(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t,
                              {"/gone", "410 Gone", "",
                               "{\"kind\":\"Status\",\"message\":\"too old resource version\","
                               "\"reason\":\"Expired\",\"code\":410}"},
                              {.match = "/garbage"});
    t.reply[1].then = SRV_CLOSE;
    static const char garbage[] = "{\"type\":\"ADDED\",\"object\":{}}\nthis is not json\n";
    tc_chunked(&t.s, &t.reply[1], garbage, NULL, 0, NULL, 0, false);
    kube_query q[] = {{"timeoutSeconds", "60"}, {NULL, NULL}};
    kube_error err = {0};
    assert_non_null(kube_watch_start(c, "/gone", q, tc_event, tc_end, &t, &err));
    tc_run(&t);
    assert_int_equal(t.events, 0);
    assert_int_equal(t.ends, 1);
    assert_int_equal(t.end_err.kind, KUBE_ERR_HTTP);
    assert_int_equal(t.end_err.http_code, 410);
    assert_true(kube_error_is(&t.end_err, "Expired"));
    assert_string_equal(t.end_err.message, "too old resource version");
    assert_non_null(strstr(t.s.requests[0], "watch=1&timeoutSeconds=60 "));

    assert_non_null(kube_watch_start(c, "/garbage", NULL, tc_event, tc_end, &t, &err));
    tc_run(&t);
    assert_int_equal(t.events, 1);
    assert_int_equal(t.ends, 2);
    assert_int_equal(t.end_err.kind, KUBE_ERR_DECODE);
    tc_close(&t);
}

/* From inside a watch event: cancel another call, cancel the watch itself, start a new call. */
static void tc_event_cancels(void *ud, const char *type, cJSON *object)
{
    tc *t = ud;
    tc_event(ud, type, object);
    kube_call_cancel(t->other);
    kube_call_cancel(t->self);
    kube_call_cancel(t->self); /* twice is harmless */
    kube_request req = tc_get(t->follow);
    kube_error err = {0};
    assert_non_null(kube_call_start(t->client, &req, tc_done, t, &err));
}

static void tc_never(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)ud;
    (void)err;
    (void)code;
    (void)body;
    fail_msg("a cancelled call's callback ran");
}

static void test_cancel_inside_callbacks(void **state)
{
    (void)state;
    tc t = {.follow = "/next"};
    kube_client *c = tc_serve(&t, {.match = "/w?"}, {"/slow", "200 OK", "", "{}"},
                              {"/next", "200 OK", "", "{\"next\":1}"});
    t.reply[1].delay_ms = 2000;
    static const char two[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                              "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n";
    tc_chunked(&t.s, &t.reply[0], two, NULL, 0, NULL, 0, false); /* both in one chunk, then idle */
    kube_error err = {0};
    kube_request slow = tc_get("/slow");
    t.other = kube_call_start(c, &slow, tc_never, &t, &err);
    assert_non_null(t.other);
    t.self = kube_watch_start(c, "/w", NULL, tc_event_cancels, tc_end, &t, &err);
    assert_non_null(t.self);
    tc_run(&t);
    assert_int_equal(t.events, 1); /* the second event of the chunk was never delivered */
    assert_int_equal(t.ends, 0);
    assert_int_equal(t.done, 1);
    assert_string_equal(t.body, "{\"next\":1}");
    tc_close(&t);
}

/* Two calls; whichever answers first cancels the other, even when both finished in the same
 * turn of the loop. */
typedef struct {
    ev_loop *loop;
    kube_call *calls[2];
    int done;
} tc_pair;

static void tc_pair_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    (void)body;
    tc_pair *p = ud;
    assert_int_equal(err->kind, KUBE_OK);
    p->done++;
    kube_call_cancel(p->calls[0]);
    kube_call_cancel(p->calls[1]);
    ev_stop(p->loop);
}

static void test_done_cancels_sibling(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t, {"/one", "200 OK", "", "{}"}, {"/two", "200 OK", "", "{}"});
    tc_pair p = {.loop = t.loop};
    kube_error err = {0};
    kube_request r1 = tc_get("/one"), r2 = tc_get("/two");
    p.calls[0] = kube_call_start(c, &r1, tc_pair_done, &p, &err);
    p.calls[1] = kube_call_start(c, &r2, tc_pair_done, &p, &err);
    test_loop_run(t.loop, 10000);
    /* Give the other answer time to arrive: its callback must still not run. */
    ev_timer_add(t.loop, 200, test_loop_stop, NULL);
    test_loop_run(t.loop, 10000);
    assert_int_equal(p.done, 1);
    tc_close(&t);
}

static void tc_stop_on_event(void *ud, const char *type, cJSON *object)
{
    tc_event(ud, type, object);
    ev_stop(((tc *)ud)->loop);
}

static void tc_never_end(void *ud, const kube_error *err)
{
    (void)ud;
    (void)err;
    fail_msg("a freed client's watch ended");
}

static void tc_never_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    (void)ud;
}

/* Freeing the client with a watch and a call in flight runs no callback, leaks nothing and
 * leaves no socket registered in the loop. */
static void test_free_in_flight(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t, {.match = "/w?"}, {"/slow", "200 OK", "", "{}"});
    t.reply[1].delay_ms = 5000;
    tc_chunked(&t.s, &t.reply[0], "{\"type\":\"ADDED\",\"object\":{}}\n", NULL, 0, NULL, 0, false);
    kube_error err = {0};
    kube_request slow = tc_get("/slow");
    assert_non_null(kube_call_start(c, &slow, tc_never, &t, &err));
    assert_non_null(kube_watch_start(c, "/w", NULL, tc_stop_on_event, tc_never_end, &t, &err));
    tc_run(&t);
    assert_int_equal(t.events, 1);
    kube_client_free(c);
    srv_stop(&t.s);
    /* The fds the client used are closed; new ones reuse their numbers and must register
     * cleanly, which fails if the loop still thought it watched them. */
    int fds[8];
    for (int i = 0; i < 8; i += 2) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds + i), 0);
        assert_int_equal(ev_fd_set(t.loop, fds[i], EV_READ, tc_never_fd, NULL), 0);
        assert_int_equal(ev_fd_set(t.loop, fds[i + 1], EV_READ, tc_never_fd, NULL), 0);
    }
    for (int i = 0; i < 8; i++) {
        ev_fd_clear(t.loop, fds[i]);
        close(fds[i]);
    }
    tc_clear(&t);
    ev_free(t.loop);
}

/* What the client's retry hook was told, retry by retry. */
typedef struct {
    int n;
    int retry[8];
    long code[8];
    uint64_t delay[8];
    kube_errkind kind[8];
    char message[8][160];
} tc_retries;

static void tc_on_retry(void *ud, const char *verb, const char *path, const kube_error *err,
                        int retry, uint64_t delay_ms)
{
    tc_retries *r = ud;
    assert_string_equal(verb, "GET");
    assert_string_equal(path, "/x");
    assert_true(r->n < 8);
    r->retry[r->n] = retry;
    r->code[r->n] = err->http_code;
    r->kind[r->n] = err->kind;
    r->delay[r->n] = delay_ms;
    snprintf(r->message[r->n], sizeof(r->message[0]), "%s", err->message ? err->message : "");
    r->n++;
}

/* A 429 with Retry-After: the retry waits what the server asked, not the (shorter) backoff. */
static void test_429_retry_after_honoured(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t,
                              {"/x", "429 Too Many Requests", "Retry-After: 1\r\n",
                               "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}"},
                              {"/x", "200 OK", "", "{}"});
    tc_retries r = {0};
    kube_client_on_retry(c, tc_on_retry, &r);
    kube_request req = tc_get("/x");
    tc_call_ok(&t, &req, 2);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.retry[0], 1);
    assert_int_equal(r.code[0], 429);
    assert_int_equal(r.delay[0], 1000); /* the backoff alone would be 100-200 ms */
    tc_close(&t);
}

/* 5xx answers without Retry-After: each wait is the backoff with jitter, within a range that
 * doubles from retry to retry (the pure function's bounds are test_retry_delay's). A call that
 * uses up its retries reports the last answer, its Retry-After included. */
static void test_5xx_backoff_grows(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(
        &t, {"/x", "500 Internal Server Error", "", "boom"}, {"/x", "502 Bad Gateway", "", "proxy"},
        {"/x", "503 Service Unavailable", "", "later"},
        {"/x", "503 Service Unavailable", "Retry-After: 7\r\n", "still later"});
    tc_retries r = {0};
    kube_client_on_retry(c, tc_on_retry, &r);
    kube_request req = tc_get("/x");
    req.max_retries = 3;
    tc_call(&t, &req);
    assert_int_equal(r.n, 3);
    const long codes[] = {500, 502, 503};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r.retry[i], i + 1);
        assert_int_equal(r.code[i], codes[i]);
        uint64_t top = 200u << i; /* 200, 400, 800 ms; the lower half is fixed */
        assert_true(r.delay[i] >= top / 2 && r.delay[i] <= top);
    }
    assert_int_equal(t.done, 1);
    assert_int_equal(t.err.http_code, 503);
    assert_int_equal(t.err.retry_after_s, 7);
    assert_int_equal(t.s.nrequests, 4);
    tc_close(&t);
}

/* An attempt that times out (the server answers too late) is a transport error, retried after
 * the backoff like a 5xx. */
static void test_timeout_retried(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c = tc_serve(&t, {"/x", "200 OK", "", "{\"late\":true}"},
                              {"/x", "200 OK", "", "{\"in\":\"time\"}"});
    t.reply[0].delay_ms = 5000;
    tc_retries r = {0};
    kube_client_on_retry(c, tc_on_retry, &r);
    kube_request req = tc_get("/x");
    req.timeout_ms = 300;
    tc_call_ok(&t, &req, 2);
    assert_string_equal(t.body, "{\"in\":\"time\"}");
    assert_int_equal(r.n, 1);
    assert_int_equal(r.kind[0], KUBE_ERR_TRANSPORT);
    assert_int_equal(r.code[0], 0);
    assert_non_null(strstr(r.message[0], "timed out"));
    assert_true(r.delay[0] >= 100 && r.delay[0] <= 200);
    tc_close(&t);
}

/* A watch is never retried by the client: an error answer ends it, with its Retry-After in the
 * error for the informer to honour. */
static void test_watch_429_retry_after_in_error(void **state)
{
    (void)state;
    tc t = {0};
    kube_client *c =
        tc_serve(&t, {"/w?", "429 Too Many Requests", "Retry-After: 4\r\n",
                      "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}"});
    tc_retries r = {0};
    kube_client_on_retry(c, tc_on_retry, &r);
    kube_error err = {0};
    assert_non_null(kube_watch_start(c, "/w", NULL, tc_event, tc_end, &t, &err));
    tc_run(&t);
    assert_int_equal(t.ends, 1);
    assert_int_equal(t.end_err.http_code, 429);
    assert_int_equal(t.end_err.retry_after_s, 4);
    assert_int_equal(r.n, 0);
    assert_int_equal(t.s.nrequests, 1);
    tc_close(&t);
}

static void test_retry_delay(void **state)
{
    (void)state;
    assert_int_equal(kube_retry_delay_ms(0, -1, 0), 100);
    assert_int_equal(kube_retry_delay_ms(0, -1, 100), 200);
    assert_int_equal(kube_retry_delay_ms(1, -1, 0), 200);
    for (uint32_t r = 0; r < 5000; r += 7) {
        uint64_t d = kube_retry_delay_ms(3, -1, r);
        assert_true(d >= 800 && d <= 1600);
        d = kube_retry_delay_ms(40, -1, r * 104729u);
        assert_true(d >= 5000 && d <= 10000);
    }
    assert_int_equal(kube_retry_delay_ms(0, 3, 0), 3000);
    assert_int_equal(kube_retry_delay_ms(0, 0, 0), 100);
    assert_int_equal(kube_retry_delay_ms(0, 3600, 0), 30000); /* Retry-After is capped */
}

static void test_path(void **state)
{
    (void)state;
    struct {
        const char *g, *v, *ns, *res, *name, *sub, *want;
    } cases[] = {
        {"", "v1", "default", "pods", "p", NULL, "/api/v1/namespaces/default/pods/p"},
        {NULL, "v1", NULL, "nodes", NULL, NULL, "/api/v1/nodes"},
        {"inference.llmkube.dev", "v1alpha1", "ns", "modelpools", "p", "status",
         "/apis/inference.llmkube.dev/v1alpha1/namespaces/ns/modelpools/p/status"},
        {"apps", "v1", "", "deployments", NULL, NULL, "/apis/apps/v1/deployments"},
        {"rbac.authorization.k8s.io", "v1", NULL, "clusterroles", "system:x y/z", NULL,
         "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Ax%20y%2Fz"},
        {"", "v1", NULL, NULL, NULL, NULL, "/api/v1"},
        {"", "v1", "ns", "pods", "", NULL, NULL},
        {"", "v1", "ns", NULL, "p", NULL, NULL},
        {"", "v1", "ns", "pods", NULL, "status", NULL},
        {"", "", "ns", "pods", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char *p = kube_path(cases[i].g, cases[i].v, cases[i].ns, cases[i].res, cases[i].name,
                            cases[i].sub);
        if (cases[i].want)
            assert_string_equal(p, cases[i].want);
        else
            assert_null(p);
        free(p);
    }
}

TEST_MAIN(cmocka_unit_test(test_get_ok), cmocka_unit_test(test_body_and_keepalive),
          cmocka_unit_test(test_retry_503_retry_after), cmocka_unit_test(test_retry_429),
          cmocka_unit_test(test_no_retry_404_and_retries_exhausted),
          cmocka_unit_test(test_connection_reset), cmocka_unit_test(test_transport_error),
          cmocka_unit_test(test_watch_chunked), cmocka_unit_test(test_scratch_answers),
          cmocka_unit_test(test_watch_http_error_and_garbage),
          cmocka_unit_test(test_cancel_inside_callbacks),
          cmocka_unit_test(test_done_cancels_sibling), cmocka_unit_test(test_free_in_flight),
          cmocka_unit_test(test_429_retry_after_honoured), cmocka_unit_test(test_5xx_backoff_grows),
          cmocka_unit_test(test_timeout_retried),
          cmocka_unit_test(test_watch_429_retry_after_in_error), cmocka_unit_test(test_retry_delay),
          cmocka_unit_test(test_path))

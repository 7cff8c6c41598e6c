/* Tests of the router's registration (router/registry.h, api/fence.h "Acknowledged swaps") against
 * the scripted API server on loopback: the Lease is created (unready names it until the answer),
 * then written by merge patches carrying the resourceVersion answered last and the fenced
 * annotation; a write whose outcome is unknown (500, an answer cut off) keeps the members it
 * carried blocked until a later write succeeds, and a withdrawal moves the pool's fence reads past
 * its success; a 409 reads the Lease and writes again with the version read; a 404 ends the
 * registration at once and creates the Lease again; renewals failing for D end it too (unready
 * says why) and the next success begins a new one; the changed callback names a withdrawn pool,
 * and NULL when the registration begins; release deletes the Lease or gives up after its timeout,
 * and freeing with a call in flight leaks nothing. Each step runs the loop until the client hands
 * over a chosen answer (the loop stops right there, before anything else runs), so the state is
 * checked between one answer and the next. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "test_main.h"

#include "loop_run.h"
#include "scripted_http.h"

#include "api/fence.h"
#include "kube/client.h"
#include "loop/ev.h"
#include "router/registry.h"

#define DURATION_MS 2000
#define DEADLINE_MS 10000
/* Each answer waits this long after its request came in, so that two answers never carry the same
 * time on the millisecond clock (a guarantee of progress, not a wait for anything). */
#define GAP_MS 2
#define HELD_MS 600000 /* an answer that never comes within a test */

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/ops/leases"
#define POST_LEASE "POST " LEASES " "
#define PATCH_LEASE "PATCH " LEASES "/router-a "
#define GET_LEASE "GET " LEASES "/router-a "
#define DELETE_LEASE "DELETE " LEASES "/router-a "

#define MAX_REPLIES 24
#define MAX_ANSWERS 32
#define MAX_CHANGES 16

typedef struct {
    ev_loop *loop;
    srv s;
    srv_reply r[MAX_REPLIES];
    size_t nr;
    kube_client *client;
    rt_registry *reg;
    int answers, stop_after;           /* answers the client handed over; the loop stops at one */
    long codes[MAX_ANSWERS];           /* their HTTP codes (0: none) */
    uint64_t answered_ms[MAX_ANSWERS]; /* when each was handed over */
    int nchanges;
    char
        *changes[MAX_CHANGES]; /* the changed callback's pool keys (NULL: the registration began) */
    uint64_t changed_ms[MAX_CHANGES];
    int released;
} fx;

static void fx_observe(void *ud, const char *verb, long code)
{
    (void)verb;
    fx *f = ud;
    assert_true(f->answers < MAX_ANSWERS);
    f->codes[f->answers] = code;
    f->answered_ms[f->answers] = ev_now_ms();
    /* The registry's callback runs right after this one, in the same turn of the loop. */
    if (++f->answers == f->stop_after)
        ev_stop(f->loop);
}

static void fx_changed(void *ud, const char *pool_key)
{
    fx *f = ud;
    assert_true(f->nchanges < MAX_CHANGES);
    f->changes[f->nchanges] = pool_key ? strdup(pool_key) : NULL;
    if (pool_key)
        assert_non_null(f->changes[f->nchanges]);
    f->changed_ms[f->nchanges++] = ev_now_ms();
}

static void fx_released(void *ud)
{
    fx *f = ud;
    f->released++;
}

static fx *fx_new(void)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->loop = ev_new();
    assert_non_null(f->loop);
    srv_start(&f->s, f->loop, f->r, 0);
    kube_config cfg = {0};
    kube_error err = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", f->s.port) > 0);
    f->client = kube_client_new(f->loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(f->client);
    kube_client_observe(f->client, fx_observe, f);
    rt_registry_config rc = {.namespace_ = "ops",
                             .name = "router-a",
                             .identity = "me",
                             .fronts = "team-a",
                             .duration_ms = DURATION_MS,
                             .renew_ms = 500,
                             .window_ms = 1000,
                             .changed = fx_changed,
                             .ud = f};
    f->reg = rt_registry_new(f->loop, f->client, &rc);
    assert_non_null(f->reg);
    return f;
}

static void fx_free(fx *f)
{
    rt_registry_free(f->reg);
    kube_client_free(f->client);
    srv_stop(&f->s);
    ev_free(f->loop);
    for (int i = 0; i < f->nchanges; i++)
        free(f->changes[i]);
    free(f);
}

/* Scripts the next answer to a request whose line holds match (answer: malloc'd, kept by s). */
static srv_reply *fx_reply(fx *f, const char *match, char *answer)
{
    assert_true(f->nr < MAX_REPLIES);
    srv_reply *r = &f->r[f->nr++];
    *r = (srv_reply){.match = match, .delay_ms = GAP_MS};
    r->pieces[0] = srv_own(&f->s, answer);
    f->s.nreplies = f->nr;
    return r;
}

static char *lease_answer(const char *status, const char *rv)
{
    char *body;
    assert_true(asprintf(&body,
                         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                         "\"metadata\":{\"name\":\"router-a\",\"namespace\":\"ops\","
                         "\"resourceVersion\":\"%s\"},\"spec\":{\"holderIdentity\":\"me\"}}",
                         rv) > 0);
    char *http = srv_http(status, "", body);
    free(body);
    return http;
}

static char *status_answer(long code, const char *status, const char *reason)
{
    char *body;
    assert_true(asprintf(&body,
                         "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                         "\"message\":\"scripted %s\",\"reason\":\"%s\",\"code\":%ld}",
                         reason, reason, code) > 0);
    char *http = srv_http(status, "", body);
    free(body);
    return http;
}

/* Runs the loop until the client has handed over its n-th answer (and the registry's callback has
 * run on it), and nothing after it. */
static void fx_run_to(fx *f, int n)
{
    assert_true(f->answers < n);
    f->stop_after = n;
    test_loop_run(f->loop, DEADLINE_MS);
    assert_int_equal(f->answers, n);
}

static bool fx_is_released(void *ud)
{
    fx *f = ud;
    return f->released > 0 && f->s.nrequests >= 2;
}

static uint64_t fx_until(const fx *f)
{
    return rt_registry_until(f->reg, ev_now_ms());
}

static bool fx_unready_names_the_lease(const fx *f)
{
    char buf[1024];
    rt_registry_unready(f->reg, ev_now_ms(), buf, sizeof(buf));
    return strstr(buf, "Lease ops/router-a") != NULL;
}

static bool fx_ready(const fx *f)
{
    char buf[1024];
    rt_registry_unready(f->reg, ev_now_ms(), buf, sizeof(buf));
    return buf[0] == '\0';
}

/* Request i's line starts with what (the method, the path and a blank). */
static void assert_request(const fx *f, int i, const char *what)
{
    assert_true(i < f->s.nrequests);
    if (strncmp(f->s.requests[i], what, strlen(what)) != 0)
        fail_msg("request %d is %.*s, not %s", i, (int)strcspn(f->s.requests[i], "\r"),
                 f->s.requests[i], what);
}

/* Request i is a write of the Lease: what (POST_LEASE or PATCH_LEASE), carrying resourceVersion rv
 * (NULL: none, as in a create) and the fenced annotation fenced (NULL: JSON null, the merge
 * patch's removal). */
static void assert_write(const fx *f, int i, const char *what, const char *rv, const char *fenced)
{
    assert_request(f, i, what);
    const char *req = f->s.requests[i];
    const char *head_end = strstr(req, "\r\n\r\n");
    assert_non_null(head_end);
    if (strcmp(what, PATCH_LEASE) == 0) {
        const char *ct = strcasestr(req, "\r\nContent-Type: application/merge-patch+json");
        assert_true(ct && ct < head_end);
    }
    cJSON *body = cJSON_Parse(head_end + 4);
    if (!body)
        fail_msg("request %d's body is not JSON: %s", i, head_end + 4);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(body, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(body, "spec");
    const cJSON *got_rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
    if (rv)
        assert_string_equal(cJSON_GetStringValue(got_rv), rv);
    else
        assert_null(got_rv);
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(md, "annotations"), API_FENCED_ANNOTATION);
    assert_non_null(ann);
    if (fenced)
        assert_string_equal(cJSON_GetStringValue(ann), fenced);
    else
        assert_true(cJSON_IsNull(ann));
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(md, "labels"), API_ROUTER_LEASE_LABEL)),
        "true");
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(md, "annotations"), API_FRONTS_ANNOTATION)),
        "team-a");
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity")), "me");
    assert_int_equal(
        (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds")),
        DURATION_MS / 1000);
    if (!rv) { /* a create names the Lease */
        assert_string_equal(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "apiVersion")),
            "coordination.k8s.io/v1");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "kind")),
                            "Lease");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name")),
                            "router-a");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "namespace")),
                            "ops");
    }
    cJSON_Delete(body);
}

/* The changed callback's call i named pool_key (NULL: the registration began). */
static void assert_change(const fx *f, int i, const char *pool_key)
{
    assert_true(i < f->nchanges);
    if (pool_key)
        assert_string_equal(f->changes[i], pool_key);
    else if (f->changes[i])
        fail_msg("changed call %d named %s, not NULL (the registration began)", i, f->changes[i]);
}

/* Starts f's registry and runs it to the create's answer (201, resourceVersion "1"). */
static void fx_register(fx *f)
{
    rt_registry_start(f->reg);
    fx_run_to(f, 1);
    assert_int_equal(f->codes[0], 201);
    assert_true(fx_until(f) > 0);
}

/* 1. The create, and the renewal after it. */
static void test_start_creates_the_lease(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "2"));

    uint64_t before = ev_now_ms();
    rt_registry_start(f->reg);
    uint64_t sent = ev_now_ms(); /* the create was sent by now */
    /* Before the answer: not registered, and /readyz says why. */
    assert_int_equal(fx_until(f), 0);
    assert_true(fx_unready_names_the_lease(f));
    assert_int_equal(f->nchanges, 0);

    fx_run_to(f, 1);
    assert_int_equal(f->codes[0], 201);
    assert_int_equal(f->s.nrequests, 1);
    assert_write(f, 0, POST_LEASE, NULL, NULL);
    uint64_t now = ev_now_ms();
    uint64_t until = rt_registry_until(f->reg, now);
    assert_true(until > now);
    assert_true(until <= sent + DURATION_MS);
    assert_true(until >= before + DURATION_MS);
    assert_true(fx_ready(f));
    /* The registration began: every pool may go on, on reads sent after the answer. */
    assert_int_equal(f->nchanges, 1);
    assert_change(f, 0, NULL);
    assert_true(rt_registry_reads_from(f->reg, "ns/p") >= f->answered_ms[0]);
    assert_false(rt_registry_blocks(f->reg, "ns/p", "m"));

    /* The renewal: a merge patch carrying the version the create answered; D from its send. */
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 200);
    assert_write(f, 1, PATCH_LEASE, "1", NULL);
    uint64_t renewed = fx_until(f);
    assert_true(renewed > until);
    assert_true(renewed <= f->answered_ms[1] + DURATION_MS);
    assert_true(fx_ready(f));

    fx_free(f);
}

/* 2. An acknowledgement whose write fails with 500 may have landed: its member stays blocked after
 * the withdrawal, until the withdrawal's write succeeds; the pool's reads count from then on. */
static void test_ack_of_unknown_outcome_blocks_until_a_write_succeeds(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, status_answer(500, "500 Internal Server Error", "InternalError"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "3"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "4"));
    fx_register(f);
    uint64_t began = rt_registry_reads_from(f->reg, "ns/q");

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_false(rt_registry_blocks(f->reg, "ns/p", "other"));
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 500);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_false(rt_registry_blocks(f->reg, "ns/p", "other"));
    assert_true(fx_until(f) > 0); /* a failed write does not end the registration */

    /* Withdrawn: written at once, but the 500's entry may stand until that write succeeds. */
    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", NULL), 0);
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_int_equal(rt_registry_reads_from(f->reg, "ns/p"), began);
    fx_run_to(f, 3);
    assert_int_equal(f->codes[2], 200);
    assert_write(f, 2, PATCH_LEASE, "1", NULL);
    assert_false(rt_registry_blocks(f->reg, "ns/p", "m"));
    uint64_t reads_from = rt_registry_reads_from(f->reg, "ns/p");
    assert_true(reads_from >= f->answered_ms[2]);
    assert_true(reads_from > began);
    assert_int_equal(rt_registry_reads_from(f->reg, "ns/q"), began); /* other pools: unchanged */

    /* The next write (the renewal) carries the version that success answered. */
    fx_run_to(f, 4);
    assert_write(f, 3, PATCH_LEASE, "3", NULL);
    assert_false(rt_registry_blocks(f->reg, "ns/p", "m"));

    fx_free(f);
}

/* 3. A withdrawal whose write fails leaves the committed entry standing (its member blocked, the
 * pool's reads not moved); the retry's success clears it. */
static void test_failed_withdrawal_keeps_the_member_blocked(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "2"));
    fx_reply(f, PATCH_LEASE, status_answer(500, "500 Internal Server Error", "InternalError"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "3"));
    fx_register(f);
    uint64_t began = rt_registry_reads_from(f->reg, "ns/q");

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    fx_run_to(f, 2);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_int_equal(f->nchanges, 1); /* an acknowledgement is no change */

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", NULL), 0);
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    fx_run_to(f, 3);
    assert_int_equal(f->codes[2], 500);
    assert_write(f, 2, PATCH_LEASE, "2", NULL);
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_int_equal(rt_registry_reads_from(f->reg, "ns/p"), began);
    assert_int_equal(f->nchanges, 1);

    /* The retry (after its backoff) succeeds: the entry is gone. */
    fx_run_to(f, 4);
    assert_int_equal(f->codes[3], 200);
    assert_write(f, 3, PATCH_LEASE, "2", NULL);
    assert_false(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_true(rt_registry_reads_from(f->reg, "ns/p") >= f->answered_ms[3]);
    assert_int_equal(f->nchanges, 2);
    assert_change(f, 1, "ns/p");

    fx_free(f);
}

/* Two writes of unknown outcome with different members: either may stand, so every member of the
 * pool is blocked until a write succeeds (the second failure is an answer cut off by a reset). */
static void test_two_unknown_writes_block_every_member(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, status_answer(503, "503 Service Unavailable", "ServiceUnavailable"));
    srv_reply *cut = fx_reply(f, PATCH_LEASE,
                              strdup("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     "Content-Length: 100\r\n\r\n{\"metadata\""));
    cut->then = SRV_RESET;
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "2"));
    fx_register(f);

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 503);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_false(rt_registry_blocks(f->reg, "ns/p", "x"));

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m2"), 0);
    fx_run_to(f, 3);
    assert_write(f, 2, PATCH_LEASE, "1", "ns/p=m2");
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m2"));
    assert_true(rt_registry_blocks(f->reg, "ns/p", "x"));
    assert_false(rt_registry_blocks(f->reg, "ns/q", "x"));

    /* The retry succeeds: only m2 stands (and is wanted). */
    fx_run_to(f, 4);
    assert_int_equal(f->codes[3], 200);
    assert_write(f, 3, PATCH_LEASE, "1", "ns/p=m2");
    assert_false(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_false(rt_registry_blocks(f->reg, "ns/p", "x"));
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m2"));
    /* m's entry may have stood until now: a withdrawal. */
    assert_true(rt_registry_reads_from(f->reg, "ns/p") >= f->answered_ms[3]);
    assert_int_equal(f->nchanges, 2);
    assert_change(f, 1, "ns/p");

    fx_free(f);
}

static bool fx_lapsed(void *ud)
{
    return fx_until(ud) == 0;
}

static bool fx_registered(void *ud)
{
    return fx_until(ud) > 0;
}

/* Renewals that fail until D has passed since the last success: the registration lapses (unready
 * names the Lease and why), and the next success begins a new one. */
static void test_failed_renewals_end_the_registration(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    /* More failures than fit in D with the shortest backoff (125 ms): they last until it lapsed. */
    size_t first = f->nr;
    while (f->nr < MAX_REPLIES)
        fx_reply(f, PATCH_LEASE, status_answer(500, "500 Internal Server Error", "InternalError"));
    fx_register(f);
    uint64_t began = rt_registry_reads_from(f->reg, "ns/q");

    test_loop_run_until(f->loop, fx_lapsed, f, DEADLINE_MS);
    char buf[1024];
    rt_registry_unready(f->reg, ev_now_ms(), buf, sizeof(buf));
    assert_non_null(strstr(buf, "Lease ops/router-a"));
    assert_non_null(strstr(buf, "scripted InternalError"));
    assert_int_equal(f->nchanges, 1);
    assert_true(f->answers >= 2);

    /* The API server is back: the next renewal succeeds and begins a new registration. */
    const char *ok = srv_own(&f->s, lease_answer("200 OK", "2"));
    for (size_t i = first; i < f->nr; i++)
        if (!f->r[i].used)
            f->r[i].pieces[0] = ok;
    test_loop_run_until(f->loop, fx_registered, f, DEADLINE_MS);
    int last = f->answers - 1;
    assert_int_equal(f->codes[last], 200);
    assert_write(f, last, PATCH_LEASE, "1", NULL);
    assert_true(fx_ready(f));
    assert_int_equal(f->nchanges, 2);
    assert_change(f, 1, NULL);
    assert_true(rt_registry_reads_from(f->reg, "ns/q") >= f->answered_ms[last]);
    assert_true(rt_registry_reads_from(f->reg, "ns/q") > began);

    fx_free(f);
}

/* 4. A conflict: the Lease is read and written again with the version read. */
static void test_conflict_reads_and_writes_again(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, status_answer(409, "409 Conflict", "Conflict"));
    fx_reply(f, GET_LEASE, lease_answer("200 OK", "7"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "8"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "9"));
    fx_register(f);
    uint64_t registered_until = fx_until(f);
    uint64_t began = rt_registry_reads_from(f->reg, "ns/q");

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 409);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));

    fx_run_to(f, 3);
    assert_int_equal(f->codes[2], 200);
    assert_request(f, 2, GET_LEASE);
    /* A read is no write: the registration is not extended by it, nothing is committed. */
    assert_int_equal(fx_until(f), registered_until);
    assert_int_equal(f->nchanges, 1);
    fx_run_to(f, 4);
    assert_int_equal(f->codes[3], 200);
    assert_write(f, 3, PATCH_LEASE, "7", "ns/p=m");
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_true(fx_until(f) > registered_until);
    /* m was acknowledged throughout: no withdrawal, the pool's reads count as before. */
    assert_int_equal(f->nchanges, 1);
    assert_int_equal(rt_registry_reads_from(f->reg, "ns/p"), began);

    fx_run_to(f, 5); /* the renewal: the version the last write answered */
    assert_write(f, 4, PATCH_LEASE, "8", "ns/p=m");

    fx_free(f);
}

/* 5. The Lease gone (404 to a patch): the registration ends at once, before the create that follows
 * is answered; that create begins a new one. */
static void test_lease_gone_ends_the_registration(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, status_answer(404, "404 Not Found", "NotFound"));
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "5"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "6"));
    fx_register(f);
    uint64_t began = rt_registry_reads_from(f->reg, "ns/q");

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 404);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_int_equal(f->s.nrequests, 2); /* the create again: not even received yet */
    assert_int_equal(fx_until(f), 0);
    assert_true(fx_unready_names_the_lease(f));
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));
    assert_int_equal(f->nchanges, 1);

    fx_run_to(f, 3);
    assert_int_equal(f->codes[2], 201);
    assert_write(f, 2, POST_LEASE, NULL, "ns/p=m");
    assert_true(fx_until(f) > 0);
    assert_true(fx_ready(f));
    assert_int_equal(f->nchanges, 2);
    assert_change(f, 1, NULL);
    uint64_t began_again = rt_registry_reads_from(f->reg, "ns/q");
    assert_true(began_again >= f->answered_ms[2]);
    assert_true(began_again > began);
    assert_true(rt_registry_reads_from(f->reg, "ns/p") >= began_again);
    assert_true(rt_registry_blocks(f->reg, "ns/p", "m"));

    fx_run_to(f, 4); /* then patches again, with the new Lease's version */
    assert_write(f, 3, PATCH_LEASE, "5", "ns/p=m");

    fx_free(f);
}

/* 6. changed: NULL when the registration begins, the pool's key when its withdrawal is written
 * (not when an acknowledgement is). */
static void test_changed_names_the_pool_withdrawn(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "2"));
    fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "3"));
    rt_registry_start(f->reg);
    assert_int_equal(f->nchanges, 0);
    fx_run_to(f, 1);
    assert_int_equal(f->nchanges, 1);
    assert_change(f, 0, NULL);
    assert_true(f->changed_ms[0] >= f->answered_ms[0]);

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0); /* as it is: nothing new */
    fx_run_to(f, 2);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");
    assert_int_equal(f->nchanges, 1);

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", NULL), 0);
    assert_int_equal(f->nchanges, 1); /* not before the write succeeded */
    fx_run_to(f, 3);
    assert_write(f, 2, PATCH_LEASE, "2", NULL);
    assert_int_equal(f->nchanges, 2);
    assert_change(f, 1, "ns/p");
    assert_true(f->changed_ms[1] >= f->answered_ms[2]);
    assert_true(rt_registry_reads_from(f->reg, "ns/p") >= f->answered_ms[2]);

    /* A name longer than the API allows is refused, and nothing changes. */
    char longname[600];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(rt_registry_ack(f->reg, "ns", longname, "m"), -EINVAL);

    fx_free(f);
}

/* 7. Release deletes the Lease and calls done once the API server answered. */
static void test_release_deletes_the_lease(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, DELETE_LEASE,
             srv_http("200 OK", "",
                      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                      "\"Success\"}"));
    fx_register(f);

    rt_registry_release(f->reg, 5000, fx_released, f);
    assert_int_equal(fx_until(f), 0); /* forwards nothing more from now */
    assert_true(fx_unready_names_the_lease(f));
    assert_int_equal(f->released, 0);
    fx_run_to(f, 2);
    assert_int_equal(f->codes[1], 200);
    assert_request(f, 1, DELETE_LEASE);
    assert_int_equal(f->released, 1);

    fx_free(f);
}

/* Release gives up after its timeout when the API server does not answer (the delete is sent with
 * the same timeout: either ends the wait, done runs once); then freed. */
static void test_release_gives_up_after_its_timeout(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    fx_reply(f, DELETE_LEASE, lease_answer("200 OK", "1"))->delay_ms = HELD_MS;
    fx_register(f);

    rt_registry_release(f->reg, 500, fx_released, f);
    test_loop_run_until(f->loop, fx_is_released, f, DEADLINE_MS);
    /* done ran once, whichever ended the wait: the timer or the delete's own timeout. */
    assert_int_equal(f->released, 1);
    assert_request(f, 1, DELETE_LEASE);

    fx_free(f);
}

/* Freed with a write in flight (its answer held back): nothing leaks, nothing runs after. */
static void test_free_with_a_write_in_flight(void **state)
{
    (void)state;
    fx *f = fx_new();
    fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    srv_reply *held = fx_reply(f, PATCH_LEASE, lease_answer("200 OK", "2"));
    held->delay_ms = HELD_MS;
    held->stop = true;
    fx_register(f);

    assert_int_equal(rt_registry_ack(f->reg, "ns", "p", "m"), 0);
    test_loop_run(f->loop, DEADLINE_MS); /* until the patch has come in */
    assert_int_equal(f->s.nrequests, 2);
    assert_write(f, 1, PATCH_LEASE, "1", "ns/p=m");

    fx_free(f);
}

/* Released with the create in flight: the Lease is deleted by name all the same; then freed. */
static void test_release_before_the_create_was_answered(void **state)
{
    (void)state;
    fx *f = fx_new();
    srv_reply *held = fx_reply(f, POST_LEASE, lease_answer("201 Created", "1"));
    held->delay_ms = HELD_MS;
    held->stop = true;
    fx_reply(f, DELETE_LEASE,
             srv_http("404 Not Found", "",
                      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                      "\"reason\":\"NotFound\",\"code\":404}"));
    rt_registry_start(f->reg);
    test_loop_run(f->loop, DEADLINE_MS); /* until the create has come in */
    assert_int_equal(f->s.nrequests, 1);

    /* The create may land: the Lease is deleted by name all the same (a 404 is as good). */
    rt_registry_release(f->reg, 5000, fx_released, f);
    assert_int_equal(fx_until(f), 0);
    test_loop_run_until(f->loop, fx_is_released, f, DEADLINE_MS);
    assert_int_equal(f->released, 1);
    assert_request(f, 1, DELETE_LEASE);

    fx_free(f);
}

TEST_MAIN(cmocka_unit_test(test_start_creates_the_lease),
          cmocka_unit_test(test_ack_of_unknown_outcome_blocks_until_a_write_succeeds),
          cmocka_unit_test(test_failed_withdrawal_keeps_the_member_blocked),
          cmocka_unit_test(test_two_unknown_writes_block_every_member),
          cmocka_unit_test(test_failed_renewals_end_the_registration),
          cmocka_unit_test(test_conflict_reads_and_writes_again),
          cmocka_unit_test(test_lease_gone_ends_the_registration),
          cmocka_unit_test(test_changed_names_the_pool_withdrawn),
          cmocka_unit_test(test_release_deletes_the_lease),
          cmocka_unit_test(test_release_gives_up_after_its_timeout),
          cmocka_unit_test(test_free_with_a_write_in_flight),
          cmocka_unit_test(test_release_before_the_create_was_answered))

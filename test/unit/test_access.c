/* Tests of kube_access: the Authorization header parser, the verdict cache (expiry, bound,
 * eviction), and the reviews against a fake API server (an httpd on the same loop) that counts
 * TokenReviews and SubjectAccessReviews: concurrent checks of one token share one review, verdicts
 * are cached, a failure is 503 and is not cached. Cancelled checks, against a scripted API server
 * that answers late: a cancelled check never hears its verdict, a shared review goes on for the
 * others, and a review nobody waits on is aborted (its connection closes before its answer). */
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

#include "test_main.h"

#include "scripted_http.h"

#include "httpd/httpd.h"
#include "kube/access.h"
#include "kube/access_cache.h"
#include "kube/client.h"
#include "loop/ev.h"

static void test_bearer(void **state)
{
    (void)state;
    static const struct {
        const char *in, *token;
    } good[] = {
        {"Bearer abc", "abc"},
        {"bearer abc", "abc"},
        {"BEARER\ta.b-c_d~e+f/g=", "a.b-c_d~e+f/g="},
        {"Bearer   abc  ", "abc"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const char *tok = NULL;
        size_t len = 0;
        assert_int_equal(kube_access_bearer(good[i].in, &tok, &len), 0);
        assert_int_equal(len, strlen(good[i].token));
        assert_memory_equal(tok, good[i].token, len);
    }
    static const char *const bad[] = {
        "",           "Bearer",       "Bearer ",     "Bearer  \t ", "Bearerabc",   "Basic YWJj",
        "Bearer a b", "Bearer a\x01", "Bearer \x7f", "Token abc",   " Bearer abc", "Bear abc",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *tok = NULL;
        size_t len = 0;
        if (kube_access_bearer(bad[i], &tok, &len) != -EINVAL)
            fail_msg("'%s' was taken for a bearer token", bad[i]);
    }
    const char *tok;
    size_t len;
    assert_int_equal(kube_access_bearer(NULL, &tok, &len), -EINVAL);
    /* A token longer than any real one (16 KiB) is refused, not copied. */
    char *big = malloc(20000);
    assert_non_null(big);
    memcpy(big, "Bearer ", 7);
    memset(big + 7, 'x', 20000 - 8);
    big[20000 - 1] = 0;
    assert_int_equal(kube_access_bearer(big, &tok, &len), -EINVAL);
    free(big);
}

static void key_of(const char *token, unsigned char key[KUBE_ACCESS_KEY_LEN])
{
    kube_access_cache_key(token, strlen(token), key);
}

static void test_cache_expiry(void **state)
{
    (void)state;
    kube_access_cache *c = kube_access_cache_new(4, 10000);
    assert_non_null(c);
    unsigned char a[KUBE_ACCESS_KEY_LEN], b[KUBE_ACCESS_KEY_LEN];
    key_of("token-a", a);
    key_of("token-b", b);
    assert_memory_not_equal(a, b, KUBE_ACCESS_KEY_LEN);
    int v = 0;
    assert_false(kube_access_cache_get(c, a, 1000, &v));
    kube_access_cache_put(c, a, 200, 1000);
    assert_true(kube_access_cache_get(c, a, 1000, &v));
    assert_int_equal(v, 200);
    assert_false(kube_access_cache_get(c, b, 1000, &v));
    assert_true(kube_access_cache_get(c, a, 10999, &v));  /* just inside the TTL */
    assert_false(kube_access_cache_get(c, a, 11000, &v)); /* expired */
    assert_int_equal(kube_access_cache_live(c, 11000), 0);
    /* A new verdict for the same key replaces the old one and restarts its clock. */
    kube_access_cache_put(c, b, 403, 20000);
    kube_access_cache_put(c, b, 200, 25000);
    assert_true(kube_access_cache_get(c, b, 34999, &v));
    assert_int_equal(v, 200);
    assert_int_equal(kube_access_cache_live(c, 25000), 1);
    kube_access_cache_free(c);
}

static void test_cache_bound(void **state)
{
    (void)state;
    kube_access_cache *c = kube_access_cache_new(3, 10000);
    assert_non_null(c);
    unsigned char k[5][KUBE_ACCESS_KEY_LEN];
    for (int i = 0; i < 5; i++) {
        char t[16];
        snprintf(t, sizeof(t), "token-%d", i);
        key_of(t, k[i]);
    }
    int v;
    kube_access_cache_put(c, k[0], 200, 0);
    kube_access_cache_put(c, k[1], 401, 1);
    kube_access_cache_put(c, k[2], 403, 2);
    assert_int_equal(kube_access_cache_live(c, 2), 3);
    /* Full: the oldest (k0) makes room, whatever the order of lookups. */
    assert_true(kube_access_cache_get(c, k[0], 3, &v));
    kube_access_cache_put(c, k[3], 200, 3);
    assert_int_equal(kube_access_cache_live(c, 3), 3);
    assert_false(kube_access_cache_get(c, k[0], 3, &v));
    assert_true(kube_access_cache_get(c, k[1], 3, &v));
    assert_int_equal(v, 401);
    assert_true(kube_access_cache_get(c, k[2], 3, &v));
    assert_int_equal(v, 403);
    assert_true(kube_access_cache_get(c, k[3], 3, &v));
    /* An expired entry is reused before a live one is evicted: k1 expires at 10001. */
    kube_access_cache_put(c, k[2], 403, 5000); /* k2 refreshed: now the newest */
    kube_access_cache_put(c, k[4], 200, 10001);
    assert_false(kube_access_cache_get(c, k[1], 10001, &v));
    assert_true(kube_access_cache_get(c, k[2], 10001, &v));
    assert_true(kube_access_cache_get(c, k[3], 10001, &v));
    assert_true(kube_access_cache_get(c, k[4], 10001, &v));
    assert_null(kube_access_cache_new(0, 10000));
    kube_access_cache_free(c);
}

/* ---- reviews against a fake API server ---- */

typedef enum { FAKE_ALLOW, FAKE_DENY, FAKE_UNAUTHENTICATED, FAKE_FAIL } fake_mode;

typedef struct fake {
    fake_mode mode;
    int token_reviews, access_reviews, other;
} fake;

static char *fake_dup(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

static void fake_answer(void *ud, const char *method, const char *path, httpd_reply *out)
{
    fake *f = ud;
    const char *body;
    if (strcmp(method, "POST") == 0 &&
        strcmp(path, "/apis/authentication.k8s.io/v1/tokenreviews") == 0) {
        f->token_reviews++;
        body = f->mode == FAKE_UNAUTHENTICATED
                   ? "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":false}}"
                   : "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,\"user\":{"
                     "\"username\":\"system:serviceaccount:mon:prom\",\"uid\":\"u1\","
                     "\"groups\":[\"system:serviceaccounts\"]}}}";
    } else if (strcmp(method, "POST") == 0 &&
               strcmp(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews") == 0) {
        f->access_reviews++;
        body = f->mode == FAKE_DENY ? "{\"status\":{\"allowed\":false}}"
                                    : "{\"status\":{\"allowed\":true}}";
    } else {
        f->other++;
        body = "{}";
    }
    if (f->mode == FAKE_FAIL) {
        *out = (httpd_reply){.code = 500,
                             .body = fake_dup("{\"kind\":\"Status\",\"message\":"
                                              "\"etcd is gone\"}")};
    } else {
        *out =
            (httpd_reply){.code = 201, .content_type = "application/json", .body = fake_dup(body)};
    }
    out->len = strlen(out->body);
}

typedef struct check {
    ev_loop *loop;
    int done, codes[32];
    int want; /* stop the loop once this many have answered */
} check;

static void check_done(void *ud, int code, const char *why)
{
    check *c = ud;
    assert_non_null(why);
    c->codes[c->done++] = code;
    if (c->done == c->want)
        ev_stop(c->loop);
}

static void check_guard(ev_loop *loop, void *ud)
{
    (void)ud;
    ev_stop(loop);
}

/* Starts n checks of one header, runs the loop until all have answered (or 10 s passed). */
static void check_run(check *c, kube_access *a, const char *header, int n)
{
    *c = (check){.loop = c->loop, .want = n};
    for (int i = 0; i < n; i++)
        kube_access_check(a, header, check_done, c);
    if (c->done < n) {
        uint64_t guard = ev_timer_add(c->loop, 10000, check_guard, NULL);
        ev_run(c->loop);
        ev_timer_cancel(c->loop, guard);
    }
    assert_int_equal(c->done, n);
}

static void test_reviews(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    fake f = {0};
    char err[200];
    httpd *fake_srv = httpd_start(loop, "127.0.0.1:0", fake_answer, &f, err, sizeof(err));
    assert_non_null(fake_srv);
    kube_config cfg = {0};
    kube_error kerr = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", httpd_port(fake_srv)) > 0);
    kube_client *client = kube_client_new(loop, &cfg, &kerr);
    kube_config_clear(&cfg);
    assert_non_null(client);
    kube_access *a =
        kube_access_new(client, &(kube_access_opts){.path = "/metrics", .verb = "get"});
    assert_non_null(a);
    check c = {.loop = loop};

    /* Ten concurrent checks of one token: one TokenReview, one SubjectAccessReview, ten 200s. */
    check_run(&c, a, "Bearer reader", 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(c.codes[i], 200);
    assert_int_equal(f.token_reviews, 1);
    assert_int_equal(f.access_reviews, 1);
    /* Cached: answered inside the call, no request. */
    check_run(&c, a, "Bearer reader", 3);
    assert_int_equal(f.token_reviews, 1);

    /* A step: the fake's mode, a header checked n times, the code each check gets, and the
     * reviews the fake has had by then (-1: not looked at). */
    static const struct {
        fake_mode mode;
        const char *header;
        int n, code, token_reviews, access_reviews;
    } steps[] = {
        /* Not allowed: 403 after both reviews; unauthenticated: 401 after the TokenReview alone. */
        {FAKE_DENY, "Bearer intruder", 2, 403, 2, 2},
        {FAKE_UNAUTHENTICATED, "Bearer made-up", 1, 401, 3, 2},
        /* No header, or not a bearer token: 401 with no request at all. */
        {FAKE_UNAUTHENTICATED, NULL, 1, 401, -1, -1},
        {FAKE_UNAUTHENTICATED, "Basic YTpi", 1, 401, 3, -1},
        /* The API server failing: 503, not cached, so the token passes once it answers again. */
        {FAKE_FAIL, "Bearer later", 2, 503, 4, -1},
        {FAKE_ALLOW, "Bearer later", 1, 200, 5, -1},
    };
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        f.mode = steps[s].mode;
        check_run(&c, a, steps[s].header, steps[s].n);
        for (int i = 0; i < steps[s].n; i++)
            assert_int_equal(c.codes[i], steps[s].code);
        if (steps[s].token_reviews >= 0)
            assert_int_equal(f.token_reviews, steps[s].token_reviews);
        if (steps[s].access_reviews >= 0)
            assert_int_equal(f.access_reviews, steps[s].access_reviews);
    }
    assert_int_equal(f.other, 0);

    /* Freed with a review in flight: its callback never runs, nothing leaks. */
    c = (check){.loop = loop, .want = 1};
    kube_access_check(a, "Bearer pending", check_done, &c);
    kube_access_free(a);
    assert_int_equal(c.done, 0);

    kube_client_free(client);
    httpd_stop(fake_srv);
    ev_free(loop);
}

/* ---- cancelled checks ---- */

typedef struct waiter {
    check *c;
    kube_access_waiter **cancel_other; /* cancelled from inside this one's done */
} waiter;

static void waiter_done(void *ud, int code, const char *why)
{
    waiter *w = ud;
    if (w->cancel_other)
        kube_access_cancel(*w->cancel_other);
    check_done(w->c, code, why);
}

typedef struct conn_gone {
    srv *api;
    const srv_reply *reply;
} conn_gone;

/* Polls until no connection of the scripted server carries reply (its client closed it). */
static void conn_gone_poll(ev_loop *loop, void *ud)
{
    conn_gone *g = ud;
    for (int i = 0; i < SRV_MAX; i++)
        if (g->api->conns[i].fd >= 0 && g->api->conns[i].reply == g->reply) {
            assert_true(ev_timer_add(loop, 5, conn_gone_poll, g) > 0);
            return;
        }
    ev_stop(loop);
}

static void test_cancel(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    static const char tr[] = "POST /apis/authentication.k8s.io/v1/tokenreviews";
    srv_reply replies[] = {
        {.match = tr, .delay_ms = 100},                 /* shared: one waiter cancelled */
        {.match = tr, .delay_ms = 10000, .stop = true}, /* nobody waits: aborted */
        {.match = tr},                                  /* that token again: a new review */
        {.match = tr, .delay_ms = 100},                 /* a done cancels the other waiter */
    };
    srv api;
    srv_start(&api, loop, replies, 4);
    const char *no =
        srv_own(&api, srv_http("201 Created", "", "{\"status\":{\"authenticated\":false}}"));
    for (int i = 0; i < 4; i++)
        replies[i].pieces[0] = no;
    kube_config cfg = {0};
    kube_error kerr = {0};
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", api.port) > 0);
    kube_client *kc = kube_client_new(loop, &cfg, &kerr);
    kube_config_clear(&cfg);
    assert_non_null(kc);
    kube_access *a = kube_access_new(kc, &(kube_access_opts){.path = "/metrics", .verb = "get"});
    assert_non_null(a);
    check c = {.loop = loop, .want = 1};
    kube_access_cancel(NULL);

    /* Two checks share a review; the first is cancelled: only the second hears the verdict. */
    kube_access_waiter *w1 = kube_access_check(a, "Bearer shared", check_done, &c);
    kube_access_waiter *w2 = kube_access_check(a, "Bearer shared", check_done, &c);
    assert_true(w1 && w2);
    kube_access_cancel(w1);
    ev_run(loop);
    assert_int_equal(c.done, 1);
    assert_int_equal(c.codes[0], 401);
    assert_int_equal(api.nrequests, 1);

    /* Both checks of a review cancelled: its call is aborted before the API server answers. */
    c = (check){.loop = loop, .want = 1};
    w1 = kube_access_check(a, "Bearer gone", check_done, &c);
    w2 = kube_access_check(a, "Bearer gone", check_done, &c);
    assert_true(w1 && w2);
    ev_run(loop); /* until the TokenReview is in */
    assert_int_equal(api.nrequests, 2);
    kube_access_cancel(w2);
    kube_access_cancel(w1);
    conn_gone g = {&api, &replies[1]};
    assert_true(ev_timer_add(loop, 5, conn_gone_poll, &g) > 0);
    ev_run(loop);
    assert_int_equal(c.done, 0);
    /* Nothing was cached and nothing waits: that token is reviewed again. */
    assert_non_null(kube_access_check(a, "Bearer gone", check_done, &c));
    ev_run(loop);
    assert_int_equal(c.done, 1);
    assert_int_equal(c.codes[0], 401);
    assert_int_equal(api.nrequests, 3);

    /* A done may cancel another check of its review: that one never hears the verdict. */
    c = (check){.loop = loop, .want = 1};
    kube_access_waiter *other = NULL;
    waiter first = {.c = &c, .cancel_other = &other}, second = {.c = &c};
    assert_non_null(kube_access_check(a, "Bearer pair", waiter_done, &first));
    assert_non_null(other = kube_access_check(a, "Bearer pair", waiter_done, &second));
    ev_run(loop);
    assert_int_equal(c.done, 1);
    assert_int_equal(api.nrequests, 4);

    kube_access_free(a);
    kube_client_free(kc);
    srv_stop(&api);
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_bearer), cmocka_unit_test(test_cache_expiry),
          cmocka_unit_test(test_cache_bound), cmocka_unit_test(test_reviews),
          cmocka_unit_test(test_cancel))

/* Unit tests for the informer: its pure parts (the relist diff, what a 410 relist delivers; the
 * reflector-style backoff; the watch timeout; what a caller waiting for a sync is told), and its
 * list/watch machine against a scripted HTTP responder for what a real API server will not do on
 * demand: a watch resumed from the last resourceVersion after a normal end and after a cut, a
 * relist on 410 (as an ERROR event and as an answer), a 429 with Retry-After on a watch. The
 * same machine runs end to end against a real kube-apiserver in the e2e suite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include "loop_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer/informer.h"
#include "kube/client.h"
#include "scripted_http.h"
#include "util/rng.h"

static cJSON *obj_new(const char *ns, const char *name, const char *rv)
{
    char buf[256];
    if (ns)
        snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
                 ns, name, rv);
    else
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\"}}",
                 name, rv);
    cJSON *o = cJSON_Parse(buf);
    assert_non_null(o);
    return o;
}

/* Puts the object ns/name at resourceVersion rv into s. */
static void put(store *s, const char *ns, const char *name, const char *rv)
{
    assert_int_equal(store_put(s, obj_new(ns, name, rv), NULL), 0);
}

static const char *rv_of(const cJSON *o)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion"));
}

/* A list's items as the informer holds them once decoded (items consumed; nameless ones left
 * out, as the informer leaves them out). */
typedef struct test_list {
    store_item *v;
    size_t n;
} test_list;

static test_list list_of(const store *s, cJSON *items)
{
    test_list l = {calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof(store_item)), 0};
    assert_non_null(l.v);
    cJSON *item;
    while (items && (item = cJSON_DetachItemFromArray(items, 0)))
        if (store_decode(s, item, &l.v[l.n]) == 0)
            l.n++;
    cJSON_Delete(items);
    return l;
}

static void list_free(const store *s, test_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        store_item_release(s, &l->v[i]);
    free(l->v);
}

static const informer_change *find(const informer_change *ch, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ch[i].key, key) == 0)
            return &ch[i];
    return NULL;
}

/* A relist's diff against s: the list as decoded (from items, consumed) and its changes. */
typedef struct t_diff {
    store *s;
    test_list l;
    informer_change *ch;
    size_t n;
} t_diff;

static t_diff diff_of(store *s, cJSON *items)
{
    t_diff d = {.s = s, .l = list_of(s, items)};
    assert_int_equal(informer_diff(s, d.l.v, d.l.n, &d.ch, &d.n), 0);
    return d;
}

/* Frees d, and its store. */
static void diff_free(t_diff *d)
{
    informer_changes_free(d->ch, d->n);
    list_free(d->s, &d->l);
    store_free(d->s);
}

static void test_diff_first_list_is_all_adds(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    cJSON *items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, obj_new("ns", "a", "1"));
    cJSON_AddItemToArray(items, obj_new(NULL, "node", "2"));
    t_diff d = diff_of(s, items);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.ch[0].kind, INFORMER_ADDED);
    assert_string_equal(d.ch[0].key, "ns/a");
    assert_ptr_equal(d.ch[0].rec, d.l.v[0].rec);
    assert_int_equal(d.ch[1].kind, INFORMER_ADDED);
    assert_string_equal(d.ch[1].key, "node");
    diff_free(&d);
}

static void test_diff_relist(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    put(s, "ns", "same", "10");
    put(s, "ns", "changed", "11");
    put(s, "ns", "gone", "12");
    put(s, "other", "gone", "13");

    cJSON *items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, obj_new("ns", "changed", "20"));
    cJSON_AddItemToArray(items, obj_new("ns", "same", "10"));
    cJSON_AddItemToArray(items, obj_new("ns", "new", "21"));
    cJSON_AddItemToArray(items, obj_new("ns", "changed", "99")); /* duplicate: first wins */
    cJSON_AddItemToArray(items, cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}"));

    t_diff d = diff_of(s, items);
    assert_int_equal(d.n, 4);
    /* Listed order first, deletions after. */
    assert_int_equal(d.ch[0].kind, INFORMER_UPDATED);
    assert_string_equal(d.ch[0].key, "ns/changed");
    assert_string_equal(rv_of(d.ch[0].rec), "20");
    assert_int_equal(d.ch[1].kind, INFORMER_ADDED);
    assert_string_equal(d.ch[1].key, "ns/new");
    assert_int_equal(d.ch[2].kind, INFORMER_DELETED);
    assert_int_equal(d.ch[3].kind, INFORMER_DELETED);
    const informer_change *g1 = find(d.ch, d.n, "ns/gone"), *g2 = find(d.ch, d.n, "other/gone");
    assert_non_null(g1);
    assert_non_null(g2);
    /* A deletion carries the cached object. */
    assert_ptr_equal(g1->rec, store_get(s, "ns/gone"));
    assert_null(find(d.ch, d.n, "ns/same"));
    diff_free(&d);
}

static void test_diff_empty_list_deletes_all(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    put(s, "ns", "a", "1");
    put(s, "ns", "b", "2");
    informer_change *ch;
    size_t n;
    /* An empty list (no items, or "items": []). */
    assert_int_equal(informer_diff(s, NULL, 0, &ch, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ch[0].kind, INFORMER_DELETED);
    assert_int_equal(ch[1].kind, INFORMER_DELETED);
    informer_changes_free(ch, n);
    t_diff d = diff_of(s, cJSON_CreateArray());
    assert_int_equal(d.n, 2);
    diff_free(&d);
}

static void test_diff_missing_version_is_an_update(void **state)
{
    (void)state;
    store *s = store_new(NULL);
    assert_int_equal(store_put(s, cJSON_Parse("{\"metadata\":{\"name\":\"a\"}}"), NULL), 0);
    cJSON *items = cJSON_Parse("[{\"metadata\":{\"name\":\"a\"}}]");
    t_diff d = diff_of(s, items);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ch[0].kind, INFORMER_UPDATED);
    diff_free(&d);
}

static void test_diff_large(void **state)
{
    (void)state;
    enum { N = 5000 };
    store *s = store_new(NULL);
    cJSON *items = cJSON_CreateArray();
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "o%d", i);
        put(s, "ns", name, "1");
        /* Keep the even ones, half of them changed; drop the odd ones; add as many new. */
        if (i % 2 == 0)
            cJSON_AddItemToArray(items, obj_new("ns", name, i % 4 ? "2" : "1"));
        snprintf(name, sizeof(name), "n%d", i);
        if (i % 2)
            cJSON_AddItemToArray(items, obj_new("ns", name, "1"));
    }
    t_diff d = diff_of(s, items);
    size_t count[3] = {0};
    for (size_t i = 0; i < d.n; i++)
        count[d.ch[i].kind]++;
    assert_int_equal(count[INFORMER_ADDED], N / 2);
    assert_int_equal(count[INFORMER_UPDATED], N / 4);
    assert_int_equal(count[INFORMER_DELETED], N / 2);
    diff_free(&d);
}

static void test_backoff(void **state)
{
    (void)state;
    informer_backoff b;
    informer_backoff_init(&b);
    uint64_t now = 1000000;
    /* rnd = 0: half the step, doubling from 0.8 s to half the 60 s cap. */
    const uint64_t want[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(informer_backoff_next(&b, now, 0), want[i]);
        now += 1000;
    }
    /* Jitter stays within the step, which stays within the cap. */
    assert_true(informer_backoff_next(&b, now, UINT64_MAX) <= 60000);
    assert_true(informer_backoff_next(&b, now, 15000) == 45000);
    /* Two healthy minutes reset it; less does not. */
    now += 2 * 60 * 1000 - 1;
    assert_int_equal(informer_backoff_next(&b, now, 0), 30000);
    now += 2 * 60 * 1000;
    assert_int_equal(informer_backoff_next(&b, now, 0), 800);
    assert_int_equal(informer_backoff_next(&b, now, 800), 2400);
}

static void test_watch_timeout(void **state)
{
    (void)state;
    assert_int_equal(informer_watch_timeout_s(0.0), 300);
    assert_int_equal(informer_watch_timeout_s(0.5), 450);
    assert_int_equal(informer_watch_timeout_s(0.9999999), 600);
    for (double r = 0; r < 1.0; r += 0.01) {
        long t = informer_watch_timeout_s(r);
        assert_true(t >= 300 && t <= 600);
    }
}

/* Names for people, and what is waited for before a first list (the last error is tested end to
 * end: a list of a resource whose CRD is missing). No informer is started, so no client is needed.
 */
static void test_names_and_waiting(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    informer_config crd = {
        .group = "inference.llmkube.dev", .version = "v1alpha1", .resource = "inferenceservices"};
    informer_config core = {.group = "", .version = "v1", .resource = "pods"};
    informer *a = informer_new(loop, NULL, &crd, NULL), *b = informer_new(loop, NULL, &core, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(informer_name(a), "inferenceservices.inference.llmkube.dev");
    assert_string_equal(informer_name(b), "pods");
    assert_null(informer_last_error(a));

    const informer *const both[] = {a, b};
    char buf[128];
    informer_waiting(both, 2, buf, sizeof(buf));
    assert_string_equal(buf, "the first list of inferenceservices.inference.llmkube.dev; pods");
    informer_waiting(both, 0, buf, sizeof(buf));
    assert_string_equal(buf, "");
    char small[10];
    informer_waiting(both, 2, small, sizeof(small)); /* cut, never overrun */
    assert_string_equal(small, "the first");

    informer_free(a);
    informer_free(b);
    ev_free(loop);
}

/* ---- the list/watch machine against the scripted responder ---- */

typedef struct ti {
    ev_loop *loop;
    srv s;              /* ti_serve's */
    srv_reply reply[6]; /* what s answers from */
    kube_client *client;
    informer *inf;
    int adds, updates, deletes, listed;
    int in_list;          /* changes delivered while a list was being applied */
    bool listing_at_done; /* informer_listing() inside on_listed */
    int nerrors;
    char errors[8][256];
    long error_codes[8];
} ti;

static void ti_add(void *ud, const void *o)
{
    (void)o;
    ti *t = ud;
    t->adds++;
    t->in_list += informer_listing(t->inf);
}
static void ti_update(void *ud, const void *a, const void *b)
{
    (void)a;
    (void)b;
    ti *t = ud;
    t->updates++;
    t->in_list += informer_listing(t->inf);
}
static void ti_delete(void *ud, const void *o)
{
    (void)o;
    ti *t = ud;
    t->deletes++;
    t->in_list += informer_listing(t->inf);
}
static void ti_listed(void *ud)
{
    ti *t = ud;
    t->listed++;
    t->listing_at_done |= informer_listing(t->inf);
}
static void ti_error(void *ud, const kube_error *err)
{
    ti *t = ud;
    assert_true(t->nerrors < 8);
    snprintf(t->errors[t->nerrors], sizeof(t->errors[0]), "%s", err->message);
    t->error_codes[t->nerrors++] = err->http_code;
}

/* A new loop with t->s answering from t->reply, one a request line's substring of match (NULL
 * ends); each reply's pieces are set afterwards (ti_piece). The loop will stop once every reply was
 * asked for. */
static void ti_serve(ti *t, const char *const *match)
{
    t->loop = ev_new();
    assert_non_null(t->loop);
    int n = 0;
    for (; match[n]; n++) {
        assert_true(n < (int)(sizeof(t->reply) / sizeof(*t->reply)));
        t->reply[n] = (srv_reply){.match = match[n]};
    }
    srv_start(&t->s, t->loop, t->reply, (size_t)n);
    t->s.stop_at = n;
}

/* Piece j of reply i: str, malloc'd, freed with t->s. */
static void ti_piece(ti *t, int i, int j, char *str)
{
    t->reply[i].pieces[j] = srv_own(&t->s, str);
}

/* An informer of pods (whole JSON records) through a client of t->s; runs until t->s has seen
 * the requests it waits for (stop_at). */
static void ti_run(ti *t)
{
    kube_config cfg = {0};
    kube_error err = {0};
    ev_loop *loop = t->loop;
    assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", t->s.port) > 0);
    t->client = kube_client_new(loop, &cfg, &err);
    kube_config_clear(&cfg);
    assert_non_null(t->client);
    informer_config ic = {.group = "", .version = "v1", .resource = "pods"};
    util_rng_seed(42);
    informer_handlers h = {.on_add = ti_add,
                           .on_update = ti_update,
                           .on_delete = ti_delete,
                           .on_error = ti_error,
                           .on_listed = ti_listed,
                           .ud = t};
    t->inf = informer_new(loop, t->client, &ic, &h);
    assert_non_null(t->inf);
    assert_int_equal(informer_start(t->inf), 0);
    test_loop_run(t->loop, 20000);
}

static void ti_finish(ti *t)
{
    informer_free(t->inf);
    kube_client_free(t->client);
    srv_stop(&t->s);
    ev_free(t->loop);
}

/* A pod list at resourceVersion rv with the named pods (resourceVersion 1 each). */
static char *ti_list(const char *rv, const char *names)
{
    char items[512] = "";
    char copy[64];
    snprintf(copy, sizeof(copy), "%s", names);
    for (char *save = NULL, *n = strtok_r(copy, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
        size_t len = strlen(items);
        snprintf(items + len, sizeof(items) - len,
                 "%s{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"resourceVersion\":"
                 "\"1\"}}",
                 len ? "," : "", n);
    }
    char *body;
    assert_true(asprintf(&body,
                         "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                         "\"resourceVersion\":\"%s\"},\"items\":[%s]}",
                         rv, items) > 0);
    char *http = srv_http("200 OK", "", body);
    free(body);
    return http;
}

static const char ti_watch_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n";

/* One watch event line as a chunk. */
static char *ti_event(const char *type, const char *name, const char *rv)
{
    char line[256];
    if (name)
        snprintf(line, sizeof(line),
                 "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                 "\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"resourceVersion\":"
                 "\"%s\"}}}\n",
                 type, name, rv);
    else
        snprintf(line, sizeof(line),
                 "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                 "\"metadata\":{\"resourceVersion\":\"%s\"}}}\n",
                 type, rv);
    return srv_chunk(line, strlen(line));
}

/* The request line of request i, for the failure message. */
static bool ti_request_has(const srv *s, int i, const char *what)
{
    assert_true(i < s->nrequests);
    const char *r = s->requests[i];
    const char *hit = strstr(r, what);
    if (!hit || hit > strstr(r, "\r\n"))
        fail_msg("request %d: no \"%s\" in %.*s", i, what, (int)strcspn(r, "\r"), r);
    return true;
}

#define TI_LIST "GET /api/v1/pods?limit=500 "
#define TI_WATCH(rv) "watch=1&resourceVersion=" rv "&"

/* A watch that ends normally (the server's timeoutSeconds) resumes from the last resourceVersion,
 * a bookmark's included; one cut mid-stream resumes from the last event's, after the backoff,
 * without a relist. */
static void test_watch_resumes_from_last_version(void **state)
{
    (void)state;
    ti t = {0};
    ti_serve(&t, (const char *[]){TI_LIST, TI_WATCH("10"), TI_WATCH("12"), TI_WATCH("13"), NULL});
    t.reply[2].then = SRV_RESET;
    t.reply[3].delay_ms = 60000;
    ti_piece(&t, 0, 0, ti_list("10", "a"));
    t.reply[1].pieces[0] = ti_watch_head;
    ti_piece(&t, 1, 1, ti_event("ADDED", "b", "11"));
    ti_piece(&t, 1, 2, ti_event("BOOKMARK", NULL, "12"));
    t.reply[1].pieces[3] = "0\r\n\r\n";
    t.reply[2].pieces[0] = ti_watch_head;
    ti_piece(&t, 2, 1, ti_event("MODIFIED", "a", "13"));
    t.reply[3].pieces[0] = ti_watch_head;
    ti_run(&t);
    ti_request_has(&t.s, 0, "GET /api/v1/pods?limit=500 ");
    ti_request_has(&t.s, 1, "watch=1&resourceVersion=10&allowWatchBookmarks=true&");
    ti_request_has(&t.s, 2, "watch=1&resourceVersion=12&"); /* the bookmark's */
    ti_request_has(&t.s, 3, "watch=1&resourceVersion=13&"); /* the last event's, after the cut */
    assert_int_equal(t.listed, 1);                          /* never listed again */
    assert_int_equal(t.adds, 2);
    assert_int_equal(t.updates, 1);
    assert_int_equal(t.nerrors, 1); /* the cut */
    assert_int_equal(t.error_codes[0], 0);
    assert_string_equal(informer_resource_version(t.inf), "13");
    informer_stats st;
    informer_stats_get(t.inf, &st);
    assert_int_equal(st.relists, 0);
    ti_finish(&t);
}

/* 410 Gone, as an ERROR event in the stream and as the answer to a watch: the informer lists
 * again (no resourceVersion: the current state) and the relist's diff takes back what was deleted
 * meanwhile; then it watches from the new list's resourceVersion. */
static void test_relist_on_410(void **state)
{
    (void)state;
    ti t = {0};
    ti_serve(&t, (const char *[]){TI_LIST, TI_WATCH("10"), TI_LIST, TI_WATCH("20"), TI_LIST,
                                  TI_WATCH("30"), NULL});
    t.reply[5].delay_ms = 60000;
    ti_piece(&t, 0, 0, ti_list("10", "a b"));
    t.reply[1].pieces[0] = ti_watch_head;
    static const char gone[] =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":"
        "\"Expired\",\"message\":\"too old resource version: 10 (15)\"}}\n";
    ti_piece(&t, 1, 1, srv_chunk(gone, strlen(gone)));
    ti_piece(&t, 2, 0, ti_list("20", "a"));
    ti_piece(&t, 3, 0,
             srv_http("410 Gone", "",
                      "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
                      "\"message\":\"too old resource version: 20 (25)\"}"));
    ti_piece(&t, 4, 0, ti_list("30", "a c"));
    t.reply[5].pieces[0] = ti_watch_head;
    ti_run(&t);
    ti_request_has(&t.s, 1, "watch=1&resourceVersion=10&");
    ti_request_has(&t.s, 2, "GET /api/v1/pods?limit=500 "); /* relist after the ERROR event */
    ti_request_has(&t.s, 3, "watch=1&resourceVersion=20&");
    ti_request_has(&t.s, 4, "GET /api/v1/pods?limit=500 "); /* relist after the 410 answer */
    ti_request_has(&t.s, 5, "watch=1&resourceVersion=30&");
    assert_int_equal(t.listed, 3);
    assert_int_equal(t.nerrors, 2);
    assert_int_equal(t.error_codes[0], 410);
    assert_int_equal(t.error_codes[1], 410);
    assert_int_equal(t.adds, 3);    /* a, b, then c */
    assert_int_equal(t.deletes, 1); /* b, gone by the first relist */
    /* Every change came from a list being applied, and a list is done by on_listed. */
    assert_int_equal(t.in_list, 4);
    assert_false(t.listing_at_done);
    store *st = informer_store(t.inf);
    assert_int_equal(store_count(st), 2);
    assert_non_null(store_get(st, "ns/a"));
    assert_non_null(store_get(st, "ns/c"));
    informer_stats stats;
    informer_stats_get(t.inf, &stats);
    assert_int_equal(stats.relists, 2);
    ti_finish(&t);
}

/* The wait an error message announces ("... (next try in N ms)"). */
static long ti_next_try_ms(const char *msg)
{
    const char *p = strstr(msg, "(next try in ");
    if (!p)
        fail_msg("no next try in \"%s\"", msg);
    return strtol(p + strlen("(next try in "), NULL, 10);
}

/* A watch answered 429 with Retry-After waits what the server asked (the backoff alone is
 * 0.8-1.6 s), then resumes from the same resourceVersion; a 503 without one waits the next
 * backoff step, twice as long as the first, with jitter. */
static void test_watch_429_honours_retry_after(void **state)
{
    (void)state;
    ti t = {0};
    ti_serve(&t, (const char *[]){TI_LIST, TI_WATCH("10"), TI_WATCH("10"), TI_WATCH("10"), NULL});
    t.reply[3].delay_ms = 60000;
    ti_piece(&t, 0, 0, ti_list("10", "a"));
    ti_piece(&t, 1, 0,
             srv_http("429 Too Many Requests", "Retry-After: 2\r\n",
                      "{\"kind\":\"Status\",\"code\":429,\"reason\":\"TooManyRequests\","
                      "\"message\":\"too many requests, please try again later\"}"));
    ti_piece(&t, 2, 0, srv_http("503 Service Unavailable", "", "unavailable"));
    t.reply[3].pieces[0] = ti_watch_head;
    ti_run(&t);
    assert_int_equal(t.nerrors, 2);
    assert_int_equal(t.error_codes[0], 429);
    assert_int_equal(ti_next_try_ms(t.errors[0]), 2000);
    assert_int_equal(t.error_codes[1], 503);
    long second = ti_next_try_ms(t.errors[1]);
    assert_true(second >= 1600 && second <= 3200);
    assert_int_equal(t.listed, 1); /* resumed, never relisted */
    ti_finish(&t);
}

TEST_MAIN(cmocka_unit_test(test_diff_first_list_is_all_adds), cmocka_unit_test(test_diff_relist),
          cmocka_unit_test(test_diff_empty_list_deletes_all),
          cmocka_unit_test(test_diff_missing_version_is_an_update),
          cmocka_unit_test(test_diff_large), cmocka_unit_test(test_backoff),
          cmocka_unit_test(test_watch_timeout), cmocka_unit_test(test_names_and_waiting),
          cmocka_unit_test(test_watch_resumes_from_last_version),
          cmocka_unit_test(test_relist_on_410),
          cmocka_unit_test(test_watch_429_honours_retry_after))

/* The out-of-memory test (test/support/oom_case.h) over the informer's parts: watch events cut at
 * every few bytes, decoded into a store and diffed against a relist; the writes awaited in the
 * cache; the work queue on a loop; and strmap, the stores' index, which grows opportunistically. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer/expect.h"
#include "informer/informer.h"
#include "informer/store.h"
#include "informer/workqueue.h"
#include "kube/error.h"
#include "kube/watchdec.h"
#include "loop/ev.h"
#include "util/strmap.h"

#include "oom_case.h"

/* Watch events cut at every few bytes, decoded and put in a store, then the relist diff. */
static int sc_watch(char **out)
{
    static const char stream[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"1\"}}}\n\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"2\"},\"x\":[1,2,3]}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\","
        "\"resourceVersion\":\"3\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Gone\","
        "\"message\":\"too old resource version\"}}\n";
    store *s = store_new(NULL);
    if (!s)
        return -ENOMEM;
    kube_wdec d;
    kube_wdec_init(&d, 0);
    kube_error err = {0};
    char *types = oom_answer("%s", "");
    int rc = 0;
    for (size_t at = 0; at < sizeof(stream) - 1 && rc == 0; at += 7) {
        size_t n = sizeof(stream) - 1 - at < 7 ? sizeof(stream) - 1 - at : 7;
        rc = kube_wdec_feed(&d, stream + at, n, &err) < 0 ? -ENOMEM : 0;
        kube_wdec_event ev;
        int got;
        while (rc == 0 && (got = kube_wdec_next(&d, &ev, &err)) == 1) {
            char *more = oom_answer("%s %s", types, ev.type);
            free(types);
            types = more;
            if (strcmp(ev.type, "ERROR") == 0) {
                kube_error_from_status(&err, ev.object, 0);
                cJSON_Delete(ev.object);
                if (err.kind == KUBE_ERR_NOMEM) {
                    rc = -ENOMEM;
                    break;
                }
                more = oom_answer("%s %ld %s %s", types, err.http_code,
                                  err.reason ? err.reason : "-", err.message);
                free(types);
                types = more;
                kube_error_clear(&err);
            } else {
                rc = store_put(s, ev.object, NULL);
            }
        }
        if (rc == 0 && got < 0)
            rc = err.kind == KUBE_ERR_NOMEM ? -ENOMEM : -EINVAL;
    }
    if (rc == 0 && kube_wdec_finish(&d, &err) < 0)
        rc = -EINVAL;
    /* A relist that drops a and changes b. */
    if (rc == 0) {
        cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\","
                               "\"resourceVersion\":\"4\"}}");
        store_item it = {0};
        rc = o ? store_decode(s, o, &it) : -ENOMEM;
        informer_change *ch = NULL;
        size_t nch = 0;
        if (rc == 0)
            rc = informer_diff(s, &it, 1, &ch, &nch);
        if (rc == 0) {
            char *more = oom_answer("%s | %zu changes, %zu cached", types, nch, store_count(s));
            free(types);
            types = more;
            informer_changes_free(ch, nch);
        }
        store_item_release(s, &it);
    }
    kube_error_clear(&err);
    kube_wdec_free(&d);
    store_free(s);
    if (rc == 0)
        *out = types;
    else
        free(types);
    return rc;
}

/* Writes awaited in the cache, by owner. */
static int sc_expect(char **out)
{
    store *s = store_new(NULL);
    expects *x = s ? expects_new() : NULL;
    int rc = x ? 0 : -ENOMEM;
    for (int i = 0; i < 3 && rc == 0; i++) {
        char owner[8], key[8];
        snprintf(owner, sizeof(owner), "o%d", i % 2);
        snprintf(key, sizeof(key), "k%d", i);
        rc = expects_add(x, owner, s, key, "1", "2", 0);
    }
    if (rc == 0) {
        bool p0 = expects_pending(x, "o0", 10, 1000);
        expects_forget(x, "o0");
        *out = oom_answer("%d %d %d", p0, expects_pending(x, "o0", 10, 1000),
                          expects_pending(x, "o1", 10, 1000));
    }
    expects_free(x);
    store_free(s);
    return rc;
}

/* The work queue on a loop: keys handed out in order, a failure requeued after its backoff, a
 * duplicate add merged. A requeue that runs out of memory is reported by wq_done. */
typedef struct {
    ev_loop *loop;
    char log[64];
    int rc;
    bool failed_once;
} wq_ctx;

static void wq_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    (void)waited_ms;
    wq_ctx *c = ud;
    bool fail = strcmp(key, "b") == 0 && !c->failed_once;
    c->failed_once |= fail;
    strncat(c->log, key, sizeof(c->log) - strlen(c->log) - 1);
    int rc = wq_done(q, key, fail ? WQ_FAILURE : WQ_SUCCESS);
    if (rc < 0)
        c->rc = rc;
    wq_stats st;
    wq_stats_get(q, &st);
    if (c->rc < 0 || st.depth + st.in_flight + st.waiting == 0)
        ev_stop(c->loop);
}

static void wq_guard(ev_loop *loop, void *ud)
{
    ((wq_ctx *)ud)->rc = -ETIMEDOUT;
    ev_stop(loop);
}

static int sc_workqueue(char **out)
{
    wq_ctx c = {.loop = ev_new()};
    if (!c.loop)
        return -ENOMEM;
    wq_config cfg = {.base_delay_ms = 1, .max_delay_ms = 4};
    wq *q = wq_new(c.loop, &cfg, wq_process, &c);
    int rc = q ? 0 : -ENOMEM;
    static const char *const keys[] = {"a", "b", "c", "a"};
    for (size_t i = 0; rc == 0 && i < 4; i++)
        rc = wq_add(q, keys[i]);
    if (rc == 0) {
        oom_pause(true);
        uint64_t guard = ev_timer_add(c.loop, 5000, wq_guard, &c);
        oom_pause(false);
        assert_true(guard != 0);
        rc = ev_run(c.loop);
        if (c.rc == -ETIMEDOUT)
            fail_msg("workqueue: keys left unhandled (%s so far)", c.log);
        if (rc == 0)
            rc = c.rc;
        if (rc == 0)
            *out = oom_answer("%s", c.log);
    }
    wq_free(q);
    ev_free(c.loop);
    return rc < 0 ? rc : 0;
}

/* strmap grows opportunistically: inserting never fails, lookups find everything. */
typedef struct {
    strmap_node node;
    char key[16];
} entry;

static int sc_strmap(char **out)
{
    strmap m;
    int rc = strmap_init(&m);
    if (rc < 0)
        return rc;
    enum { N = 200 };
    entry *e = calloc(N, sizeof(*e));
    if (!e) {
        strmap_fini(&m);
        return -ENOMEM;
    }
    for (int i = 0; i < N; i++) {
        snprintf(e[i].key, sizeof(e[i].key), "k%d", i);
        strmap_insert(&m, &e[i].node, e[i].key);
    }
    size_t found = 0;
    for (int i = 0; i < N; i++)
        found += strmap_get(&m, e[i].key) == &e[i].node;
    for (int i = 0; i < N; i += 2)
        strmap_remove(&m, &e[i].node);
    *out = oom_answer("%zu %zu", found, m.count);
    strmap_fini(&m);
    free(e);
    return 0;
}

OOM_TEST(watch)
OOM_TEST(expect)
OOM_TEST(workqueue)
OOM_TEST(strmap)

OOM_MAIN(cmocka_unit_test(test_watch), cmocka_unit_test(test_expect),
         cmocka_unit_test(test_workqueue), cmocka_unit_test(test_strmap))

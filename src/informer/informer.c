/* informer: a small state machine on the loop. One call is in flight at a time (a list page or the
 * watch) and one timer holds the next step (next page, resumed watch, or a retry after backoff).
 * Every step that runs user callbacks checks a generation number afterwards, because a callback
 * may have stopped (and even restarted) the informer under it. */
#include "informer/informer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/backoff.h"
#include "util/rng.h"
#include "util/strmap.h"

enum { INFORMER_PAGE_DEFAULT = 500 };
/* A server's Retry-After is honoured up to this long (the client's own retries cap it the same). */
enum { INFORMER_RETRY_AFTER_MAX_S = 30 };

typedef enum { INFORMER_NEXT_LIST, INFORMER_NEXT_WATCH } informer_next;

struct informer {
    ev_loop *loop;
    kube_client *client;
    char *path;
    char *name;  /* "resource.group" (a CRD's name) or a core resource's plural, for people */
    bool is_crd; /* not the core group: a 404 may well mean its CustomResourceDefinition is missing
                  */
    char *last_error; /* the latest failure's message until a list completes again; NULL after */
    char *label_selector, *field_selector;
    long page_size;
    bool
        scratch; /* the codec copies: list pages and watch events may be parsed in scratch memory */
    informer_handlers h;
    store *store;
    bool running, synced;
    bool listing;    /* a list's changes are being delivered */
    unsigned gen;    /* bumped by informer_stop */
    kube_call *call; /* the list page or the watch in flight */
    uint64_t timer;  /* the pending step */
    informer_next next;
    store_item *pending; /* the decoded items of the list pages received so far */
    size_t npending, cap_pending;
    char *cont; /* continue token of the next page */
    char *rv;   /* last resourceVersion seen */
    informer_backoff backoff;
    informer_stats stats;
};

void informer_backoff_init(informer_backoff *b)
{
    *b = (informer_backoff){.base_ms = 1600, .cap_ms = 60 * 1000, .reset_ms = 2 * 60 * 1000};
}

uint64_t informer_backoff_next(informer_backoff *b, uint64_t now_ms, uint64_t rnd)
{
    if (b->failures && now_ms - b->last_ms >= b->reset_ms)
        b->failures = 0;
    uint64_t d = util_backoff_ms(b->base_ms, b->cap_ms, b->failures, rnd);
    if (util_backoff_step_ms(b->base_ms, b->cap_ms, b->failures) < b->cap_ms)
        b->failures++;
    b->last_ms = now_ms;
    return d;
}

long informer_watch_timeout_s(double r)
{
    long s = 300 + (long)(r * 301.0);
    return s > 600 ? 600 : s;
}

static const char *informer_meta_string(const cJSON *obj, const char *field)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, field));
    return v && *v ? v : NULL;
}

/* ---- the diff of a relist ---- */

typedef struct informer_listed {
    strmap_node node;
    char *key;
} informer_listed;

typedef struct informer_diff_ctx {
    const strmap *listed;
    informer_change *changes;
    size_t n;
    int err;
} informer_diff_ctx;

static bool informer_diff_deleted(const char *key, const void *rec, void *ud)
{
    informer_diff_ctx *d = ud;
    if (strmap_get(d->listed, key))
        return true;
    informer_change *c = &d->changes[d->n];
    *c = (informer_change){.kind = INFORMER_DELETED, .key = strdup(key), .rec = rec};
    if (!c->key) {
        d->err = -ENOMEM;
        return false;
    }
    d->n++;
    return true;
}

static bool informer_same_version(const char *ra, const char *rb)
{
    return ra && rb && *ra && strcmp(ra, rb) == 0;
}

int informer_diff(const store *cached, const store_item *items, size_t nitems,
                  informer_change **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    informer_diff_ctx d = {0};
    strmap listed = {0};
    informer_listed *keys = calloc(nitems + 1, sizeof(*keys));
    size_t nkeys = 0;
    d.changes = calloc(nitems + store_count(cached) + 1, sizeof(*d.changes));
    d.listed = &listed;
    if (!keys || !d.changes || strmap_init(&listed) < 0)
        d.err = -ENOMEM;

    for (size_t i = 0; i < nitems && !d.err; i++) {
        const char *key = items[i].key;
        if (strmap_get(&listed, key)) /* a duplicate: the first one counts */
            continue;
        keys[nkeys].key = (char *)key;
        strmap_insert(&listed, &keys[nkeys++].node, key);
        const void *old = store_get(cached, key);
        if (old &&
            informer_same_version(store_version(cached, old), store_version(cached, items[i].rec)))
            continue;
        informer_change *c = &d.changes[d.n];
        *c = (informer_change){.kind = old ? INFORMER_UPDATED : INFORMER_ADDED,
                               .key = strdup(key),
                               .rec = items[i].rec,
                               .item = i};
        if (!c->key)
            d.err = -ENOMEM;
        else
            d.n++;
    }
    if (!d.err)
        store_each(cached, informer_diff_deleted, &d);

    free(keys);
    strmap_fini(&listed);
    if (d.err) {
        informer_changes_free(d.changes, d.n);
        return d.err;
    }
    *out = d.changes;
    *n = d.n;
    return 0;
}

void informer_changes_free(informer_change *changes, size_t n)
{
    for (size_t i = 0; changes && i < n; i++)
        free(changes[i].key);
    free(changes);
}

/* ---- the state machine ---- */

static void informer_list_page(informer *inf);
static void informer_watch_begin(informer *inf);

static void informer_step(ev_loop *loop, void *ud)
{
    (void)loop;
    informer *inf = ud;
    inf->timer = 0;
    if (inf->next == INFORMER_NEXT_LIST)
        informer_list_page(inf);
    else
        informer_watch_begin(inf);
}

static void informer_report(informer *inf, const kube_error *err)
{
    inf->stats.errors++;
    free(inf->last_error);
    inf->last_error = err->message ? strdup(err->message) : NULL;
    if (inf->h.on_error)
        inf->h.on_error(inf->h.ud, err);
}

/* Without a timer the informer would stall silently; at least say so. */
static void informer_schedule(informer *inf, informer_next next, uint64_t delay_ms)
{
    ev_timer_cancel(inf->loop, inf->timer);
    inf->next = next;
    inf->timer = ev_timer_add(inf->loop, delay_ms, informer_step, inf);
    if (!inf->timer) {
        kube_error err = {0};
        kube_error_set(&err, KUBE_ERR_NOMEM, "informer %s: stalled: cannot arm a timer", inf->path);
        informer_report(inf, &err);
        kube_error_clear(&err);
    }
}

/* Reports err with the wait before the next try in its message, then retries next after it: the
 * backoff, or the server's Retry-After when that is longer (a watch answered 429 is not retried by
 * the client, so the informer is the one that must wait as asked). */
static void informer_fail(informer *inf, const kube_error *err, informer_next next)
{
    uint64_t delay = informer_backoff_next(&inf->backoff, ev_now_ms(), util_rng_next());
    if (err->retry_after_s > 0) {
        uint64_t ra = (uint64_t)(err->retry_after_s < INFORMER_RETRY_AFTER_MAX_S
                                     ? err->retry_after_s
                                     : INFORMER_RETRY_AFTER_MAX_S) *
                      1000u;
        if (ra > delay)
            delay = ra;
    }
    kube_error told = {0};
    char *msg = NULL;
    if (kube_error_copy(&told, err) == 0 &&
        asprintf(&msg, "%s (next try in %llu ms)", err->message ? err->message : "failed",
                 (unsigned long long)delay) >= 0) {
        free(told.message);
        told.message = msg;
    }
    unsigned gen = inf->gen;
    informer_report(inf, &told);
    kube_error_clear(&told);
    if (gen != inf->gen)
        return;
    informer_schedule(inf, next, delay);
}

/* informer_fail for a call of the client that failed: the API server's answer alone ("the server
 * could not find the requested resource") does not say which resource it is about, so the message
 * gets the verb and path first, and a 404 of a custom resource names the CustomResourceDefinition
 * to check. */
static void informer_fail_call(informer *inf, const char *verb, const kube_error *err,
                               informer_next next)
{
    kube_error named = {0};
    bool no_crd = inf->is_crd && err->http_code == 404;
    kube_error_set(&named, err->kind, "%s %s: %s%s%s%s", verb, inf->path,
                   err->message ? err->message : "failed",
                   no_crd ? " (is the CustomResourceDefinition " : "", no_crd ? inf->name : "",
                   no_crd ? " installed?)" : "");
    if (named.kind == err->kind) { /* not out of memory */
        named.http_code = err->http_code;
        named.retry_after_s = err->retry_after_s;
        named.reason = err->reason ? strdup(err->reason) : NULL;
    }
    informer_fail(inf, &named, next);
    kube_error_clear(&named);
}

static void informer_fail_errno(informer *inf, int rc, const char *what, informer_next next)
{
    kube_error err = {0};
    kube_error_set(&err, rc == -ENOMEM ? KUBE_ERR_NOMEM : KUBE_ERR_DECODE, "informer %s: %s: %s",
                   inf->path, what, strerror(-rc));
    informer_fail(inf, &err, next);
    kube_error_clear(&err);
}

static void informer_pending_free(informer *inf, store_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_item_release(inf->store, &items[i]);
    free(items);
}

static void informer_list_reset(informer *inf)
{
    informer_pending_free(inf, inf->pending, inf->npending);
    inf->pending = NULL;
    inf->npending = inf->cap_pending = 0;
    free(inf->cont);
    inf->cont = NULL;
}

/* Stores it (taken whatever the result) and tells the handlers. 0, or the store's error. */
static int informer_upsert(informer *inf, store_item *it)
{
    void *old = NULL;
    const void *rec = it->rec;
    int rc = store_put_item(inf->store, it, &old);
    if (rc < 0) {
        store_item_release(inf->store, it);
        return rc;
    }
    if (old && inf->h.on_update)
        inf->h.on_update(inf->h.ud, old, rec);
    else if (!old && inf->h.on_add)
        inf->h.on_add(inf->h.ud, rec);
    store_release(inf->store, old);
    return 0;
}

/* Drops key and tells the handlers, with last (the final state) if given, else what was cached. */
static void informer_remove(informer *inf, const char *key, const void *last)
{
    void *old = NULL;
    if (store_delete(inf->store, key, &old) < 0)
        return; /* never delivered as added: nothing to take back */
    if (inf->h.on_delete)
        inf->h.on_delete(inf->h.ud, last ? last : old);
    store_release(inf->store, old);
}

static int informer_apply(informer *inf, store_item *items, const informer_change *ch, size_t n)
{
    unsigned gen = inf->gen;
    for (size_t i = 0; i < n && gen == inf->gen; i++) {
        if (ch[i].kind == INFORMER_DELETED) {
            informer_remove(inf, ch[i].key, NULL);
            continue;
        }
        int rc = informer_upsert(inf, &items[ch[i].item]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void informer_list_done(informer *inf, const char *rv)
{
    store_item *items = inf->pending;
    size_t nitems = inf->npending;
    inf->pending = NULL;
    inf->npending = inf->cap_pending = 0;
    char *list_rv = strdup(rv);
    informer_change *ch = NULL;
    size_t n = 0;
    int rc = list_rv ? informer_diff(inf->store, items, nitems, &ch, &n) : -ENOMEM;
    unsigned gen = inf->gen;
    if (rc == 0) {
        free(inf->rv);
        inf->rv = list_rv;
        list_rv = NULL;
        inf->listing = true;
        rc = informer_apply(inf, items, ch, n);
        inf->listing = false;
    }
    free(list_rv);
    informer_changes_free(ch, n);
    informer_pending_free(inf, items, nitems);
    if (gen != inf->gen)
        return;
    if (rc < 0) {
        informer_fail_errno(inf, rc, "cannot cache the list", INFORMER_NEXT_LIST);
        return;
    }
    if (inf->stats.lists++)
        inf->stats.relists++;
    free(inf->last_error);
    inf->last_error = NULL;
    if (!inf->synced) {
        inf->synced = true;
        if (inf->h.on_synced)
            inf->h.on_synced(inf->h.ud);
        if (gen != inf->gen)
            return;
    }
    if (inf->h.on_listed) {
        inf->h.on_listed(inf->h.ud);
        if (gen != inf->gen)
            return;
    }
    informer_watch_begin(inf);
}

/* List items come without kind and apiVersion (the list has them); watch events carry them, so
 * fill them in to make every object look the same to the codec. Each item is decoded now, not
 * when the list is complete: a list of many pages is then never held whole as JSON, only the
 * records the cache keeps of it. An item the codec refuses (no name, a wrong type where the
 * record needs one) is left out, as the store would refuse it from a watch. */
static int informer_take_items(informer *inf, const cJSON *body, cJSON *items)
{
    const char *api = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "apiVersion"));
    const char *list_kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "kind"));
    char kind[256] = "";
    size_t kl = list_kind ? strlen(list_kind) : 0;
    if (kl > 4 && kl < sizeof(kind) && strcmp(list_kind + kl - 4, "List") == 0)
        snprintf(kind, sizeof(kind), "%.*s", (int)(kl - 4), list_kind);
    cJSON *item;
    while (items && (item = cJSON_DetachItemFromArray(items, 0))) {
        if ((api && !cJSON_HasObjectItem(item, "apiVersion") &&
             !cJSON_AddStringToObject(item, "apiVersion", api)) ||
            (*kind && !cJSON_HasObjectItem(item, "kind") &&
             !cJSON_AddStringToObject(item, "kind", kind))) {
            cJSON_Delete(item);
            return -ENOMEM;
        }
        if (inf->npending == inf->cap_pending) {
            size_t cap = inf->cap_pending ? inf->cap_pending * 2 : 64;
            store_item *grown = realloc(inf->pending, cap * sizeof(*grown));
            if (!grown) {
                cJSON_Delete(item);
                return -ENOMEM;
            }
            inf->pending = grown;
            inf->cap_pending = cap;
        }
        int rc = store_decode(inf->store, item, &inf->pending[inf->npending]);
        if (rc == -ENOMEM)
            return rc;
        if (rc == 0)
            inf->npending++;
    }
    return 0;
}

static void informer_on_page(void *ud, const kube_error *err, long http_code, const cJSON *body)
{
    (void)http_code;
    informer *inf = ud;
    inf->call = NULL;
    if (err->kind != KUBE_OK) {
        /* A 410 here is an expired continue token: start over from the first page. */
        informer_list_reset(inf);
        informer_fail_call(inf, "list", err, INFORMER_NEXT_LIST);
        return;
    }
    const char *rv = informer_meta_string(body, "resourceVersion");
    const char *cont = informer_meta_string(body, "continue");
    cJSON *items = cJSON_GetObjectItemCaseSensitive(body, "items");
    int rc = 0;
    if (!rv || (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)))
        rc = -EBADMSG;
    /* The client lets us take parts of the answer instead of copying them. */
    if (rc == 0)
        rc = informer_take_items(inf, body, cJSON_IsArray(items) ? items : NULL);
    free(inf->cont);
    inf->cont = NULL;
    if (rc == 0 && cont && !(inf->cont = strdup(cont)))
        rc = -ENOMEM;
    if (rc < 0) {
        informer_list_reset(inf);
        informer_fail_errno(inf, rc, "bad list answer", INFORMER_NEXT_LIST);
    } else if (inf->cont) {
        informer_schedule(inf, INFORMER_NEXT_LIST, 0);
    } else {
        informer_list_done(inf, rv);
    }
}

static void informer_list_page(informer *inf)
{
    char limit[24];
    snprintf(limit, sizeof(limit), "%ld", inf->page_size);
    kube_query q[5];
    size_t n = 0;
    q[n++] = (kube_query){"limit", limit};
    if (inf->cont)
        q[n++] = (kube_query){"continue", inf->cont};
    if (inf->label_selector)
        q[n++] = (kube_query){"labelSelector", inf->label_selector};
    if (inf->field_selector)
        q[n++] = (kube_query){"fieldSelector", inf->field_selector};
    q[n] = (kube_query){NULL, NULL};
    kube_request req = {.method = KUBE_GET,
                        .path = inf->path,
                        .query = q,
                        .max_retries = -1,
                        .list = true,
                        .scratch = inf->scratch};
    kube_error err = {0};
    inf->call = kube_call_start(inf->client, &req, informer_on_page, inf, &err);
    if (!inf->call) {
        informer_list_reset(inf);
        informer_fail_call(inf, "list", &err, INFORMER_NEXT_LIST);
    }
    kube_error_clear(&err);
}

static void informer_watch_ended(informer *inf)
{
    inf->call = NULL;
    inf->stats.watch_restarts++;
}

static void informer_watch_abort(informer *inf)
{
    kube_call_cancel(inf->call);
    informer_watch_ended(inf);
}

/* An ERROR event: 410 Expired/Gone means our resourceVersion is compacted away; anything else
 * leaves the stream in doubt. Either way only a relist is safe (client-go does the same). */
static void informer_on_watch_error(informer *inf, const cJSON *status)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
    const char *reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(status, "reason"));
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(status, "message"));
    informer_watch_abort(inf);
    kube_error err = {0};
    kube_error_set(&err, KUBE_ERR_HTTP, "watch %s: %s", inf->path, msg ? msg : "error event");
    err.http_code = cJSON_IsNumber(code) ? (long)code->valuedouble : 0;
    err.reason = reason ? strdup(reason) : NULL;
    informer_fail(inf, &err, INFORMER_NEXT_LIST);
    kube_error_clear(&err);
}

static void informer_on_event(void *ud, const char *type, cJSON *obj)
{
    informer *inf = ud;
    inf->stats.watch_events++;
    if (strcmp(type, "ERROR") == 0) {
        informer_on_watch_error(inf, obj);
        cJSON_Delete(obj);
        return;
    }
    const char *ev_rv = informer_meta_string(obj, "resourceVersion");
    char *rv = ev_rv ? strdup(ev_rv) : NULL;
    unsigned gen = inf->gen;
    bool deleted = strcmp(type, "DELETED") == 0;
    store_item it = {0};
    char *gone = NULL; /* DELETED: the key, even if the codec refuses the last state */
    int rc = ev_rv && !rv ? -ENOMEM : 0;
    if (rc == 0 && deleted && informer_meta_string(obj, "name") && !(gone = store_key_of(obj)))
        rc = -ENOMEM;
    if (rc == 0 && (deleted || strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)) {
        rc = store_decode(inf->store, obj, &it);
        obj = NULL;
        /* An object the codec refuses is not cached, as if never seen. */
        if (rc == -EINVAL)
            rc = 0;
    }
    if (rc == 0 && it.key && !deleted)
        rc = informer_upsert(inf, &it);
    else if (rc == 0 && gone)
        informer_remove(inf, gone, it.rec);
    store_item_release(inf->store, &it);
    free(gone);
    cJSON_Delete(obj);
    if (gen != inf->gen || rc < 0) {
        free(rv);
        if (gen == inf->gen) {
            informer_watch_abort(inf);
            informer_fail_errno(inf, rc, "cannot cache a watch event", INFORMER_NEXT_LIST);
        }
        return;
    }
    if (rv) {
        free(inf->rv);
        inf->rv = rv;
    }
}

static void informer_on_end(void *ud, const kube_error *err)
{
    informer *inf = ud;
    informer_watch_ended(inf);
    if (err->kind == KUBE_OK) { /* the server's timeoutSeconds: resume where we were */
        informer_schedule(inf, INFORMER_NEXT_WATCH, 0);
        return;
    }
    bool gone =
        err->http_code == 410 || kube_error_is(err, "Expired") || kube_error_is(err, "Gone");
    bool transient =
        err->kind == KUBE_ERR_TRANSPORT || err->http_code == 429 || err->http_code >= 500;
    informer_fail_call(inf, "watch", err,
                       !gone && transient ? INFORMER_NEXT_WATCH : INFORMER_NEXT_LIST);
}

static void informer_watch_begin(informer *inf)
{
    long timeout = informer_watch_timeout_s(util_rng_unit());
    char ts[24];
    snprintf(ts, sizeof(ts), "%ld", timeout);
    kube_query q[6];
    size_t n = 0;
    q[n++] = (kube_query){"resourceVersion", inf->rv};
    q[n++] = (kube_query){"allowWatchBookmarks", "true"};
    q[n++] = (kube_query){"timeoutSeconds", ts};
    if (inf->label_selector)
        q[n++] = (kube_query){"labelSelector", inf->label_selector};
    if (inf->field_selector)
        q[n++] = (kube_query){"fieldSelector", inf->field_selector};
    q[n] = (kube_query){NULL, NULL};
    kube_error err = {0};
    inf->call =
        kube_watch_start(inf->client, inf->path, q, informer_on_event, informer_on_end, inf, &err);
    if (!inf->call)
        informer_fail_call(inf, "watch", &err, INFORMER_NEXT_WATCH);
    else if (inf->scratch) /* informer_on_event deletes each object, the codec copying what it keeps
                            */
        kube_watch_scratch(inf->call);
    kube_error_clear(&err);
}

/* ---- lifecycle ---- */

static bool informer_dup(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return !src || *dst;
}

informer *informer_new(ev_loop *loop, kube_client *client, const informer_config *cfg,
                       const informer_handlers *h)
{
    if (!cfg->version || !cfg->resource)
        return NULL;
    informer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return NULL;
    inf->loop = loop;
    inf->client = client;
    inf->h = h ? *h : (informer_handlers){0};
    inf->page_size = cfg->page_size > 0 ? cfg->page_size : INFORMER_PAGE_DEFAULT;
    informer_backoff_init(&inf->backoff);
    inf->path = kube_path(cfg->group ? cfg->group : "", cfg->version, cfg->namespace_,
                          cfg->resource, NULL, NULL);
    inf->is_crd = cfg->group && *cfg->group;
    if (inf->is_crd) {
        if (asprintf(&inf->name, "%s.%s", cfg->resource, cfg->group) < 0)
            inf->name = NULL;
    } else {
        inf->name = strdup(cfg->resource);
    }
    inf->store = store_new(cfg->codec);
    inf->scratch = cfg->codec && cfg->codec->copies;
    if (!inf->path || !inf->name || !inf->store ||
        !informer_dup(&inf->label_selector, cfg->label_selector) ||
        !informer_dup(&inf->field_selector, cfg->field_selector)) {
        informer_free(inf);
        return NULL;
    }
    return inf;
}

void informer_free(informer *inf)
{
    if (!inf)
        return;
    informer_stop(inf);
    store_free(inf->store);
    free(inf->path);
    free(inf->name);
    free(inf->last_error);
    free(inf->label_selector);
    free(inf->field_selector);
    free(inf->rv);
    free(inf);
}

store *informer_store(informer *inf)
{
    return inf->store;
}

int informer_start(informer *inf)
{
    if (inf->running)
        return -EALREADY;
    inf->running = true;
    inf->next = INFORMER_NEXT_LIST;
    inf->timer = ev_timer_add(inf->loop, 0, informer_step, inf);
    if (!inf->timer) {
        inf->running = false;
        return -ENOMEM;
    }
    return 0;
}

void informer_stop(informer *inf)
{
    if (!inf->running)
        return;
    inf->running = false;
    inf->gen++;
    if (inf->call)
        kube_call_cancel(inf->call);
    inf->call = NULL;
    ev_timer_cancel(inf->loop, inf->timer);
    inf->timer = 0;
    informer_list_reset(inf);
}

bool informer_listing(const informer *inf)
{
    return inf->listing;
}

bool informer_synced(const informer *inf)
{
    return inf->synced;
}

const char *informer_name(const informer *inf)
{
    return inf->name;
}

const char *informer_last_error(const informer *inf)
{
    return inf->last_error;
}

void informer_waiting(const informer *const *infs, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        if (infs[i]->synced)
            continue;
        int k = snprintf(buf + used, len - used, "%s%s%s%s%s", used ? "; " : "the first list of ",
                         infs[i]->name, infs[i]->last_error ? " (last error: " : "",
                         infs[i]->last_error ? infs[i]->last_error : "",
                         infs[i]->last_error ? ")" : "");
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

const char *informer_resource_version(const informer *inf)
{
    return inf->rv;
}

void informer_stats_get(const informer *inf, informer_stats *out)
{
    *out = inf->stats;
}

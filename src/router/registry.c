/* registry: one Lease, written by one call at a time (create, then merge patches carrying the
 * resourceVersion last read; a conflict reads the Lease and writes again; a Lease gone ends the
 * registration and is created again). What the Lease may say is tracked per pool as the members an
 * entry may stand for: the one the last successful write left, those of writes sent since (any of
 * them may land until a later one succeeds: both carry the same precondition, so only one can),
 * and the one wanted now. A withdrawn entry counts as gone only once a write without it succeeded;
 * reads of the pool sent before that do not count. Entries forgotten a window after that. */
#include "router/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/fence.h"
#include "leader/lease.h"
#include "log/log.h"
#include "util/backoff.h"
#include "util/rng.h"
#include "util/strmap.h"

#define RG_TIMEOUT_MS 5000
#define RG_RETRY_MS 250
/* The annotation's longest value: entries past it are not written (their swaps wait the fence). */
#define RG_MAX_FENCED 65536

typedef struct rg_entry {
    strmap_node node;
    char *key;       /* "ns/name" */
    char *want;      /* acknowledged now */
    char *sent;      /* in the write in flight */
    char *committed; /* as the last successful write left the Lease */
    char *pending;   /* in a write since that may have landed */
    bool uncertain;  /* several such members: every member is blocked */
    uint64_t reads_from;
} rg_entry;

typedef enum { RG_CREATE, RG_READ, RG_PATCH } rg_step;

struct rt_registry {
    ev_loop *loop;
    kube_client *client;
    rt_registry_config cfg;
    char *ns, *name, *identity, *fronts;
    strmap entries;
    char *rv; /* the Lease's resourceVersion as last read */
    rg_step step;
    kube_call *call;
    uint64_t call_sent_ms;
    bool dirty; /* entries changed since the write in flight was sent */
    uint64_t timer;
    unsigned failures;
    uint64_t since_ms, until_ms;
    char *why; /* the last failure, for /readyz */
    bool released;
    void (*released_fn)(void *ud);
    void *released_ud;
    uint64_t release_timer;
};

static void rg_send(rt_registry *r);

static bool rg_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static rg_entry *rg_find(const rt_registry *r, const char *key)
{
    return STRMAP_FIND(&r->entries, key, rg_entry, node);
}

static void rg_entry_free(rt_registry *r, rg_entry *e)
{
    strmap_remove(&r->entries, &e->node);
    free(e->key), free(e->want), free(e->sent), free(e->committed), free(e->pending);
    free(e);
}

/* Whether anything of e may stand in the Lease. */
static bool rg_stands(const rg_entry *e)
{
    return e->committed || e->pending || e->sent || e->uncertain;
}

/* Adds member to what may stand from a write that failed (its outcome unknown). */
static void rg_may_stand(rg_entry *e, char *member)
{
    if (!member)
        return;
    if (e->pending && !rg_eq(e->pending, member))
        e->uncertain = true;
    free(e->pending);
    e->pending = member;
}

/* ---- the timer ---- */

static void rg_fire(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_registry *r = ud;
    r->timer = 0;
    rg_send(r);
}

static void rg_arm(rt_registry *r, uint64_t delay_ms)
{
    if (r->timer)
        ev_timer_cancel(r->loop, r->timer);
    r->timer = ev_timer_add(r->loop, delay_ms, rg_fire, r);
}

/* ---- the write ---- */

static char *rg_fenced(rt_registry *r, bool mark_sent)
{
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (strmap_node *n = strmap_first(&r->entries); n; n = strmap_next(&r->entries, n)) {
        rg_entry *e = STRMAP_OWNER(n, rg_entry, node);
        if (mark_sent) {
            free(e->sent);
            e->sent = NULL;
        }
        if (!e->want)
            continue;
        size_t add = strlen(e->key) + strlen(e->want) + 2;
        if (len + add >= RG_MAX_FENCED)
            continue;
        if (len + add + 1 > cap) {
            cap = (len + add + 1) * 2;
            char *t = realloc(s, cap);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        len += (size_t)sprintf(s + len, "%s%s=%s", len ? " " : "", e->key, e->want);
        if (mark_sent && !(e->sent = strdup(e->want))) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static char *rg_body(rt_registry *r, const char *fenced)
{
    char now[32];
    lease_time_format((int64_t)ev_wall_ms() * 1000, now);
    cJSON *o = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(o, "metadata");
    cJSON *spec = cJSON_AddObjectToObject(o, "spec");
    cJSON *labels = cJSON_AddObjectToObject(md, "labels");
    cJSON *ann = cJSON_AddObjectToObject(md, "annotations");
    if (r->step == RG_CREATE) {
        cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1");
        cJSON_AddStringToObject(o, "kind", "Lease");
        cJSON_AddStringToObject(md, "name", r->name);
        cJSON_AddStringToObject(md, "namespace", r->ns);
        cJSON_AddStringToObject(spec, "acquireTime", now);
    } else {
        cJSON_AddStringToObject(md, "resourceVersion", r->rv);
    }
    cJSON_AddStringToObject(labels, API_ROUTER_LEASE_LABEL, "true");
    if (r->fronts)
        cJSON_AddStringToObject(ann, API_FRONTS_ANNOTATION, r->fronts);
    if (*fenced)
        cJSON_AddStringToObject(ann, API_FENCED_ANNOTATION, fenced);
    else
        cJSON_AddNullToObject(ann, API_FENCED_ANNOTATION);
    cJSON_AddStringToObject(spec, "holderIdentity", r->identity);
    cJSON_AddNumberToObject(spec, "leaseDurationSeconds", (double)(r->cfg.duration_ms / 1000));
    cJSON_AddStringToObject(spec, "renewTime", now);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return body;
}

static void rg_failed(rt_registry *r, const char *what, const kube_error *err, long code)
{
    char why[512];
    snprintf(why, sizeof(why), "%s Lease %s/%s%s: %s",
             code == 401 || code == 403 ? "the API server refuses this router's write of its"
                                        : "cannot write this router's",
             r->ns, r->name, code == 403 ? " (its role lacks create/patch on leases there)" : "",
             err->message ? err->message : what);
    if (!r->why || strcmp(r->why, why) != 0)
        log_kv(LOG_ERROR, "the router's registration failed; it retries", "error", why, NULL);
    free(r->why);
    r->why = strdup(why);
    uint64_t d = util_backoff_ms(RG_RETRY_MS, r->cfg.renew_ms, r->failures, util_rng_next());
    if (util_backoff_step_ms(RG_RETRY_MS, r->cfg.renew_ms, r->failures) < r->cfg.renew_ms)
        r->failures++;
    rg_arm(r, d);
}

/* A write succeeded at now, sent at sent_ms: the Lease says exactly what it carried. */
static void rg_written(rt_registry *r, uint64_t sent_ms, uint64_t now)
{
    r->failures = 0;
    free(r->why);
    r->why = NULL;
    bool began = false;
    if (sent_ms + r->cfg.duration_ms > now) {
        began = now >= r->until_ms;
        if (began)
            r->since_ms = now;
        r->until_ms = sent_ms + r->cfg.duration_ms;
    }
    strmap_node *n = strmap_first(&r->entries);
    while (n) {
        rg_entry *e = STRMAP_OWNER(n, rg_entry, node);
        n = strmap_next(&r->entries, n);
        bool withdrawn = e->uncertain || (e->committed && !rg_eq(e->committed, e->sent)) ||
                         (e->pending && !rg_eq(e->pending, e->sent));
        free(e->committed);
        free(e->pending);
        e->committed = e->sent;
        e->sent = NULL;
        e->pending = NULL;
        e->uncertain = false;
        if (withdrawn) {
            e->reads_from = now;
            if (!began && r->cfg.changed)
                r->cfg.changed(r->cfg.ud, e->key);
        }
    }
    if (began) {
        log_kv(LOG_INFO, "the router is registered", "lease", r->name, "namespace", r->ns, NULL);
        if (r->cfg.changed)
            r->cfg.changed(r->cfg.ud, NULL);
    }
}

/* What a write sent and may have landed (failed without an answer that says it did not). */
static void rg_unsure(rt_registry *r)
{
    for (strmap_node *n = strmap_first(&r->entries); n; n = strmap_next(&r->entries, n)) {
        rg_entry *e = STRMAP_OWNER(n, rg_entry, node);
        rg_may_stand(e, e->sent);
        e->sent = NULL;
    }
}

static void rg_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_registry *r = ud;
    r->call = NULL;
    uint64_t now = ev_now_ms();
    rg_step step = r->step;
    const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(body, "metadata"), "resourceVersion"));
    if (err->kind == KUBE_OK && rv) {
        free(r->rv);
        r->rv = strdup(rv);
        r->step = r->rv ? RG_PATCH : RG_READ;
        if (step == RG_READ) { /* learnt the version: write at once */
            rg_send(r);
            return;
        }
        rg_written(r, r->call_sent_ms, now);
        if (r->dirty)
            rg_send(r);
        else
            rg_arm(r, r->cfg.renew_ms);
        return;
    }
    if (step != RG_READ)
        rg_unsure(r);
    if (code == 409) { /* exists (a create that landed) or changed: read it, write again */
        r->step = RG_READ;
        rg_send(r);
        return;
    }
    if (code == 404 && step != RG_CREATE) {
        /* Gone: an operator may have listed the Leases without it, so the registration ends now;
         * a new one begins with the next create. */
        log_kv(LOG_ERROR, "the router's Lease is gone; registering again", "lease", r->name,
               "namespace", r->ns, NULL);
        r->until_ms = 0;
        r->step = RG_CREATE;
        free(r->rv);
        r->rv = NULL;
        rg_send(r);
        return;
    }
    rg_failed(r, "no answer", err, code);
}

static void rg_send(rt_registry *r)
{
    if (r->call || r->released)
        return;
    if (r->timer) {
        ev_timer_cancel(r->loop, r->timer);
        r->timer = 0;
    }
    char *path = kube_path("coordination.k8s.io", "v1", r->ns, "leases",
                           r->step == RG_CREATE ? NULL : r->name, NULL);
    char *fenced = r->step == RG_READ ? NULL : rg_fenced(r, true);
    char *body = fenced ? rg_body(r, fenced) : NULL;
    kube_request req = {.method = r->step == RG_CREATE ? KUBE_POST
                                  : r->step == RG_READ ? KUBE_GET
                                                       : KUBE_PATCH_MERGE,
                        .path = path,
                        .body = body,
                        .timeout_ms = RG_TIMEOUT_MS,
                        .max_retries = 0,
                        .scratch = true};
    kube_error err = {0};
    r->dirty = false;
    r->call_sent_ms = ev_now_ms();
    if (path && (r->step == RG_READ || body))
        r->call = kube_call_start(r->client, &req, rg_done, r, &err);
    if (!r->call) {
        if (r->step != RG_READ)
            rg_unsure(r);
        if (err.kind == KUBE_OK)
            kube_error_set(&err, KUBE_ERR_NOMEM, "out of memory");
        rg_failed(r, "not sent", &err, 0);
    }
    kube_error_clear(&err);
    free(path), free(fenced), free(body);
}

/* ---- the router's side ---- */

rt_registry *rt_registry_new(ev_loop *loop, kube_client *client, const rt_registry_config *cfg)
{
    rt_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->loop = loop;
    r->client = client;
    r->cfg = *cfg;
    if (strmap_init(&r->entries) < 0) {
        free(r);
        return NULL;
    }
    if (!(r->ns = strdup(cfg->namespace_)) || !(r->name = strdup(cfg->name)) ||
        !(r->identity = strdup(cfg->identity)) ||
        (cfg->fronts && !(r->fronts = strdup(cfg->fronts)))) {
        rt_registry_free(r);
        return NULL;
    }
    return r;
}

void rt_registry_start(rt_registry *r)
{
    r->step = RG_CREATE;
    rg_send(r);
}

static void rg_release_end(rt_registry *r)
{
    if (r->release_timer)
        ev_timer_cancel(r->loop, r->release_timer);
    r->release_timer = 0;
    void (*fn)(void *) = r->released_fn;
    r->released_fn = NULL;
    if (fn)
        fn(r->released_ud);
}

static void rg_release_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)body;
    rt_registry *r = ud;
    r->call = NULL;
    if (err->kind != KUBE_OK && code != 404)
        log_kv(LOG_ERROR, "could not delete the router's Lease; it expires", "lease", r->name,
               "error", err->message ? err->message : "", NULL);
    rg_release_end(r);
}

static void rg_release_timeout(ev_loop *loop, void *ud)
{
    (void)loop;
    rt_registry *r = ud;
    r->release_timer = 0;
    rg_release_end(r);
}

void rt_registry_release(rt_registry *r, uint64_t timeout_ms, void (*done)(void *ud), void *ud)
{
    r->released = true;
    r->until_ms = 0;
    if (r->timer)
        ev_timer_cancel(r->loop, r->timer);
    r->timer = 0;
    if (r->call)
        kube_call_cancel(r->call);
    r->call = NULL;
    r->released_fn = done;
    r->released_ud = ud;
    /* By name even before a create was answered: it may land (a 404 is as good). */
    char *path = kube_path("coordination.k8s.io", "v1", r->ns, "leases", r->name, NULL);
    kube_request req = {.method = KUBE_DELETE,
                        .path = path,
                        .timeout_ms = (long)timeout_ms,
                        .max_retries = 0,
                        .scratch = true};
    kube_error err = {0};
    if (path)
        r->call = kube_call_start(r->client, &req, rg_release_done, r, &err);
    kube_error_clear(&err);
    free(path);
    if (!r->call) {
        rg_release_end(r);
        return;
    }
    r->release_timer = ev_timer_add(r->loop, timeout_ms, rg_release_timeout, r);
}

void rt_registry_free(rt_registry *r)
{
    if (!r)
        return;
    if (r->call)
        kube_call_cancel(r->call);
    if (r->timer)
        ev_timer_cancel(r->loop, r->timer);
    if (r->release_timer)
        ev_timer_cancel(r->loop, r->release_timer);
    strmap_node *n = strmap_first(&r->entries);
    while (n) {
        rg_entry *e = STRMAP_OWNER(n, rg_entry, node);
        n = strmap_next(&r->entries, n);
        rg_entry_free(r, e);
    }
    strmap_fini(&r->entries);
    free(r->ns), free(r->name), free(r->identity), free(r->fronts), free(r->rv), free(r->why);
    free(r);
}

uint64_t rt_registry_until(const rt_registry *r, uint64_t now_ms)
{
    return now_ms < r->until_ms ? r->until_ms : 0;
}

uint64_t rt_registry_reads_from(const rt_registry *r, const char *pool_key)
{
    const rg_entry *e = rg_find(r, pool_key);
    return e && e->reads_from > r->since_ms ? e->reads_from : r->since_ms;
}

bool rt_registry_blocks(const rt_registry *r, const char *pool_key, const char *member)
{
    const rg_entry *e = rg_find(r, pool_key);
    return e && (e->uncertain || rg_eq(e->want, member) || rg_eq(e->sent, member) ||
                 rg_eq(e->committed, member) || rg_eq(e->pending, member));
}

/* Forgets entries that stand nowhere and whose withdrawal is older than any fence window. */
static void rg_sweep(rt_registry *r, uint64_t now)
{
    strmap_node *n = strmap_first(&r->entries);
    while (n) {
        rg_entry *e = STRMAP_OWNER(n, rg_entry, node);
        n = strmap_next(&r->entries, n);
        if (!e->want && !rg_stands(e) && now > e->reads_from + r->cfg.window_ms)
            rg_entry_free(r, e);
    }
}

int rt_registry_ack(rt_registry *r, const char *ns, const char *name, const char *member)
{
    char key[512]; /* a namespace (63) and a name (253) */
    if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name) >= sizeof(key))
        return -EINVAL;
    rg_entry *e = rg_find(r, key);
    if (e ? (e->want ? rg_eq(e->want, member) : !member) : !member)
        return 0; /* as it is: the common case, on every decision */
    if (!e) {
        if (!(e = calloc(1, sizeof(*e))) || !(e->key = strdup(key))) {
            free(e);
            return -ENOMEM;
        }
        strmap_insert(&r->entries, &e->node, e->key);
    }
    char *want = member ? strdup(member) : NULL;
    if (member && !want)
        return -ENOMEM;
    free(e->want);
    e->want = want;
    rg_sweep(r, ev_now_ms());
    if (r->call)
        r->dirty = true;
    else if (r->step != RG_CREATE || r->timer) /* written now (or with the create's retry) */
        rg_send(r);
    return 0;
}

void rt_registry_unready(const rt_registry *r, uint64_t now_ms, char *buf, size_t len)
{
    if (rt_registry_until(r, now_ms))
        snprintf(buf, len, "%s", "");
    else
        snprintf(buf, len, "registration with the operator (Lease %s/%s)%s%s", r->ns, r->name,
                 r->why ? ": " : "", r->why ? r->why : "");
}

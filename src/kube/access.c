/* kube_access: one review in flight per token (later checks of that token wait on it), each a
 * TokenReview and, when the token is valid, a SubjectAccessReview for the user it named. Calls
 * are not retried: a scraper waits on the answer and will ask again, and an unreachable API
 * server must be a quick 503. A review whose waiters all cancelled is aborted with them. */
#include "kube/access.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube/access_cache.h"

/* Checks waiting on reviews are bounded by the callers' connections; reviews of distinct tokens
 * in flight are bounded here so that a flood of made-up tokens cannot queue without end. */
#define KUBE_ACCESS_MAX_REVIEWS 64
#define KUBE_ACCESS_MAX_TOKEN 16384

typedef struct kube_access_review kube_access_review;

struct kube_access_waiter {
    kube_access_review *r; /* NULL once its verdict is being delivered */
    kube_access_done_fn done;
    void *ud;
    kube_access_waiter *prev, *next;
};

struct kube_access_review {
    kube_access *a;
    unsigned char key[KUBE_ACCESS_KEY_LEN];
    kube_call *call;
    kube_access_waiter *waiters, *last; /* in arrival order */
    bool finishing; /* its verdict goes to the waiters: a cancel does not end it */
    kube_access_review *next;
};

struct kube_access {
    kube_client *client;
    char *path, *verb;
    long timeout_ms;
    kube_access_cache *cache;
    kube_access_review *reviews;
    size_t n_reviews;
};

int kube_access_bearer(const char *authorization, const char **token, size_t *len)
{
    if (!authorization || strncasecmp(authorization, "Bearer", 6) != 0)
        return -EINVAL;
    const char *p = authorization + 6;
    if (*p != ' ' && *p != '\t')
        return -EINVAL;
    p += strspn(p, " \t");
    size_t n = 0;
    while (p[n] > 0x20 && p[n] < 0x7f)
        n++;
    const char *rest = p + n;
    if (n == 0 || n > KUBE_ACCESS_MAX_TOKEN || rest[strspn(rest, " \t")] != 0)
        return -EINVAL;
    *token = p;
    *len = n;
    return 0;
}

kube_access *kube_access_new(kube_client *client, const kube_access_opts *opts)
{
    kube_access *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->client = client;
    a->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 5000;
    a->path = strdup(opts->path);
    a->verb = strdup(opts->verb);
    a->cache = kube_access_cache_new(opts->cache_size ? opts->cache_size : 256,
                                     opts->ttl_ms ? opts->ttl_ms : 10000);
    if (!a->path || !a->verb || !a->cache) {
        kube_access_free(a);
        return NULL;
    }
    return a;
}

static void kube_access_waiter_unlink(kube_access_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        w->r->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        w->r->last = w->prev;
    w->r = NULL;
}

static void kube_access_review_free(kube_access_review *r)
{
    while (r->waiters) {
        kube_access_waiter *w = r->waiters;
        kube_access_waiter_unlink(w);
        free(w);
    }
    free(r);
}

/* Takes r off the list of reviews in flight. */
static void kube_access_review_unlink(kube_access_review *r)
{
    kube_access *a = r->a;
    for (kube_access_review **p = &a->reviews; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    a->n_reviews--;
}

void kube_access_free(kube_access *a)
{
    if (!a)
        return;
    while (a->reviews) {
        kube_access_review *r = a->reviews;
        a->reviews = r->next;
        kube_call_cancel(r->call);
        kube_access_review_free(r);
    }
    kube_access_cache_free(a->cache);
    free(a->path);
    free(a->verb);
    free(a);
}

static kube_access_waiter *kube_access_wait(kube_access_review *r, kube_access_done_fn done,
                                            void *ud)
{
    kube_access_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    *w = (kube_access_waiter){.r = r, .done = done, .ud = ud, .prev = r->last};
    if (r->last)
        r->last->next = w;
    else
        r->waiters = w;
    r->last = w;
    return w;
}

void kube_access_cancel(kube_access_waiter *w)
{
    if (!w || !w->r) /* from inside its own done: freed when that returns */
        return;
    kube_access_review *r = w->r;
    kube_access_waiter_unlink(w);
    free(w);
    if (r->waiters || r->finishing)
        return;
    /* Nobody waits for this review any more: its call goes too (its verdict is not cached). */
    kube_access_review_unlink(r);
    kube_call_cancel(r->call);
    kube_access_review_free(r);
}

/* Ends a review: the verdict is cached unless it is "cannot tell", then every waiter hears it,
 * in the order they came. The review leaves the list first, so a waiter may start a check of the
 * same token again; each waiter leaves before its done runs, so a done may cancel the others. */
static void kube_access_finish(kube_access_review *r, int code, const char *why)
{
    kube_access *a = r->a;
    kube_access_review_unlink(r);
    if (code != 503)
        kube_access_cache_put(a->cache, r->key, code, ev_now_ms());
    r->finishing = true;
    while (r->waiters) {
        kube_access_waiter *w = r->waiters;
        kube_access_waiter_unlink(w);
        w->done(w->ud, code, why);
        free(w);
    }
    kube_access_review_free(r);
}

/* A review call's failure as a 503 message. */
static void kube_access_failed(kube_access_review *r, const char *kind, const kube_error *err)
{
    char why[300];
    snprintf(why, sizeof(why), "%s failed: %s", kind, err->message ? err->message : "no answer");
    kube_access_finish(r, 503, why);
}

static int kube_access_post(kube_access_review *r, const char *path, cJSON *body, kube_done_fn done,
                            kube_error *err)
{
    char *text = cJSON_PrintUnformatted(body);
    if (!text)
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    kube_request req = {.method = KUBE_POST,
                        .path = path,
                        .body = text,
                        .timeout_ms = r->a->timeout_ms,
                        .max_retries = 0};
    r->call = kube_call_start(r->a->client, &req, done, r, err);
    explicit_bzero(text, strlen(text)); /* it may hold the token */
    free(text);
    return r->call ? 0 : -1;
}

static void kube_access_on_sar(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    kube_access_review *r = ud;
    r->call = NULL;
    if (err->kind != KUBE_OK) {
        kube_access_failed(r, "SubjectAccessReview", err);
        return;
    }
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(body, "status");
    const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(status, "allowed");
    if (!cJSON_IsBool(allowed)) {
        kube_access_finish(r, 503, "SubjectAccessReview: answer without status.allowed");
        return;
    }
    kube_access_finish(r, cJSON_IsTrue(allowed) ? 200 : 403,
                       cJSON_IsTrue(allowed) ? "allowed" : "not allowed by RBAC");
}

/* The SubjectAccessReview for the user a TokenReview named: every attribute of the user (name,
 * uid, groups, extra) so that RBAC sees the same subject it would for a request of its own. */
static cJSON *kube_access_sar_body(const kube_access *a, const cJSON *user)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *spec = cJSON_AddObjectToObject(root, "spec");
    cJSON *nr = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
    if (!cJSON_AddStringToObject(root, "apiVersion", "authorization.k8s.io/v1") ||
        !cJSON_AddStringToObject(root, "kind", "SubjectAccessReview") || !nr ||
        !cJSON_AddStringToObject(nr, "path", a->path) ||
        !cJSON_AddStringToObject(nr, "verb", a->verb)) {
        cJSON_Delete(root);
        return NULL;
    }
    static const char *const from[] = {"username", "uid", "groups", "extra"};
    static const char *const to[] = {"user", "uid", "groups", "extra"};
    for (size_t i = 0; i < 4; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(user, from[i]);
        cJSON *copy = v ? cJSON_Duplicate(v, 1) : NULL;
        if (v && (!copy || !cJSON_AddItemToObject(spec, to[i], copy))) {
            cJSON_Delete(copy);
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}

static void kube_access_on_token(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    kube_access_review *r = ud;
    r->call = NULL;
    if (err->kind != KUBE_OK) {
        kube_access_failed(r, "TokenReview", err);
        return;
    }
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(body, "status");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(status, "user");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(user, "username");
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(status, "authenticated")) ||
        !cJSON_IsString(name) || !*name->valuestring) {
        kube_access_finish(r, 401, "token not authenticated");
        return;
    }
    cJSON *sar = kube_access_sar_body(r->a, user);
    kube_error e = {0};
    if (!sar || kube_access_post(r, "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar,
                                 kube_access_on_sar, &e) < 0) {
        if (!sar)
            kube_error_set(&e, KUBE_ERR_NOMEM, "out of memory");
        kube_access_failed(r, "SubjectAccessReview", &e);
    }
    cJSON_Delete(sar);
    kube_error_clear(&e);
}

static int kube_access_start(kube_access_review *r, const char *token, size_t len, kube_error *err)
{
    char *t = strndup(token, len);
    cJSON *root = cJSON_CreateObject();
    cJSON *spec = cJSON_AddObjectToObject(root, "spec");
    int rc = -1;
    if (!t || !spec || !cJSON_AddStringToObject(root, "apiVersion", "authentication.k8s.io/v1") ||
        !cJSON_AddStringToObject(root, "kind", "TokenReview") ||
        !cJSON_AddStringToObject(spec, "token", t))
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    else
        rc = kube_access_post(r, "/apis/authentication.k8s.io/v1/tokenreviews", root,
                              kube_access_on_token, err);
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(spec, "token");
    if (cJSON_IsString(tok))
        explicit_bzero(tok->valuestring, strlen(tok->valuestring));
    cJSON_Delete(root);
    if (t)
        explicit_bzero(t, len);
    free(t);
    return rc;
}

kube_access_waiter *kube_access_check(kube_access *a, const char *authorization,
                                      kube_access_done_fn done, void *ud)
{
    const char *token;
    size_t len;
    if (kube_access_bearer(authorization, &token, &len) < 0) {
        done(ud, 401, authorization ? "not a bearer token" : "no Authorization header");
        return NULL;
    }
    unsigned char key[KUBE_ACCESS_KEY_LEN];
    kube_access_cache_key(token, len, key);
    int verdict;
    if (kube_access_cache_get(a->cache, key, ev_now_ms(), &verdict)) {
        done(ud, verdict, "cached");
        return NULL;
    }
    kube_access_waiter *w;
    for (kube_access_review *r = a->reviews; r; r = r->next)
        if (memcmp(r->key, key, sizeof(key)) == 0) {
            if (!(w = kube_access_wait(r, done, ud)))
                done(ud, 503, "out of memory");
            return w;
        }
    if (a->n_reviews >= KUBE_ACCESS_MAX_REVIEWS) {
        done(ud, 503, "too many token reviews in flight");
        return NULL;
    }
    kube_access_review *r = calloc(1, sizeof(*r));
    kube_error err = {0};
    if (!r || !(w = kube_access_wait(r, done, ud))) {
        free(r);
        done(ud, 503, "out of memory");
        return NULL;
    }
    r->a = a;
    memcpy(r->key, key, sizeof(key));
    if (kube_access_start(r, token, len, &err) < 0) {
        kube_access_review_free(r);
        done(ud, 503, err.message ? err.message : "cannot start a TokenReview");
        kube_error_clear(&err);
        return NULL;
    }
    r->next = a->reviews;
    a->reviews = r;
    a->n_reviews++;
    return w;
}

/* prober: one curl easy handle per Pod on a shared multi handle (evcurl), answers capped in size;
 * a batch completes when its last request does, and is delivered from the loop so a caller's
 * callback may start the next batch. */
#include "pool/prober.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop/evcurl.h"
#include "util/strmap.h"

#define PROBER_MAX_BODY (1u << 20)
#define PROBER_SWEEP_MIN 64

/* The last verdict of a Pod, by UID. */
typedef struct prober_memo_entry {
    strmap_node node; /* key: uid */
    char *uid;
    char *pod; /* namespace/name: swept once the cache has no Pod with this uid there */
    char *message;
    prober_memo memo;
} prober_memo_entry;

typedef struct prober_req {
    prober_batch *batch;
    CURL *easy;
    char *body;
    size_t len;
    bool too_big;
} prober_req;

struct prober_batch {
    prober *owner;
    prober_batch *next;
    char *runtime;
    prober_req *reqs;
    prober_verdict *results;
    char **messages;
    size_t n, pending;
    uint64_t timer; /* delivery of a batch that needed no request */
    prober_done_fn done;
    void *ud;
};

struct prober {
    ev_loop *loop;
    evcurl *ec;
    long timeout_ms;
    prober_batch *batches;
    strmap memos;
    size_t sweep_at;
    prober_alive_fn alive;
    void *alive_ud;
};

static void prober_batch_free(prober_batch *b)
{
    prober *p = b->owner;
    for (prober_batch **pp = &p->batches; *pp; pp = &(*pp)->next) {
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    }
    ev_timer_cancel(p->loop, b->timer);
    for (size_t i = 0; i < b->n; i++) {
        if (b->reqs[i].easy) {
            curl_multi_remove_handle(evcurl_multi(p->ec), b->reqs[i].easy);
            curl_easy_cleanup(b->reqs[i].easy);
        }
        free(b->reqs[i].body);
        free(b->messages[i]);
        free((char *)b->results[i].pod);
    }
    free(b->reqs);
    free(b->results);
    free(b->messages);
    free(b->runtime);
    free(b);
}

static void prober_deliver(prober_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->results[i].message = b->messages[i];
    b->done(b->ud, b->results, b->n);
    prober_batch_free(b);
}

static void prober_judge(prober_req *r, CURLcode rc)
{
    prober_batch *b = r->batch;
    size_t i = (size_t)(r - b->reqs);
    char msg[512];
    long code = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    if (r->too_big) {
        b->results[i].verdict = PROBE_ERROR;
        snprintf(msg, sizeof(msg), "answer larger than %u bytes", PROBER_MAX_BODY);
    } else if (rc != CURLE_OK) {
        /* curl's own summary of the failure, not its error buffer: that one carries elapsed
         * times and byte counts ("after 2001 milliseconds"), and the message ends up in the
         * pool's status, where the same failure must read the same each time. */
        const char *why = curl_easy_strerror(rc);
        b->results[i].verdict = probe_judge(b->runtime, 0, why, strlen(why), msg, sizeof(msg));
    } else {
        b->results[i].verdict =
            probe_judge(b->runtime, code, r->body ? r->body : "", r->len, msg, sizeof(msg));
    }
    b->messages[i] = strdup(msg);
}

static void prober_progress(void *ud)
{
    prober *p = ud;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(evcurl_multi(p->ec), &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        prober_req *r = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        CURLcode rc = m->data.result;
        prober_judge(r, rc);
        curl_multi_remove_handle(evcurl_multi(p->ec), r->easy);
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        if (--r->batch->pending == 0)
            prober_deliver(r->batch);
    }
}

static size_t prober_on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    prober_req *r = ud;
    size_t n = size * nmemb;
    if (r->len + n > PROBER_MAX_BODY) {
        r->too_big = true;
        return 0;
    }
    char *grown = realloc(r->body, r->len + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + r->len, data, n);
    r->body = grown;
    r->len += n;
    r->body[r->len] = 0;
    return n;
}

prober *prober_new(ev_loop *loop, long timeout_ms)
{
    prober *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->loop = loop;
    p->timeout_ms = timeout_ms;
    p->sweep_at = PROBER_SWEEP_MIN;
    if (strmap_init(&p->memos) < 0) {
        free(p);
        return NULL;
    }
    p->ec = evcurl_new(loop, prober_progress, p);
    if (!p->ec) {
        strmap_fini(&p->memos);
        free(p);
        return NULL;
    }
    return p;
}

static void prober_memo_drop(prober *p, prober_memo_entry *m)
{
    strmap_remove(&p->memos, &m->node);
    free(m->uid);
    free(m->pod);
    free(m->message);
    free(m);
}

void prober_free(prober *p)
{
    if (!p)
        return;
    while (p->batches)
        prober_batch_free(p->batches);
    evcurl_free(p->ec);
    for (strmap_node *n; (n = strmap_first(&p->memos));)
        prober_memo_drop(p, STRMAP_OWNER(n, prober_memo_entry, node));
    strmap_fini(&p->memos);
    free(p);
}

/* ---- the memo ---- */

static prober_memo_entry *prober_memo_find(const prober *p, const char *uid)
{
    return STRMAP_FIND(&p->memos, uid, prober_memo_entry, node);
}

void prober_memo_alive(prober *p, prober_alive_fn alive, void *ud)
{
    p->alive = alive;
    p->alive_ud = ud;
}

static void prober_memo_sweep(prober *p)
{
    strmap_node *n = strmap_first(&p->memos);
    while (n) {
        strmap_node *next = strmap_next(&p->memos, n);
        prober_memo_entry *m = STRMAP_OWNER(n, prober_memo_entry, node);
        if (!p->alive(p->alive_ud, m->pod, m->uid))
            prober_memo_drop(p, m);
        n = next;
    }
    p->sweep_at = p->memos.count * 2;
    if (p->sweep_at < PROBER_SWEEP_MIN)
        p->sweep_at = PROBER_SWEEP_MIN;
}

int prober_memo_set(prober *p, const char *uid, const char *pod_key, probe_verdict v,
                    const char *message, int64_t sent_mono_ms, int64_t now_mono_ms)
{
    prober_memo_forget(p, uid);
    prober_memo_entry *m = calloc(1, sizeof(*m));
    if (!m || !(m->uid = strdup(uid)) || !(m->pod = strdup(pod_key)) ||
        !(m->message = strdup(message ? message : ""))) {
        if (m) {
            free(m->uid);
            free(m->pod);
        }
        free(m);
        return -ENOMEM;
    }
    m->memo = (prober_memo){.verdict = v,
                            .at_mono_ms = now_mono_ms,
                            .sent_mono_ms = sent_mono_ms,
                            .message = m->message};
    strmap_insert(&p->memos, &m->node, m->uid);
    if (p->alive && p->memos.count >= p->sweep_at)
        prober_memo_sweep(p);
    return 0;
}

const prober_memo *prober_memo_get(const prober *p, const char *uid)
{
    prober_memo_entry *m = prober_memo_find(p, uid);
    return m ? &m->memo : NULL;
}

void prober_memo_forget(prober *p, const char *uid)
{
    prober_memo_entry *m = prober_memo_find(p, uid);
    if (m)
        prober_memo_drop(p, m);
}

size_t prober_memo_count(const prober *p)
{
    return p->memos.count;
}

static void prober_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    prober_batch *b = ud;
    b->timer = 0;
    prober_deliver(b);
}

/* Starts the probe of target i. 0, -ENOMEM, or -EIO (curl would not take the transfer). */
static int prober_add(prober_batch *b, size_t i, const char *ip, int port, const char *path)
{
    prober_req *r = &b->reqs[i];
    r->batch = b;
    char *url = NULL;
    /* An IPv6 Pod IP must be bracketed in a URL. */
    bool v6 = strchr(ip, ':') != NULL;
    if (asprintf(&url, "http://%s%s%s:%d%s", v6 ? "[" : "", ip, v6 ? "]" : "", port, path) < 0)
        return -ENOMEM;
    r->easy = curl_easy_init();
    if (!r->easy) {
        free(url);
        return -ENOMEM;
    }
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)r);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, prober_on_write);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, b->owner->timeout_ms);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    /* Pods are reached directly: a proxy from the environment must not sit in between. */
    curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(r->easy, CURLOPT_USERAGENT, "modelpool-operator-idle-probe");
    if (curl_multi_add_handle(evcurl_multi(b->owner->ec), r->easy) != CURLM_OK) {
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        return -EIO;
    }
    b->pending++;
    return 0;
}

prober_batch *prober_start(prober *p, const char *runtime, const char *idle_endpoint,
                           const prober_target *targets, size_t n, prober_done_fn done, void *ud)
{
    prober_batch *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->owner = p;
    b->done = done;
    b->ud = ud;
    b->n = n;
    b->runtime = strdup(runtime && *runtime ? runtime : "llamacpp");
    b->reqs = calloc(n ? n : 1, sizeof(*b->reqs));
    b->results = calloc(n ? n : 1, sizeof(*b->results));
    b->messages = calloc(n ? n : 1, sizeof(*b->messages));
    b->next = p->batches;
    p->batches = b;
    if (!b->runtime || !b->reqs || !b->results || !b->messages)
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (!(b->results[i].pod = strdup(targets[i].pod)))
            goto fail;

    const char *path = NULL;
    int path_rc = probe_path(runtime, idle_endpoint, &path);
    for (size_t i = 0; i < n; i++) {
        if (path_rc < 0) {
            b->results[i].verdict = PROBE_UNSUPPORTED;
            b->messages[i] = strdup(probe_path_error(path_rc));
        } else if (!targets[i].ip || !*targets[i].ip) {
            b->results[i].verdict = PROBE_ERROR;
            b->messages[i] = strdup("Pod has no IP yet");
        } else if (prober_add(b, i, targets[i].ip, targets[i].port, path) < 0) {
            goto fail;
        }
    }
    if (b->pending == 0 && !(b->timer = ev_timer_add(p->loop, 0, prober_on_timer, b)))
        goto fail;
    return b;
fail:
    prober_batch_free(b);
    return NULL;
}

void prober_cancel(prober_batch *b)
{
    if (b)
        prober_batch_free(b);
}

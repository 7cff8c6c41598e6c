/* kube_client: HTTP calls to the API server on one curl multi handle driven by the ev loop
 * through evcurl. libcurl forbids calling back into the multi handle from its own callbacks, so
 * the write callback only buffers; every user callback runs afterwards from kube_client_pump()
 * (evcurl's progress callback), where adding, cancelling and freeing calls is safe. A call
 * cancelled while the pump runs is only marked dead and freed when the pump ends. */
#include "kube/client.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "kube/watchdec.h"
#include "util/backoff.h"
#include "util/rng.h"
#include "util/scratch.h"
#include "loop/evcurl.h"

#define KUBE_DEFAULT_TIMEOUT_MS 30000
#define KUBE_DEFAULT_RETRIES 5
#define KUBE_CONNECT_TIMEOUT_MS 10000
#define KUBE_KEEPALIVE_S 30
/* A normal call that moves less than a byte a second for this long is stuck, whatever its
 * whole-call timeout says (a LIST may be given minutes). */
#define KUBE_LOW_SPEED_TIME_S 20
/* Watches sit idle for minutes, so they get no low-speed limit; instead the server is asked to
 * end them after timeoutSeconds and we give up KUBE_WATCH_MARGIN_S after that. */
#define KUBE_WATCH_DEFAULT_TIMEOUT_S 300
#define KUBE_WATCH_MARGIN_S 30
#define KUBE_BACKOFF_BASE_MS 200
#define KUBE_BACKOFF_MAX_MS 10000
#define KUBE_RETRY_AFTER_MAX_S 30
/* A watch's scratch region (kube_watch_scratch): room for an event's tree, far above a usual one;
 * a bigger one goes on in the heap. After a big event, what is above KEEP goes back. */
#define KUBE_WATCH_SCRATCH (1u << 20)
#define KUBE_WATCH_SCRATCH_KEEP (64u << 10)
/* Of an error answer to a watch, only the start is kept: it is a Status or a proxy's page. */
#define KUBE_WATCH_ERROR_BODY_MAX (64u << 10)

struct kube_call {
    kube_client *c;
    kube_call *prev, *next;
    CURL *easy;
    bool in_multi;
    bool finished; /* curl is done with this attempt; result holds how it went */
    bool dead;     /* cancelled or answered: freed by the next reap */
    CURLcode result;
    struct curl_slist *headers;
    char *path;
    char *body;
    kube_method method;
    bool watch;
    bool list;
    bool scratch;    /* kube_request.scratch, or kube_watch_scratch */
    scratch *events; /* a watch's events are parsed here (kube_watch_scratch) */
    int retries_left, attempts;
    uint64_t retry_timer;
    long retry_after_s; /* from the last answer's Retry-After, or -1 */
    kube_buf resp;      /* normal calls: the body; watches: an error answer's body */
    kube_wdec dec;
    kube_error werr; /* what went wrong inside the write callback */
    kube_done_fn done;
    kube_watch_event_fn on_event;
    kube_watch_end_fn on_end;
    void *ud;
    char errbuf[CURL_ERROR_SIZE];
};

struct kube_client {
    ev_loop *loop;
    evcurl *ec;
    kube_config cfg;
    kube_call *calls;
    int depth; /* > 0 while the pump runs user callbacks: frees are deferred */
    bool curl_global;
    kube_observe_fn observe;
    void *observe_ud;
    kube_retry_fn on_retry;
    void *on_retry_ud;
};

static const char *const kube_method_names[] = {
    [KUBE_GET] = "GET",       [KUBE_POST] = "POST",         [KUBE_PUT] = "PUT",
    [KUBE_DELETE] = "DELETE", [KUBE_PATCH_MERGE] = "PATCH", [KUBE_PATCH_JSON] = "PATCH",
};

uint64_t kube_retry_delay_ms(int attempt, long retry_after_s, uint64_t rnd)
{
    uint64_t d = util_backoff_ms(KUBE_BACKOFF_BASE_MS, KUBE_BACKOFF_MAX_MS,
                                 attempt > 0 ? (unsigned)attempt : 0, rnd);
    if (retry_after_s >= 0) {
        uint64_t ra = (uint64_t)(retry_after_s < KUBE_RETRY_AFTER_MAX_S ? retry_after_s
                                                                        : KUBE_RETRY_AFTER_MAX_S) *
                      1000u;
        if (ra > d)
            d = ra;
    }
    return d;
}

static void kube_client_pump(void *ud);

kube_client *kube_client_new(ev_loop *loop, const kube_config *cfg, kube_error *err)
{
    if (!cfg->server) {
        kube_error_set(err, KUBE_ERR_CONFIG, "kube client: configuration has no server");
        return NULL;
    }
    /* Before the first answer is parsed: kube_request.scratch needs cJSON to allocate through it.
     */
    scratch_install();
    kube_client *c = calloc(1, sizeof(*c));
    if (!c) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->loop = loop;
    if (kube_config_copy(&c->cfg, cfg, err) < 0) {
        free(c);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kube_config_clear(&c->cfg);
        free(c);
        kube_error_set(err, KUBE_ERR_TRANSPORT, "kube client: libcurl initialisation failed");
        return NULL;
    }
    c->curl_global = true;
    c->ec = evcurl_new(loop, kube_client_pump, c);
    if (!c->ec) {
        kube_client_free(c);
        kube_error_set(err, KUBE_ERR_NOMEM, "kube client: cannot set up libcurl");
        return NULL;
    }
    return c;
}

/* Takes the call out of curl and off the timer; it can be attached again for a retry. */
static void kube_call_detach(kube_call *call)
{
    if (call->in_multi)
        curl_multi_remove_handle(evcurl_multi(call->c->ec), call->easy);
    call->in_multi = false;
    ev_timer_cancel(call->c->loop, call->retry_timer);
    call->retry_timer = 0;
}

static void kube_call_free(kube_call *call)
{
    kube_call_detach(call);
    if (call->easy)
        curl_easy_cleanup(call->easy);
    curl_slist_free_all(call->headers);
    free(call->path);
    free(call->body);
    kube_buf_free(&call->resp);
    kube_wdec_free(&call->dec);
    scratch_free(call->events);
    kube_error_clear(&call->werr);
    free(call);
}

static void kube_call_unlink(kube_call *call)
{
    kube_client *c = call->c;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
}

static void kube_client_reap(kube_client *c)
{
    if (c->depth)
        return;
    kube_call *next;
    for (kube_call *call = c->calls; call; call = next) {
        next = call->next;
        if (call->dead) {
            kube_call_unlink(call);
            kube_call_free(call);
        }
    }
}

void kube_client_free(kube_client *c)
{
    if (!c)
        return;
    while (c->calls) {
        kube_call *call = c->calls;
        kube_call_unlink(call);
        kube_call_free(call);
    }
    evcurl_free(c->ec); /* clears the fds of the connections it closes from the loop */
    if (c->curl_global)
        curl_global_cleanup();
    kube_config_clear(&c->cfg);
    free(c);
}

static size_t kube_call_on_write(char *p, size_t size, size_t n, void *ud)
{
    kube_call *call = ud;
    size_t len = size * n;
    if (call->watch) {
        long code = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && code < 300)
            return kube_wdec_feed(&call->dec, p, len, &call->werr) < 0 ? 0 : len;
        if (call->resp.len >= KUBE_WATCH_ERROR_BODY_MAX)
            return len;
    }
    if (kube_buf_add(&call->resp, p, len) < 0) {
        kube_error_set(&call->werr, KUBE_ERR_NOMEM, "out of memory reading the answer");
        return 0;
    }
    return len;
}

static size_t kube_call_on_header(char *p, size_t size, size_t n, void *ud)
{
    kube_call *call = ud;
    size_t len = size * n;
    static const char ra[] = "Retry-After:";
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        call->retry_after_s = -1; /* a new answer (after a 100 Continue, say) */
    } else if (len > sizeof(ra) - 1 && strncasecmp(p, ra, sizeof(ra) - 1) == 0) {
        char *v = strndup(p + sizeof(ra) - 1, len - (sizeof(ra) - 1));
        call->retry_after_s = kube_retry_after_parse(v);
        free(v);
    }
    return len;
}

/* Headers are rebuilt for each attempt so that a rotated token is picked up by retries too. */
static int kube_call_headers(kube_call *call, kube_error *err)
{
    kube_client *c = call->c;
    const char *token;
    if (kube_config_token(&c->cfg, ev_now_ms(), &token, err) < 0)
        return -1;
    const char *ctype = NULL;
    if (call->body) {
        ctype = call->method == KUBE_PATCH_MERGE  ? "Content-Type: application/merge-patch+json"
                : call->method == KUBE_PATCH_JSON ? "Content-Type: application/json-patch+json"
                                                  : "Content-Type: application/json";
    }
    kube_buf auth = {0};
    struct curl_slist *h = NULL, *t;
    /* "Expect:" stops curl from waiting for a 100 Continue before sending larger bodies. */
    bool ok = (h = curl_slist_append(NULL, "Accept: application/json")) &&
              (t = curl_slist_append(h, "Expect:")) &&
              (!ctype || (t = curl_slist_append(h, ctype)));
    if (ok && token)
        ok = kube_buf_addf(&auth, "Authorization: Bearer %s", token) == 0 &&
             (t = curl_slist_append(h, auth.p));
    if (auth.p)
        memset(auth.p, 0, auth.len); /* no copy of the token lingers in freed memory */
    kube_buf_free(&auth);
    if (!ok) {
        curl_slist_free_all(h);
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    }
    curl_slist_free_all(call->headers);
    call->headers = h;
    curl_easy_setopt(call->easy, CURLOPT_HTTPHEADER, h);
    return 0;
}

/* Starts one attempt. */
static int kube_call_attach(kube_call *call, kube_error *err)
{
    if (kube_call_headers(call, err) < 0)
        return -1;
    kube_buf_free(&call->resp);
    kube_error_clear(&call->werr);
    call->retry_after_s = -1;
    call->finished = false;
    call->attempts++;
    if (curl_multi_add_handle(evcurl_multi(call->c->ec), call->easy) != CURLM_OK)
        return kube_error_set(err, KUBE_ERR_NOMEM, "%s %s: cannot start the transfer",
                              kube_method_names[call->method], call->path);
    call->in_multi = true;
    return 0;
}

/* Delivers the outcome: the call is dead from here on, so a cancel from inside the callback is
 * a no-op and the reap after the pump frees it. */
static void kube_call_finish(kube_call *call, const kube_error *err, long code, const cJSON *body)
{
    kube_call_detach(call);
    call->dead = true;
    if (call->watch)
        call->on_end(call->ud, err);
    else
        call->done(call->ud, err, code, body);
}

/* Codes that a new attempt cannot change: our own setup, TLS trust and our write callback. */
static bool kube_curl_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_WRITE_ERROR:
    case CURLE_TOO_MANY_REDIRECTS:
        return false;
    default:
        return true;
    }
}

static void kube_call_transport_error(kube_call *call, kube_error *err)
{
    const char *why = call->errbuf[0] ? call->errbuf : curl_easy_strerror(call->result);
    if (call->attempts > 1)
        kube_error_set(err, KUBE_ERR_TRANSPORT, "%s %s: %s (after %d attempts)",
                       kube_method_names[call->method], call->path, why, call->attempts);
    else
        kube_error_set(err, KUBE_ERR_TRANSPORT, "%s %s: %s", kube_method_names[call->method],
                       call->path, why);
}

static void kube_call_on_retry(ev_loop *loop, void *ud)
{
    (void)loop;
    kube_call *call = ud;
    kube_client *c = call->c;
    call->retry_timer = 0;
    kube_error err = {0};
    c->depth++;
    if (kube_call_attach(call, &err) < 0)
        kube_call_finish(call, &err, 0, NULL);
    c->depth--;
    kube_error_clear(&err);
    kube_client_reap(c);
}

/* Schedules the next attempt after err; false when the call has no retries left or no timer. */
static bool kube_call_retry(kube_call *call, const kube_error *err)
{
    if (call->retries_left <= 0)
        return false;
    kube_client *c = call->c;
    kube_call_detach(call);
    uint64_t delay = kube_retry_delay_ms(call->attempts - 1, call->retry_after_s, util_rng_next());
    call->retry_timer = ev_timer_add(c->loop, delay, kube_call_on_retry, call);
    if (!call->retry_timer)
        return false;
    call->retries_left--;
    if (c->on_retry)
        c->on_retry(c->on_retry_ud, call->list ? "LIST" : kube_method_names[call->method],
                    call->path, err, call->attempts, delay);
    return true;
}

static void kube_call_complete(kube_call *call)
{
    kube_error err = {0};
    long code = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
    if (call->c->observe)
        call->c->observe(call->c->observe_ud,
                         call->watch  ? "WATCH"
                         : call->list ? "LIST"
                                      : kube_method_names[call->method],
                         code);
    bool http_error = code && (code < 200 || code >= 300);
    if (call->werr.kind != KUBE_OK)
        kube_error_copy(&err, &call->werr);
    else if (http_error) {
        kube_error_from_http(&err, code, call->resp.p, call->resp.len);
        if (call->retry_after_s > 0)
            err.retry_after_s = call->retry_after_s;
    } else if (call->result != CURLE_OK)
        kube_call_transport_error(call, &err);
    else if (call->watch)
        kube_wdec_finish(&call->dec, &err);

    if (!call->watch && err.kind != KUBE_OK && kube_error_retryable(&err) &&
        (http_error || kube_curl_retryable(call->result)) && kube_call_retry(call, &err)) {
        kube_error_clear(&err);
        return;
    }
    cJSON *body = NULL;
    scratch *s = NULL;
    if (!call->watch && call->resp.len) {
        /* A tree is about four times its text: room for that, as address space only. */
        if (call->scratch && err.kind == KUBE_OK && call->resp.len < (size_t)-1 / 8)
            s = scratch_new(call->resp.len * 4);
        scratch_use(s);
        body = cJSON_ParseWithLength(call->resp.p, call->resp.len);
        scratch_use(NULL);
        if (s) /* the tree holds copies of the text: hand the buffer back before the callback */
            kube_buf_free(&call->resp);
    }
    kube_call_finish(call, &err, code, body);
    cJSON_Delete(body);
    scratch_free(s);
    kube_error_clear(&err);
}

/* Hands out the events decoded so far; stops as soon as a callback cancels the watch. */
static void kube_watch_deliver(kube_call *call)
{
    kube_wdec_event ev;
    kube_error err = {0};
    int r = 0;
    if (call->scratch && !call->events)
        call->events = scratch_new(KUBE_WATCH_SCRATCH); /* NULL: events go to the heap */
    while (!call->dead) {
        /* The last event's tree is gone (the callee deleted it): its room serves the next. */
        scratch_reset(call->events, KUBE_WATCH_SCRATCH_KEEP);
        scratch_use(call->events);
        r = kube_wdec_next(&call->dec, &ev, &err);
        scratch_use(NULL);
        if (r != 1)
            break;
        call->on_event(call->ud, ev.type, ev.object);
    }
    if (r < 0 && !call->dead)
        kube_call_finish(call, &err, 0, NULL);
    kube_error_clear(&err);
}

/* evcurl's progress callback, after every curl_multi_socket_action. */
static void kube_client_pump(void *ud)
{
    kube_client *c = ud;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(evcurl_multi(c->ec), &left))) {
        char *priv = NULL;
        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        kube_call *call = (kube_call *)priv;
        call->finished = true;
        call->result = m->data.result;
    }
    /* Calls started from a callback go to the head of the list and wait for the next pump;
     * dead calls stay linked until the reap, so following next pointers stays safe. */
    c->depth++;
    for (kube_call *call = c->calls; call; call = call->next) {
        if (!call->dead && call->watch && call->in_multi)
            kube_watch_deliver(call);
        if (!call->dead && call->finished && call->in_multi)
            kube_call_complete(call);
    }
    c->depth--;
    kube_client_reap(c);
}

/* server + path + ?query, every key and value escaped. Watches get watch=1 and a
 * timeoutSeconds (the caller's, or ours); *timeout_s returns it. */
static char *kube_call_url(const kube_client *c, const char *path, const kube_query *query,
                           bool watch, long *timeout_s)
{
    kube_buf b = {0};
    bool ok = kube_buf_adds(&b, c->cfg.server) == 0 && kube_buf_adds(&b, path) == 0;
    char sep = '?';
    if (ok && watch) {
        ok = kube_buf_adds(&b, "?watch=1") == 0;
        sep = '&';
    }
    *timeout_s = -1;
    for (const kube_query *q = query; ok && q && q->key; q++) {
        ok = kube_buf_add(&b, &sep, 1) == 0 && kube_buf_add_escaped(&b, q->key) == 0 &&
             kube_buf_adds(&b, "=") == 0 && kube_buf_add_escaped(&b, q->value ? q->value : "") == 0;
        sep = '&';
        if (strcmp(q->key, "timeoutSeconds") == 0 && q->value)
            *timeout_s = strtol(q->value, NULL, 10);
    }
    if (ok && watch && *timeout_s <= 0) {
        *timeout_s = KUBE_WATCH_DEFAULT_TIMEOUT_S;
        ok = kube_buf_addf(&b, "%ctimeoutSeconds=%d", sep, KUBE_WATCH_DEFAULT_TIMEOUT_S) == 0;
    }
    if (!ok) {
        kube_buf_free(&b);
        return NULL;
    }
    return kube_buf_take(&b);
}

/* Everything about the transfer that stays the same across attempts. */
static int kube_call_setup(kube_call *call, const char *url, long timeout_ms)
{
    const kube_config *cfg = &call->c->cfg;
    CURL *e = call->easy;
    CURLcode rc = CURLE_OK;
#define KUBE_SET(opt, val) rc = rc ? rc : curl_easy_setopt(e, opt, val)
    KUBE_SET(CURLOPT_URL, url);
    KUBE_SET(CURLOPT_PROTOCOLS_STR, "http,https");
    KUBE_SET(CURLOPT_PRIVATE, call);
    KUBE_SET(CURLOPT_WRITEFUNCTION, kube_call_on_write);
    KUBE_SET(CURLOPT_WRITEDATA, call);
    KUBE_SET(CURLOPT_HEADERFUNCTION, kube_call_on_header);
    KUBE_SET(CURLOPT_HEADERDATA, call);
    KUBE_SET(CURLOPT_ERRORBUFFER, call->errbuf);
    KUBE_SET(CURLOPT_NOSIGNAL, 1L);
    /* HTTP/1.1: one connection per watch, simple and well trodden in curl 7.88; keep-alive
     * still reuses connections between normal calls. */
    KUBE_SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    KUBE_SET(CURLOPT_CONNECTTIMEOUT_MS, (long)KUBE_CONNECT_TIMEOUT_MS);
    KUBE_SET(CURLOPT_TCP_KEEPALIVE, 1L);
    KUBE_SET(CURLOPT_TCP_KEEPIDLE, (long)KUBE_KEEPALIVE_S);
    KUBE_SET(CURLOPT_TCP_KEEPINTVL, (long)KUBE_KEEPALIVE_S);
    KUBE_SET(CURLOPT_TIMEOUT_MS, timeout_ms);
    if (!call->watch) {
        KUBE_SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        KUBE_SET(CURLOPT_LOW_SPEED_TIME, (long)KUBE_LOW_SPEED_TIME_S);
        KUBE_SET(CURLOPT_ACCEPT_ENCODING, ""); /* big LISTs come gzipped */
    }
    if (cfg->insecure) {
        KUBE_SET(CURLOPT_SSL_VERIFYPEER, 0L);
        KUBE_SET(CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg->ca_data) {
        struct curl_blob b = {cfg->ca_data, cfg->ca_data_len, CURL_BLOB_COPY};
        KUBE_SET(CURLOPT_CAINFO_BLOB, &b);
    } else if (cfg->ca_file) {
        KUBE_SET(CURLOPT_CAINFO, cfg->ca_file);
    }
    if (cfg->cert_data) {
        struct curl_blob b = {cfg->cert_data, cfg->cert_data_len, CURL_BLOB_COPY};
        KUBE_SET(CURLOPT_SSLCERT_BLOB, &b);
    } else if (cfg->cert_file) {
        KUBE_SET(CURLOPT_SSLCERT, cfg->cert_file);
    }
    if (cfg->key_data) {
        struct curl_blob b = {cfg->key_data, cfg->key_data_len, CURL_BLOB_COPY};
        KUBE_SET(CURLOPT_SSLKEY_BLOB, &b);
    } else if (cfg->key_file) {
        KUBE_SET(CURLOPT_SSLKEY, cfg->key_file);
    }
    if (cfg->cert_data || cfg->cert_file) {
        KUBE_SET(CURLOPT_SSLCERTTYPE, "PEM");
        KUBE_SET(CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (cfg->proxy_url)
        KUBE_SET(CURLOPT_PROXY, cfg->proxy_url);
    if (cfg->user_agent)
        KUBE_SET(CURLOPT_USERAGENT, cfg->user_agent);
    if (call->method == KUBE_GET) {
        KUBE_SET(CURLOPT_HTTPGET, 1L);
    } else {
        KUBE_SET(CURLOPT_CUSTOMREQUEST, kube_method_names[call->method]);
        if (call->body) {
            KUBE_SET(CURLOPT_POSTFIELDS, call->body);
            KUBE_SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(call->body));
        }
    }
#undef KUBE_SET
    return rc == CURLE_OK ? 0 : -1;
}

static kube_call *kube_call_new(kube_client *c, kube_method method, const char *path,
                                const kube_query *query, const char *body, long timeout_ms,
                                bool watch, kube_error *err)
{
    if ((unsigned)method > KUBE_PATCH_JSON || !path || path[0] != '/') {
        kube_error_set(err, KUBE_ERR_CONFIG, "kube call: bad method or path \"%s\"",
                       path ? path : "(null)");
        return NULL;
    }
    kube_call *call = calloc(1, sizeof(*call));
    if (!call) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    call->c = c;
    call->method = method;
    call->watch = watch;
    call->retry_after_s = -1;
    kube_wdec_init(&call->dec, 0);
    long watch_s;
    char *url = kube_call_url(c, path, query, watch, &watch_s);
    if (watch) /* a day bounds the arithmetic; no server keeps a watch open that long */
        timeout_ms = ((watch_s < 86400 ? watch_s : 86400) + KUBE_WATCH_MARGIN_S) * 1000;
    else if (timeout_ms <= 0)
        timeout_ms = KUBE_DEFAULT_TIMEOUT_MS;
    if (!url || !(call->path = strdup(path)) || (body && !(call->body = strdup(body))) ||
        !(call->easy = curl_easy_init()) || kube_call_setup(call, url, timeout_ms) < 0) {
        free(url);
        kube_call_free(call);
        kube_error_set(err, KUBE_ERR_NOMEM, "kube call %s: cannot set up the transfer", path);
        return NULL;
    }
    free(url); /* curl keeps its own copy */
    if (kube_call_attach(call, err) < 0) {
        kube_call_free(call);
        return NULL;
    }
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    return call;
}

void kube_client_observe(kube_client *c, kube_observe_fn fn, void *ud)
{
    c->observe = fn;
    c->observe_ud = ud;
}

void kube_client_on_retry(kube_client *c, kube_retry_fn fn, void *ud)
{
    c->on_retry = fn;
    c->on_retry_ud = ud;
}

kube_call *kube_call_start(kube_client *c, const kube_request *req, kube_done_fn done, void *ud,
                           kube_error *err)
{
    kube_call *call = kube_call_new(c, req->method, req->path, req->query, req->body,
                                    req->timeout_ms, false, err);
    if (!call)
        return NULL;
    call->retries_left = req->max_retries < 0 ? KUBE_DEFAULT_RETRIES : req->max_retries;
    call->list = req->list && req->method == KUBE_GET;
    call->scratch = req->scratch;
    call->done = done;
    call->ud = ud;
    return call;
}

kube_call *kube_watch_start(kube_client *c, const char *path, const kube_query *query,
                            kube_watch_event_fn on_event, kube_watch_end_fn on_end, void *ud,
                            kube_error *err)
{
    kube_call *call = kube_call_new(c, KUBE_GET, path, query, NULL, 0, true, err);
    if (!call)
        return NULL;
    call->on_event = on_event;
    call->on_end = on_end;
    call->ud = ud;
    return call;
}

void kube_watch_scratch(kube_call *call)
{
    call->scratch = true;
}

void kube_call_cancel(kube_call *call)
{
    if (!call || call->dead)
        return;
    kube_call_detach(call);
    call->dead = true;
    kube_client_reap(call->c);
}

/* kube_client: asynchronous calls to the Kubernetes API server on the process's one event loop.
 * One curl multi handle carries every call (connections are reused, HTTP keep-alive, TCP
 * keepalive); callers get their answer in a callback from ev_run(), never by blocking. Nothing here
 * knows about ModelPools, so the router can reuse it. */
#ifndef MP_KUBE_CLIENT_H
#define MP_KUBE_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/config.h"
#include "kube/error.h"
#include "loop/ev.h"

typedef struct kube_client kube_client;
typedef struct kube_call kube_call;

typedef enum {
    KUBE_GET,
    KUBE_POST,
    KUBE_PUT,
    KUBE_DELETE,
    KUBE_PATCH_MERGE, /* application/merge-patch+json */
    KUBE_PATCH_JSON,  /* application/json-patch+json */
} kube_method;

/* A query parameter. Arrays of them end with {NULL, NULL}; values are URL-encoded by the client. */
typedef struct kube_query {
    const char *key;
    const char *value;
} kube_query;

typedef struct kube_request {
    kube_method method;
    const char *path;        /* e.g. "/api/v1/namespaces/default/pods"; see kube_path() */
    const kube_query *query; /* may be NULL */
    const char *body;        /* JSON for POST/PUT/PATCH, else NULL */
    long timeout_ms;         /* whole-call timeout of each attempt; 0 means the default (30 s) */
    int max_retries;         /* retries of 429, 5xx and transport errors; -1 means default (5) */
    bool list;               /* a GET of a collection: counted as verb LIST by the observer */
    /* The callback only reads the answer's tree and keeps no part of it (not even detached):
     * the client may parse it in scratch memory (util/scratch.h), released once the callback
     * returns, so that a big answer leaves no holes in the heap. */
    bool scratch;
} kube_request;

/* The answer to a call. err->kind == KUBE_OK for 2xx. body is the parsed JSON answer (NULL when
 * the answer was empty or not JSON); it is borrowed: valid during the callback only (detach or
 * duplicate what you keep). For errors, err carries the Status reason and message. */
typedef void (*kube_done_fn)(void *ud, const kube_error *err, long http_code, const cJSON *body);

/* Watch stream events. type is "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR" (then object
 * is a metav1.Status). The callee takes ownership of object (cJSON_Delete it or keep it). */
typedef void (*kube_watch_event_fn)(void *ud, const char *type, cJSON *object);
/* The stream ended. err->kind == KUBE_OK when the server closed it normally (timeoutSeconds);
 * otherwise why. Called exactly once per watch unless the watch was cancelled. */
typedef void (*kube_watch_end_fn)(void *ud, const kube_error *err);

/* Creates a client on loop for cfg (copied). NULL on failure with err set. */
kube_client *kube_client_new(ev_loop *loop, const kube_config *cfg, kube_error *err);
/* Cancels every call still in flight (their callbacks are not called) and frees the client.
 * Not from inside one of the client's own callbacks. */
void kube_client_free(kube_client *c);

/* Called once per attempt that got an answer or failed in transport (retries count again), with
 * verb GET, LIST, WATCH, POST, PUT, PATCH or DELETE and the HTTP status (0: no answer). For
 * request metrics; NULL turns it off. */
typedef void (*kube_observe_fn)(void *ud, const char *verb, long http_code);
void kube_client_observe(kube_client *c, kube_observe_fn fn, void *ud);

/* Called before each retry the client schedules on its own (calls, not watches): verb and path
 * of the call, what the last attempt got (an HTTP error or a transport error: refused, reset,
 * timed out), the retry's number (1 for the first) and the wait before it in milliseconds. For
 * logs; NULL turns it off. */
typedef void (*kube_retry_fn)(void *ud, const char *verb, const char *path, const kube_error *err,
                              int retry, uint64_t delay_ms);
void kube_client_on_retry(kube_client *c, kube_retry_fn fn, void *ud);

/* Starts a call; done runs later from the loop, exactly once, unless the call is cancelled first.
 * Returns NULL only if the call could not even be queued (err set, done never called). 429/5xx
 * and transport errors are retried with backoff and jitter, honouring Retry-After; other 4xx
 * are not. */
kube_call *kube_call_start(kube_client *c, const kube_request *req, kube_done_fn done, void *ud,
                           kube_error *err);
/* Starts a watch: GET path?watch=1&<query>; events arrive as they are decoded. No retries here:
 * resuming is the informer's job (an error answer's Retry-After is in the end's err). NULL on
 * immediate failure (err set). Without a timeoutSeconds in query, timeoutSeconds=300 is added; the
 * watch is abandoned (transport error) 30 s after timeoutSeconds if the server has not ended it, so
 * a silently dead connection is noticed. */
kube_call *kube_watch_start(kube_client *c, const char *path, const kube_query *query,
                            kube_watch_event_fn on_event, kube_watch_end_fn on_end, void *ud,
                            kube_error *err);
/* The watch's on_event only reads each object and deletes it before it returns (it keeps no part of
 * it): the client may then parse events in a scratch region of the watch's own (util/scratch.h),
 * so that the trees of a stream of events leave no holes among the records decoded from them. */
void kube_watch_scratch(kube_call *call);
/* Cancels a call or watch in flight; its callbacks will not run. Safe to call from inside any
 * callback, but not on a call whose done/end callback has already started. */
void kube_call_cancel(kube_call *call);

/* The wait before retry number attempt (0 for the first retry): exponential from 200 ms up to
 * 10 s with the upper half random (util_backoff_ms; rnd: any random word), or the server's
 * Retry-After seconds when longer (honoured up to 30 s). Exposed for tests. */
uint64_t kube_retry_delay_ms(int attempt, long retry_after_s, uint64_t rnd);

/* Builds an API path, escaping each segment: group "" means the core group (/api/v1).
 * namespace, name and subresource may be NULL (namespace "" too: all namespaces); an empty
 * resource, name or subresource gives NULL. Returns a malloc'd string or NULL. Example:
 * kube_path("inference.llmkube.dev", "v1alpha1", "ns", "modelpools", "p", "status"). */
char *kube_path(const char *group, const char *version, const char *namespace_,
                const char *resource, const char *name, const char *subresource);

#endif

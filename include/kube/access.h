/* kube_access: may the caller of an HTTP endpoint read it? Asked of the API server the way
 * Kubernetes components and kubebuilder operators ask: the request's bearer token in a
 * TokenReview, then the user it names in a SubjectAccessReview for a verb on a non-resource path
 * (get /metrics). Answers are cached briefly (kube_access_cache) and concurrent checks of one
 * token share one review, so a burst of scrapes costs two API calls. It fails closed: no
 * answer from the API server is 503, never a pass. */
#ifndef MP_KUBE_ACCESS_H
#define MP_KUBE_ACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "loop/ev.h"

typedef struct kube_access kube_access;

/* The verdict as an HTTP status: 200 allowed, 401 no valid token, 403 authenticated but not
 * allowed, 503 the API server could not tell (why says what happened). */
typedef void (*kube_access_done_fn)(void *ud, int code, const char *why);

typedef struct kube_access_opts {
    const char *path;  /* the non-resource URL asked about, e.g. "/metrics" */
    const char *verb;  /* e.g. "get" */
    size_t cache_size; /* 0: 256 tokens */
    uint64_t ttl_ms;   /* 0: 10 s */
    long timeout_ms;   /* each review call; 0: 5 s */
} kube_access_opts;

/* NULL when out of memory. The client is borrowed and must outlive the checker. */
kube_access *kube_access_new(kube_client *client, const kube_access_opts *opts);
/* Cancels the reviews in flight; their callbacks are not called, and every check's handle is
 * gone. NULL is a no-op. */
void kube_access_free(kube_access *a);

typedef struct kube_access_waiter kube_access_waiter;

/* Checks the Authorization header value (NULL: none). done runs exactly once, unless the check
 * is cancelled or the checker freed first: from inside this call (a cached or malformed answer,
 * or an error), which then returns NULL, or later from the loop, and then the check's handle is
 * returned, valid until done runs. */
kube_access_waiter *kube_access_check(kube_access *a, const char *authorization,
                                      kube_access_done_fn done, void *ud);
/* Cancels a check whose done has not run: done never runs. A review that no check waits on any
 * more is aborted (its API call cancelled, nothing cached). NULL is a no-op, and so is a call
 * from inside the check's own done. */
void kube_access_cancel(kube_access_waiter *w);

/* The token of an "Authorization: Bearer <token>" value: the scheme in any case, blanks around
 * the token, no blank or control character inside it. 0 with *token, *len set, or -EINVAL. */
int kube_access_bearer(const char *authorization, const char **token, size_t *len);

#endif

/* kube_error: what went wrong with a call to the API server, as a value the caller must look at.
 * It carries the HTTP code and the Status reason and message the server sent, so callers branch on
 * facts ("Conflict", "Gone", "NotFound") and users read the server's own words. */
#ifndef MP_KUBE_ERROR_H
#define MP_KUBE_ERROR_H

#include <stdbool.h>

typedef enum {
    KUBE_OK = 0,
    KUBE_ERR_CONFIG,    /* bad kubeconfig / in-cluster environment / flags */
    KUBE_ERR_TRANSPORT, /* connect, TLS, timeout, reset: no HTTP answer */
    KUBE_ERR_HTTP,      /* the server answered with a status >= 400 */
    KUBE_ERR_DECODE,    /* the answer was not the JSON we expected */
    KUBE_ERR_NOMEM,
} kube_errkind;

typedef struct kube_error {
    kube_errkind kind;
    long http_code; /* 0 when there was no HTTP answer */
    char *reason;   /* metav1.Status reason ("NotFound", "Conflict", "Gone", ...) or NULL */
    char *message;  /* always set when kind != KUBE_OK; owned */
} kube_error;

/* Frees the strings and resets to KUBE_OK. Safe on a zeroed or already-cleared error. */
void kube_error_clear(kube_error *err);
/* Replaces err's content (printf-style message). Returns -1 so callers can `return kube_error_set(...)`. */
int kube_error_set(kube_error *err, kube_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when err is an HTTP error with that Status reason (e.g. "Conflict"). */
bool kube_error_is(const kube_error *err, const char *reason);
/* Deep copy; returns 0 or -1 on allocation failure (dst then holds KUBE_ERR_NOMEM). */
int kube_error_copy(kube_error *dst, const kube_error *src);

#endif

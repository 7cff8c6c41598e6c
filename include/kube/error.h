/* kube_error: what went wrong with a call to the API server, as a value the caller must look at.
 * It carries the HTTP code and the Status reason and message the server sent, so callers branch on
 * facts ("Conflict", "Gone", "NotFound") and users read the server's own words.
 * The project's error rule (docs/contributing.md): a negative errno for local calls, a kube_error
 * for calls to the API server, an error buffer (char *err, size_t errlen) for start-up. */
#ifndef MP_KUBE_ERROR_H
#define MP_KUBE_ERROR_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

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
    /* The answer's Retry-After in seconds (a 429 or a 503 asks the client to wait that long);
     * 0 when it sent none. Set by the client on HTTP errors, watches' included. */
    long retry_after_s;
} kube_error;

/* Frees the strings and resets to KUBE_OK. Safe on a zeroed or already-cleared error. */
void kube_error_clear(kube_error *err);
/* Replaces err's content (printf-style message). Returns -1 so callers can `return
 * kube_error_set(...)`. */
int kube_error_set(kube_error *err, kube_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when err is an HTTP error with that Status reason (e.g. "Conflict"). */
bool kube_error_is(const kube_error *err, const char *reason);
/* Deep copy; returns 0 or -1 on allocation failure (dst then holds KUBE_ERR_NOMEM). */
int kube_error_copy(kube_error *dst, const kube_error *src);

/* Fills err (KUBE_ERR_HTTP) from an error answer: a metav1.Status body gives its reason and
 * message; any other body gives "HTTP <code>: <start of the body>". When the server sent no
 * reason, the usual one for the code is used (404 -> "NotFound", 409 -> "Conflict", ...). */
void kube_error_from_http(kube_error *err, long http_code, const char *body, size_t len);
/* Same from an already parsed metav1.Status (a watch ERROR event: its "code" field, if any,
 * wins over http_code). */
void kube_error_from_status(kube_error *err, const cJSON *status, long http_code);
/* True for errors worth retrying as they are: transport errors, 429 and 5xx. */
bool kube_error_retryable(const kube_error *err);
/* A Retry-After header value in seconds (surrounding blanks allowed), or -1 when it is not a
 * plain number of seconds (the API server never sends HTTP dates). */
long kube_retry_after_parse(const char *value);

#endif

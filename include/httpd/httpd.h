/* httpd: a small HTTP or HTTPS server (libmicrohttpd, TLS through its GnuTLS backend) on the
 * process's event loop, for /metrics, /healthz and /readyz, and for the test tree's simulated Pods.
 * MHD runs in "external epoll" mode: no thread, one fd and one timer in the ev loop. It answers
 * through a callback, now or later (a suspended connection), and knows nothing of what it serves.
 */
#ifndef MP_HTTPD_HTTPD_H
#define MP_HTTPD_HTTPD_H

#include <stddef.h>
#include <sys/socket.h>

#include "loop/ev.h"

typedef struct httpd httpd;

typedef struct httpd_reply {
    unsigned code;            /* HTTP status; 0 means 500 */
    const char *content_type; /* NULL: text/plain; charset=utf-8 */
    char *body;               /* malloc'd (the server frees it), or NULL for an empty body */
    size_t len;               /* bytes of body */
} httpd_reply;

/* Fills out for a request; runs from ev_run(). out starts zeroed. */
typedef void (*httpd_answer_fn)(void *ud, const char *method, const char *path, httpd_reply *out);

typedef struct httpd_req httpd_req;

/* The asynchronous form: answer with httpd_req_reply(), from inside the call or later from the
 * loop (the connection waits suspended meanwhile, with no thread). Exactly one reply per req. */
typedef void (*httpd_request_fn)(void *ud, httpd_req *req);

typedef struct httpd_config {
    const char *bind;         /* as httpd_parse_bind takes it, but not "0" */
    httpd_answer_fn answer;   /* one of answer (immediate) and request (asynchronous) */
    httpd_request_fn request; /* is set */
    void *ud;
    /* HTTPS when both are set: PEM certificate (chain) and private key, copied at start. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
} httpd_config;

/* Parses a bind address as the flags take it: ":8080" (every IPv4 interface), "127.0.0.1:8080",
 * "[::1]:8080", port 0 meaning one picked by the kernel, or "0" meaning "do not serve".
 * Returns 0 (*ss, *len set), 1 for "0", or -1 with a message in err. */
int httpd_parse_bind(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
                     size_t errlen);

/* Listens on bind (as httpd_parse_bind takes it, but not "0"). NULL when it cannot, with the
 * reason in err. */
httpd *httpd_start(ev_loop *loop, const char *bind, httpd_answer_fn answer, void *ud, char *err,
                   size_t errlen);
/* Listens as cfg says. NULL when it cannot (the address is taken, TLS is not built into
 * libmicrohttpd, the key does not match the certificate, ...), with the reason in err. */
httpd *httpd_start_config(ev_loop *loop, const httpd_config *cfg, char *err, size_t errlen);

/* A request's method, path (without the query) and a header (case-insensitive name; NULL when
 * absent). Valid until the req is replied to. */
const char *httpd_req_method(const httpd_req *r);
const char *httpd_req_path(const httpd_req *r);
const char *httpd_req_header(const httpd_req *r, const char *name);
/* The ud the server was started with. */
void *httpd_req_ud(const httpd_req *r);
/* Answers r and takes reply->body; r is gone afterwards. A req not yet answered when its server
 * stops is dropped with its connection: its owner must forget it before httpd_stop. */
void httpd_req_reply(httpd_req *r, httpd_reply *reply);

/* The port listened on (the kernel's pick for port 0). */
int httpd_port(const httpd *h);
/* Closes the listener and every connection. NULL is a no-op. Not from inside the callback. */
void httpd_stop(httpd *h);

#endif

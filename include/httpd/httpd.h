/* httpd: a small HTTP or HTTPS server (libmicrohttpd, TLS through its GnuTLS backend) on the
 * process's event loop, for /metrics, /healthz and /readyz, the router's front and the test tree's
 * simulated Pods. MHD runs in "external epoll" mode: no thread, one fd and one timer in the ev
 * loop. It answers through a callback, now or later (a suspended connection), reads request bodies
 * and writes replies as streams with backpressure both ways, and knows nothing of what it serves.
 * The lifetime rule: work started for a request (an API call, a forward, a timer) is registered
 * with it (httpd_req_work) and cancelled by httpd when the request ends unanswered, so no work
 * outlives its connection and nothing calls back into a request that is gone.
 */
#ifndef MP_HTTPD_HTTPD_H
#define MP_HTTPD_HTTPD_H

#include <stdbool.h>
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

/* The asynchronous form, called once the request's headers are in (its body, if any, not yet
 * read): answer with httpd_req_reply() or a stream (httpd_req_stream_begin), from inside the call
 * or later from the loop (the connection waits suspended meanwhile, with no thread). Exactly one
 * answer per req. The body is read only when asked for (httpd_req_body). */
typedef void (*httpd_request_fn)(void *ud, httpd_req *req);

typedef struct httpd_config {
    const char *bind;         /* as httpd_parse_bind takes it, but not "0" */
    httpd_answer_fn answer;   /* one of answer (immediate) and request (asynchronous) */
    httpd_request_fn request; /* is set */
    void *ud;
    /* HTTPS when both are set: PEM certificate (chain) and private key, copied at start. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
    /* 0: the defaults for a few scrapers and probes (64 connections, 30 s idle timeout). A
     * suspended connection (held, paused or waiting for stream bytes) never times out.
     * A connection is "waiting" from its accept, and again from the end of each request, until
     * its next request head is complete (a TLS handshake included). At max_connections, a new
     * connection closes a waiting one of the client (address) holding the most, its oldest, so a
     * flood of idle or half-sent connections cannot lock another client out, even one whose head
     * has yet to arrive; one inside a request is never closed for it. With
     * every open connection inside a request, a few more are accepted, then none (they wait in
     * the listen backlog) until one closes. */
    unsigned max_connections;
    unsigned idle_timeout_s; /* no byte moved for this long, in any phase */
    /* A waiting connection whose request head is not complete this long after it began to wait
     * is closed (a slow or stalled head, or an idle keep-alive connection); 0: none. */
    unsigned head_timeout_ms;
    /* Connections open at once from one client IP address; past it a new one is closed at
     * accept, unanswered. 0: no cap. */
    unsigned max_per_client;
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
/* Calls fn for every request header in the order received; fn returns false to stop. */
typedef bool (*httpd_header_fn)(void *ud, const char *name, const char *value);
void httpd_req_headers(const httpd_req *r, httpd_header_fn fn, void *ud);
/* The path with the query, as a proxy sends it on: malloc'd, NULL when out of memory. The query's
 * arguments are re-encoded from their decoded values (percent-encoding may differ from the
 * client's, the meaning does not). */
char *httpd_req_target(const httpd_req *r);
/* The client's IP address as text (no port): 0, -ENOENT when unknown, -ENOSPC when buf is too
 * small. */
int httpd_req_client_addr(const httpd_req *r, char *buf, size_t len);
/* The ud the server was started with. */
void *httpd_req_ud(const httpd_req *r);

/* Answers r and takes reply->body; r is gone afterwards, and so are its work registrations
 * (httpd_req_work: their cancels never run). A req not yet answered when its server stops is
 * dropped with its connection, its work cancelled inside httpd_stop.
 * Answering before the body was read (a 404, a 413 on Content-Length): sent at once; MHD then
 * closes the connection rather than read a body nobody wants. Answering while the body is partly
 * read: MHD can only send once the request is complete, so the rest of the body is read and
 * discarded first when it is at most 1 MiB; a longer rest closes the connection unanswered. */
void httpd_req_reply(httpd_req *r, httpd_reply *reply);

/* Request bodies, streamed as MHD reads them (bounded by MHD's per-connection buffer, no copy of
 * the whole body). fn gets each chunk in order (data valid during the call only), then one call
 * with end set (len may be 0): the whole body is in. An empty or absent body gives just the end
 * call. fn may pause, resume, answer r or begin its stream from inside. */
typedef void (*httpd_body_fn)(void *ud, const char *data, size_t len, bool end);
/* Starts delivering r's body to fn, once per req, before r is answered: 0, -EALREADY or -EINVAL.
 * Delivery starts from the loop, never inside this call. */
int httpd_req_body(httpd_req *r, httpd_body_fn fn, void *ud);
/* Pause stops delivery after the current chunk: the connection is suspended, MHD stops reading
 * the socket and the client's sends block once the kernel buffers fill (backpressure). Resume
 * (from anywhere on the loop) delivers again, from the loop. Both are no-ops when not reading. */
void httpd_req_body_pause(httpd_req *r);
void httpd_req_body_resume(httpd_req *r);

/* Streaming replies. A header is a name/value pair, copied. */
typedef struct httpd_header {
    const char *name, *value;
} httpd_header;
/* Starts the reply: status code and headers (a Content-Length header gives a fixed-length body;
 * otherwise chunked transfer encoding, or close-delimited for an HTTP/1.0 client).
 * 0, -EALREADY (already answered), -EINVAL (bad Content-Length) or -ENOMEM. The headers go out
 * with the first bytes or at httpd_req_stream_end, as soon as MHD may send (see httpd_req_reply
 * on a body partly read); a header with an empty value is left out (MHD cannot send it). */
int httpd_req_stream_begin(httpd_req *r, unsigned code, const httpd_header *headers, size_t n);
/* Copies data for the client; it is sent from the loop without waiting for more. Returns 0, 1
 * when the bytes buffered here exceed the high-water mark (256 KiB: the producer should pause
 * until the drain callback), or -EINVAL (no stream begun, or ended) / -ENOMEM. */
int httpd_req_stream_write(httpd_req *r, const char *data, size_t len);
/* fn runs from the loop, once per time httpd_req_stream_write returned 1, when every buffered
 * byte has been handed to the connection; never once r ended under its owner (httpd_req_work). */
void httpd_req_stream_on_drain(httpd_req *r, void (*fn)(void *ud), void *ud);
/* Ends the stream once the buffered bytes are sent; ok false instead aborts: the connection is
 * closed where the reply stands, so the client sees a truncated reply (no final chunk, or fewer
 * bytes than Content-Length). r is gone for its owner afterwards, with its work registrations
 * (as after httpd_req_reply). */
void httpd_req_stream_end(httpd_req *r, bool ok);

/* Ends r now, its body partly read (a stalled upload, one that will not be read on): MHD could
 * send an answer only after the whole body, so on a plain connection for which nothing was sent
 * the reply (code, headers, body, and Connection: close) is written straight to the socket; then
 * the connection is closed (over TLS, or once a response began: closed unanswered). The reply is
 * read by a client that has stopped sending; one still sending may see a reset instead. r is
 * gone for its owner afterwards, with its work registrations (as after httpd_req_reply). */
void httpd_req_abort(httpd_req *r, unsigned code, const httpd_header *headers, size_t n,
                     const char *body, size_t len);

/* Work started for r, i.e. anything that will call back with r or with state that refers to it
 * (an access review, a forward, a timer, the owner's whole handling of r), is registered here
 * with a cancel. httpd runs cancel(ud) exactly once if r ends before its owner finished it
 * (httpd_req_reply, httpd_req_stream_end, httpd_req_abort): the client went away, a read or
 * write failed, the connection timed out (from the loop), or the server stops (from inside
 * httpd_stop). The cancel must stop the work so that nothing of it runs again or touches r; r is
 * gone once the cancels have returned. A cancel need answer nothing (an answer would be dropped:
 * the connection is closing), may free its own state and may end r's other registrations
 * (httpd_work_done); r's cancels run newest first. Finishing r ends its registrations without
 * running them: the handle is gone then, so work that ends without answering r ends its
 * registration first. Returns the registration, or NULL (out of memory, or r already ending: called
 * from one of its cancels): the caller must then not start the work, or stop it. What is seen when:
 * while MHD reads the body or sends the reply, a closed or reset connection is seen at once. MHD
 * does not poll a suspended connection, so this file watches the socket of one waiting for its
 * answer (after its body, or before it is asked for) or for stream bytes: a reset is seen at once.
 * An end of file may be a client that only half-closed and still reads: it is taken for gone at
 * once when a response has begun (a stream waiting for bytes); before that, on plain HTTP/1.1, an
 * interim 100 Continue makes a client that left reset (seen at once), and over TLS or HTTP/1.0 the
 * request stays until its answer fails to go out. Not seen until the connection is resumed (the
 * answer, a write, a body resume): a client that leaves with bytes still unread on the socket (a
 * paused body, a pipelined request, a TLS close_notify). A request that stays keeps its work until
 * that work ends (its own timeout bounds it). */
typedef struct httpd_work httpd_work;
httpd_work *httpd_req_work(httpd_req *r, void (*cancel)(void *ud), void *ud);
/* The work ended while r goes on (before r is answered): its cancel will not run, w is gone.
 * NULL is a no-op, and so is a call from inside w's own cancel. */
void httpd_work_done(httpd_work *w);

/* Connections open now: accepted and not yet closed. 0 for NULL. */
size_t httpd_connections(const httpd *h);
/* The port listened on (the kernel's pick for port 0). */
int httpd_port(const httpd *h);
/* Requests not over yet: unanswered, or answered and still being sent. A server shutting down
 * waits for 0 before httpd_stop, so answers already given reach their clients. */
size_t httpd_pending(const httpd *h);
/* Closes the listener and every connection; the work of requests not finished is cancelled
 * first (httpd_req_work), inside this call. NULL is a no-op. Not from inside a callback of h. */
void httpd_stop(httpd *h);

#endif

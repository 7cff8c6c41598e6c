/* fwd: the router's upstream side. Forwards one client request to a member Pod over HTTP/1.1
 * with libcurl (one multi handle on the ev loop through evcurl, connections kept alive and reused),
 * streaming the request body up and the response down with backpressure both ways. */
#ifndef MP_ROUTER_FORWARD_H
#define MP_ROUTER_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"

typedef struct fwd fwd;
typedef struct fwd_call fwd_call;

typedef struct fwd_config {
    long connect_timeout_ms; /* 0: 2000 */
    /* Once the request body went out: the longest the member may send nothing, no byte of its
     * head or body, while fwd is ready to take one (time with the receive side paused by the
     * caller does not count); 0: none. A call that runs out of it before the head ends
     * UPSTREAM_FAILED_BEFORE_RESPONSE and is not retried (the member took the request and may be
     * working on it); after the head, FAILED_AFTER_RESPONSE. */
    long idle_timeout_ms;
    long max_idle_connections; /* the connection cache, all members together; 0: 64 */
    /* Connections open to one member at a time; 0: no limit. Calls beyond it wait in curl for a
     * connection (that wait counts against neither timeout). */
    long max_host_connections;
    /* An idle connection older than this is not reused, but closed; 0: 4000. Below the 5 s
     * keep-alive timeout of llama.cpp's and uvicorn's servers, so a connection is not reused
     * just as the member closes it. */
    long max_idle_age_ms;
    /* fwd_body() returns 1 while more than this many request bytes wait to be sent; 0: 256 KiB. */
    size_t body_high_water;
    /* Request bodies up to this size are kept until the response starts, so that a second target
     * can get the request from the start; a longer body is not retried. 0: 1 MiB. */
    size_t replay_cap;
} fwd_config;

typedef struct fwd_header {
    const char *name;
    const char *value;
} fwd_header;

typedef struct fwd_target {
    const char *ip; /* numeric IPv4 or IPv6 address */
    int port;
} fwd_target;

/* Everything is copied by fwd_start; nothing needs to outlive the call to it. */
typedef struct fwd_request {
    const char *method;        /* "GET", "POST", ... */
    const char *path;          /* with the query: "/v1/models?x=1" */
    const fwd_header *headers; /* as the client sent them; hop-by-hop ones, Host, Content-Length
                                * and Expect are dropped */
    size_t nheaders;
    const char *client_addr; /* the client's IP, appended to X-Forwarded-For; NULL: none */
    /* Tried in order; the second (if any) only when the first fails before any response byte
     * (refused, reset, closed, timed out connecting) and the body is still replayable (see
     * replay_cap). At most two attempts whatever the array's length. */
    const fwd_target *targets;
    size_t ntargets;
    /* The body's start (the bytes the caller already holds, possibly rewritten). more: further
     * bytes follow through fwd_body(). */
    const char *body;
    size_t body_len;
    bool more;
    /* The body's total length when known (what the upstream gets as Content-Length), -1 when
     * not: the body then goes chunked. Ignored when !more (the length is body_len then). */
    int64_t content_length;
    /* The drain fence: an attempt that is not sending its request by this time (ev_now_ms) is
     * failed before any byte goes out (connected late, a second target), so the caller may put
     * the request back; 0: no deadline. */
    uint64_t send_by_ms;
} fwd_request;

typedef enum fwd_outcome {
    FWD_OK,                              /* the whole response went to data() */
    FWD_UPSTREAM_FAILED_BEFORE_RESPONSE, /* no response byte: the caller answers 502 */
    FWD_FAILED_AFTER_RESPONSE,           /* head() ran, the body broke: abort the client */
} fwd_outcome; /* a cancelled call has no outcome: fwd_cancel() ends it without done() */

typedef struct fwd_result {
    fwd_outcome outcome;
    int status;             /* the upstream's HTTP status, 0 when none */
    int target;             /* index into targets of the one tried last (that answered) */
    uint64_t first_byte_us; /* from fwd_start to the first response byte; 0 when none */
    uint64_t bytes_up;      /* request body bytes sent (to the last target tried) */
    uint64_t bytes_down;    /* response body bytes handed to data() */
    const char *error;      /* for people, NULL on FWD_OK; valid during done() */
    /* Not sent by send_by_ms (nothing went out): the member is not at fault, the caller may put
     * the request back. A connection confirmed too late is kept (up to max_idle_age_ms) for the
     * next call to that address, so the next try need not connect again. */
    bool late;
} fwd_result;

/* The caller's side of a call. Every callback runs on the loop's thread. head, data and
 * body_drained run from inside curl's callbacks (or from the loop turn fwd_resume schedules): from
 * them the caller may call fwd_start, fwd_body, fwd_resume and fwd_cancel, on any call. done runs
 * from the loop outside curl (evcurl's progress callback or a timer of fwd's): the same calls are
 * allowed there, but this call is gone once done returns (fwd_cancel on it inside done is a
 * no-op). fwd_free is allowed from none of them. done may come before the whole request body
 * went up (the member answered early, or the call failed): the caller then stops pushing. */
typedef struct fwd_client {
    /* Once, with the upstream's final status and its headers minus the hop-by-hop ones
     * (Connection, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade and those named
     * in Connection). Content-Length is end-to-end and kept. Valid during the call only. */
    void (*head)(void *ud, int status, const fwd_header *headers, size_t n);
    /* Response body bytes as curl receives them (chunked framing removed, content encoding
     * kept). The bytes are always taken; returning 1 says "full": no more data() until
     * fwd_resume(). */
    int (*data)(void *ud, const char *bytes, size_t len);
    /* After fwd_body() returned 1: the buffered body fell below half the high-water mark
     * (unless done() came first). */
    void (*body_drained)(void *ud);
    /* Exactly once per call not cancelled, last. */
    void (*done)(void *ud, const fwd_result *r);
    /* Optional: the call got a new connection to targets[target] (TCP established, no byte sent
     * on it): the caller confirms, with what it learns after this moment, that the address still
     * belongs to what it meant to reach, and answers with fwd_confirm (from here or later). A
     * connection kept from an earlier call is used without asking: it reached what was confirmed
     * then, and a new process at the address cannot take over an established connection. */
    void (*connected)(void *ud, int target);
} fwd_client;

/* NULL when out of memory or when curl cannot be set up. cfg may be NULL (defaults). */
fwd *fwd_new(ev_loop *loop, const fwd_config *cfg);
/* Cancels the calls still running (no done) and closes every connection. Not from inside any
 * callback of fwd's. NULL is a no-op. */
void fwd_free(fwd *f);

/* What makes req unfit for the wire as it is (a method, path, header or target that cannot be
 * sent, no target, a body that does not fit its method or length; static text), or NULL. Pure. */
const char *fwd_request_invalid(const fwd_request *req, const fwd_client *cl);
/* Starts forwarding req: 0 with *out set, or -EINVAL (fwd_request_invalid says why), -ENOMEM,
 * -EIO (curl could not set up or start the transfer); done() is then never called. Never calls a
 * callback before it returns. From inside head, data or body_drained the transfer starts on the
 * next loop turn (curl cannot be entered from its own callbacks). */
int fwd_start(fwd *f, const fwd_request *req, const fwd_client *cl, void *ud, fwd_call **out);
/* The words for a fwd_start error (for a 502's message). */
const char *fwd_start_error(const fwd_request *req, const fwd_client *cl, int rc);

/* More request body (copied); end: this was the last piece (with content_length known, the
 * piece that reaches it ends the body by itself). 1 when the body waiting to be sent is above the
 * high-water mark (pause the source until body_drained), 0 otherwise. When the bytes cannot be
 * taken the call fails and done() says why: -EINVAL (after the end, past content_length, short of
 * it at the end, pushed on past 8 times the high-water mark), -ENOMEM; -EPIPE when the call has
 * already failed or ended. Once the member has answered in full the bytes are dropped with 0
 * (done follows). */
int fwd_body(fwd_call *c, const char *data, size_t len, bool end);

/* The answer to connected(): refused NULL sends the request on the connection; otherwise the
 * connection is closed unused and the call fails with that reason (copied), bytes_up 0. A no-op
 * when no answer is awaited. */
void fwd_confirm(fwd_call *c, const char *refused);

/* The client can take data again after data() returned 1 (a no-op otherwise). The transfer
 * resumes on the next loop turn, so no callback runs inside fwd_resume. */
void fwd_resume(fwd_call *c);

/* The client went away: the call ends without done(), its connection to the member is closed
 * (a half-read response cannot be reused). Frees the call at once, or, from inside a callback,
 * as soon as curl returns; either way c must not be used afterwards. */
void fwd_cancel(fwd_call *c);

#endif

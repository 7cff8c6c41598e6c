/* fwd_internal: what the forwarder's files share: its state (struct fwd, struct fwd_call), its
 * limits, and the functions one file calls in another. forward.c: the public API and a call's
 * lifecycle (start, the body pushed, kick, progress, finishing and retry); fwd_io.c: the easy
 * handle's options and curl's callbacks (request body out, response head and body in);
 * fwd_conn.c: new connections made by fwd and confirmed by the caller before their first byte,
 * and the park of confirmed connections a late call could not use; fwd_headers.c (contract in
 * router/fwd_headers.h): the pure header rules. Private to src/router: the forwarder's contract is
 * router/forward.h. */
#ifndef MP_ROUTER_FWD_INTERNAL_H
#define MP_ROUTER_FWD_INTERNAL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"
#include "loop/evcurl.h"
#include "router/forward.h"
#include "router/fwd_headers.h"

#define FWD_DEF_CONNECT_TIMEOUT_MS 2000L
#define FWD_DEF_MAX_IDLE 64L
#define FWD_DEF_IDLE_AGE_MS 4000L
#define FWD_DEF_HIGH_WATER ((size_t)256 << 10)
#define FWD_DEF_REPLAY_CAP ((size_t)1 << 20)
/* A body up to this size that is complete at the start goes out in the head's write. */
#define FWD_WHOLE_MAX (16u << 10)
/* A caller that ignores fwd_body()'s 1 and pushes on is failed past this many times the mark. */
#define FWD_OVERRUN_FACTOR 8
/* curl hands over what one recv() returned, up to this: small enough for many calls at once,
 * large enough for a bulk response. SSE events go out as they come, whatever the size. */
#define FWD_BUFFER_SIZE (32L << 10)
#define FWD_MAX_ATTEMPTS 2
/* The response head as kept until head(): beyond these the member is broken or hostile. */
#define FWD_MAX_HEADERS 128
#define FWD_MAX_HEADER_BYTES ((size_t)64 << 10)
#define FWD_KEEPALIVE_S 30L

/* A confirmed connection whose call was too late to send on it (see fwd_confirm): kept for the
 * next call to the same address, which then need not connect (and be late) again. */
typedef struct fwd_parked {
    char ip[64];
    int port;
    int fd;
    uint64_t at_ms;
} fwd_parked;

struct fwd {
    ev_loop *loop;
    evcurl *ec;
    fwd_config cfg;
    fwd_call *calls;
    int depth; /* > 0 while a caller's callback runs: fwd_cancel only marks */
    /* Easy handles of ended calls kept for the next ones (curl_easy_reset between):
     * curl_easy_init's allocations and the receive buffer are made once, not per request. As many
     * as the idle connections kept, each of which the next call may use. */
    CURL **idle_easy;
    size_t nidle_easy;
    fwd_parked *parked; /* as many as idle connections, oldest first */
    size_t nparked;
};

typedef struct fwd_hdr {
    char *name, *value;
} fwd_hdr;

struct fwd_call {
    fwd *f;
    fwd_call *prev, *next;
    CURL *easy;
    bool in_multi;
    fwd_client cl;
    void *ud;
    fwd_target *targets; /* ips owned */
    size_t ntargets;
    int attempt;         /* index into targets of the one being tried */
    uint64_t send_by_ms; /* fwd_request.send_by_ms */
    struct curl_slist *headers;
    char *path;
    char *method;
    uint64_t t0_us;

    /* Request body: buf[sent..len) waits to go out; buf[0..sent) went out and is kept while
     * replayable (then base is 0). pushed counts every byte the caller gave. */
    char *buf;
    size_t len, cap, sent;
    uint64_t base, pushed;
    int64_t total; /* -1: unknown */
    bool upload;
    bool whole; /* all of the body sent with the request's head (POSTFIELDS, no read callback) */
    bool body_end;
    bool replayable;
    bool told_full;
    bool send_paused;

    /* Response. */
    bool resp_started; /* any byte of it in this attempt */
    bool head_done;
    int status;
    fwd_hdr *rh;
    size_t nrh;
    size_t rh_bytes;
    bool want_recv_pause;
    bool recv_paused;
    bool resume_pending;

    uint64_t kick_timer;
    /* The member's silence: idle_timer runs once the body is out; last_rx_ms is when a byte of
     * the answer last came (or the clock started, or the receive side was resumed). */
    uint64_t idle_timer, last_rx_ms;
    bool dead;        /* cancelled: freed without done */
    bool failed;      /* ended by fwd itself; error says why */
    bool finished;    /* curl is done with the attempt; result says how */
    bool add_pending; /* started inside a curl callback: added from the loop */
    bool in_done;
    bool late; /* not sent by send_by_ms (fwd_result.late) */
    /* With a connected() callback, every new connection is fwd's own: curl's open-socket
     * callback refuses to open one (want_conn), the attempt ends, fwd connects (conn_fd, watched
     * until writable, conn_timer), asks the caller (confirming), and on fwd_confirm hands the
     * socket to curl through the same callback when the attempt is started again. */
    bool want_conn;
    bool confirming;
    int conn_fd; /* -1: none */
    uint64_t conn_timer;
    CURLcode result;
    const char *error;
    uint64_t first_byte_us, bytes_up, bytes_down;
    char errbuf[CURL_ERROR_SIZE];
    char msg[CURL_ERROR_SIZE + 96];
};

/* ---- forward.c: a call's lifecycle ---- */

/* Frees the calls marked dead, unless a caller's callback is running (f->depth > 0). */
void fwd_reap(fwd *f);
/* Arms c's 0 ms timer: unpauses, a pending add and a failed call's end run from the loop, never
 * from inside curl. Without a timer c is failed ("out of memory") where it can be finished. */
void fwd_kick(fwd_call *c);
/* The whole body went out: the member's turn, and the clock of its silence starts. */
void fwd_body_out(fwd_call *c);
/* Ends c: its handle out of the multi, done() called with the outcome; c is then dead. */
void fwd_finish(fwd_call *c);
/* Back to the start of the attempt at targets[attempt], its handle out of the multi. */
void fwd_attempt_reset(fwd_call *c);
/* Tries the next target when this attempt failed before any response byte. true: it does. */
bool fwd_retry(fwd_call *c);

/* ---- fwd_io.c: the easy handle and curl's callbacks ---- */

/* Sets the easy handle up for c. 0, -ENOMEM, or -EIO when curl refuses an option. */
int fwd_setup(fwd_call *c, const fwd_request *req);
/* Points the easy handle at targets[attempt]. 0, -ENOMEM, or -EIO when curl refuses the URL. */
int fwd_set_url(fwd_call *c);
/* Appends n bytes to the request body's queue. 0 or -ENOMEM (the queue is as it was). */
int fwd_buf_append(fwd_call *c, const char *p, size_t n);
/* The body can no longer go again: what went out is dropped from then on. */
void fwd_not_replayable(fwd_call *c);
/* Forgets the response head kept so far. */
void fwd_rh_clear(fwd_call *c);

/* ---- fwd_conn.c: new connections, their confirmation, the park ---- */

/* Closes the connection fwd is making or holding for c, if any, and stops its timer. */
void fwd_conn_close(fwd_call *c);
/* An attempt that ended because curl wanted a new connection: fwd makes it. true: it took the
 * attempt over (connecting, or already ended it); false: the caller ends it as it stands. */
bool fwd_conn_start(fwd_call *c);
/* A parked connection to t that is still open and silent: its fd, or -ENOENT when there is none
 * (those past the idle age, closed or readable are closed on the way). */
int fwd_unpark(fwd *f, const fwd_target *t);

#endif

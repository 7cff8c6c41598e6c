/* fwd_client: the caller's side of the forwarder's tests (test_forward_*.c): a fwd on the test's
 * ev loop and the fwd_client callbacks of its calls, which record what arrives (head, body,
 * result) and act as the test set them to: say "full" to every piece of the answer, cancel at an
 * event, answer a stream's events one by one (ping-pong with up_stream_next), push a request body a
 * piece per loop turn, start the next call from done() or head(), confirm or refuse a new
 * connection from connected(). Part of the test-support library (test/support); failures fail the
 * test (cmocka). */
#ifndef MP_TEST_FWD_CLIENT_H
#define MP_TEST_FWD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fwd_upstream.h"
#include "loop/ev.h"
#include "router/forward.h"

typedef struct t_cli t_cli;
struct t_cli {
    ev_loop *loop;
    fwd *f;
    fwd_call *call;
    up *u;
    fwd_target tg; /* u, the one target of most requests */
    bool timed_out;
    int heads, status;
    char hdrs[4096]; /* "name: value\n" each */
    char *body;
    size_t blen;
    int dones;
    fwd_result r;
    char err[256];
    bool stop_on_done;
    int want_dones; /* stop at this many done() */
    /* response backpressure */
    bool full_always;
    bool paused;
    int pauses;
    /* streaming */
    bool ping_pong;
    int events;
    int cancel_at;            /* cancel at this event (from inside data(), or from a timer) */
    int stall_at;             /* ping_pong: the upstream sends nothing after this event */
    uint64_t pace_ms;         /* ping_pong: the next event this long after one arrived */
    uint64_t resume_after_ms; /* full_always: fwd_resume this long after "full" */
    bool cancel_by_timer;
    /* reset after head */
    bool reset_on_head;
    /* request body pusher */
    uint64_t to_push, pushed;
    size_t piece;
    bool push_paused;
    bool push_one; /* one piece per t_push, the caller says when the next one goes */
    int fulls, drains;
    /* calls to run one after the other */
    int again;
    bool again_on_head; /* start the next call from head() rather than done() */
    fwd_call *second;
    fwd_request *req;
    /* connected(): asked at all; confirmed from a timer, refused with this reason when set */
    bool confirm;
    const char *refuse;
    int connects;
    int requests_at_connect;   /* the upstream's request count when connected() came */
    uint64_t confirm_after_ms; /* connected(): fwd_confirm this long after (default 1) */
    uint64_t confirm_timer;
};

/* The callbacks without connected(); with t->confirm, t_start passes them with it. */
extern const fwd_client t_client;

/* t (zeroed) with a new loop, u started on it in mode, and a fwd on that loop (cfg may be NULL)
 * that stops the loop at its first done(). */
void t_setup(t_cli *t, up *u, up_mode mode, const fwd_config *cfg);
/* Frees the fwd (unless the test did), stops t->u and frees the loop. */
void t_teardown(t_cli *t);
/* Starts req as t->call; the test fails if fwd_start does not take it. */
void t_start(t_cli *t, const fwd_request *req);
/* Runs the loop until something stops it; the test fails after 20 s. */
void t_run(t_cli *t);
/* t_start, then t_run. */
void t_call(t_cli *t, const fwd_request *req);
/* A request of method to path for t's one target (t->tg) with body, whole (NULL: none); the test
 * sets any other field. */
fwd_request t_req(t_cli *t, const char *method, const char *path, const char *body);
/* A GET of path from t's one target, run (t_call). */
void t_get(t_cli *t, const char *path);
/* Pushes the next piece of the request body (t->piece bytes of up_pattern, to t->to_push in all).
 */
void t_push(t_cli *t);

#endif

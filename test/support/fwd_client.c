/* fwd_client: the forwarder tests' caller (fwd_client.h). Every callback writes down what it got
 * and then does what the fields of t_cli ask of it; timers stand in for what the router would do
 * later from its loop (resume a paused answer, confirm a connection, push the next piece). */
#include "fwd_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void t_guard(ev_loop *loop, void *ud)
{
    t_cli *t = ud;
    t->timed_out = true;
    ev_stop(loop);
}

void t_run(t_cli *t)
{
    uint64_t g = ev_timer_add(t->loop, 20000, t_guard, t);
    assert_int_equal(ev_run(t->loop), 0);
    ev_timer_cancel(t->loop, g);
    assert_false(t->timed_out);
}

static const fwd_client t_client_confirm;

static const fwd_client *t_cl(const t_cli *t)
{
    return t->confirm ? &t_client_confirm : &t_client;
}

static void t_head(void *ud, int status, const fwd_header *h, size_t n)
{
    t_cli *t = ud;
    t->heads++;
    t->status = status;
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(t->hdrs + off, sizeof(t->hdrs) - off, "%s: %s\n", h[i].name,
                                h[i].value);
    if (t->reset_on_head)
        up_reset(t->u);
    if (t->again_on_head && t->again > 0) {
        /* Inside curl's header callback: the new call starts on the next loop turn. */
        t->again--;
        assert_int_equal(fwd_start(t->f, t->req, &t_client, t, &t->second), 0);
    }
}

static void t_resume_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    t->paused = false;
    fwd_resume(t->call);
}

static void t_next_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    up_stream_next(t->u);
}

static void t_cancel_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    fwd_cancel(t->call);
    t->call = NULL;
}

static int t_data(void *ud, const char *p, size_t n)
{
    t_cli *t = ud;
    assert_false(t->paused); /* no data() between "full" and fwd_resume */
    t->body = realloc(t->body, t->blen + n + 1);
    assert_non_null(t->body);
    memcpy(t->body + t->blen, p, n);
    t->blen += n;
    t->body[t->blen] = '\0';
    if (t->ping_pong) {
        /* The upstream writes the next event only once this one arrived: a forwarder that
         * waited for more before handing data over would stall here until the deadline. */
        char want[32];
        int wn = snprintf(want, sizeof(want), "data: %d\n\n", t->events);
        if (t->blen < (size_t)wn)
            return 0;
        assert_int_equal(t->blen, wn);
        assert_memory_equal(t->body, want, (size_t)wn);
        t->blen = 0;
        t->events++;
        if (t->cancel_at && t->events == t->cancel_at) {
            if (t->cancel_by_timer) {
                assert_true(ev_timer_add(t->loop, 0, t_cancel_timer, t) > 0);
            } else {
                fwd_cancel(t->call);
                t->call = NULL;
            }
            return 0;
        }
        if (t->stall_at && t->events == t->stall_at)
            return 0;
        if (t->pace_ms)
            assert_true(ev_timer_add(t->loop, t->pace_ms, t_next_timer, t) > 0);
        else
            up_stream_next(t->u);
    }
    if (t->full_always) {
        t->paused = true;
        t->pauses++;
        assert_true(ev_timer_add(t->loop, t->resume_after_ms, t_resume_timer, t) > 0);
        return 1;
    }
    return 0;
}

static void t_push_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_push(ud);
}

/* One piece per loop turn, so that curl sometimes finds the body empty and pauses. */
void t_push(t_cli *t)
{
    if (t->push_paused || t->pushed == t->to_push)
        return;
    size_t n = t->piece;
    if (t->to_push - t->pushed < n)
        n = (size_t)(t->to_push - t->pushed);
    char *p = malloc(n);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)up_pattern(t->pushed + i);
    t->pushed += n;
    int r = fwd_body(t->call, p, n, t->pushed == t->to_push);
    free(p);
    assert_true(r == 0 || r == 1);
    if (r == 1) {
        t->fulls++;
        t->push_paused = true;
        up_release(t->u); /* the member reads from now on */
        return;
    }
    if (t->pushed < t->to_push && !t->push_one)
        assert_true(ev_timer_add(t->loop, 0, t_push_timer, t) > 0);
}

static void t_drained(void *ud)
{
    t_cli *t = ud;
    assert_true(t->push_paused);
    t->drains++;
    t->push_paused = false;
    assert_true(ev_timer_add(t->loop, 0, t_push_timer, t) > 0);
}

static void t_done(void *ud, const fwd_result *r)
{
    t_cli *t = ud;
    t->dones++;
    t->r = *r;
    if (r->error)
        snprintf(t->err, sizeof(t->err), "%s", r->error);
    t->r.error = r->error ? t->err : NULL;
    t->call = NULL;
    if (t->again > 0 && !t->again_on_head) {
        t->again--;
        t->blen = 0;
        assert_int_equal(fwd_start(t->f, t->req, t_cl(t), t, &t->call), 0);
        return;
    }
    if (t->stop_on_done && t->dones >= t->want_dones)
        ev_stop(t->loop);
}

static void t_confirm_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    t_cli *t = ud;
    t->confirm_timer = 0;
    fwd_confirm(t->call, t->refuse);
}

static void t_connected(void *ud, int target)
{
    t_cli *t = ud;
    (void)target;
    t->connects++;
    t->requests_at_connect = t->u->nrequests;
    /* Later, from the loop, as a read from the API server would answer. */
    t->confirm_timer =
        ev_timer_add(t->loop, t->confirm_after_ms ? t->confirm_after_ms : 1, t_confirm_timer, t);
    assert_true(t->confirm_timer != 0);
}

const fwd_client t_client = {
    .head = t_head, .data = t_data, .body_drained = t_drained, .done = t_done};
static const fwd_client t_client_confirm = {.head = t_head,
                                            .data = t_data,
                                            .body_drained = t_drained,
                                            .done = t_done,
                                            .connected = t_connected};

void t_setup(t_cli *t, up *u, up_mode mode, const fwd_config *cfg)
{
    memset(t, 0, sizeof(*t));
    t->loop = ev_new();
    assert_non_null(t->loop);
    up_start(u, t->loop, mode);
    t->u = u;
    t->tg = (fwd_target){"127.0.0.1", u->port};
    t->stop_on_done = true;
    t->f = fwd_new(t->loop, cfg);
    assert_non_null(t->f);
}

void t_teardown(t_cli *t)
{
    fwd_free(t->f);
    up_stop(t->u);
    free(t->body);
    ev_free(t->loop);
}

void t_start(t_cli *t, const fwd_request *req)
{
    assert_int_equal(fwd_start(t->f, req, t_cl(t), t, &t->call), 0);
}

void t_call(t_cli *t, const fwd_request *req)
{
    t_start(t, req);
    t_run(t);
}

fwd_request t_req(t_cli *t, const char *method, const char *path, const char *body)
{
    return (fwd_request){.method = method,
                         .path = path,
                         .targets = &t->tg,
                         .ntargets = 1,
                         .body = body,
                         .body_len = body ? strlen(body) : 0};
}

void t_get(t_cli *t, const char *path)
{
    fwd_request req = t_req(t, "GET", path, NULL);
    t_call(t, &req);
}

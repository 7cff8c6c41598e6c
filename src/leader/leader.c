/* leader: the election loop (see leader.h). One request in flight at a time:
 *   not leading: GET the Lease; absent -> POST it; free, expired, or ours -> PUT ourselves as
 * holder with its resourceVersion; held and valid -> wait a jittered retry period. leading: PUT a
 * new renewTime with the resourceVersion of our last write (no GET while that works); a conflict
 * falls back to the GET path. The renew deadline is counted from when the last successful write was
 * SENT: the API server stamped the lease no earlier, so the others' expiry (counted from when they
 * saw it) is later still. Deadlines use the monotonic clock; the wall clock only fills the
 * MicroTime fields. leader_may_write judges the same deadline from the clock at the moment it is
 * asked, so a write started after the deadline but before its timer ran is still refused. */
#include "leader/leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "leader/lease.h"
#include "log/log.h"
#include "util/rng.h"

struct leader {
    ev_loop *loop;
    kube_client *client;
    leader_callbacks cb;
    char *ns, *name, *identity;
    uint64_t lease_ms, deadline_ms, retry_ms;
    uint64_t (*now)(void);
    char *item_path, *coll_path;

    kube_call *call;
    uint64_t retry_timer, deadline_timer;
    bool leading, stopped;
    uint64_t sent_ms;    /* when the write in flight was sent */
    uint64_t renewed_ms; /* when our last successful write was sent */
    char *problem;       /* leader_problem */
    bool problem_read;   /* it is about reading the Lease (a successful read ends it) */

    /* the record as last seen or written */
    char *rv;
    uint64_t observed_ms;
    char *acquire_time;
    int64_t transitions;

    void (*release_done)(void *ud);
    void *release_ud;
};

static void leader_attempt(leader *l);

static int64_t leader_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int leader_set(char **dst, const char *src)
{
    char *s = src ? strdup(src) : NULL;
    if (src && !s)
        return -1;
    free(*dst);
    *dst = s;
    return 0;
}

/* An answer to a lease request: one that says we may not use the Lease at all (not a conflict,
 * not a passing server or network fault) starts an episode, reported once at error level; a
 * successful write ends it (a successful read ends only an episode of failed reads). */
static void leader_note(leader *l, const kube_error *err, const char *doing)
{
    bool read = strcmp(doing, "read") == 0;
    if (err->kind == KUBE_OK) {
        /* A read that works says nothing of a write that failed: only a write ends that. */
        if (!l->problem || (read && !l->problem_read))
            return;
        log_kv(LOG_INFO, "lease usable again", "lease", l->name, "namespace", l->ns, NULL);
        free(l->problem);
        l->problem = NULL;
        return;
    }
    if (err->kind != KUBE_ERR_HTTP || kube_error_retryable(err) || err->http_code == 409 ||
        err->http_code == 401)
        return;
    char *text = NULL;
    if (asprintf(&text, "leader election: cannot %s the Lease %s/%s: %s", doing, l->ns, l->name,
                 err->message ? err->message : "") < 0)
        return;
    if (l->problem && strcmp(l->problem, text) == 0) {
        free(text); /* the same episode: said already */
        return;
    }
    log_kv(LOG_ERROR, "cannot take part in leader election", "lease", l->name, "namespace", l->ns,
           "doing", doing, "reason", err->reason ? err->reason : "", "error",
           err->message ? err->message : "", NULL);
    free(l->problem);
    l->problem = text;
    l->problem_read = read;
}

static void leader_on_retry(ev_loop *loop, void *ud)
{
    (void)loop;
    leader *l = ud;
    l->retry_timer = 0;
    leader_attempt(l);
}

/* The next attempt: every retry period while leading; with up to 20% jitter otherwise, so
 * standbys do not knock together (as client-go's JitterUntil). */
static void leader_schedule(leader *l)
{
    uint64_t delay = l->retry_ms;
    if (!l->leading) {
        delay += (util_rng_next() % 1000) * l->retry_ms / 5000;
    }
    l->retry_timer = ev_timer_add(l->loop, delay, leader_on_retry, l);
}

/* We may no longer write: say so at once, then keep competing (the caller may stop us). */
static void leader_lose(leader *l, const char *why)
{
    l->leading = false;
    if (l->deadline_timer)
        ev_timer_cancel(l->loop, l->deadline_timer);
    l->deadline_timer = 0;
    if (l->call) {
        kube_call_cancel(l->call);
        l->call = NULL;
    }
    free(l->rv);
    l->rv = NULL;
    log_kv(LOG_ERROR, "leader election lost", "lease", l->name, "identity", l->identity, "reason",
           why, NULL);
    if (l->cb.lost)
        l->cb.lost(l->cb.ud, why);
    if (!l->stopped && !l->retry_timer)
        leader_schedule(l);
}

static void leader_on_deadline(ev_loop *loop, void *ud)
{
    (void)loop;
    leader *l = ud;
    l->deadline_timer = 0;
    if (l->leading)
        leader_lose(l, "the lease was not renewed within the renew deadline");
}

static void leader_on_write(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    leader *l = ud;
    l->call = NULL;
    leader_note(l, err, l->rv ? "update" : "create");
    lease_record rec;
    if (err->kind != KUBE_OK || lease_record_read(body, &rec) < 0) {
        /* A conflict means someone else wrote: read it again before deciding anything. */
        log_kv(l->leading ? LOG_INFO : LOG_DEBUG, "lease write failed", "lease", l->name, "error",
               err->kind != KUBE_OK ? err->message : "answer is not a Lease", NULL);
        free(l->rv);
        l->rv = NULL;
        leader_schedule(l);
        return;
    }
    if (leader_set(&l->rv, rec.resource_version) < 0 ||
        leader_set(&l->acquire_time, rec.acquire_time) < 0) {
        free(l->rv);
        l->rv = NULL;
        leader_schedule(l);
        return;
    }
    l->transitions = rec.transitions;
    l->observed_ms = l->now();
    l->renewed_ms = l->sent_ms;
    if (l->deadline_timer)
        ev_timer_cancel(l->loop, l->deadline_timer);
    uint64_t now = l->now();
    uint64_t until = l->sent_ms + l->deadline_ms;
    l->deadline_timer = ev_timer_add(l->loop, until > now ? until - now : 0, leader_on_deadline, l);
    leader_schedule(l);
    if (!l->leading) {
        l->leading = true;
        log_kv(LOG_INFO, "became leader", "lease", l->name, "namespace", l->ns, "identity",
               l->identity, NULL);
        if (l->cb.started)
            l->cb.started(l->cb.ud);
    }
}

static void leader_write(leader *l, lease_step step, const char *rv)
{
    char now[32];
    lease_time_format(leader_wall_us(), now);
    bool renew = step == LEASE_RENEW && l->acquire_time;
    lease_spec spec = {.holder = l->identity,
                       .duration_s = (int64_t)(l->lease_ms / 1000),
                       .transitions =
                           renew || step == LEASE_CREATE ? l->transitions : l->transitions + 1,
                       .acquire_time = renew ? l->acquire_time : now,
                       .renew_time = now};
    if (step == LEASE_CREATE)
        spec.transitions = 0;
    char *body = lease_body(l->ns, l->name, step == LEASE_CREATE ? NULL : rv, &spec);
    kube_error err = {0};
    kube_request req = {.method = step == LEASE_CREATE ? KUBE_POST : KUBE_PUT,
                        .path = step == LEASE_CREATE ? l->coll_path : l->item_path,
                        .body = body,
                        .timeout_ms = (long)(l->deadline_ms / 2),
                        .max_retries = 0};
    l->sent_ms = l->now();
    if (body)
        l->call = kube_call_start(l->client, &req, leader_on_write, l, &err);
    if (!l->call) {
        log_kv(LOG_ERROR, "lease write not sent", "lease", l->name, "error",
               body ? err.message : "out of memory", NULL);
        leader_schedule(l);
    }
    free(body);
    kube_error_clear(&err);
}

static void leader_on_get(void *ud, const kube_error *err, long code, const cJSON *body)
{
    leader *l = ud;
    l->call = NULL;
    if (code != 404)
        leader_note(l, err, "read");
    if (code == 404) {
        l->transitions = 0;
        leader_write(l, LEASE_CREATE, NULL);
        return;
    }
    lease_record rec;
    if (err->kind != KUBE_OK || lease_record_read(body, &rec) < 0) {
        log_kv(l->problem ? LOG_DEBUG : LOG_INFO, "lease read failed", "lease", l->name, "error",
               err->kind != KUBE_OK ? err->message : "answer is not a Lease", NULL);
        leader_schedule(l);
        return;
    }
    if (!l->rv || strcmp(l->rv, rec.resource_version) != 0) {
        if (leader_set(&l->rv, rec.resource_version) < 0) {
            leader_schedule(l);
            return;
        }
        l->observed_ms = l->now();
    }
    l->transitions = rec.transitions;
    if (leader_set(&l->acquire_time, rec.acquire_time) < 0) {
        leader_schedule(l);
        return;
    }
    lease_step step = lease_decide(&rec, l->identity, (int64_t)l->observed_ms, (int64_t)l->now());
    if (l->leading && step != LEASE_RENEW) {
        leader_lose(l, "another process holds the lease");
        return;
    }
    if (step == LEASE_WAIT) {
        log_kv(LOG_DEBUG, "lease held by another", "lease", l->name, "holder", rec.holder, NULL);
        leader_schedule(l);
        return;
    }
    leader_write(l, step, l->rv);
}

static void leader_attempt(leader *l)
{
    if (l->stopped || l->call)
        return;
    if (l->leading && l->rv) {
        leader_write(l, LEASE_RENEW, l->rv);
        return;
    }
    kube_error err = {0};
    kube_request req = {.method = KUBE_GET,
                        .path = l->item_path,
                        .timeout_ms = (long)(l->deadline_ms / 2),
                        .max_retries = 0};
    l->call = kube_call_start(l->client, &req, leader_on_get, l, &err);
    if (!l->call) {
        log_kv(LOG_ERROR, "lease read not sent", "lease", l->name, "error", err.message, NULL);
        leader_schedule(l);
    }
    kube_error_clear(&err);
}

leader *leader_new(ev_loop *loop, kube_client *client, const leader_config *cfg,
                   const leader_callbacks *cb, char *err, size_t errlen)
{
    uint64_t lease_ms = cfg->lease_ms ? cfg->lease_ms : 15000;
    uint64_t deadline_ms = cfg->renew_deadline_ms ? cfg->renew_deadline_ms : 10000;
    uint64_t retry_ms = cfg->retry_ms ? cfg->retry_ms : 2000;
    if (!(deadline_ms < lease_ms && retry_ms < deadline_ms && lease_ms % 1000 == 0)) {
        snprintf(err, errlen,
                 "leader election needs retry < renew deadline < lease duration (whole seconds)");
        return NULL;
    }
    if (!cfg->namespace_ || !*cfg->namespace_ || !cfg->name || !*cfg->name || !cfg->identity ||
        !*cfg->identity) {
        snprintf(err, errlen,
                 "leader election needs a lease namespace, a lease name and an identity");
        return NULL;
    }
    snprintf(err, errlen, "out of memory");
    leader *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    *l = (leader){.loop = loop,
                  .client = client,
                  .cb = *cb,
                  .lease_ms = lease_ms,
                  .deadline_ms = deadline_ms,
                  .retry_ms = retry_ms,
                  .now = cfg->clock_ms ? cfg->clock_ms : ev_now_ms,
                  .ns = strdup(cfg->namespace_),
                  .name = strdup(cfg->name),
                  .identity = strdup(cfg->identity)};
    if (l->ns && l->name) {
        l->item_path = kube_path("coordination.k8s.io", "v1", l->ns, "leases", l->name, NULL);
        l->coll_path = kube_path("coordination.k8s.io", "v1", l->ns, "leases", NULL, NULL);
    }
    if (!l->identity || !l->item_path || !l->coll_path) {
        leader_free(l);
        return NULL;
    }
    return l;
}

void leader_start(leader *l)
{
    log_kv(LOG_INFO, "waiting for leadership", "lease", l->name, "namespace", l->ns, "identity",
           l->identity, NULL);
    leader_attempt(l);
}

bool leader_is_leading(const leader *l)
{
    return l->leading;
}

bool leader_may_write(const leader *l)
{
    return l->leading && l->now() < l->renewed_ms + l->deadline_ms;
}

const char *leader_problem(const leader *l)
{
    return l->problem;
}

static void leader_released(void *ud, const kube_error *err, long code, const cJSON *body)
{
    (void)code;
    (void)body;
    leader *l = ud;
    l->call = NULL;
    if (err->kind == KUBE_OK)
        log_kv(LOG_INFO, "lease released", "lease", l->name, NULL);
    else
        log_kv(LOG_ERROR, "lease release failed; it expires by itself", "lease", l->name, "error",
               err->message, NULL);
    if (l->release_done)
        l->release_done(l->release_ud);
}

void leader_release(leader *l, void (*done)(void *ud), void *ud)
{
    l->stopped = true;
    if (l->retry_timer)
        ev_timer_cancel(l->loop, l->retry_timer);
    if (l->deadline_timer)
        ev_timer_cancel(l->loop, l->deadline_timer);
    l->retry_timer = l->deadline_timer = 0;
    if (l->call) {
        kube_call_cancel(l->call);
        l->call = NULL;
    }
    bool was_leading = l->leading;
    l->leading = false;
    char now[32];
    lease_time_format(leader_wall_us(), now);
    /* As client-go: holder empty, a one-second duration, so a standby takes over at once. */
    lease_spec spec = {.holder = "",
                       .duration_s = 1,
                       .transitions = l->transitions,
                       .acquire_time = now,
                       .renew_time = now};
    char *body = was_leading && l->rv ? lease_body(l->ns, l->name, l->rv, &spec) : NULL;
    if (body) {
        kube_error err = {0};
        kube_request req = {.method = KUBE_PUT,
                            .path = l->item_path,
                            .body = body,
                            .timeout_ms = 2000,
                            .max_retries = 0};
        l->release_done = done;
        l->release_ud = ud;
        l->call = kube_call_start(l->client, &req, leader_released, l, &err);
        kube_error_clear(&err);
        free(body);
        if (l->call)
            return;
    }
    if (done)
        done(ud);
}

void leader_free(leader *l)
{
    if (!l)
        return;
    if (l->call)
        kube_call_cancel(l->call);
    if (l->retry_timer)
        ev_timer_cancel(l->loop, l->retry_timer);
    if (l->deadline_timer)
        ev_timer_cancel(l->loop, l->deadline_timer);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->item_path);
    free(l->coll_path);
    free(l->rv);
    free(l->acquire_time);
    free(l->problem);
    free(l);
}

/* sim_pod: the simulator's Pods in memory (sim_ctl.h): their addresses in the run's loopback block,
 * the load and termination timers a pass waits on, the state lines the e2e tests read, and what
 * each serves: the probe endpoints and the OpenAI ones (answered token by token, the probe busy
 * meanwhile), a listener that answers nothing (probe "hang"), or a real llama.cpp server. */
#include "sim_ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/log.h"
#include "sim_oai.h"

/* A Pod serves its probes and the OpenAI requests of several clients at once (a router's held
 * requests, a load test). */
#define SIM_POD_CONNECTIONS 1024
/* An idle connection is closed after this, as llama-server does (its keep-alive timeout): a
 * client's pooled connection can be gone when it is reused. */
#define SIM_POD_KEEPALIVE_S 5
/* A Pod this process created but the cache never showed is forgotten after this: it was deleted
 * before its ADDED event could arrive (or the watch is far behind, and a relist will bring it). */
#define SIM_UNSEEN_FORGET_MS 30000

/* ---- addresses ---- */

/* The in-use flag of address n, which must be one of ours (sim_ip_ours). */
static bool *sim_ip_slot(sim *s, int n)
{
    return &s->ip_used[n - s->opt.ip_first];
}

static bool sim_ip_ours(const sim *s, int n)
{
    return n >= s->opt.ip_first && n < s->opt.ip_first + s->opt.ip_count;
}

/* Frees *ip (0: a Pod without an address yet) and clears it. */
void sim_ip_release(sim *s, int *ip)
{
    if (sim_ip_ours(s, *ip))
        *sim_ip_slot(s, *ip) = false;
    *ip = 0;
}

/* Keeps the address a Pod's status already names, when it is one of ours and free. */
static int sim_ip_adopt(sim *s, const char *text)
{
    int a, b, c;
    char rest;
    if (!text || sscanf(text, "127.%d.%d.%d%c", &a, &b, &c, &rest) != 3 || a < 0 || a > 255 ||
        b < 0 || b > 255 || c < 0 || c > 255)
        return 0;
    int n = a << 16 | b << 8 | c;
    if (!sim_ip_ours(s, n) || *sim_ip_slot(s, n))
        return 0;
    *sim_ip_slot(s, n) = true;
    return n;
}

/* ---- the state lines ---- */

/* A Pod holds the GPU once its container ran and until it is gone, terminating or not. */
static bool sim_pod_holds(const sim_pod *p)
{
    return !p->gone && sim_eq(p->phase, "Running");
}

/* Prints line unless it is what *shown already says; takes line. */
static void sim_print_once(char **shown, char *line)
{
    if (!line)
        return;
    if (*shown && strcmp(*shown, line) == 0) {
        free(line);
        return;
    }
    printf("%s\n", line);
    fflush(stdout);
    free(*shown);
    *shown = line;
}

/* One line per change of a Pod (state, address, and whether it was busy then: its member marked
 * busy, or an OpenAI request in flight on it, so a Pod deleted while serving shows busy=true). */
static void sim_show_pod(sim_pod *p, bool busy)
{
    busy = busy || p->inflight > 0 || p->cut_busy;
    const char *state = p->gone ? "Gone" : p->terminating ? "Terminating" : p->phase;
    char ip[24];
    sim_ip_text(sim_pod_holds(p) ? p->ip : 0, ip, sizeof(ip));
    char *line = NULL;
    if (asprintf(&line, "sim %s pod=%s state=%s ip=%s busy=%s", p->m->key, p->name, state, ip,
                 busy ? "true" : "false") < 0)
        line = NULL;
    sim_print_once(&p->shown, line);
}

static bool sim_member_busy(const sim_member *m)
{
    return sim_isvc_flag(store_get(informer_store(m->s->isvcs), m->key), "sim.modelpool.test/busy");
}

/* The lines for the e2e tests and their checks: per Pod and per member, each printed right after
 * the write that caused it, before anything that write lets the operator do, so the order of
 * lines is the order of events. */
void sim_show(sim_member *m)
{
    bool busy = sim_member_busy(m);
    int holding = 0;
    for (sim_pod *p = m->pods; p; p = p->next) {
        sim_show_pod(p, busy);
        holding += sim_pod_holds(p);
    }
    char *line = NULL;
    if (asprintf(&line, "sim %s phase=%s ready=%d holding=%d", m->key, m->phase ? m->phase : "-",
                 m->ready, holding) < 0)
        line = NULL;
    sim_print_once(&m->shown, line);
}

/* ---- Pods in memory ---- */

void sim_on_load(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_pod *p = ud;
    p->load_timer = 0;
    wq_add(p->m->s->q, p->m->key);
}

void sim_on_terminate(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_pod *p = ud;
    p->term_timer = 0;
    wq_add(p->m->s->q, p->m->key);
}

/* True once the deadline due has come; until then one timer (re-armed when due moved) brings
 * the member back at due. */
bool sim_due(ev_loop *loop, uint64_t due, uint64_t *timer, uint64_t *at, ev_timer_fn fn, sim_pod *p)
{
    uint64_t now = ev_now_ms();
    if (now >= due)
        return true;
    if (*timer && *at == due)
        return false;
    ev_timer_cancel(loop, *timer);
    *timer = ev_timer_add(loop, due - now, fn, p);
    *at = due;
    return false;
}

void sim_pod_terminating(sim_pod *p)
{
    if (!p->terminating)
        p->term_since_ms = ev_now_ms();
    p->terminating = true;
}

sim_pod *sim_pod_new(sim_member *m, const char *name)
{
    sim_pod *p = calloc(1, sizeof(*p));
    if (!p || !(p->name = strdup(name))) {
        free(p);
        return NULL;
    }
    p->m = m;
    p->phase = "Pending";
    p->born_ms = ev_now_ms();
    p->next = m->pods;
    m->pods = p;
    return p;
}

static void sim_pod_http_stop(sim_pod *p);

void sim_pod_free(sim_pod *p)
{
    sim *s = p->m->s;
    sim_pod_http_stop(p);
    sim_hang_stop(p->hang, NULL, NULL);
    sim_llama_free(p->llama);
    ev_timer_cancel(s->loop, p->load_timer);
    ev_timer_cancel(s->loop, p->term_timer);
    sim_ip_release(s, &p->ip);
    free(p->name);
    free(p->shown);
    free(p);
}

static sim_pod *sim_pod_find(sim_member *m, const char *name)
{
    for (sim_pod *p = m->pods; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

const cJSON *sim_pod_cached(const sim_pod *p)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", p->m->ns, p->name) < 0)
        return NULL;
    const cJSON *obj = store_get(informer_store(p->m->s->pods), key);
    free(key);
    return obj;
}

static void sim_answer(sim_pod *p, const char *method, const char *path, sim_reply *out)
{
    sim_member *m = p->m;
    if (strcmp(path, "/sim/requests") == 0) {
        out->code = 200;
        out->content_type = "text/plain; charset=utf-8";
        snprintf(out->body, sizeof(out->body), "%llu\n", (unsigned long long)m->requests);
        return;
    }
    m->requests++;
    sim_isvc_answer(store_get(informer_store(m->s->isvcs), m->key), path, p->inflight, out);
    if (log_enabled(LOG_DEBUG)) {
        char code[8];
        snprintf(code, sizeof(code), "%u", out->code);
        log_kv(LOG_DEBUG, "served", "member", m->key, "pod", p->name, "method", method, "path",
               path, "code", code, NULL);
    }
}

/* ---- OpenAI requests ---- */

/* One OpenAI request on a Pod, from its headers until its answer is handed to httpd. */
struct sim_infer {
    sim_infer *prev, *next; /* the Pod's requests in flight */
    sim_pod *p;
    httpd_req *r;
    sim_oai_kind kind;
    char *body; /* the request body as read so far */
    size_t len, cap;
    sim_oai_req q;
    bool counted;      /* its body is in: the probe counts it busy (p->inflight) */
    int sent;          /* stream: token events written */
    uint64_t token_ms; /* the member's per-token delay when the body was in */
    uint64_t timer;
    char id[48];
    long created;
};

static void sim_infer_free(sim_infer *w)
{
    sim_pod *p = w->p;
    if (w->prev)
        w->prev->next = w->next;
    else
        p->infers = w->next;
    if (w->next)
        w->next->prev = w->prev;
    p->inflight -= w->counted;
    ev_timer_cancel(p->m->s->loop, w->timer);
    sim_oai_req_clear(&w->q);
    free(w->body);
    free(w);
}

/* The request ended before its answer (the client left, or the Pod stops serving): it is no
 * longer in flight. */
static void sim_infer_ended(void *ud)
{
    sim_infer *w = ud;
    log_kv(LOG_DEBUG, "request ended unanswered", "member", w->p->m->key, "pod", w->p->name, NULL);
    sim_infer_free(w);
}

/* Answers w with a whole body (taken; NULL: out of memory, a 500) and forgets it. */
static void sim_infer_send(sim_infer *w, unsigned code, char *body)
{
    if (!body)
        code = 500;
    char len[24];
    snprintf(len, sizeof(len), "%zu", body ? strlen(body) : 0);
    httpd_header hd[] = {
        {"Content-Type", "application/json"}, {"X-Sim-Pod", w->p->name}, {"Content-Length", len}};
    httpd_req *r = w->r;
    if (httpd_req_stream_begin(r, code, hd, 3) == 0) {
        int rc = body ? httpd_req_stream_write(r, body, strlen(body)) : 0;
        httpd_req_stream_end(r, rc >= 0);
    } else {
        httpd_reply out = {.code = 500};
        httpd_req_reply(r, &out);
    }
    free(body);
    sim_infer_free(w);
}

static void sim_infer_on_token(ev_loop *loop, void *ud)
{
    sim_infer *w = ud;
    w->timer = 0;
    /* A few hundred bytes a token, a bounded number of tokens: what the client has not read yet
     * stays in httpd's buffer rather than pausing the simulated generation. */
    char *event = sim_oai_chunk(&w->q, w->id, w->created, w->sent);
    int rc = event ? httpd_req_stream_write(w->r, event, strlen(event)) : -1;
    free(event);
    if (rc >= 0 && ++w->sent < w->q.tokens) {
        w->timer = ev_timer_add(loop, w->token_ms, sim_infer_on_token, w);
        if (w->timer)
            return;
        rc = -1;
    }
    if (rc >= 0 && (event = sim_oai_chunk_last(&w->q, w->id, w->created))) {
        rc = httpd_req_stream_write(w->r, event, strlen(event));
        free(event);
        if (rc >= 0)
            rc = httpd_req_stream_write(w->r, SIM_OAI_DONE, strlen(SIM_OAI_DONE));
    } else {
        rc = -1;
    }
    httpd_req_stream_end(w->r, rc >= 0); /* a failure truncates the stream, as a crash would */
    sim_infer_free(w);
}

static void sim_infer_on_done(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_infer *w = ud;
    w->timer = 0;
    sim_infer_send(w, 200, sim_oai_response(&w->q, w->id, w->created));
}

/* The whole body is in: answer as the member's annotations say, after the simulated work. From
 * now on the probe counts it busy: llama.cpp's /slots shows a request only once its body is read
 * and its prompt is on a slot (a request still uploading, or being tokenized, looks idle). */
static void sim_infer_start(sim_infer *w)
{
    sim_member *m = w->p->m;
    char *err = NULL;
    w->counted = true;
    w->p->inflight++;
    if (sim_oai_parse(w->kind, w->body, w->len, &w->q, &err) < 0) {
        sim_infer_send(w, 400, err);
        return;
    }
    const cJSON *isvc = store_get(informer_store(m->s->isvcs), m->key);
    const char *served = sim_isvc_annotation(isvc, "sim.modelpool.test/served-model");
    if (sim_eq(sim_isvc_runtime(isvc), "llamacpp")) {
        /* llama-server (one model) takes any model name and answers with its own (--alias). */
        char *own = strdup(served ? served : m->name);
        if (!own) {
            sim_infer_send(w, 500, NULL);
            return;
        }
        free(w->q.model);
        w->q.model = own;
    } else if (served && strcmp(served, w->q.model) != 0) {
        sim_infer_send(w, 404, sim_oai_model_not_found(w->q.model));
        return;
    }
    w->token_ms = sim_isvc_ms(isvc, "sim.modelpool.test/token-ms", 0);
    w->created = (long)time(NULL);
    snprintf(w->id, sizeof(w->id), "%s-%s-%llu",
             w->kind == SIM_OAI_CHAT          ? "chatcmpl"
             : w->kind == SIM_OAI_COMPLETIONS ? "cmpl"
                                              : "emb",
             w->p->name, (unsigned long long)m->requests);
    if (w->q.stream) {
        httpd_header hd[] = {{"Content-Type", "text/event-stream"},
                             {"Cache-Control", "no-cache"},
                             {"X-Sim-Pod", w->p->name}};
        if (httpd_req_stream_begin(w->r, 200, hd, 3) < 0) {
            sim_infer_send(w, 500, NULL);
            return;
        }
        if (!(w->timer = ev_timer_add(m->s->loop, w->token_ms, sim_infer_on_token, w))) {
            httpd_req_stream_end(w->r, false);
            sim_infer_free(w);
        }
        return;
    }
    uint64_t ms = w->token_ms * (uint64_t)w->q.tokens;
    if (!(w->timer = ev_timer_add(m->s->loop, ms, sim_infer_on_done, w)))
        sim_infer_send(w, 500, NULL);
}

static void sim_infer_on_body(void *ud, const char *data, size_t len, bool end)
{
    sim_infer *w = ud;
    if (len > SIM_OAI_BODY_MAX - w->len) {
        sim_infer_send(
            w, 413, sim_oai_error("the request body is over 32 MiB", "invalid_request_error", 413));
        return;
    }
    if (w->len + len > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + len)
            cap *= 2;
        char *b = realloc(w->body, cap);
        if (!b) {
            sim_infer_send(w, 500, NULL);
            return;
        }
        w->body = b;
        w->cap = cap;
    }
    if (len)
        memcpy(w->body + w->len, data, len);
    w->len += len;
    if (end)
        sim_infer_start(w);
}

/* A POST to an OpenAI endpoint: in flight from now until answered. */
static void sim_infer_new(sim_pod *p, httpd_req *r, sim_oai_kind kind)
{
    sim_infer *w = calloc(1, sizeof(*w));
    if (!w) {
        httpd_reply out = {.code = 500};
        httpd_req_reply(r, &out);
        return;
    }
    *w = (sim_infer){.p = p, .r = r, .kind = kind, .next = p->infers};
    if (p->infers)
        p->infers->prev = w;
    p->infers = w;
    p->m->requests++;
    if (!httpd_req_work(r, sim_infer_ended, w)) {
        sim_infer_send(w, 500, NULL);
        return;
    }
    const char *cl = httpd_req_header(r, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > SIM_OAI_BODY_MAX) { /* refused before reading it */
        sim_infer_send(
            w, 413, sim_oai_error("the request body is over 32 MiB", "invalid_request_error", 413));
        return;
    }
    if (httpd_req_body(r, sim_infer_on_body, w) < 0)
        sim_infer_send(w, 500, NULL);
}

/* Stops the server: the requests in flight end with their connections (sim_infer_ended). */
static void sim_pod_http_stop(sim_pod *p)
{
    httpd_stop(p->http);
    p->http = NULL;
}

static void sim_on_request(void *ud, httpd_req *r)
{
    sim_pod *p = ud;
    const char *method = httpd_req_method(r), *path = httpd_req_path(r);
    sim_oai_kind kind;
    if (sim_oai_kind_of(path, &kind) == 0) {
        if (strcmp(method, "POST") == 0) {
            sim_infer_new(p, r, kind);
            return;
        }
        char *body = sim_oai_error("use POST", "invalid_request_error", 405);
        httpd_reply out = {.code = 405,
                           .content_type = "application/json",
                           .body = body,
                           .len = body ? strlen(body) : 0};
        httpd_req_reply(r, &out);
        return;
    }
    sim_reply rep;
    sim_answer(p, method, path, &rep);
    httpd_reply out = {
        .code = rep.code, .content_type = rep.content_type, .body = strdup(rep.body)};
    out.len = out.body ? strlen(out.body) : 0;
    if (!out.body)
        out = (httpd_reply){.code = 500};
    httpd_req_reply(r, &out);
}

/* Logged at info level: a test waits for this line to know a probe is in flight and hung. */
static void sim_hang_held(void *ud, const char *path)
{
    sim_pod *p = ud;
    log_kv(LOG_INFO, "request held", "member", p->m->key, "pod", p->name, "path", path, NULL);
}

static void sim_hang_release(void *ud, const char *path, sim_reply *out)
{
    sim_answer(ud, "GET", path, out);
}

/* Closes p's listener: probes of it are refused from now on, and requests held by a hang are
 * dropped unanswered (the server went away under them). */
void sim_pod_unserve(sim_pod *p)
{
    if (p->http || p->hang)
        log_kv(LOG_DEBUG, "stopped serving", "member", p->m->key, "pod", p->name, NULL);
    sim_pod_http_stop(p);
    sim_hang_stop(p->hang, NULL, NULL);
    p->hang = NULL;
    sim_llama_stop(p->llama); /* SIGTERM; the Pod stays terminating until the process is gone */
}

/* ---- real llama.cpp servers (--llama-server) ---- */

/* A member whose Pods are real llama-server processes: a llama.cpp runtime, with --llama-server. */
static bool sim_is_llama(const sim *s, const cJSON *isvc)
{
    const char *rt = sim_isvc_runtime(isvc);
    return s->opt.llama_server && (sim_eq(rt, "llamacpp") || sim_eq(rt, "llamacpp-router"));
}

/* Whether p serves: a simulated Pod at once, a real server once its model is loaded. */
bool sim_pod_loaded(const sim_pod *p)
{
    return !p->llama || sim_llama_state_of(p->llama) == SIM_LLAMA_READY;
}

/* The process lines, in the order of events, for a test to see that two servers of a pool never
 * ran at once: sim <ns>/<name> llama=<pod> state=<started|ready|exited> pid=<pid> [status=<s>] */
static void sim_show_llama(const sim_pod *p, const char *state)
{
    int pid = sim_llama_pid(p->llama), st = sim_llama_wait_status(p->llama);
    if (strcmp(state, "exited") == 0)
        printf("sim %s llama=%s state=exited pid=%d status=%s%d\n", p->m->key, p->name, pid,
               WIFSIGNALED(st) ? "signal-" : "", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    else
        printf("sim %s llama=%s state=%s pid=%d\n", p->m->key, p->name, state, pid);
    fflush(stdout);
}

static void sim_on_llama(void *ud)
{
    sim_pod *p = ud;
    bool exited = sim_llama_state_of(p->llama) == SIM_LLAMA_EXITED;
    sim_show_llama(p, exited ? "exited" : "ready");
    log_kv(LOG_INFO, exited ? "llama-server exited" : "llama-server ready", "member", p->m->key,
           "pod", p->name, NULL);
    wq_add(p->m->s->q, p->m->key);
}

/* Starts p's llama-server on its address unless it has one: the model is the simulator's, the name
 * it answers to the member's sim.modelpool.test/served-model, else the member's name. 0, or -1 when
 * the address is taken or the process cannot start (why in err). */
static int sim_pod_serve_llama(sim_pod *p, const cJSON *isvc, char *err, size_t errlen)
{
    if (p->llama)
        return 0; /* loading, serving, or exited: sim_run reports a crash */
    sim *s = p->m->s;
    char ip[24];
    sim_ip_text(p->ip, ip, sizeof(ip));
    int port = sim_isvc_port(isvc);
    int rc = sim_llama_can_bind(ip, port);
    if (rc < 0) {
        snprintf(err, errlen, "%s:%d: %s", ip, port, strerror(-rc));
        return -1;
    }
    const char *alias = sim_isvc_annotation(isvc, "sim.modelpool.test/served-model");
    sim_llama_config cfg = {.server = s->opt.llama_server,
                            .model = s->opt.llama_model,
                            .log_dir = s->opt.llama_log_dir,
                            .ctx_size = s->opt.llama_ctx};
    p->llama = sim_llama_start(s->loop, &cfg, p->name, ip, port, alias ? alias : p->m->name,
                               sim_on_llama, p, err, errlen);
    if (!p->llama)
        return -1;
    p->http_port = port;
    sim_show_llama(p, "started");
    log_kv(LOG_INFO, "llama-server started", "member", p->m->key, "pod", p->name, "ip", ip, NULL);
    return 0;
}

/* Serves (or stops serving) p's probe endpoints as isvc asks: answered (httpd), held unanswered
 * (probe: hang), or not at all (probe: refuse). Leaving a hang answers what it held, as the
 * annotation now says. 0, or -1 when it cannot listen (why in err). */
static int sim_pod_serve(sim_pod *p, const cJSON *isvc, bool want, char *err, size_t errlen)
{
    if (sim_is_llama(p->m->s, isvc) || p->llama) {
        if (!want || !p->ip) {
            sim_pod_unserve(p);
            return 0;
        }
        return sim_pod_serve_llama(p, isvc, err, errlen);
    }
    const char *probe = sim_isvc_annotation(isvc, "sim.modelpool.test/probe");
    int port = sim_isvc_port(isvc);
    want = want && p->ip && !sim_eq(probe, "refuse");
    bool hang = want && sim_eq(probe, "hang");
    if (!want || p->http_port != port) {
        sim_pod_unserve(p);
    } else if (p->hang && !hang) {
        log_kv(LOG_DEBUG, "hang released", "member", p->m->key, "pod", p->name, NULL);
        sim_hang_stop(p->hang, sim_hang_release, p);
        p->hang = NULL;
    } else if (p->http && hang) {
        sim_pod_http_stop(p);
    }
    if (!want || p->http || p->hang)
        return 0;
    char ip[24];
    sim_ip_text(p->ip, ip, sizeof(ip));
    if (hang) {
        p->hang = sim_hang_start(p->m->s->loop, ip, port, sim_hang_held, p, err, errlen);
    } else {
        char bind[40];
        snprintf(bind, sizeof(bind), "%s:%d", ip, port);
        httpd_config cfg = {.bind = bind,
                            .request = sim_on_request,
                            .ud = p,
                            .max_connections = SIM_POD_CONNECTIONS,
                            .idle_timeout_s = SIM_POD_KEEPALIVE_S};
        p->http = httpd_start_config(p->m->s->loop, &cfg, err, errlen);
    }
    if (!p->http && !p->hang)
        return -1;
    p->http_port = port;
    char port_text[8];
    snprintf(port_text, sizeof(port_text), "%d", port);
    log_kv(LOG_DEBUG, hang ? "hanging" : "serving", "member", p->m->key, "pod", p->name, "ip", ip,
           "port", port_text, NULL);
    return 0;
}

/* Serves p, first giving it an address if it has none: the first free one it can listen on, since
 * another simulator (a test running in parallel) may hold some of 127.0.0.0/8 on this port. A Pod
 * whose status already names its address keeps it. 0, or -1 (logged). */
int sim_pod_place(sim_pod *p, const cJSON *isvc)
{
    sim *s = p->m->s;
    char err[256] = "no loopback address left";
    if (p->ip) {
        if (sim_pod_serve(p, isvc, true, err, sizeof(err)) == 0)
            return 0;
    } else {
        int start = s->opt.ip_round_robin ? s->ip_next : 0;
        for (int i = 0; i < s->opt.ip_count; i++) {
            int n = s->opt.ip_first + (start + i) % s->opt.ip_count;
            if (*sim_ip_slot(s, n))
                continue;
            *sim_ip_slot(s, n) = true;
            p->ip = n;
            if (sim_pod_serve(p, isvc, true, err, sizeof(err)) == 0) {
                s->ip_next = (n - s->opt.ip_first + 1) % s->opt.ip_count;
                return 0;
            }
            log_kv(LOG_DEBUG, "address taken, trying the next", "pod", p->name, "error", err, NULL);
            *sim_ip_slot(s, n) = false;
            p->ip = 0;
        }
    }
    log_kv(LOG_ERROR, "cannot serve", "member", p->m->key, "pod", p->name, "error", err, NULL);
    return -1;
}

/* Takes a cached Pod this process does not know yet (a restart, or one made by hand). */
static sim_pod *sim_pod_adopt(sim_member *m, const char *name, const cJSON *obj)
{
    sim_pod *p = sim_pod_new(m, name);
    if (!p)
        return NULL;
    const char *phase = sim_str(obj, "status", "phase");
    if (sim_eq(phase, "Running"))
        p->phase = "Running";
    else if (sim_eq(phase, "Failed"))
        p->phase = "Failed";
    else if (sim_eq(phase, "Succeeded"))
        p->phase = "Succeeded";
    if (!sim_terminal(p->phase)) {
        p->ip = sim_ip_adopt(m->s, sim_str(obj, "status", "podIP"));
        p->ip_in_status = p->ip != 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, sim_field(obj, "status", "conditions"))
        {
            if (sim_eq(sim_str(c, "type", NULL), "Ready"))
                p->ready_in_status = p->ip_in_status && sim_eq(sim_str(c, "status", NULL), "True");
        }
    }
    log_kv(LOG_INFO, "adopted pod", "member", m->key, "pod", name, "phase", p->phase, NULL);
    return p;
}

typedef struct sim_sync_ctx {
    sim_member *m;
    int err;
} sim_sync_ctx;

static bool sim_sync_one(const char *key, const void *obj, void *ud)
{
    (void)key;
    sim_sync_ctx *c = ud;
    const char *name = sim_str(obj, "metadata", "name");
    sim_pod *p = sim_pod_find(c->m, name);
    if (!p && !(p = sim_pod_adopt(c->m, name, obj))) {
        c->err = -ENOMEM;
        return false;
    }
    p->seen = true;
    p->mark = c->m->s->pass;
    if (sim_field(obj, "metadata", "deletionTimestamp"))
        sim_pod_terminating(p);
    return true;
}

/* Brings the member's Pods in memory in line with the cache: adopts the unknown, forgets those
 * that left it. 0 or -ENOMEM. */
int sim_sync_pods(sim_member *m)
{
    sim *s = m->s;
    s->pass++;
    sim_sync_ctx c = {.m = m};
    store_index_each(informer_store(s->pods), SIM_INDEX_MEMBER, m->key, sim_sync_one, &c);
    uint64_t now = ev_now_ms();
    for (sim_pod **pp = &m->pods; *pp;) {
        sim_pod *p = *pp;
        if (p->mark != s->pass && (p->seen || p->gone || now - p->born_ms > SIM_UNSEEN_FORGET_MS)) {
            *pp = p->next;
            log_kv(LOG_DEBUG, "pod gone", "member", m->key, "pod", p->name, NULL);
            p->gone = true; /* deleted by someone else, or our answer was lost */
            sim_show_pod(p, sim_member_busy(m));
            sim_pod_free(p);
        } else {
            pp = &p->next;
        }
    }
    return c.err;
}

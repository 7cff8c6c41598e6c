/* sim_ctl: the simulator's controller. Informer events queue member keys ("ns/name"); a pass over
 * a member compares the cache (plus what this process wrote and the cache may not show yet) with
 * what the member should look like and makes at most one write, keeping the key in flight until it
 * is answered. So writes to one member never overlap, a 409 or a failing API server is a failure
 * the work queue retries with backoff, and a restart rebuilds everything from the cache. */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "httpd/httpd.h"
#include "informer/informer.h"
#include "informer/workqueue.h"
#include "log/log.h"
#include "sim_hang.h"
#include "sim_isvc.h"
#include "sim_llama.h"
#include "sim_oai.h"
#include "util/strmap.h"

#define SIM_INDEX_MEMBER "member"
/* A Pod serves its probes and the OpenAI requests of several clients at once (a router's held
 * requests, a load test). */
#define SIM_POD_CONNECTIONS 1024
/* An idle connection is closed after this, as llama-server does (its keep-alive timeout): a
 * client's pooled connection can be gone when it is reused. */
#define SIM_POD_KEEPALIVE_S 5
/* A Pod this process created but the cache never showed is forgotten after this: it was deleted
 * before its ADDED event could arrive (or the watch is far behind, and a relist will bring it). */
#define SIM_UNSEEN_FORGET_MS 30000

typedef enum {
    SIM_OP_NONE,
    SIM_OP_CREATE,
    SIM_OP_DELETE,
    SIM_OP_POD_STATUS,
    SIM_OP_UNFINALIZE,
    SIM_OP_ISVC_STATUS,
} sim_op;

/* What a pass did: nothing left to do, a write is in flight, or it must be retried. */
typedef enum { SIM_IDLE, SIM_CALL, SIM_RETRY } sim_step;

/* The status a Pod is given. */
typedef enum { SIM_POD_RUNNING, SIM_POD_FAILED, SIM_POD_EVICTED, SIM_POD_CRASHED } sim_pod_state;

typedef struct sim_member sim_member;
typedef struct sim_pod sim_pod;
typedef struct sim_infer sim_infer;

struct sim_pod {
    sim_pod *next;
    sim_member *m;
    char *name;
    const char *phase; /* Pending, Running, Failed or Succeeded: the cache's, or our last write */
    int ip;            /* N of 127.0.0.N, 0 for none */
    bool ip_in_status; /* status.podIP already names it */
    bool ready_in_status; /* and its Ready condition is True */
    bool seen;            /* has been in the cache */
    bool terminating;     /* its deletion has started */
    bool gone;            /* the API server said it is deleted; the cache may lag */
    /* The delays run from these instants and are read from the annotations on every pass, so a
     * test can hold a Pod (load-ms or terminate-ms huge) and release it by lowering them. */
    uint64_t born_ms, term_since_ms;
    uint64_t load_timer, load_at, term_timer, term_at;
    unsigned mark;     /* pass number of the last time it was in the cache */
    httpd *http;       /* the probe endpoints (answered at once) and the OpenAI ones */
    sim_infer *infers; /* OpenAI requests in flight: the probe says busy meanwhile */
    int inflight;
    bool cut_busy;    /* requests were in flight when its deletion began (they were cut) */
    sim_hang *hang;   /* or, with probe: "hang", a listener that answers nothing */
    sim_llama *llama; /* or, with --llama-server, a real llama.cpp server (kept until it exited) */
    int http_port;    /* the port of either */
    char *shown;      /* the last state line printed for it */
};

struct sim_member {
    strmap_node node; /* in sim.members, by key */
    sim *s;
    char *key; /* "ns/name" */
    char *ns, *name;
    sim_pod *pods; /* newest first */
    int desired;
    const char *phase; /* the phase last decided for its status, NULL before */
    int ready;         /* Pods ready when it was decided */
    /* The last status write and the resourceVersion it was made on: while the cache still holds
     * that version, our write has not come back through the watch and must not be repeated. */
    const char *status_phase;
    int status_replicas;
    char *status_rv;
    /* The write in flight and what it was about. */
    kube_call *call;
    sim_op op;
    sim_pod *op_pod;
    char *op_name; /* CREATE: the Pod's name */
    sim_pod_state op_state;
    bool op_ready;
    const char *op_phase;
    int op_replicas;
    char *op_rv;
    uint64_t requests;
    char *shown; /* the last state line printed */
};

struct sim {
    ev_loop *loop;
    kube_client *client;
    sim_options opt;
    informer *isvcs, *pods;
    wq *q;
    strmap members;
    bool synced;
    bool *ip_used; /* by address index - opt.ip_first */
    int ip_next;   /* with opt.ip_round_robin: where the next search starts (an offset) */
    uint64_t rng;
    unsigned pass;
};

/* ---- small helpers ---- */

static const cJSON *sim_field(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const char *sim_str(const cJSON *obj, const char *a, const char *b)
{
    return cJSON_GetStringValue(sim_field(obj, a, b));
}

/* metadata.resourceVersion, "" when missing (the write then fails and is retried). */
static const char *sim_rv(const cJSON *obj)
{
    const char *rv = sim_str(obj, "metadata", "resourceVersion");
    return rv ? rv : "";
}

static bool sim_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* The phase as one of our static strings (m->phase outlives the cached object), or NULL. */
static const char *sim_phase_literal(const char *phase)
{
    static const char *const known[] = {"Pending",       "Creating", "Progressing", "Ready",
                                        "WaitingForGPU", "Stopped",  "Suspended",   "Failed"};
    for (size_t i = 0; phase && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(known[i], phase) == 0)
            return known[i];
    return NULL;
}

static bool sim_terminal(const char *phase)
{
    return sim_eq(phase, "Failed") || sim_eq(phase, "Succeeded");
}

/* Address index n is 127.<n>>16>.<n>>8 & 255>.<n & 255>: 2..254 is 127.0.0.2..254. */
static char *sim_ip_text(int ip, char *buf, size_t len)
{
    if (ip)
        snprintf(buf, len, "127.%d.%d.%d", (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    else
        snprintf(buf, len, "-");
    return buf;
}

static void sim_now_rfc3339(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint32_t sim_rand(sim *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (uint32_t)(s->rng >> 32);
}

static bool sim_has_finalizer(const cJSON *pod)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, sim_field(pod, "metadata", "finalizers"))
    {
        if (sim_eq(cJSON_GetStringValue(f), SIM_FINALIZER))
            return true;
    }
    return false;
}

/* The answer to a DELETE or a finalizer removal is the object; without finalizers left (and
 * deleted with grace 0, as we do) it no longer exists. */
static bool sim_answer_gone(long http_code, const cJSON *body)
{
    if (http_code == 404)
        return true;
    if (sim_eq(sim_str(body, "kind", NULL), "Status"))
        return true;
    return cJSON_GetArraySize(sim_field(body, "metadata", "finalizers")) == 0;
}

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
static void sim_ip_release(sim *s, int *ip)
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
static void sim_show(sim_member *m)
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

static void sim_on_load(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_pod *p = ud;
    p->load_timer = 0;
    wq_add(p->m->s->q, p->m->key);
}

static void sim_on_terminate(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_pod *p = ud;
    p->term_timer = 0;
    wq_add(p->m->s->q, p->m->key);
}

/* True once the deadline due has come; until then one timer (re-armed when due moved) brings
 * the member back at due. */
static bool sim_due(ev_loop *loop, uint64_t due, uint64_t *timer, uint64_t *at, ev_timer_fn fn,
                    sim_pod *p)
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

static void sim_pod_terminating(sim_pod *p)
{
    if (!p->terminating)
        p->term_since_ms = ev_now_ms();
    p->terminating = true;
}

static sim_pod *sim_pod_new(sim_member *m, const char *name)
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

static void sim_pod_free(sim_pod *p)
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

static const cJSON *sim_pod_cached(const sim_pod *p)
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
static void sim_pod_unserve(sim_pod *p)
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
static bool sim_pod_loaded(const sim_pod *p)
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
static int sim_pod_place(sim_pod *p, const cJSON *isvc)
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
static int sim_sync_pods(sim_member *m)
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

/* ---- writes ---- */

static void sim_on_done(void *ud, const kube_error *err, long http_code, const cJSON *body);

/* Starts the member's one write; path and body are taken (either may be NULL after an
 * allocation failure, which is then a retry). */
static sim_step sim_call(sim_member *m, sim_op op, kube_method method, char *path, cJSON *body)
{
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    sim_step step = SIM_RETRY;
    if (path && (text || method == KUBE_DELETE)) {
        kube_request req = {
            .method = method, .path = path, .body = text, .timeout_ms = 10000, .max_retries = -1};
        kube_error err = {0};
        m->op = op;
        m->call = kube_call_start(m->s->client, &req, sim_on_done, m, &err);
        if (m->call)
            step = SIM_CALL;
        else
            log_kv(LOG_ERROR, "cannot start a call", "member", m->key, "error", err.message, NULL);
        kube_error_clear(&err);
    }
    free(text);
    free(path);
    return step;
}

static char *sim_pod_path(const sim_member *m, const char *name, const char *sub)
{
    return kube_path("", "v1", m->ns, "pods", name, sub);
}

static sim_step sim_create(sim_member *m, const cJSON *isvc)
{
    sim *s = m->s;
    char suffix[6];
    for (size_t i = 0; i < 5; i++)
        suffix[i] = (char)('a' + sim_rand(s) % 26);
    suffix[5] = 0;
    free(m->op_name);
    m->op_name = NULL;
    if (asprintf(&m->op_name, "%s-%s", m->name, suffix) < 0) {
        m->op_name = NULL;
        return SIM_RETRY;
    }
    const char *uid = sim_str(isvc, "metadata", "uid");
    cJSON *pod = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    cJSON_AddStringToObject(meta, "name", m->op_name);
    cJSON_AddStringToObject(meta, "namespace", m->ns);
    cJSON_AddStringToObject(labels, "app", m->name);
    cJSON_AddStringToObject(labels, SIM_LABEL_SERVICE, m->name);
    if (s->opt.finalizer)
        cJSON_AddItemToObject(meta, "finalizers",
                              cJSON_CreateStringArray((const char *[]){SIM_FINALIZER}, 1));
    /* Only for whoever reads it: without a garbage collector nothing acts on it. */
    if (uid) {
        cJSON *owner = cJSON_CreateObject();
        cJSON_AddStringToObject(owner, "apiVersion", "inference.llmkube.dev/v1alpha1");
        cJSON_AddStringToObject(owner, "kind", "InferenceService");
        cJSON_AddStringToObject(owner, "name", m->name);
        cJSON_AddStringToObject(owner, "uid", uid);
        cJSON_AddBoolToObject(owner, "controller", true);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), owner);
    }
    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", "server");
    cJSON_AddStringToObject(c, "image", "sim");
    cJSON *port = cJSON_CreateObject();
    cJSON_AddStringToObject(port, "name", "http");
    cJSON_AddNumberToObject(port, "containerPort", sim_isvc_port(isvc));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "ports"), port);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    return sim_call(m, SIM_OP_CREATE, KUBE_POST, sim_pod_path(m, NULL, NULL), pod);
}

static sim_step sim_delete(sim_member *m, sim_pod *p)
{
    m->op_pod = p;
    /* Grace 0: there is no kubelet to end it, so without a finalizer it goes at once. */
    cJSON *opts = cJSON_CreateObject();
    cJSON_AddStringToObject(opts, "apiVersion", "v1");
    cJSON_AddStringToObject(opts, "kind", "DeleteOptions");
    cJSON_AddNumberToObject(opts, "gracePeriodSeconds", 0);
    return sim_call(m, SIM_OP_DELETE, KUBE_DELETE, sim_pod_path(m, p->name, NULL), opts);
}

/* Removes our finalizer, keeping anyone else's; resourceVersion makes it a compare-and-swap. */
static sim_step sim_unfinalize(sim_member *m, sim_pod *p, const cJSON *cached)
{
    m->op_pod = p;
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(patch, "metadata");
    cJSON_AddStringToObject(meta, "resourceVersion", sim_rv(cached));
    cJSON *keep = cJSON_AddArrayToObject(meta, "finalizers");
    const cJSON *f;
    cJSON_ArrayForEach(f, sim_field(cached, "metadata", "finalizers"))
    {
        if (!sim_eq(cJSON_GetStringValue(f), SIM_FINALIZER))
            cJSON_AddItemToArray(keep, cJSON_Duplicate(f, true));
    }
    return sim_call(m, SIM_OP_UNFINALIZE, KUBE_PATCH_MERGE, sim_pod_path(m, p->name, NULL), patch);
}

static cJSON *sim_condition(const char *type, bool status, const char *now)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", type);
    cJSON_AddStringToObject(c, "status", status ? "True" : "False");
    cJSON_AddStringToObject(c, "lastTransitionTime", now);
    return c;
}

/* What a kubelet would report: Running with the address and a ready `server` container, or
 * Failed with the container terminated (an eviction also loses the address). */
static sim_step sim_pod_status(sim_member *m, sim_pod *p, const cJSON *cached, sim_pod_state st)
{
    char now[32], ip[24];
    sim_now_rfc3339(now, sizeof(now));
    bool running = st == SIM_POD_RUNNING;
    /* A real server's container runs from its start and is ready once its model is loaded. */
    bool ready = running && sim_pod_loaded(p);
    m->op_pod = p;
    m->op_state = st;
    m->op_ready = ready;
    cJSON *patch = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(patch, "metadata"), "resourceVersion",
                            sim_rv(cached));
    cJSON *status = cJSON_AddObjectToObject(patch, "status");
    cJSON_AddStringToObject(status, "phase", running ? "Running" : "Failed");
    if (running) {
        sim_ip_text(p->ip, ip, sizeof(ip));
        cJSON_AddStringToObject(status, "podIP", ip);
        cJSON *ips = cJSON_AddArrayToObject(status, "podIPs");
        cJSON *one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "ip", ip);
        cJSON_AddItemToArray(ips, one);
        cJSON_AddStringToObject(status, "startTime", now);
    } else {
        cJSON_AddNullToObject(status, "podIP");
        cJSON_AddNullToObject(status, "podIPs");
        cJSON_AddStringToObject(status, "reason", st == SIM_POD_EVICTED ? "Evicted" : "Error");
        cJSON_AddStringToObject(
            status, "message",
            st == SIM_POD_EVICTED   ? "simulated eviction (sim.modelpool.test/evict)"
            : st == SIM_POD_CRASHED ? "llama-server exited (see --llama-log-dir)"
                                    : "simulated failure (sim.modelpool.test/fail)");
    }
    cJSON *conds = cJSON_AddArrayToObject(status, "conditions");
    cJSON_AddItemToArray(conds, sim_condition("PodScheduled", true, now));
    cJSON_AddItemToArray(conds, sim_condition("Initialized", true, now));
    cJSON_AddItemToArray(conds, sim_condition("ContainersReady", ready, now));
    cJSON_AddItemToArray(conds, sim_condition("Ready", ready, now));
    cJSON *cs = cJSON_CreateObject();
    cJSON_AddStringToObject(cs, "name", "server");
    cJSON_AddStringToObject(cs, "image", "sim");
    cJSON_AddStringToObject(cs, "imageID", "");
    cJSON_AddBoolToObject(cs, "ready", ready);
    cJSON_AddBoolToObject(cs, "started", running);
    cJSON_AddNumberToObject(cs, "restartCount", 0);
    cJSON *state = cJSON_AddObjectToObject(cs, "state");
    if (running) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(state, "running"), "startedAt", now);
    } else {
        cJSON *t = cJSON_AddObjectToObject(state, "terminated");
        cJSON_AddNumberToObject(t, "exitCode", st == SIM_POD_EVICTED ? 137 : 1);
        cJSON_AddStringToObject(t, "reason", st == SIM_POD_EVICTED ? "Evicted" : "Error");
        cJSON_AddStringToObject(t, "finishedAt", now);
    }
    cJSON_AddItemToArray(cJSON_AddArrayToObject(status, "containerStatuses"), cs);
    return sim_call(m, SIM_OP_POD_STATUS, KUBE_PATCH_MERGE, sim_pod_path(m, p->name, "status"),
                    patch);
}

/* Reports phase (and replicas) in the InferenceService status, unless it already says so. */
static sim_step sim_status(sim_member *m, const cJSON *isvc, const char *phase, int replicas)
{
    m->phase = phase;
    const cJSON *st = sim_field(isvc, "status", NULL);
    const cJSON *r = sim_field(st, "replicas", NULL);
    const char *rv = sim_str(isvc, "metadata", "resourceVersion");
    if (sim_eq(sim_str(st, "phase", NULL), phase) && cJSON_IsNumber(r) &&
        (int)r->valuedouble == replicas)
        return SIM_IDLE;
    if (sim_eq(m->status_phase, phase) && m->status_replicas == replicas &&
        sim_eq(m->status_rv, rv))
        return SIM_IDLE;
    free(m->op_rv);
    m->op_rv = rv ? strdup(rv) : NULL;
    m->op_phase = phase;
    m->op_replicas = replicas;
    cJSON *patch = cJSON_CreateObject();
    cJSON *status = cJSON_AddObjectToObject(patch, "status");
    cJSON_AddStringToObject(status, "phase", phase);
    cJSON_AddNumberToObject(status, "replicas", replicas);
    return sim_call(m, SIM_OP_ISVC_STATUS, KUBE_PATCH_MERGE,
                    kube_path("inference.llmkube.dev", "v1alpha1", m->ns, "inferenceservices",
                              m->name, "status"),
                    patch);
}

/* Records what an answered write changed; false when it failed and must be retried. */
static bool sim_apply_answer(sim_member *m, const kube_error *err, long code, const cJSON *body)
{
    sim *s = m->s;
    sim_pod *p = m->op_pod;
    bool ok = err->kind == KUBE_OK;
    switch (m->op) {
    case SIM_OP_CREATE:
        if (!ok)
            return false; /* AlreadyExists included: the next pass picks another name */
        if (!(p = sim_pod_new(m, m->op_name)))
            return false;
        log_kv(LOG_INFO, "created pod", "member", m->key, "pod", p->name, NULL);
        return true;
    case SIM_OP_DELETE:
    case SIM_OP_UNFINALIZE:
        if (!ok && code != 404)
            return false;
        sim_pod_terminating(p);
        p->gone = sim_answer_gone(code, body);
        p->cut_busy = p->cut_busy || p->inflight > 0;
        sim_pod_unserve(p);
        log_kv(LOG_INFO, p->gone ? "pod deleted" : "pod terminating", "member", m->key, "pod",
               p->name, NULL);
        return true;
    case SIM_OP_POD_STATUS:
        if (code == 404) {
            p->gone = true;
            return true;
        }
        if (!ok)
            return false;
        if (m->op_state == SIM_POD_RUNNING) {
            p->phase = "Running";
            p->ip_in_status = true;
            p->ready_in_status = m->op_ready;
        } else {
            p->phase = "Failed";
            sim_pod_unserve(p);
            sim_ip_release(s, &p->ip);
            p->ip_in_status = false;
            p->ready_in_status = false;
        }
        log_kv(LOG_INFO, "pod status", "member", m->key, "pod", p->name, "phase", p->phase, NULL);
        return true;
    case SIM_OP_ISVC_STATUS:
        if (code == 404)
            return true; /* deleted meanwhile: nothing to report to */
        if (!ok)
            return false;
        m->status_phase = m->op_phase;
        m->status_replicas = m->op_replicas;
        free(m->status_rv);
        m->status_rv = m->op_rv;
        m->op_rv = NULL;
        return true;
    case SIM_OP_NONE:
        break;
    }
    return true;
}

static void sim_on_done(void *ud, const kube_error *err, long http_code, const cJSON *body)
{
    sim_member *m = ud;
    m->call = NULL;
    bool ok = sim_apply_answer(m, err, http_code, body);
    if (err->kind != KUBE_OK && !(ok && http_code == 404)) {
        static const char *const names[] = {
            [SIM_OP_NONE] = "none",
            [SIM_OP_CREATE] = "create pod",
            [SIM_OP_DELETE] = "delete pod",
            [SIM_OP_POD_STATUS] = "write pod status",
            [SIM_OP_UNFINALIZE] = "remove finalizer",
            [SIM_OP_ISVC_STATUS] = "write status",
        };
        /* A conflict is routine (our cache was behind): say it only when asked. */
        log_kv(kube_error_is(err, "Conflict") ? LOG_DEBUG : LOG_ERROR, "write failed, will retry",
               "member", m->key, "op", names[m->op], "error", err->message, NULL);
    }
    m->op = SIM_OP_NONE;
    m->op_pod = NULL;
    sim_show(m);
    /* Success goes straight on to the next step: its effect is already in memory. */
    wq_done(m->s->q, m->key, ok ? WQ_SUCCESS : WQ_FAILURE);
    if (ok)
        wq_add(m->s->q, m->key);
}

/* ---- one pass over a member ---- */

/* Active as a ReplicaSet counts Pods: not being deleted, not Failed or Succeeded. */
static bool sim_active(const sim_pod *p)
{
    return !p->gone && !p->terminating && !sim_terminal(p->phase);
}

/* Ready: Running, its address in its status, its server loaded, not being deleted. */
static bool sim_ready(const sim_pod *p)
{
    return sim_active(p) && sim_eq(p->phase, "Running") && p->ip_in_status && p->ready_in_status;
}

/* The active Pod a ReplicaSet deletes first when there are too many (getPodsToDelete's ranking,
 * less what needs nodes): Pending before Running, not ready before ready, then the newest. */
static sim_pod *sim_extra(sim_member *m)
{
    sim_pod *pick = NULL;
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!sim_active(p))
            continue;
        if (!pick) {
            pick = p;
            continue;
        }
        bool p_pending = sim_eq(p->phase, "Pending"), k_pending = sim_eq(pick->phase, "Pending");
        if (p_pending != k_pending) {
            if (p_pending)
                pick = p;
            continue;
        }
        if (sim_ready(p) != sim_ready(pick)) {
            if (!sim_ready(p))
                pick = p;
            continue;
        }
        if (p->born_ms > pick->born_ms)
            pick = p;
    }
    return pick;
}

/* One active Pod: load it, fail it, keep it serving. SIM_IDLE when it needs no write now. */
static sim_step sim_run(sim_member *m, const cJSON *isvc, sim_pod *p)
{
    sim *s = m->s;
    const cJSON *cached = sim_pod_cached(p);
    bool fail = sim_isvc_flag(isvc, "sim.modelpool.test/fail");
    bool evict = sim_isvc_flag(isvc, "sim.modelpool.test/evict");
    if (sim_eq(p->phase, "Pending")) {
        if (sim_isvc_flag(isvc, "sim.modelpool.test/waiting-for-gpu"))
            return SIM_IDLE;
        uint64_t load = sim_isvc_ms(isvc, "sim.modelpool.test/load-ms", s->opt.load_ms);
        if (!sim_due(s->loop, p->born_ms + load, &p->load_timer, &p->load_at, sim_on_load, p))
            return SIM_IDLE;
        if (!cached) /* its resourceVersion is needed; the ADDED event will bring us back */
            return SIM_IDLE;
        if (fail)
            return sim_pod_status(m, p, cached, SIM_POD_FAILED);
        /* Listening before the status says Running, so a probe never finds a Pod that is not
         * there yet. */
        if (sim_pod_place(p, isvc) < 0)
            return SIM_RETRY;
        return sim_pod_status(m, p, cached, SIM_POD_RUNNING);
    }
    if (p->llama && sim_llama_state_of(p->llama) == SIM_LLAMA_EXITED) {
        /* The server died under a Pod nobody deleted: a crashed container (never restarted here,
         * so a test sees it), reported Failed and replaced. */
        log_kv(LOG_ERROR, "llama-server crashed", "member", m->key, "pod", p->name, NULL);
        return cached ? sim_pod_status(m, p, cached, SIM_POD_CRASHED) : SIM_IDLE;
    }
    if (evict || fail) {
        sim_pod_unserve(p);
        return cached ? sim_pod_status(m, p, cached, evict ? SIM_POD_EVICTED : SIM_POD_FAILED)
                      : SIM_IDLE;
    }
    if (sim_pod_place(p, isvc) < 0)
        return SIM_RETRY;
    if (!p->ip_in_status || p->ready_in_status != sim_pod_loaded(p))
        return cached ? sim_pod_status(m, p, cached, SIM_POD_RUNNING) : SIM_IDLE;
    return SIM_IDLE;
}

/* The status a Deployment-backed member reports: Ready while a Pod is ready (terminating Pods are
 * not: Stopped can come while they still go); else Failed when the test fails its Pods, else
 * WaitingForGPU or Creating while it wants replicas, else Stopped. */
static const char *sim_member_phase(const sim_member *m, const cJSON *isvc, bool failed, int ready)
{
    if (ready > 0) /* loading: its server runs but has not loaded the model yet */
        return sim_isvc_flag(isvc, "sim.modelpool.test/loading") ? "Progressing" : "Ready";
    if (m->desired <= 0)
        return "Stopped";
    if (failed)
        return "Failed";
    for (const sim_pod *p = m->pods; p; p = p->next)
        if (sim_active(p) && sim_eq(p->phase, "Running"))
            return "Progressing"; /* a real server loading its model (--llama-server) */
    for (const sim_pod *p = m->pods; p; p = p->next)
        if (sim_active(p) && sim_eq(p->phase, "Pending") &&
            sim_isvc_flag(isvc, "sim.modelpool.test/waiting-for-gpu"))
            return "WaitingForGPU";
    return "Creating";
}

static sim_step sim_reconcile(sim_member *m)
{
    sim *s = m->s;
    const cJSON *isvc = store_get(informer_store(s->isvcs), m->key);
    if (sim_sync_pods(m) < 0)
        return SIM_RETRY;
    m->desired = isvc ? sim_isvc_replicas(isvc) : 0;
    if (!m->phase) /* after a restart: what the status said, until a pass decides */
        m->phase = sim_phase_literal(sim_str(isvc, "status", "phase"));

    /* Pods on their way out, whatever is wanted: stop serving, then let them go. */
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!p->terminating || p->gone)
            continue;
        sim_pod_unserve(p);
        /* A real server's Pod is gone only once its process is (the memory is freed): its exit
         * brings the member back here. */
        if (p->llama && sim_llama_state_of(p->llama) != SIM_LLAMA_EXITED)
            continue;
        /* Until the cache shows the deletion, its resourceVersion would only earn a 409. */
        const cJSON *cached = sim_pod_cached(p);
        if (!cached || !sim_has_finalizer(cached) ||
            !sim_field(cached, "metadata", "deletionTimestamp"))
            continue;
        uint64_t hold = sim_isvc_ms(isvc, "sim.modelpool.test/terminate-ms", s->opt.terminate_ms);
        if (sim_due(s->loop, p->term_since_ms + hold, &p->term_timer, &p->term_at, sim_on_terminate,
                    p))
            return sim_unfinalize(m, p, cached);
    }

    /* As a ReplicaSet: the old Pods still terminating are not counted, so replacements are
     * created at once beside them; a Pod failed on the test's request is not replaced while the
     * annotation stays (it would fail again, forever). */
    int active = 0;
    bool failed = false;
    for (sim_pod *p = m->pods; p; p = p->next) {
        active += sim_active(p);
        failed |= !p->gone && !p->terminating && sim_terminal(p->phase);
    }
    failed = failed && (sim_isvc_flag(isvc, "sim.modelpool.test/fail") ||
                        sim_isvc_flag(isvc, "sim.modelpool.test/evict"));
    if (m->desired <= 0) {
        /* Failed Pods go too, so a member scaled to 0 is left without Pods. */
        for (sim_pod *p = m->pods; p; p = p->next)
            if (!p->gone && !p->terminating)
                return sim_delete(m, p);
    } else if (active > m->desired) {
        return sim_delete(m, sim_extra(m));
    } else if (active < m->desired && !failed) {
        return sim_create(m, isvc);
    }

    int ready = 0;
    for (sim_pod *p = m->pods; p; p = p->next) {
        if (!sim_active(p))
            continue;
        sim_step step = sim_run(m, isvc, p);
        if (step != SIM_IDLE)
            return step;
        ready += sim_ready(p);
    }
    m->ready = ready;
    if (!isvc)
        return SIM_IDLE;
    return sim_status(m, isvc, sim_member_phase(m, isvc, failed, ready), ready);
}

/* ---- members ---- */

static sim_member *sim_member_get(sim *s, const char *key)
{
    strmap_node *n = strmap_get(&s->members, key);
    if (n)
        return STRMAP_OWNER(n, sim_member, node);
    const char *slash = strchr(key, '/');
    if (!slash)
        return NULL;
    sim_member *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->s = s;
    m->key = strdup(key);
    m->ns = strndup(key, (size_t)(slash - key));
    m->name = strdup(slash + 1);
    if (!m->key || !m->ns || !m->name) {
        free(m->key);
        free(m->ns);
        free(m->name);
        free(m);
        return NULL;
    }
    strmap_insert(&s->members, &m->node, m->key);
    return m;
}

static void sim_member_free(sim_member *m)
{
    kube_call_cancel(m->call);
    while (m->pods) {
        sim_pod *p = m->pods;
        m->pods = p->next;
        sim_pod_free(p);
    }
    free(m->key);
    free(m->ns);
    free(m->name);
    free(m->status_rv);
    free(m->op_name);
    free(m->op_rv);
    free(m->shown);
    free(m);
}

/* A member whose InferenceService and Pods are all gone is forgotten. */
static void sim_member_maybe_drop(sim *s, sim_member *m)
{
    if (m->pods || m->call || store_get(informer_store(s->isvcs), m->key))
        return;
    strmap_remove(&s->members, &m->node);
    sim_member_free(m);
}

static void sim_process(wq *q, const char *key, uint64_t waited_ms, void *ud)
{
    (void)waited_ms;
    sim *s = ud;
    /* Before both caches are complete, a missing Pod may only be unlisted yet: wait for the
     * sync, which queues every member. */
    if (!s->synced) {
        wq_done(q, key, WQ_SUCCESS);
        return;
    }
    sim_member *m = sim_member_get(s, key);
    if (!m) {
        wq_done(q, key, WQ_FAILURE);
        return;
    }
    sim_step step = sim_reconcile(m);
    if (step == SIM_CALL)
        return;
    sim_show(m);
    wq_done(q, key, step == SIM_RETRY ? WQ_FAILURE : WQ_SUCCESS);
    sim_member_maybe_drop(s, m);
}

/* ---- informers ---- */

static void sim_queue_obj(sim *s, const cJSON *obj, bool is_pod)
{
    const char *ns = sim_str(obj, "metadata", "namespace");
    const char *name = is_pod ? cJSON_GetStringValue(sim_field(sim_field(obj, "metadata", "labels"),
                                                               SIM_LABEL_SERVICE, NULL))
                              : sim_str(obj, "metadata", "name");
    char *key = NULL;
    if (!ns || !name || !*name || asprintf(&key, "%s/%s", ns, name) < 0)
        return;
    wq_add(s->q, key);
    free(key);
}

static void sim_isvc_add(void *ud, const void *obj)
{
    sim_queue_obj(ud, obj, false);
}

static void sim_isvc_update(void *ud, const void *old_obj, const void *new_obj)
{
    (void)old_obj;
    sim_queue_obj(ud, new_obj, false);
}

static void sim_pod_add(void *ud, const void *obj)
{
    sim_queue_obj(ud, obj, true);
}

static void sim_pod_update(void *ud, const void *old_obj, const void *new_obj)
{
    (void)old_obj;
    sim_queue_obj(ud, new_obj, true);
}

static bool sim_queue_each(const char *key, const void *obj, void *ud)
{
    (void)key;
    sim *s = ud;
    sim_queue_obj(s, obj, sim_field(sim_field(obj, "metadata", "labels"), SIM_LABEL_SERVICE, NULL));
    return true;
}

static void sim_on_synced(void *ud)
{
    sim *s = ud;
    if (s->synced || !informer_synced(s->isvcs) || !informer_synced(s->pods))
        return;
    s->synced = true;
    log_kv(LOG_INFO, "caches synced", NULL);
    store_each(informer_store(s->isvcs), sim_queue_each, s);
    store_each(informer_store(s->pods), sim_queue_each, s);
}

static void sim_on_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "watch failed, retrying", "error", err->message, NULL);
}

/* Pods by "ns/<inference.llmkube.dev/service label>", the member key. */
static int sim_index_member(const void *obj, store_index_out *out, void *ud)
{
    (void)ud;
    const char *ns = sim_str(obj, "metadata", "namespace");
    const char *svc = cJSON_GetStringValue(
        sim_field(sim_field(obj, "metadata", "labels"), SIM_LABEL_SERVICE, NULL));
    if (!ns || !svc || !*svc)
        return 0;
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, svc) < 0)
        return -ENOMEM;
    int rc = store_index_emit(out, key);
    free(key);
    return rc;
}

/* ---- lifecycle ---- */

sim *sim_new(ev_loop *loop, kube_client *client, const sim_options *opt)
{
    sim *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->loop = loop;
    s->client = client;
    s->opt = *opt;
    if (s->opt.ip_first <= 0 || s->opt.ip_count <= 0) {
        s->opt.ip_first = SIM_IP_FIRST_DEFAULT;
        s->opt.ip_count = SIM_IP_COUNT_DEFAULT;
    }
    if (strmap_init(&s->members) < 0 ||
        !(s->ip_used = calloc((size_t)s->opt.ip_count, sizeof(*s->ip_used)))) {
        strmap_fini(&s->members);
        free(s);
        return NULL;
    }
    s->rng = (ev_now_ms() << 16) ^ (uint64_t)getpid() ^ (uint64_t)time(NULL);
    if (!s->rng)
        s->rng = 1;
    informer_handlers h = {.on_add = sim_isvc_add,
                           .on_update = sim_isvc_update,
                           .on_delete = sim_isvc_add,
                           .on_synced = sim_on_synced,
                           .on_error = sim_on_error,
                           .ud = s};
    informer_config ic = {.group = "inference.llmkube.dev",
                          .version = "v1alpha1",
                          .resource = "inferenceservices",
                          .namespace_ = opt->namespace_,
                          .codec = &store_codec_json_trimmed};
    s->isvcs = informer_new(loop, client, &ic, &h);
    h.on_add = sim_pod_add;
    h.on_update = sim_pod_update;
    h.on_delete = sim_pod_add;
    informer_config pc = {.group = "",
                          .version = "v1",
                          .resource = "pods",
                          .namespace_ = opt->namespace_,
                          .label_selector = SIM_LABEL_SERVICE,
                          .codec = &store_codec_json_trimmed};
    s->pods = informer_new(loop, client, &pc, &h);
    /* Conflicts clear within a watch event or two: retry fast, but never faster than 5 s apart
     * once the API server keeps failing. */
    wq_config qc = {.concurrency = 8, .base_delay_ms = 20, .max_delay_ms = 5000};
    s->q = wq_new(loop, &qc, sim_process, s);
    if (!s->isvcs || !s->pods || !s->q ||
        store_add_index(informer_store(s->pods), SIM_INDEX_MEMBER, sim_index_member, NULL) < 0) {
        sim_free(s);
        return NULL;
    }
    return s;
}

int sim_start(sim *s)
{
    int rc = informer_start(s->isvcs);
    return rc < 0 ? rc : informer_start(s->pods);
}

void sim_print_requests(const sim *s, FILE *out)
{
    for (strmap_node *n = strmap_first(&s->members); n; n = strmap_next(&s->members, n)) {
        const sim_member *m = STRMAP_OWNER(n, sim_member, node);
        fprintf(out, "sim %s requests=%llu\n", m->key, (unsigned long long)m->requests);
    }
    fflush(out);
}

void sim_free(sim *s)
{
    if (!s)
        return;
    informer_free(s->isvcs);
    informer_free(s->pods);
    /* Calls first: their callbacks must not reach a freed queue. */
    strmap_node *n = s->members.buckets ? strmap_first(&s->members) : NULL;
    while (n) {
        strmap_node *next = strmap_next(&s->members, n);
        sim_member_free(STRMAP_OWNER(n, sim_member, node));
        n = next;
    }
    strmap_fini(&s->members);
    wq_free(s->q);
    free(s->ip_used);
    free(s);
}

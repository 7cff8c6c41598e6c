/* sim_ctl: what the simulator's controller (sim_ctl.c: members, passes, writes, informers) and its
 * Pods in memory (sim_pod.c: their addresses, timers, state lines, servers and OpenAI requests)
 * share: the records of both and the calls between them. Internal to the simulator. */
#ifndef MP_SIM_CTL_H
#define MP_SIM_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpd/httpd.h"
#include "informer/informer.h"
#include "informer/workqueue.h"
#include "sim.h"
#include "sim_hang.h"
#include "sim_llama.h"
#include "util/strmap.h"

/* The Pods' index in the Pod cache: by "ns/<service label>". */
#define SIM_INDEX_MEMBER "member"

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

/* ---- sim_ctl.c: small helpers ---- */

bool sim_eq(const char *a, const char *b);
const cJSON *sim_field(const cJSON *obj, const char *a, const char *b);
/* Address index n is 127.<n>>16>.<n>>8 & 255>.<n & 255>: 2..254 is 127.0.0.2..254. */
char *sim_ip_text(int ip, char *buf, size_t len);
const char *sim_str(const cJSON *obj, const char *a, const char *b);
bool sim_terminal(const char *phase);

/* ---- sim_pod.c ---- */

/* True once the deadline due has come; until then one timer (re-armed when due moved) brings
 * the member back at due. */
bool sim_due(ev_loop *loop, uint64_t due, uint64_t *timer, uint64_t *at, ev_timer_fn fn,
             sim_pod *p);
/* Frees *ip (0: a Pod without an address yet) and clears it. */
void sim_ip_release(sim *s, int *ip);
void sim_on_load(ev_loop *loop, void *ud);
void sim_on_terminate(ev_loop *loop, void *ud);
const cJSON *sim_pod_cached(const sim_pod *p);
void sim_pod_free(sim_pod *p);
/* Whether p serves: a simulated Pod at once, a real server once its model is loaded. */
bool sim_pod_loaded(const sim_pod *p);
sim_pod *sim_pod_new(sim_member *m, const char *name);
/* Serves p, first giving it an address if it has none: the first free one it can listen on, since
 * another simulator (a test running in parallel) may hold some of 127.0.0.0/8 on this port. A Pod
 * whose status already names its address keeps it. 0, or -1 (logged). */
int sim_pod_place(sim_pod *p, const cJSON *isvc);
void sim_pod_terminating(sim_pod *p);
/* Closes p's listener: probes of it are refused from now on, and requests held by a hang are
 * dropped unanswered (the server went away under them). */
void sim_pod_unserve(sim_pod *p);
/* The lines for the e2e tests and their checks: per Pod and per member, each printed right after
 * the write that caused it, before anything that write lets the operator do, so the order of
 * lines is the order of events. */
void sim_show(sim_member *m);
/* Brings the member's Pods in memory in line with the cache: adopts the unknown, forgets those
 * that left it. 0 or -ENOMEM. */
int sim_sync_pods(sim_member *m);

#endif

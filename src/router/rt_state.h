/* rt_state: the router's state shared by its files, private to src/router: a request (rt_req), a
 * member's queue of held requests (rt_mq), what this router keeps of a pool (rt_pool) and the
 * router itself; and the functions one file calls in another. router.c wires them; intake.c takes
 * requests in, decide.c decides a pool and applies it, relay.c forwards requests, view.c reads the
 * caches, activate.c writes to the pool and fence.c reads it for the drain fence. */
#ifndef MP_ROUTER_RT_STATE_H
#define MP_ROUTER_RT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/caches.h"
#include "api/records.h"
#include "httpd/httpd.h"
#include "informer/informer.h"
#include "kube/client.h"
#include "loop/ev.h"
#include "router/forward.h"
#include "router/model.h"
#include "router/oai.h"
#include "router/podcheck.h"
#include "router/registry.h"
#include "router/router.h"
#include "router/router_metrics.h"
#include "router/routes.h"
#include "util/strmap.h"

/* The Pods one forward may try, in turn. */
#define RT_MAX_TARGETS 2

typedef struct rt_pool rt_pool;
typedef struct rt_mq rt_mq;

typedef enum { RQ_READING, RQ_HELD, RQ_FORWARDING } rq_state;

typedef struct rt_req {
    rt_router *rt;
    httpd_req *hr;
    rq_state state;
    rt_model_scan scan;
    size_t name_at; /* scan.name + name_at: the model's name in its namespace (no qualifier) */
    char *buf;      /* the body read so far, until it is handed to the forwarder */
    size_t len, cap;
    bool body_end;
    bool body_paused;
    int64_t content_length; /* the client's, -1 when it sent none */
    uint64_t body_total;    /* bytes of body received */
    bool head_sent;         /* the member's status and headers went to the client */
    bool was_held;          /* it waited (not forwarded when it arrived) */
    bool answered;          /* while FORWARDING: the member's answer head came */
    rt_pool *pool;          /* HELD, FORWARDING */
    rt_mq *mq;
    struct rt_req *prev, *next; /* in mq's queue while HELD */
    uint64_t arrived_ms;
    uint64_t budget_timer;
    size_t reserved;       /* of the body budget: at least cap */
    uint64_t idle_timer;   /* while READING: the upload's silence is timed */
    uint64_t last_byte_ms; /* when its last body bytes came */
    unsigned refused;      /* forwards that failed before any response byte */
    uint64_t retry_at;     /* put back after one: not forwarded again before this */
    fwd_call *call;
    /* The Pods the forward's targets are (their cached UID and address), and the read that
     * confirms one on a new connection before any byte goes to it. */
    rt_podref to[RT_MAX_TARGETS];
    rt_podcheck_call *check;
} rt_req;

/* One member's requests in a pool. */
struct rt_mq {
    char *member;
    rt_req *head, *tail;
    size_t waiting;
    size_t in_flight;
    /* A forward that ended without an answer's head may have left bytes on their way to the
     * member: until then (half the fence, their transit bound) it still counts as outstanding. */
    uint64_t linger_until;
    unsigned rr; /* round-robin over its ready Pods */
};

struct rt_pool {
    strmap_node node;
    char *key; /* "namespace/name" */
    char *ns, *name;
    rt_router *rt;
    rt_mq **mqs; /* each its own allocation: requests point at theirs */
    size_t nmq;
    bool dirty;
    rt_pool *next_dirty;
    /* Our request write: in flight, then its answer's version until the cache shows it. */
    kube_call *patch;
    char *patch_member;
    unsigned patch_failures;   /* refused writes in a row */
    uint64_t patch_not_before; /* after a refused write */
    /* After a write (done or refused as a conflict): the version it was made at and the one it
     * answered (NULL after a conflict: any newer version); asked nothing more until the cache
     * shows it. */
    bool awaiting;
    char *request_rv, *request_old_rv;
    /* The member this router's last request asked for, while the pool shows that request or its
     * swap (NULL otherwise); whether a client waiting for it left; the withdrawal in flight,
     * and the pool's version it was sent at (kept after a 409: no withdrawal goes out again at
     * that version, so a lagging cache costs one write, not one per round trip). */
    char *asked;
    bool asked_left;
    /* What this router last wrote to the pool's waiting annotation ("MEMBER@MS"), while the pool
     * shows it: cleared by this router once no client here waits for that member. The write in
     * flight is p->patch, as for a request (patch_advert tells them apart). */
    char *advertised;
    bool patch_advert;
    kube_call *withdraw;
    char *withdraw_rv;
    uint64_t wake_timer;
    uint64_t wake_at;
    /* Swap timing from the status as this router saw it change (monotonic ms). */
    uint64_t swap_seen_ms;
    uint64_t swap_estimate_ms;
    uint64_t settled_ms; /* when the last swap seen here ended (0: none seen) */
    /* The drain fence's read of the pool: in flight (sent at verify_sent_ms), then the member the
     * last good read showed resident with no swap (NULL: none) and when that read was sent. */
    kube_call *verify;
    uint64_t verify_sent_ms;
    char *verified_member;
    uint64_t verified_ms;
    unsigned verify_failures;   /* failed reads in a row */
    uint64_t verify_not_before; /* after a failed read */
    /* The last fence read was refused (401/403): why, naming the missing right; NULL otherwise.
     * Its requests are answered 503 with it at once, /readyz names it, and the read is tried again
     * (after its backoff) until one succeeds. */
    char *refused;
};

struct rt_router {
    ev_loop *loop;
    kube_client *client;
    rt_router_opts o;
    char *home_copy;
    api_caches caches; /* the pools, members and their Pods (api/caches.h) */
    rt_registry *reg;  /* this replica's registration and acknowledgements (api/fence.h) */
    rt_routes *routes;
    fwd *fwd;
    rt_podcheck *podcheck;
    httpd *front;
    rt_metrics m;
    strmap pool_map;
    rt_pool *dirty;
    uint64_t tick;
    rt_req *arriving; /* the request rt_enqueue decides for: forwarded at once, not held */
    bool stopping;
    size_t in_flight;      /* forwards running, all pools */
    uint64_t linger_until; /* the latest rt_mq.linger_until, all pools (shutdown waits for it) */
    uint64_t buffered;     /* body bytes reserved by every request, at most o.body_budget_bytes */
    void (*stopped)(void *ud);
    void *stopped_ud;
    uint64_t stop_deadline, stop_timer;
};

/* router.c: pools, queues, when to decide again; decide.c: the decision. */
bool rt_str_eq(const char *a, const char *b);
const api_pool *rt_pool_rec(const rt_pool *p);
rt_pool *rt_pool_get(rt_router *rt, const char *ns, const char *name);
rt_mq *rt_mq_get(rt_pool *p, const char *member);
/* Queues q in its member's queue by arrival (new requests go last; one put back goes where it
 * arrived, usually first). */
void rt_mq_insert(rt_req *q);
void rt_mq_unlink(rt_req *q);
/* The pool is decided again on the next loop turn. */
void rt_mark(rt_pool *p);
/* Decides the pool now. */
void rt_decide(rt_pool *p);
/* Decides the pool again at time t (monotonic ms) at the latest. */
void rt_wake_at(rt_pool *p, uint64_t t);
/* The next try after a failure: util_backoff_ms from first up to max, counting *failures; the pool
 * is decided again then. Returns when (monotonic ms). */
uint64_t rt_backoff(rt_pool *p, unsigned *failures, uint64_t first, uint64_t max);
/* The timer of a held request's swapBudget (its ud is the request). */
void rt_budget_over(ev_loop *loop, void *ud);

/* intake.c: requests in, and the answers the router writes itself. */
void rt_request(void *ud, httpd_req *hr);
/* Answers q with an OpenAI error (and Retry-After when retry_s > 0), counts it, and frees q. */
void rt_answer(rt_req *q, rt_oai_err err, const char *message, uint32_t retry_s);
void rt_req_free(rt_req *q);
/* Frees q's kept body and its reservation. */
void rt_buf_drop(rt_req *q);

/* relay.c: a held request forwarded to a ready Pod of its member, its answer relayed. */
/* Starts the forward; it must be sending by send_by_ms (the drain fence's window). */
void rt_forward(rt_req *q, uint64_t send_by_ms);
/* Gives up a forward: the client gets err (502 or 413) if nothing of the answer went out yet,
 * else a cut reply. */
void rt_forward_abort(rt_req *q, rt_oai_err err, const char *msg);
/* The client left: the forward ends without an answer. */
void rt_forward_cancel(rt_req *q);

/* activate.c: this router's writes to a pool (a request, a withdrawal). */
void rt_activate(rt_pool *p, const api_pool *o, const char *member);
/* Sets the pool's waiting annotation to value ("MEMBER@MS"; NULL removes it, when it is still
 * what this router wrote), with the pool's version as the precondition. */
void rt_advertise(rt_pool *p, const api_pool *o, const char *value);
void rt_withdraw_check(rt_pool *p, const api_pool *o, const rt_mq *mq);

/* fence.c: the drain fence's read of a pool, and this replica's acknowledgement of its swap. */
/* Writes (or withdraws) this replica's acknowledgement of o's swap in its Lease (api/fence.h);
 * p: what this router keeps of the pool (its forwards), NULL when nothing. */
void rt_ack(rt_router *rt, const api_pool *o, const rt_pool *p);
/* How long after a read of the pool requests may go to the resident it showed: half the fence. */
uint64_t rt_fence_window_ms(const rt_router *rt);
/* Reads the pool from the API server, unless a read is in flight or waits out its backoff. */
void rt_verify(rt_pool *p, uint64_t now);

#endif

/* router: modelpool-router's core. It watches ModelPools, their member InferenceServices and
 * the members' Pods, serves the OpenAI API on one address, and for each request finds the member
 * its model names, then forwards it to a ready Pod of the resident member, or holds it while the
 * pool swaps that member in (asking the pool, never scaling a member), or answers it with an
 * OpenAI-format error. Everything it decides comes from the watch caches, so several replicas
 * agree without talking to each other. */
#ifndef MP_ROUTER_ROUTER_H
#define MP_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpd/httpd.h"
#include "kube/client.h"
#include "loop/ev.h"
#include "metrics/metrics.h"

typedef struct rt_router rt_router;

typedef struct rt_router_opts {
    const char *bind;       /* the OpenAI endpoint, as httpd_parse_bind takes it */
    const char *namespace_; /* NULL: every namespace */
    /* Where a model name without "<namespace>/" is looked up (names of other namespaces need it);
     * required. */
    const char *home_namespace;
    const char *label_selector; /* the ModelPools fronted; NULL all */
    long long max_body_bytes;   /* larger bodies get 413 */
    /* Body bytes kept in memory by all requests at once (until their model is known, and while
     * held); past it new ones get 503. 0: 128 MiB. */
    long long body_budget_bytes;
    long body_idle_ms;      /* an upload silent this long before its model is known: 408; 0: 30 s */
    long resident_grace_ms; /* see rt_hold_pool.grace_ms */
    long upstream_timeout_ms; /* the longest a member may send nothing once the request is sent
                               * (fwd_config.idle_timeout_ms); 0 none */
    /* The drain fence (the operator's --drain-fence), the router's side of api/fence.h; 0: its
     * default. */
    long drain_fence_ms;
    /* The endpoint's connection limits (httpd_config's): open at once, from one client IP (0 no
     * cap), and the time for a whole request head (ms). */
    unsigned max_connections, max_per_client;
    long header_timeout_ms;
    /* This replica's registration (api/fence.h): its Lease's namespace (the operator's) and its
     * name, unique per process. */
    const char *lease_namespace, *lease_name;
    metrics *metrics; /* where the router's series go; borrowed */
} rt_router_opts;

/* NULL with err set when out of memory. Nothing starts yet. */
rt_router *rt_router_new(ev_loop *loop, kube_client *client, const rt_router_opts *o, char *err,
                         size_t errlen);
/* Starts the informers and the endpoint. 0, or -1 with err set (the address is taken). */
int rt_router_start(rt_router *r, char *err, size_t errlen);
/* The port the endpoint listens on. */
int rt_router_port(const rt_router *r);
/* The endpoint's server (for its count of connections); NULL before rt_router_start. */
const httpd *rt_router_front(const rt_router *r);
/* True once the three caches hold their first list (requests before that wait for it). */
bool rt_router_synced(const rt_router *r);
/* True when the API server refuses a drain-fence read of some pool (the router lacks a right),
 * with the reason (the first such pool's, and how many more) in buf: /readyz fails with it. */
bool rt_router_refused(const rt_router *rt, char *buf, size_t len);
/* Why this replica is not registered with the operator ("" when it is): /readyz fails with it
 * (requests wait meanwhile). */
void rt_router_unregistered(const rt_router *r, char *buf, size_t len);
/* What /readyz waits for, as informer_waiting writes it ("" when synced). */
void rt_router_waiting(const rt_router *r, char *buf, size_t len);
/* Stops taking requests: held ones get 503 with Retry-After 1 (another replica can take them),
 * those being forwarded finish (at most grace_ms), then done(ud) runs from the loop. */
void rt_router_shutdown(rt_router *r, uint64_t grace_ms, void (*done)(void *ud), void *ud);
/* Frees everything; connections still open are closed. NULL is a no-op. */
void rt_router_free(rt_router *r);

#endif

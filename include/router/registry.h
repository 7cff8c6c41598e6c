/* registry: this router replica's registration with the operator (api/fence.h, "Acknowledged
 * swaps"). It keeps a Lease of its own, renewed every few seconds, whose fenced annotation lists
 * the swaps this replica acknowledges, and tells the router until when it may forward at all,
 * which pool reads count for the fence (those sent after the registration began and after an
 * acknowledgement was withdrawn), and which members it must not send to (those whose entry may
 * stand in the Lease). Every write carries the resourceVersion read last, so a write that timed out
 * can never land after a later one. */
#ifndef MP_ROUTER_REGISTRY_H
#define MP_ROUTER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "loop/ev.h"

typedef struct rt_registry rt_registry;

typedef struct rt_registry_config {
    const char *namespace_; /* the Lease's namespace (where the operator lists them) */
    const char *name;       /* the Lease's name, unique per process */
    const char *identity;   /* spec.holderIdentity */
    const char *fronts;     /* API_FRONTS_ANNOTATION: the one namespace fronted; NULL: all */
    uint64_t duration_ms;   /* D: whole seconds, at least 2 s */
    uint64_t renew_ms;      /* below D */
    uint64_t window_ms;     /* the fence window: how long a withdrawal voids older reads */
    /* The registration began again (pool NULL: every pool may go on), or pool's acknowledgement
     * was withdrawn from the Lease (its fence reads may count again once sent after now). */
    void (*changed)(void *ud, const char *pool_key);
    void *ud;
} rt_registry_config;

/* NULL when out of memory. Strings are copied. Nothing is sent before rt_registry_start. */
rt_registry *rt_registry_new(ev_loop *loop, kube_client *client, const rt_registry_config *cfg);
/* Creates the Lease, then renews it. */
void rt_registry_start(rt_registry *r);
/* Deletes the Lease (this replica forwards nothing more); done(ud) runs once the API server
 * answered or timeout_ms passed. */
void rt_registry_release(rt_registry *r, uint64_t timeout_ms, void (*done)(void *ud), void *ud);
void rt_registry_free(rt_registry *r);

/* Until when (monotonic ms) this replica may forward: D after the send of its last write that
 * succeeded; 0 when not registered now. */
uint64_t rt_registry_until(const rt_registry *r, uint64_t now_ms);
/* A read of pool pool_key sent before this (monotonic ms) does not count for the fence: the
 * registration began, or the pool's acknowledgement was withdrawn, after it. */
uint64_t rt_registry_reads_from(const rt_registry *r, const char *pool_key);
/* Whether an entry for member of pool_key may stand in the Lease (nothing may go to it). */
bool rt_registry_blocks(const rt_registry *r, const char *pool_key, const char *member);
/* Sets what this replica acknowledges for pool ns/name: member (its entry is written at once), or
 * NULL (the entry is withdrawn). 0, -ENOMEM, or -EINVAL for names longer than the API allows. */
int rt_registry_ack(rt_registry *r, const char *ns, const char *name, const char *member);
/* Why this replica is not registered ("" when it is), for /readyz. */
void rt_registry_unready(const rt_registry *r, uint64_t now_ms, char *buf, size_t len);

#endif

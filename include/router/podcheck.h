/* rt_podcheck: a member Pod confirmed at its address before the first request on a new connection
 * to it. A read of the Pod from the API server, made after the connection was established, must
 * show the Pod the cache named (same UID) alive (not terminating, not Failed or Succeeded) with the
 * same podIP; a Pod a read refuted is remembered, so requests wait for another rather than try it
 * again, until the cache has it no longer. */
#ifndef MP_ROUTER_PODCHECK_H
#define MP_ROUTER_PODCHECK_H

#include <stdbool.h>

#include "api/records.h"
#include "informer/store.h"
#include "kube/client.h"

typedef enum {
    RT_POD_SAME,    /* the Pod the cache named holds the address: send */
    RT_POD_GONE,    /* gone, going, or at another address: never send to it again */
    RT_POD_UNKNOWN, /* no answer that says (an error, a refusal): not sent this time */
} rt_pod_verdict;

/* Pure: what a read of the Pod (HTTP status code, 0 for none; read its decoded body, NULL when
 * none) says of the cached one with uid at ip. *why, for people, is set when not RT_POD_SAME. */
rt_pod_verdict rt_podcheck_judge(long code, const api_pod *read, const char *uid, const char *ip,
                                 const char **why);

/* What a request was sent to: copies of the cached Pod's fields. */
typedef struct rt_podref {
    char *ns, *name, *uid, *ip;
} rt_podref;
/* Copies pod's namespace, name, UID and address into r (what r held is freed first). 0, or
 * -ENOMEM (r then cleared). */
int rt_podref_set(rt_podref *r, const api_pod *pod);
void rt_podref_clear(rt_podref *r);

typedef struct rt_podcheck rt_podcheck;
typedef struct rt_podcheck_call rt_podcheck_call;
/* refused: NULL when the Pod holds the address, else why not (valid during the call). */
typedef void (*rt_podcheck_fn)(void *ud, const char *refused);

/* pods: the cache whose records are checked (for forgetting refuted Pods it no longer has).
 * NULL when out of memory. */
rt_podcheck *rt_podcheck_new(kube_client *client, const store *pods, long timeout_ms);
/* Not while a call is in flight (cancel those first). NULL is a no-op. */
void rt_podcheck_free(rt_podcheck *pc);

/* Reads pod; done runs later from the loop, once, unless cancelled. NULL when the read cannot
 * start (then done never runs; the caller treats it as refused). */
rt_podcheck_call *rt_podcheck_start(rt_podcheck *pc, const rt_podref *pod, rt_podcheck_fn done,
                                    void *ud);
/* done does not run. NULL is a no-op. */
void rt_podcheck_cancel(rt_podcheck_call *c);

/* A read refuted this cached Pod (its UID at its address). */
bool rt_podcheck_refuted(const rt_podcheck *pc, const api_pod *pod);

#endif

/* activate: the router's writes to a pool (the request for a member, its withdrawal); here the
 * pure part: whether this router's request is to be withdrawn, and how. */
#ifndef MP_ROUTER_ACTIVATE_H
#define MP_ROUTER_ACTIVATE_H

#include <stdbool.h>
#include <stddef.h>

/* This router's last request as it stands, and the pool as the cache shows it. */
typedef struct rt_withdraw_view {
    const char *asked;      /* the member this router asked for; NULL: none */
    bool asked_left;        /* a client waiting for it left */
    size_t waiting;         /* requests for it this router holds */
    size_t in_flight;       /* requests for it this router forwards now */
    const char *requested;  /* the pool's request annotation */
    const char *pending;    /* status.pendingMember */
    const char *withdrawn;  /* the pool's withdraw annotation */
    const char *rv;         /* the pool's resourceVersion */
    const char *sent_at_rv; /* the version a withdrawal was last sent at (after a 409); NULL */
} rt_withdraw_view;

typedef enum {
    RT_WITHDRAW_NONE,    /* nothing to do */
    RT_WITHDRAW_FORGET,  /* the pool shows neither the request nor its swap: forget it */
    RT_WITHDRAW_UNTAKEN, /* remove the request annotation (the operator has not taken it) */
    RT_WITHDRAW_TAKEN,   /* set the withdraw annotation: the operator cancels the swap if it has
                          * unloaded nothing for it */
} rt_withdraw_step;

/* The request is withdrawn once a client waiting for it left and none waits or is served any
 * more, the pool still shows it (the annotation: untaken; pendingMember: taken), no withdrawal of
 * it stands and none was sent at this version. */
rt_withdraw_step rt_activate_withdrawal(const rt_withdraw_view *v);

#endif

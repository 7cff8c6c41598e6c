/* event: records a core/v1 Event about an object, the way `kubectl describe` shows them.
 * Fire and forget: a failed Event is logged by the caller's callback, never retried forever. */
#ifndef MP_KUBE_EVENT_H
#define MP_KUBE_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"

typedef struct kube_object_ref {
    const char *api_version;
    const char *kind;
    const char *namespace_;
    const char *name;
    const char *uid;
} kube_object_ref;

typedef struct kube_event {
    bool warning; /* type Warning, else Normal */
    const char *reason;
    const char *message;
    const char *component; /* source.component and reportingComponent */
    const char *instance;  /* reportingInstance, e.g. the Pod name */
} kube_event;

/* The Event object as JSON (malloc'd), named <object name>.<hex of now_ns> like client-go's, at
 * wall-clock time now_ms. NULL when out of memory. */
char *kube_event_json(const kube_object_ref *about, const kube_event *ev, int64_t now_ms,
                      uint64_t now_ns);

/* POSTs the Event; done gets the answer. NULL on immediate failure (err set). */
kube_call *kube_event_post(kube_client *c, const kube_object_ref *about, const kube_event *ev,
                           kube_done_fn done, void *ud, kube_error *err);

#endif

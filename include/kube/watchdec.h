/* kube_wdec: splits a watch response stream into events. Pure (no I/O): bytes go in with
 * kube_wdec_feed() as they arrive, in chunks cut anywhere, and whole events come out of
 * kube_wdec_next(). The API server writes one JSON object per line:
 *   {"type":"ADDED","object":{...}}\n
 * Pulling events one at a time lets the caller stop between two events (a cancelled watch)
 * without the decoder calling back into code that may have just freed it. */
#ifndef MP_KUBE_WATCHDEC_H
#define MP_KUBE_WATCHDEC_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "kube/error.h"

/* Far above any object etcd accepts (about 1.5 MiB), far below what would hurt the process. */
#define KUBE_WDEC_MAX_EVENT_DEFAULT (16u << 20)

typedef struct kube_wdec {
    char *buf; /* unconsumed bytes */
    size_t len, cap, pos;
    size_t tail; /* bytes after the last newline received: the event still arriving */
    size_t max_event;
    int failed; /* after an error, everything fails: the stream cannot be resynchronised */
} kube_wdec;

typedef struct kube_wdec_event {
    const char *type; /* "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR" (static) */
    cJSON *object;    /* owned by the receiver; for ERROR, a metav1.Status */
} kube_wdec_event;

/* max_event 0 means KUBE_WDEC_MAX_EVENT_DEFAULT. */
void kube_wdec_init(kube_wdec *d, size_t max_event);
void kube_wdec_free(kube_wdec *d);

/* Appends bytes. 0, or -1 with err set (KUBE_ERR_DECODE when the event being received already
 * exceeds max_event, KUBE_ERR_NOMEM); after an error the decoder only fails. */
int kube_wdec_feed(kube_wdec *d, const void *data, size_t len, kube_error *err);
/* 1 with *ev filled when a whole event is available, 0 when more bytes are needed, -1 with err
 * set (KUBE_ERR_DECODE) on a line that is not a watch event or is too big. Blank lines are
 * skipped. */
int kube_wdec_next(kube_wdec *d, kube_wdec_event *ev, kube_error *err);
/* The stream ended: 0 if it ended between events, else -1 with err set. */
int kube_wdec_finish(kube_wdec *d, kube_error *err);

#endif

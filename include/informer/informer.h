/* informer: keeps a store in step with one resource on the API server (LIST in pages, then WATCH
 * from the list's resourceVersion with bookmarks, resuming where it left off and relisting on
 * 410 Gone) and tells the caller what changed. Nothing here knows about ModelPools. */
#ifndef MP_INFORMER_INFORMER_H
#define MP_INFORMER_INFORMER_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "informer/store.h"
#include "kube/client.h"
#include "loop/ev.h"

typedef struct informer informer;

typedef struct informer_config {
    const char *group;          /* "" for the core group */
    const char *version;        /* e.g. "v1" */
    const char *resource;       /* plural, e.g. "pods" */
    const char *namespace_;     /* NULL: all namespaces */
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    long page_size;             /* LIST limit; 0 means 500 */
    const store_codec *codec;   /* what the cache keeps of each object; NULL: the whole object */
} informer_config;

/* Callbacks run from the loop after the store has changed, with the codec's records. Records are
 * borrowed for the call (the old one of an update is freed right after it). Any may be NULL. A
 * callback may call informer_stop but must not free the informer. */
typedef struct informer_handlers {
    void (*on_add)(void *ud, const void *rec);
    void (*on_update)(void *ud, const void *old_rec, const void *new_rec);
    void (*on_delete)(void *ud, const void *rec);      /* the last state seen */
    void (*on_synced)(void *ud);                       /* once, after the first complete list */
    void (*on_error)(void *ud, const kube_error *err); /* a list or watch failed; it retries */
    void *ud;
    /* After every complete list (the first and each relist), once the store holds it: what was
     * true on the API server when the list was read is in the cache now. */
    void (*on_listed)(void *ud);
} informer_handlers;

typedef struct informer_stats {
    uint64_t lists;          /* complete lists, the first included */
    uint64_t relists;        /* complete lists after the first (410 Gone, errors) */
    uint64_t watch_restarts; /* watches that ended and were resumed or replaced by a relist */
    uint64_t watch_events;   /* events received, bookmarks included */
    uint64_t errors;         /* failed lists and watches (each one reported to on_error) */
} informer_stats;

/* Copies cfg's strings and h. NULL when out of memory or cfg lacks version or resource. The
 * client and the loop must outlive the informer. */
informer *informer_new(ev_loop *loop, kube_client *client, const informer_config *cfg,
                       const informer_handlers *h);
/* Stops and frees the informer and its store. */
void informer_free(informer *inf);

/* The cache. Register indexes on it before informer_start; otherwise read it only. */
store *informer_store(informer *inf);

/* Starts listing, then watching, from the loop. 0, -EALREADY or -ENOMEM; list and watch
 * failures are retried (and reported to on_error), never returned. */
int informer_start(informer *inf);
/* Cancels the call in flight and any timer; the store keeps its (now unwatched) contents and a
 * later informer_start relists (a consistent read: no resourceVersion) and delivers the
 * difference. */
void informer_stop(informer *inf);

/* True while the changes of a list are being delivered to the handlers (adds and updates first,
 * deletions last): a reader that checks a relation across objects waits for on_listed, or it sees
 * states that never were (a new object beside one the list already dropped). */
bool informer_listing(const informer *inf);
/* True once the first complete list is in the store. */
bool informer_synced(const informer *inf);
/* The resource, for people: "resource.group" (a CRD's name) or a core resource's plural ("pods").
 */
const char *informer_name(const informer *inf);
/* The message of the latest failed list or watch, until a list completes again; NULL otherwise. */
const char *informer_last_error(const informer *inf);
/* What a caller waiting for infs to sync waits for, for people: "the first list of NAME (last
 * error: MESSAGE); NAME2" over those not synced yet, "" when all are; cut to fit len (with its
 * '\0'). */
void informer_waiting(const informer *const *infs, size_t n, char *buf, size_t len);
/* The last resourceVersion seen (list, event or bookmark); NULL before the first list. */
const char *informer_resource_version(const informer *inf);
void informer_stats_get(const informer *inf, informer_stats *out);

/* The pure parts, exposed for tests. */

/* One change between the cache and a fresh list. */
typedef enum { INFORMER_ADDED, INFORMER_UPDATED, INFORMER_DELETED } informer_change_kind;
typedef struct informer_change {
    informer_change_kind kind;
    char *key;       /* owned by the change array */
    const void *rec; /* ADDED, UPDATED: the listed record; DELETED: the cached one */
    size_t item;     /* ADDED, UPDATED: its index in items */
} informer_change;

/* The events that turn cached into items (decoded records of a relist): listed keys not cached
 * are ADDED, cached keys not listed are DELETED, and keys whose resourceVersion (store_version)
 * differs are UPDATED; listed order first, then the deletions. A duplicate key counts once (the
 * first). *out is malloc'd (free with informer_changes_free); 0 or -ENOMEM. */
int informer_diff(const store *cached, const store_item *items, size_t nitems,
                  informer_change **out, size_t *n);
void informer_changes_free(informer_change *changes, size_t n);

/* The relist backoff, as client-go's reflector: util_backoff_ms from 1.6 s doubling to 60 s, so
 * the first delay is in [0.8 s, 1.6 s] and the longest in [30 s, 60 s]; back to the first after
 * two minutes without a failure. */
typedef struct informer_backoff {
    uint64_t base_ms, cap_ms, reset_ms;
    unsigned failures; /* since the last reset; stops growing once the step is capped */
    uint64_t last_ms;  /* when the last delay was handed out */
} informer_backoff;

void informer_backoff_init(informer_backoff *b);
/* The delay before the next attempt after a failure at now_ms; rnd: any random word. */
uint64_t informer_backoff_next(informer_backoff *b, uint64_t now_ms, uint64_t rnd);

/* The watch timeoutSeconds for a uniform r in [0, 1): [300, 600], as client-go. */
long informer_watch_timeout_s(double r);

#endif

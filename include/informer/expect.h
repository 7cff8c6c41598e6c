/* expect: a controller's memory of its own writes that its informer caches do not show yet, by
 * owner (the key it reconciles: a pool, a route). An owner is not reconciled again until the
 * caches have caught up with its last writes, so a plan never acts on a view older than its own
 * last action. Any store (the codec's version is read); no I/O, no clock. */
#ifndef MP_INFORMER_EXPECT_H
#define MP_INFORMER_EXPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "informer/store.h"

typedef struct expects expects;

/* NULL when out of memory. */
expects *expects_new(void);
void expects_free(expects *x);

/* Records a write of owner that succeeded: the object under key in cache had resourceVersion old_rv
 * before it, and the write's answer gave new_rv (NULL when the answer had none). now_ms: a
 * monotonic clock. 0 or -ENOMEM (then the next plan may read the cache before the write: every
 * write carries a precondition, so that costs a failed precondition, not safety). */
int expects_add(expects *x, const char *owner, const store *cache, const char *key,
                const char *old_rv, const char *new_rv, uint64_t now_ms);

/* True while a write of owner is not in its cache yet. A write answered with a numeric
 * resourceVersion (the API server's are) is awaited until the cache shows it, however long that
 * takes: acting on a cache older than one's own last write is how a stale cache starts a second
 * member. One answered without a comparable version stops being awaited after ttl_ms. The
 * owner's expectations that are met or expired are dropped. */
bool expects_pending(expects *x, const char *owner, uint64_t now_ms, uint64_t ttl_ms);

/* Drops every expectation of owner (deleted). */
void expects_forget(expects *x, const char *owner);

/* Whether a cached object at resourceVersion cache_rv shows a write answered with new_rv, made
 * when the object was at old_rv. resourceVersions are opaque to clients, but the API server's are
 * etcd revisions: when cache_rv and new_rv both read as unsigned integers, the write is shown by
 * new_rv or any later version; otherwise (or with no new_rv) by any version other than old_rv.
 * cache_rv NULL (the object is gone) counts as shown: there is nothing left to wait for. */
bool expect_rv_shows(const char *cache_rv, const char *old_rv, const char *new_rv);

/* Whether a cache whose last resourceVersion is have (its list, watch events and bookmarks) holds
 * every change up to want: both read as unsigned integers (etcd revisions, one sequence for every
 * resource) and have >= want. false when either is NULL or not a number: it cannot be told. */
bool expect_rv_at_least(const char *have, const char *want);

#endif

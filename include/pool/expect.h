/* expect: the controller's memory of its own writes that its informer cache does not show yet. A
 * pool is not planned again until the cache has caught up with the pool's last writes, so a plan
 * never acts on a view older than its own last action. Keyed by pool; no I/O, no clock. */
#ifndef MP_POOL_EXPECT_H
#define MP_POOL_EXPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "informer/store.h"

typedef struct pool_expects pool_expects;

/* NULL when out of memory. */
pool_expects *pool_expects_new(void);
void pool_expects_free(pool_expects *x);

/* Records a write of pool that succeeded: the object under key in cache had resourceVersion old_rv
 * before it, and the write's answer gave new_rv (NULL when the answer had none). now_ms: a
 * monotonic clock. 0 or -ENOMEM (then the next plan may read the cache before the write: every
 * write carries a precondition, so that costs a failed precondition, not safety). */
int pool_expects_add(pool_expects *x, const char *pool, const store *cache, const char *key,
                     const char *old_rv, const char *new_rv, uint64_t now_ms);

/* True while a write of pool is neither in its cache nor older than ttl_ms. The pool's
 * expectations that are met or expired are dropped. */
bool pool_expects_pending(pool_expects *x, const char *pool, uint64_t now_ms, uint64_t ttl_ms);

/* Drops every expectation of pool (a pool deleted). */
void pool_expects_forget(pool_expects *x, const char *pool);

/* Whether a cached object at resourceVersion cache_rv shows a write answered with new_rv, made
 * when the object was at old_rv. resourceVersions are opaque to clients, but the API server's are
 * etcd revisions: when cache_rv and new_rv both read as unsigned integers, the write is shown by
 * new_rv or any later version; otherwise (or with no new_rv) by any version other than old_rv.
 * cache_rv NULL (the object is gone) counts as shown: there is nothing left to wait for. */
bool pool_rv_shows(const char *cache_rv, const char *old_rv, const char *new_rv);

#endif

/* caches: the three informers both binaries keep (ModelPools, member InferenceServices, and the
 * Pods labelled with API_SERVICE_LABEL), built the one way: the records' codecs, the indexes the
 * lookups use, one namespace or all. Each binary brings its own handlers. */
#ifndef MP_API_CACHES_H
#define MP_API_CACHES_H

#include <stdbool.h>
#include <stddef.h>

#include "informer/informer.h"
#include "kube/client.h"
#include "loop/ev.h"

typedef struct api_caches_config {
    const char *namespace_;    /* NULL: all namespaces */
    const char *pool_selector; /* label selector of the ModelPools kept; NULL: all */
    bool index_removed; /* also index pools by the members they dropped (API_INDEX_REMOVED) */
    informer_handlers pools, isvcs, pods;
} api_caches_config;

/* Caches hold api_pool, api_isvc and api_pod records; the stores are informer_store(c->pools)...
 * Pools are indexed by API_INDEX_MEMBER (and API_INDEX_REMOVED if asked), Pods by
 * API_INDEX_SERVICE. */
typedef struct api_caches {
    informer *pools, *isvcs, *pods;
} api_caches;

/* Builds the informers and their indexes, not started; cfg's strings are copied. 0, or -ENOMEM
 * with nothing left to free. The client and the loop must outlive the caches. */
int api_caches_init(api_caches *c, ev_loop *loop, kube_client *client,
                    const api_caches_config *cfg);
/* Starts the three, pools first. 0, or the first failure (informer_start's). */
int api_caches_start(api_caches *c);
void api_caches_stop(api_caches *c);
/* Stops and frees the three (NULL members are skipped); c is zeroed. */
void api_caches_free(api_caches *c);
/* All three have completed their first list. */
bool api_caches_synced(const api_caches *c);
/* informer_waiting over the three. */
void api_caches_waiting(const api_caches *c, char *buf, size_t len);

#endif

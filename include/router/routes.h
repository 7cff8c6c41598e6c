/* routes: which member of which pool a model name selects. A name is a member InferenceService's
 * own name, the name its server answers to (annotation modelpool-operator.dev/served-model) or one
 * of its aliases (modelpool-operator.dev/model-aliases, comma-separated). The table is built from
 * the pool and InferenceService caches when first asked after a change, not on every request. */
#ifndef MP_ROUTER_ROUTES_H
#define MP_ROUTER_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "informer/store.h"
#include "router/oai.h"

typedef struct rt_routes rt_routes;

/* Where a model goes. Valid until the next rebuild (the next change, then lookup). */
typedef struct rt_route {
    const char *ns, *pool, *member;
    const char *served; /* the name the member's server answers to, NULL: the name asked */
} rt_route;

/* pools and isvcs: caches of pool_obj and pool_isvc records, borrowed. NULL: out of memory. */
rt_routes *rt_routes_new(const store *pools, const store *isvcs);
void rt_routes_free(rt_routes *r);
/* A pool or member changed in a way that may change the names: rebuild on next use. */
void rt_routes_invalidate(rt_routes *r);

/* 0 with *out; -ENOENT no such model; -EEXIST more than one member answers to it (*out is the
 * first, other_pool names another pool for the message); -ENOMEM. */
int rt_routes_lookup(rt_routes *r, const char *model, rt_route *out, const char **other);

/* Every name clients may send, for GET /v1/models, with residency from the pools' status:
 * *out (free with free(); strings are borrowed as by lookup) and *n. 0 or -ENOMEM. */
int rt_routes_models(rt_routes *r, rt_oai_model **out, size_t *n);

#endif

/* routes: which member of which pool a model name selects. A name is a member InferenceService's
 * own name, the name its server answers to (annotation modelpool-operator.dev/served-model) or one
 * of its aliases (modelpool-operator.dev/model-aliases, comma-separated). Names are scoped by
 * namespace: a plain name selects among the home namespace's pools only, "<namespace>/<name>" among
 * that namespace's, so no namespace can claim or shadow another's names. The table is built from
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
    const char *name;   /* the name asked without its namespace: a suffix of the lookup's model */
} rt_route;

/* pools and isvcs: caches of api_pool and api_isvc records, borrowed; home: the namespace whose
 * names need no qualifier (copied, not empty). NULL: out of memory. */
rt_routes *rt_routes_new(const store *pools, const store *isvcs, const char *home);
void rt_routes_free(rt_routes *r);
/* A pool or member changed in a way that may change the names: rebuild on next use. */
void rt_routes_invalidate(rt_routes *r);

/* Resolves model: first as a name of the home namespace (a name there may itself hold a '/', as
 * "Org/Model-7B"), else, when it holds a '/', as "<namespace>/<name>". 0 with *out; -ENOENT no
 * such model; -EEXIST more than one member of one namespace answers to it (*out is the first,
 * *other names another pool for the message); -ENOMEM. */
int rt_routes_lookup(rt_routes *r, const char *model, rt_route *out, const char **other);

/* Every name clients may send, for GET /v1/models, with residency from the pools' status: plain
 * for the home namespace's members, "<namespace>/<name>" for the others'. *out (free with free();
 * strings are borrowed as by lookup) and *n. 0 or -ENOMEM. */
int rt_routes_models(rt_routes *r, rt_oai_model **out, size_t *n);

#endif

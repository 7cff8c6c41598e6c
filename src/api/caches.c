/* caches: one informer_config per kind, then the indexes, registered before anything is listed
 * (a store indexes only what it adds after). All or nothing: a half-built set is freed. */
#include "api/caches.h"

#include <errno.h>

#include "api/records.h"

static informer *api_informer(ev_loop *loop, kube_client *client, const char *group,
                              const char *resource, const char *ns, const char *selector,
                              const store_codec *codec, const informer_handlers *h)
{
    informer_config cfg = {.group = group,
                           .version = *group ? API_VERSION : "v1",
                           .resource = resource,
                           .namespace_ = ns,
                           .label_selector = selector,
                           .codec = codec};
    return informer_new(loop, client, &cfg, h);
}

int api_caches_init(api_caches *c, ev_loop *loop, kube_client *client, const api_caches_config *cfg)
{
    *c = (api_caches){0};
    const char *ns = cfg->namespace_;
    c->pools = api_informer(loop, client, API_GROUP, "modelpools", ns, cfg->pool_selector,
                            &api_pool_codec, &cfg->pools);
    c->isvcs = api_informer(loop, client, API_GROUP, "inferenceservices", ns, NULL, &api_isvc_codec,
                            &cfg->isvcs);
    c->pods =
        api_informer(loop, client, "", "pods", ns, API_SERVICE_LABEL, &api_pod_codec, &cfg->pods);
    if (!c->pools || !c->isvcs || !c->pods ||
        store_add_index(informer_store(c->pools), API_INDEX_MEMBER, api_index_pool_members, NULL) <
            0 ||
        (cfg->index_removed && store_add_index(informer_store(c->pools), API_INDEX_REMOVED,
                                               api_index_pool_removed, NULL) < 0) ||
        store_add_index(informer_store(c->pods), API_INDEX_SERVICE, api_index_pod_service, NULL) <
            0) {
        api_caches_free(c);
        return -ENOMEM;
    }
    return 0;
}

int api_caches_start(api_caches *c)
{
    int rc = informer_start(c->pools);
    if (rc == 0)
        rc = informer_start(c->isvcs);
    if (rc == 0)
        rc = informer_start(c->pods);
    return rc;
}

void api_caches_stop(api_caches *c)
{
    informer_stop(c->pools);
    informer_stop(c->isvcs);
    informer_stop(c->pods);
}

void api_caches_free(api_caches *c)
{
    informer_free(c->pools);
    informer_free(c->isvcs);
    informer_free(c->pods);
    *c = (api_caches){0};
}

bool api_caches_synced(const api_caches *c)
{
    return informer_synced(c->pools) && informer_synced(c->isvcs) && informer_synced(c->pods);
}

void api_caches_waiting(const api_caches *c, char *buf, size_t len)
{
    const informer *const all[] = {c->pools, c->isvcs, c->pods};
    informer_waiting(all, sizeof(all) / sizeof(all[0]), buf, len);
}

/* manager: owns the informers, the metrics wiring, the reaction clocks and the controller, and
 * turns watch events into queued pools. Nothing is queued until all three caches are synced, this
 * replica leads, and (as a new leader) every cache was listed again since it took the lease. The
 * router Leases' cache, for the drain fence's early end, is none of the three: the controller asks
 * the API server before it trusts it, so it neither holds back the reconciles nor /readyz. */
#include "pool/manager.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/caches.h"
#include "api/records.h"
#include "informer/informer.h"
#include "log/log.h"
#include "pool/clocks.h"
#include "pool/controller.h"
#include "pool/pool_metrics.h"

struct pool_manager {
    ev_loop *loop;
    kube_client *client;
    char *instance;
    api_caches caches;
    informer *leases; /* the router Leases (api_router_lease); NULL: no early end of the fence */
    pool_controller *ctl;
    pool_metrics *pm;
    pool_clocks *clocks;
    bool synced;  /* all three caches hold a full list */
    bool leading; /* may write (pool_manager_lead); until then events queue nothing */
    /* Which caches were listed again since this replica took the lease (PM_LISTED_*). A standby's
     * watches may lag the last leader's writes (a relist after a 410 on a slow link, say): a
     * plan made from them could start a member the last leader had already started. So a new
     * leader relists all three (consistent reads) and plans nothing until all are back. */
    unsigned listed;
    void (*shutdown_done)(void *ud);
    void *shutdown_ud;
};

#define PM_LISTED_ALL 7u

/* Reconciles may run: leading, synced, and every cache listed since the lease was taken. */
static bool pm_active(const pool_manager *m)
{
    return m->synced && m->leading && m->listed == PM_LISTED_ALL;
}

static const store *pm_pools(const pool_manager *m)
{
    return informer_store(m->caches.pools);
}

/* ---- informer events -> queue ---- */

static bool pm_enqueue_each(const char *key, const void *rec, void *ud)
{
    (void)rec;
    pool_controller_enqueue(ud, key);
    return true;
}

/* Queues every pool listing member name in ns. */
static void pm_enqueue_member(pool_manager *m, const char *ns, const char *name)
{
    if (!pm_active(m) || !name)
        return;
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", name) < 0)
        return;
    store_index_each(pm_pools(m), API_INDEX_MEMBER, v, pm_enqueue_each, m->ctl);
    store_index_each(pm_pools(m), API_INDEX_REMOVED, v, pm_enqueue_each, m->ctl);
    free(v);
}

static void pm_enqueue_all(pool_manager *m)
{
    store_each(pm_pools(m), pm_enqueue_each, m->ctl);
}

static void pm_on_synced(void *ud)
{
    pool_manager *m = ud;
    if (m->synced || !api_caches_synced(&m->caches))
        return;
    m->synced = true;
    /* The list pages are freed by now; hand their pages back instead of keeping the high-water
     * mark of the initial list for the life of the process. */
    malloc_trim(0);
    log_kv(LOG_INFO, "caches synced", NULL);
    if (pm_active(m))
        pm_enqueue_all(m);
}

/* A cache listed again after this replica took the lease; the last of the three starts the
 * reconciles. */
static void pm_listed(pool_manager *m, unsigned bit)
{
    if (!m->leading || m->listed == PM_LISTED_ALL)
        return;
    m->listed |= bit;
    if (pm_active(m)) {
        log_kv(LOG_INFO, "caches listed again as leader", NULL);
        pm_enqueue_all(m);
    }
}

static void pm_listed_pools(void *ud)
{
    pm_listed(ud, 1u);
}

static void pm_listed_isvcs(void *ud)
{
    pm_listed(ud, 2u);
}

static void pm_listed_pods(void *ud)
{
    pm_listed(ud, 4u);
}

static void pm_pool_changed(void *ud, const void *rec)
{
    pool_manager *m = ud;
    const api_pool *pool = rec;
    if (!pm_active(m))
        return;
    char *key = NULL;
    if (!pool->ns || !*pool->ns)
        key = strdup(pool->name);
    else if (asprintf(&key, "%s/%s", pool->ns, pool->name) < 0)
        key = NULL;
    if (key)
        pool_controller_enqueue(m->ctl, key);
    free(key);
}

static void pm_pool_updated(void *ud, const void *old_rec, const void *new_rec)
{
    pool_manager *m = ud;
    const api_pool *old_obj = old_rec;
    if (pm_active(m))
        pool_clocks_pool_updated(m->clocks, old_obj, new_rec, ev_now_us());
    /* Members dropped from a pool's spec may now be free for another pool that claimed them. */
    for (size_t i = 0; i < old_obj->n_members; i++)
        pm_enqueue_member(m, old_obj->ns, old_obj->members[i]);
    pm_pool_changed(ud, new_rec);
}

static void pm_pool_deleted(void *ud, const void *rec)
{
    pm_pool_updated(ud, rec, rec);
}

static void pm_isvc_changed(void *ud, const void *rec)
{
    const api_isvc *isvc = rec;
    pm_enqueue_member(ud, isvc->ns, isvc->name);
}

static void pm_isvc_updated(void *ud, const void *old_rec, const void *new_rec)
{
    pool_manager *m = ud;
    const api_isvc *was = old_rec, *now = new_rec;
    if (pm_active(m) && api_isvc_replicas(was) < 1 && api_isvc_replicas(now) >= 1)
        pool_clocks_member_up(m->clocks, pm_pools(m), now->ns, now->name, ev_now_us());
    pm_isvc_changed(ud, new_rec);
}

static void pm_pod_changed(void *ud, const void *rec)
{
    const api_pod *pod = rec;
    pm_enqueue_member(ud, pod->ns, pod->member);
}

static void pm_pod_updated(void *ud, const void *old_rec, const void *new_rec)
{
    /* A Pod replaced under the same name (seen as an update after a relist): its old probe
     * result is of another process. */
    const char *old_uid = ((const api_pod *)old_rec)->uid;
    const char *new_uid = ((const api_pod *)new_rec)->uid;
    if (old_uid && (!new_uid || strcmp(old_uid, new_uid) != 0))
        pool_controller_pod_gone(((pool_manager *)ud)->ctl, old_uid);
    pm_pod_changed(ud, new_rec);
}

static void pm_pod_deleted(void *ud, const void *rec)
{
    pool_manager *m = ud;
    const api_pod *pod = rec;
    if (pod->uid)
        pool_controller_pod_gone(m->ctl, pod->uid);
    if (pm_active(m))
        pool_clocks_pod_gone(m->clocks, pm_pools(m), pod->ns, pod->member, ev_now_us());
    pm_pod_changed(ud, rec);
}

static void pm_on_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR, "list/watch failed, retrying", "error", err->message, "reason", err->reason,
           NULL);
}

/* ---- router Leases -> the drain fence's early end ---- */

static void pm_lease_changed(pool_manager *m, const api_router_lease *lease, bool gone)
{
    char *key = NULL;
    if (asprintf(&key, "%s/%s", lease->ns ? lease->ns : "", lease->name) < 0)
        return;
    pool_controller_lease_changed(m->ctl, key,
                                  gone        ? NULL
                                  : lease->rv ? lease->rv
                                              : "",
                                  pm_active(m));
    free(key);
}

static void pm_lease_added(void *ud, const void *rec)
{
    pm_lease_changed(ud, rec, false);
}

static void pm_lease_updated(void *ud, const void *old_rec, const void *new_rec)
{
    (void)old_rec;
    pm_lease_changed(ud, new_rec, false);
}

static void pm_lease_deleted(void *ud, const void *rec)
{
    pm_lease_changed(ud, rec, true);
}

static void pm_lease_error(void *ud, const kube_error *err)
{
    (void)ud;
    log_kv(LOG_ERROR,
           "list/watch of the router Leases failed, retrying; until it succeeds every "
           "swap waits the whole drain fence",
           "error", err->message, "reason", err->reason, NULL);
}

/* ---- lifecycle ---- */

/* Before a scrape: counters the queue and the informers keep themselves. */
static void pm_collect(void *ud)
{
    pool_manager *m = ud;
    wq_stats q;
    pool_controller_queue_stats(m->ctl, &q);
    pool_metrics_queue(m->pm, &q);
    informer_stats st;
    informer_stats_get(m->caches.pools, &st);
    pool_metrics_informer(m->pm, "modelpools", &st);
    informer_stats_get(m->caches.isvcs, &st);
    pool_metrics_informer(m->pm, "inferenceservices", &st);
    informer_stats_get(m->caches.pods, &st);
    pool_metrics_informer(m->pm, "pods", &st);
    if (m->leases) {
        informer_stats_get(m->leases, &st);
        pool_metrics_informer(m->pm, "leases", &st);
    }
}

/* The router Leases of ns (labelled API_ROUTER_LEASE_LABEL). NULL when out of memory. */
static informer *pm_leases_new(pool_manager *m, const char *ns)
{
    informer_config cfg = {.group = API_LEASE_GROUP,
                           .version = API_LEASE_VERSION,
                           .resource = "leases",
                           .namespace_ = ns,
                           .label_selector = API_ROUTER_LEASE_LABEL,
                           .codec = &api_router_lease_codec};
    informer_handlers h = {.on_add = pm_lease_added,
                           .on_update = pm_lease_updated,
                           .on_delete = pm_lease_deleted,
                           .on_error = pm_lease_error,
                           .ud = m};
    return informer_new(m->loop, m->client, &cfg, &h);
}

pool_manager *pool_manager_new(ev_loop *loop, kube_client *client, const pool_manager_opts *opts)
{
    pool_manager *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->loop = loop;
    m->client = client;
    char host[256] = "";
    if (!opts->instance)
        gethostname(host, sizeof(host) - 1);
    if (!(m->instance = strdup(opts->instance ? opts->instance : host)))
        goto fail;

    api_caches_config ac = {.namespace_ = opts->namespace_,
                            .index_removed = true,
                            .pools = {pm_pool_changed, pm_pool_updated, pm_pool_deleted,
                                      pm_on_synced, pm_on_error, m, pm_listed_pools},
                            .isvcs = {pm_isvc_changed, pm_isvc_updated, pm_isvc_changed,
                                      pm_on_synced, pm_on_error, m, pm_listed_isvcs},
                            .pods = {pm_pod_changed, pm_pod_updated, pm_pod_deleted, pm_on_synced,
                                     pm_on_error, m, pm_listed_pods}};
    if (api_caches_init(&m->caches, loop, client, &ac) < 0 ||
        (opts->router_lease_ns && !(m->leases = pm_leases_new(m, opts->router_lease_ns))))
        goto fail;
    if (opts->metrics &&
        (!(m->pm = pool_metrics_new(opts->metrics)) || !(m->clocks = pool_clocks_new(m->pm))))
        goto fail;
    pool_controller_config cc = {.loop = loop,
                                 .client = client,
                                 .pools = informer_store(m->caches.pools),
                                 .isvcs = informer_store(m->caches.isvcs),
                                 .isvc_informer = m->caches.isvcs,
                                 .pods = informer_store(m->caches.pods),
                                 .pm = m->pm,
                                 .clocks = m->clocks,
                                 .instance = m->instance,
                                 .probe_timeout_ms = opts->probe_timeout_ms,
                                 .drain_fence_ms = opts->drain_fence_ms,
                                 .router_leases = m->leases ? informer_store(m->leases) : NULL,
                                 .lease_informer = m->leases,
                                 .lease_ns = opts->router_lease_ns,
                                 .max_concurrent = opts->max_concurrent,
                                 .resync_ms = opts->resync_ms,
                                 .expect_ms = opts->expect_ms,
                                 .may_write = opts->may_write,
                                 .may_write_ud = opts->may_write_ud};
    if (!(m->ctl = pool_controller_new(&cc)))
        goto fail;
    /* Last: once registered, the collector must find a whole manager. */
    if (opts->metrics && metrics_on_collect(opts->metrics, pm_collect, m) < 0)
        goto fail;
    return m;
fail:
    pool_manager_free(m);
    return NULL;
}

int pool_manager_start(pool_manager *m)
{
    int rc = api_caches_start(&m->caches);
    return rc == 0 && m->leases ? informer_start(m->leases) : rc;
}

bool pool_manager_synced(const pool_manager *m)
{
    return m->synced;
}

void pool_manager_waiting(const pool_manager *m, char *buf, size_t len)
{
    api_caches_waiting(&m->caches, buf, len);
}

void pool_manager_lead(pool_manager *m)
{
    if (m->leading)
        return;
    m->leading = true;
    /* A standby queued nothing. Its caches are warm but may lag the last leader's writes: every
     * pool is reconciled once all three are listed again (pm_listed). */
    m->listed = 0;
    informer *const all[] = {m->caches.pools, m->caches.isvcs, m->caches.pods};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        informer_stop(all[i]);
        if (informer_start(all[i]) < 0)
            log_kv(LOG_ERROR, "cannot list again as leader (out of memory)", "resource",
                   informer_name(all[i]), NULL);
    }
}

static void pm_drained(void *ud)
{
    pool_manager *m = ud;
    api_caches_stop(&m->caches);
    if (m->leases)
        informer_stop(m->leases);
    if (m->shutdown_done)
        m->shutdown_done(m->shutdown_ud);
}

void pool_manager_shutdown(pool_manager *m, void (*done)(void *ud), void *ud)
{
    m->shutdown_done = done;
    m->shutdown_ud = ud;
    pool_controller_shutdown(m->ctl, pm_drained, m);
}

void pool_manager_free(pool_manager *m)
{
    if (!m)
        return;
    /* The controller first: its runs and probes read the caches. */
    pool_controller_free(m->ctl);
    api_caches_free(&m->caches);
    informer_free(m->leases);
    pool_clocks_free(m->clocks);
    pool_metrics_free(m->pm);
    free(m->instance);
    free(m);
}

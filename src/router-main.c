/* modelpool-router: parses flags, loads the API configuration, and serves the OpenAI endpoint of
 * the pools it fronts on one event loop until SIGTERM/SIGINT; then held requests are answered 503
 * (Retry-After 1: another replica takes them), requests being forwarded finish (up to 25 s, within
 * the Pod's default 30 s grace), and it exits 0. Replicas are all active: no leader. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/boot.h"
#include "app/options.h"
#include "app/telemetry.h"
#include "kube/client.h"
#include "kube/config.h"
#include "log/log.h"
#include "loop/ev.h"
#include "router/router.h"

#define ROUTER_DRAIN_MS 25000

typedef struct router_main {
    app_runtime run;
    rt_router *rt;
    char unready[1024];
} router_main;

static const char *router_unready(void *ud)
{
    router_main *m = ud;
    if (rt_router_synced(m->rt)) {
        char why[sizeof(m->unready) - 32];
        rt_router_unregistered(m->rt, why, sizeof(why));
        if (!*why && !rt_router_refused(m->rt, why, sizeof(why)))
            return NULL;
        snprintf(m->unready, sizeof(m->unready), "not ready: %s", why);
        return m->unready;
    }
    char what[sizeof(m->unready) - 32];
    rt_router_waiting(m->rt, what, sizeof(what));
    snprintf(m->unready, sizeof(m->unready), "not ready: waiting for %s",
             *what ? what : "the caches");
    return m->unready;
}

static void router_drained(void *ud)
{
    router_main *m = ud;
    ev_stop(m->run.loop);
}

/* The first SIGTERM or SIGINT (app_signals_start): drain, then stop the loop. */
static void router_shutdown(void *ud)
{
    router_main *m = ud;
    rt_router_shutdown(m->rt, ROUTER_DRAIN_MS, router_drained, m);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
    /* Request bodies are kept in buffers up to --max-body-size: each one from 64 KiB is a mapping
     * of its own (glibc's threshold would climb to 32 MiB after the first large free and leave
     * freed bodies in the heap), so a body given back is memory given back, and growing one
     * copies nothing (mremap). */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
#endif
    app_options opts;
    char msg[256];
    kube_config cfg;
    int boot = app_boot(APP_ROUTER, "modelpool-router", argc, argv, &opts, &cfg);
    if (boot >= 0)
        return boot;
    /* Unqualified model names resolve in one namespace only: the flag's (or --namespace, or
     * $POD_NAMESPACE), else the router's own in a cluster; never a guess. */
    const char *home = opts.home_namespace;
    if (!home && cfg.origin && strcmp(cfg.origin, "in-cluster") == 0)
        home = cfg.namespace_;
    if (!home || !*home) {
        fprintf(stderr, "modelpool-router: no home namespace for model names without a "
                        "\"<namespace>/\": set --home-namespace (or --namespace, or "
                        "POD_NAMESPACE) when not running in a cluster\n");
        kube_config_clear(&cfg);
        return 2;
    }
    unsigned max_conn;
    if (app_router_connections(&opts, app_fd_limit(), &max_conn, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "modelpool-router: %s\n", msg);
        kube_config_clear(&cfg);
        return 2;
    }
    int rc = 1;
    router_main m = {0};
    /* Its registration's Lease (api/fence.h): random, so a restarted process never takes over the
     * registration of the one before it. */
    char *lease_name = app_identity("modelpool-router-", "-", 4, true);
    char err[256];
    if (app_runtime_start(&m.run, &cfg, router_shutdown, &m, err, sizeof(err)) < 0) {
        fprintf(stderr, "modelpool-router: %s\n", err);
        goto out;
    }
    rt_router_opts ro = {.bind = opts.bind_addr,
                         .namespace_ = opts.namespace_,
                         .home_namespace = home,
                         .label_selector = opts.label_selector,
                         .max_body_bytes = opts.max_body_bytes,
                         .body_budget_bytes = opts.body_budget_bytes,
                         .body_idle_ms = opts.body_idle_ms,
                         .resident_grace_ms = opts.resident_grace_ms,
                         .upstream_timeout_ms = opts.upstream_timeout_ms,
                         .drain_fence_ms = opts.drain_fence_ms,
                         .max_connections = max_conn,
                         .max_per_client = opts.max_per_client,
                         .header_timeout_ms = opts.header_timeout_ms,
                         .lease_namespace = opts.router_lease_ns,
                         .lease_name = lease_name,
                         .metrics = telemetry_registry(m.run.tm)};
    if (!lease_name) {
        fprintf(stderr, "modelpool-router: cannot make a name for this replica's Lease\n");
        goto out;
    }
    if (!(m.rt = rt_router_new(m.run.loop, m.run.client, &ro, msg, sizeof(msg))) ||
        rt_router_start(m.rt, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "modelpool-router: %s\n", msg);
        goto out;
    }
    telemetry_count_connections(m.run.tm, "api", rt_router_front(m.rt));
    int served = app_runtime_serve(&m.run, "modelpool-router", &opts, router_unready, &m);
    if (served) {
        rc = served;
        goto out;
    }
    char port[8], mport[8], hport[8], maxc[16];
    snprintf(maxc, sizeof(maxc), "%u", max_conn);
    snprintf(port, sizeof(port), "%d", rt_router_port(m.rt));
    snprintf(mport, sizeof(mport), "%d", telemetry_metrics_port(m.run.tm));
    snprintf(hport, sizeof(hport), "%d", telemetry_health_port(m.run.tm));
    log_kv(LOG_INFO, "started", "version", MP_VERSION, "server", cfg.server, "config", cfg.origin,
           "namespace", opts.namespace_ ? opts.namespace_ : "(all)", "home_namespace", home, "port",
           port, "metrics_port", mport, "health_port", hport, "max_connections", maxc, "lease",
           lease_name, NULL);
    rc = ev_run(m.run.loop) < 0 ? 1 : 0;
    log_kv(LOG_INFO, "stopped", NULL);
out:
    rt_router_free(m.rt);
    free(lease_name);
    app_runtime_stop(&m.run);
    kube_config_clear(&cfg);
    return rc;
}

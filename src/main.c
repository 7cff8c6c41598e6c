/* modelpool-operator: parses flags, loads the API configuration, and runs the ModelPool
 * controller on one event loop until SIGTERM/SIGINT, then lets the reconcile in flight finish,
 * releases the leader lease, and exits 0. With --leader-elect the controller reconciles only
 * while this process holds the Lease; losing it ends the process at once with status 1 (writes
 * stop with it), and the Deployment restarts it as a standby. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/boot.h"
#include "app/options.h"
#include "app/telemetry.h"
#include "kube/client.h"
#include "kube/config.h"
#include "leader/leader.h"
#include "log/log.h"
#include "loop/ev.h"
#include "pool/manager.h"

typedef struct main_state {
    app_runtime run;
    pool_manager *pm;
    leader *leader;
    int rc;
    char unready[1024]; /* main_unready's answer: what /readyz waits for */
} main_state;

static void main_released(void *ud)
{
    main_state *m = ud;
    ev_stop(m->run.loop);
}

static void main_drained(void *ud)
{
    main_state *m = ud;
    if (m->leader)
        leader_release(m->leader, main_released, m);
    else
        ev_stop(m->run.loop);
}

/* /readyz: NULL when ready, else why not. A standby that cannot use the Lease is not ready: it
 * could never take over, and would otherwise wait in silence. Unsynced, it names the lists it waits
 * for (and their last errors: a missing CRD shows here). */
static const char *main_unready(void *ud)
{
    main_state *m = ud;
    const char *problem = m->leader ? leader_problem(m->leader) : NULL;
    if (problem)
        return problem;
    if (pool_manager_synced(m->pm))
        return NULL;
    char what[sizeof(m->unready) - 32];
    pool_manager_waiting(m->pm, what, sizeof(what));
    snprintf(m->unready, sizeof(m->unready), "not ready: waiting for %s",
             *what ? what : "the caches");
    return m->unready;
}

static bool main_may_write(void *ud)
{
    main_state *m = ud;
    return !m->leader || leader_may_write(m->leader);
}

static void main_lead(void *ud)
{
    main_state *m = ud;
    pool_manager_lead(m->pm);
}

static void main_lost(void *ud, const char *why)
{
    (void)why; /* logged by the leader module */
    main_state *m = ud;
    m->rc = 1;
    ev_stop(m->run.loop);
}

/* The client's own retries (429, 5xx, timeouts) as debug lines: under a throttling API server they
 * come in bursts, and the call's final failure is logged by its caller anyway. */
static void main_on_retry(void *ud, const char *verb, const char *path, const kube_error *err,
                          int retry, uint64_t delay_ms)
{
    (void)ud;
    if (!log_enabled(LOG_DEBUG))
        return;
    char n[16], ms[24];
    snprintf(n, sizeof(n), "%d", retry);
    snprintf(ms, sizeof(ms), "%llu", (unsigned long long)delay_ms);
    log_kv(LOG_DEBUG, "API call failed, retrying", "verb", verb, "path", path, "error",
           err->message, "retry", n, "delay_ms", ms, NULL);
}

/* The first SIGTERM or SIGINT (app_signals_start): drain, then stop the loop. */
static void main_shutdown(void *ud)
{
    main_state *m = ud;
    pool_manager_shutdown(m->pm, main_drained, m);
}

int main(int argc, char **argv)
{
    app_options opts;
    kube_config cfg;
    int boot = app_boot(APP_OPERATOR, "modelpool-operator", argc, argv, &opts, &cfg);
    if (boot >= 0)
        return boot;
    /* Where the Lease lives: the flag, $POD_NAMESPACE, else our own namespace in a cluster. */
    const char *lease_ns = opts.leader_election_ns;
    if (!lease_ns && cfg.origin && strcmp(cfg.origin, "in-cluster") == 0)
        lease_ns = cfg.namespace_;
    if (opts.leader_elect && !lease_ns) {
        fprintf(stderr, "modelpool-operator: --leader-elect needs --leader-election-namespace (or "
                        "POD_NAMESPACE) when not running in a cluster\n");
        kube_config_clear(&cfg);
        return 2;
    }
    int rc = 1;
    main_state m = {0};
    char *identity = NULL;
    char err[256];
    if (app_runtime_start(&m.run, &cfg, main_shutdown, &m, err, sizeof(err)) < 0) {
        fprintf(stderr, "modelpool-operator: %s\n", err);
        goto out;
    }
    kube_client_on_retry(m.run.client, main_on_retry, NULL);
    /* The router Leases, for the drain fence's early end: in the operator's own namespace, as the
     * leader's Lease, unless the flag says where. */
    const char *router_lease_ns = opts.router_lease_ns ? opts.router_lease_ns : lease_ns;
    if (opts.fence_acks && !router_lease_ns)
        log_kv(
            LOG_INFO,
            "no namespace for the router Leases (--router-lease-namespace, POD_NAMESPACE): every "
            "swap waits the whole drain fence",
            NULL);
    pool_manager_opts popts = {.namespace_ = opts.namespace_,
                               .instance = getenv("POD_NAME"),
                               .probe_timeout_ms = opts.probe_timeout_ms,
                               .drain_fence_ms = opts.drain_fence_ms,
                               .router_lease_ns = opts.fence_acks ? router_lease_ns : NULL,
                               .max_concurrent = (unsigned)opts.max_concurrent_reconciles,
                               .metrics = telemetry_registry(m.run.tm),
                               .may_write = main_may_write,
                               .may_write_ud = &m};
    if (!(m.pm = pool_manager_new(m.run.loop, m.run.client, &popts)) ||
        pool_manager_start(m.pm) < 0) {
        fprintf(stderr, "modelpool-operator: cannot start the controller (out of memory)\n");
        goto out;
    }
    int served = app_runtime_serve(&m.run, "modelpool-operator", &opts, main_unready, &m);
    if (served) {
        rc = served;
        goto out;
    }
    char mport[8], hport[8];
    snprintf(mport, sizeof(mport), "%d", telemetry_metrics_port(m.run.tm));
    snprintf(hport, sizeof(hport), "%d", telemetry_health_port(m.run.tm));
    log_kv(LOG_INFO, "started", "version", MP_VERSION, "server", cfg.server, "config", cfg.origin,
           "namespace", opts.namespace_ ? opts.namespace_ : "(all)", "metrics_port", mport,
           "health_port", hport, "router_leases",
           popts.router_lease_ns ? popts.router_lease_ns : "(not watched)", NULL);
    if (opts.leader_elect) {
        char why[160] = "out of memory";
        leader_config lc = {.namespace_ = lease_ns,
                            .name = opts.leader_election_id,
                            /* random: a restarted process is never taken for the one before */
                            .identity = identity = app_identity("", "_", 8, false)};
        leader_callbacks lcb = {.started = main_lead, .lost = main_lost, .ud = &m};
        if (!identity ||
            !(m.leader = leader_new(m.run.loop, m.run.client, &lc, &lcb, why, sizeof(why)))) {
            fprintf(stderr, "modelpool-operator: %s\n", why);
            goto out;
        }
        leader_start(m.leader);
    } else {
        pool_manager_lead(m.pm);
    }
    rc = ev_run(m.run.loop) < 0 || m.rc ? 1 : 0;
    log_kv(LOG_INFO, "stopped", NULL);
out:
    leader_free(m.leader);
    free(identity);
    pool_manager_free(m.pm);
    app_runtime_stop(&m.run);
    kube_config_clear(&cfg);
    return rc;
}

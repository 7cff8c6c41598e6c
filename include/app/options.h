/* options: the command line and environment of both programs (the operator and the router share
 * the flags they have in common), parsed into a plain struct by a pure function so every flag and
 * every bad-flag message is unit-tested without running anything. */
#ifndef MP_APP_OPTIONS_H
#define MP_APP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { APP_OPERATOR = 0, APP_ROUTER } app_program;

typedef struct app_options {
    app_program program;
    const char *kubeconfig; /* --kubeconfig, else $KUBECONFIG, else in-cluster/~/.kube/config */
    const char *context;    /* --context */
    const char *namespace_; /* --namespace: watch one namespace; NULL = all */
    int log_level;          /* -v N / --log-level N: 0 info, 1 debug, 2-4 trace */
    bool log_json;          /* --log-format json (default text) */
    bool leader_elect;      /* --leader-elect: compete for a Lease; only the leader writes */
    const char *leader_election_id; /* --leader-election-id: the Lease's name */
    const char *leader_election_ns; /* --leader-election-namespace, else $POD_NAMESPACE */
    const char *metrics_addr; /* --metrics-bind-address: /metrics; "0" off; :8443 (:8080 plain) */
    bool metrics_secure;      /* --metrics-secure: HTTPS and access reviews (default true) */
    const char *metrics_cert_path; /* --metrics-cert-path DIR; NULL: a self-signed certificate */
    const char *metrics_cert_name; /* --metrics-cert-name: file in DIR; default tls.crt */
    const char *metrics_cert_key;  /* --metrics-cert-key: file in DIR; default tls.key */
    const char *health_addr; /* --health-probe-bind-address: /healthz, /readyz; "0" off; :8081 */
    int max_concurrent_reconciles; /* --max-concurrent-reconciles N: pools reconciled at once; 4 */
    long probe_timeout_ms;         /* --probe-timeout DURATION: each idle probe request; 2s */
    /* --drain-fence DURATION, both programs': the operator unloads a swap's resident only on an
     * idle probe sent this long after the swap began; the router forwards only on a read of the
     * pool younger than half of it. 2s */
    long drain_fence_ms;
    /* The router's own. */
    const char *bind_addr;       /* --bind-address: the OpenAI endpoint; :8080 */
    const char *label_selector;  /* --label-selector: the ModelPools fronted; NULL all */
    long long max_body_bytes;    /* --max-body-size BYTES (or 32Mi, 1Gi): larger is 413; 32 MiB */
    long resident_grace_ms;      /* --resident-grace DURATION: a busy resident's new requests go on
                                    while another member waits, for this long; 10s */
    long upstream_timeout_ms;    /* --upstream-timeout DURATION: once the request is sent, the
                                    longest a member may send no byte (head or body); 10m */
    long long body_budget_bytes; /* --body-buffer-budget BYTES: body bytes kept by all requests at
                                    once; past it 503; 128 MiB */
    long
        body_idle_ms; /* --body-idle-timeout DURATION: a silent upload before its model: 408; 30s */
    /* --home-namespace: unqualified model names resolve there; else --namespace, else
     * $POD_NAMESPACE; NULL: none of them (main falls back to the service account's namespace) */
    const char *home_namespace;
    unsigned max_connections; /* --max-connections N: inbound at once; 0 (default): from the
                                 open-files limit (app_router_connections) */
    unsigned max_per_client;  /* --max-connections-per-client N: from one IP; 0 no cap; 256 */
    long header_timeout_ms;   /* --header-timeout DURATION: a whole request head within this of
                                 the accept or of the previous answer; 10s */
    bool help, version;
} app_options;

/* Parses argv (and the environment through getenv_fn, so tests pass their own). Returns 0, or -1
 * with a one-line message in err (size errlen) naming the bad flag or value. Strings point into
 * argv or the environment. */
int app_options_parse(app_options *o, int argc, char **argv, const char *(*getenv_fn)(const char *),
                      char *err, size_t errlen);
/* The same for either program: a flag of the other program is an unknown flag. */
int app_options_parse_for(app_program program, app_options *o, int argc, char **argv,
                          const char *(*getenv_fn)(const char *), char *err, size_t errlen);

/* The most connections a flag may ask for (MHD counts them in an unsigned int; this is far above
 * any open-files limit a Pod gets). */
#define APP_CONNECTIONS_MAX 1000000u

/* The router's inbound connection cap for the open-files limit fd_limit: --max-connections, or
 * by default (fd_limit - reserve) / 2 up to 16384, where the reserve is 256 open files (half of
 * fd_limit when that is less) for everything but inbound connections and the outbound one each may
 * need. 0, or -1 with err set: --max-connections is more than the limit allows. */
int app_router_connections(const app_options *o, unsigned long long fd_limit, unsigned *out,
                           char *err, size_t errlen);

/* The --help text of the operator, and of either program. */
const char *app_options_usage(void);
const char *app_options_usage_for(app_program program);

#endif

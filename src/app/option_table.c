/* option_table: the flags of both programs, one table each (name, kind, default, range, help, and
 * the field the value goes to), the one place a flag is written in the code; options.c parses
 * and prints --help from them, test_flag_docs holds the docs and the chart to them. */
#include <stddef.h>

#include "app/options.h"

#include "api/fence.h"

#define APP_AT(field) .offset = offsetof(app_options, field)
/* The longest duration flag: a day (a longer idle probe or timeout is surely a typo). */
#define APP_DAY_MS 86400000LL
#define APP_GI (1LL << 30)
/* A duration flag (a Go duration: 500ms, 2s, 1m) from FLOOR ms to a day, DEFAULT unless given. */
#define APP_DURATION(DEFAULT, FLOOR)                                                               \
    .kind = APP_FLAG_DURATION, .arg = "DURATION", .value = DEFAULT, .min = FLOOR, .max = APP_DAY_MS

/* The flags both programs have, said the same way for both. */
#define APP_FLAG_KUBECONFIG                                                                        \
    {                                                                                              \
        .name = "kubeconfig", .arg = "PATH", .env = "KUBECONFIG",                                  \
        .shown = "in-cluster, then ~/.kube/config", .empty = APP_EMPTY_UNSET, APP_AT(kubeconfig),  \
        .help = "kubeconfig to use"                                                                \
    }
#define APP_FLAG_CONTEXT                                                                           \
    {                                                                                              \
        .name = "context", .arg = "NAME", .shown = "the kubeconfig's current-context",             \
        APP_AT(context), .help = "kubeconfig context"                                              \
    }
#define APP_FLAG_NAMESPACE(HELP)                                                                   \
    {                                                                                              \
        .name = "namespace", .arg = "NS", .env = "WATCH_NAMESPACE", .shown = "all namespaces",     \
        .empty = APP_EMPTY_UNSET, APP_AT(namespace_), .help = HELP                                 \
    }
#define APP_FLAG_LOG_LEVEL                                                                         \
    {                                                                                              \
        .name = "log-level", .short_name = 'v', .kind = APP_FLAG_INT, .arg = "N",                  \
        .env = "LOG_LEVEL", .value = "0", .min = 0, .max = 4, APP_AT(log_level),                   \
        .help = "0 info, 1 debug, 2-4 trace"                                                       \
    }
#define APP_FLAG_LOG_FORMAT                                                                        \
    {                                                                                              \
        .name = "log-format", .kind = APP_FLAG_FORMAT, .arg = "F", .env = "LOG_FORMAT",            \
        .value = "text", APP_AT(log_json), .help = "text or json, one record a line"               \
    }
#define APP_FLAG_METRICS_ADDR(SHOWN)                                                               \
    {                                                                                              \
        .name = "metrics-bind-address", .arg = "ADDR", .shown = SHOWN, APP_AT(metrics_addr),       \
        .help = "serve Prometheus metrics on /metrics at ADDR (:PORT, HOST:PORT, [V6]:PORT); 0 "   \
                "turns it off"                                                                     \
    }
#define APP_FLAG_METRICS_SECURE                                                                    \
    {                                                                                              \
        .name = "metrics-secure", .kind = APP_FLAG_BOOL, .value = "true", APP_AT(metrics_secure),  \
        .help = "metrics over HTTPS, only to callers whose bearer token may get /metrics "         \
                "(TokenReview, SubjectAccessReview); false serves plain HTTP to anyone"            \
    }
#define APP_FLAG_CERT_PATH                                                                         \
    {                                                                                              \
        .name = "metrics-cert-path", .arg = "DIR",                                                 \
        .shown = "none: a self-signed certificate made at start", .empty = APP_EMPTY_UNSET,        \
        APP_AT(metrics_cert_path), .help = "directory of the metrics certificate and key"          \
    }
#define APP_FLAG_CERT_NAME                                                                         \
    {                                                                                              \
        .name = "metrics-cert-name", .arg = "FILE", .value = "tls.crt",                            \
        .empty = APP_EMPTY_REFUSED, APP_AT(metrics_cert_name), .help = "the certificate in DIR"    \
    }
#define APP_FLAG_CERT_KEY                                                                          \
    {                                                                                              \
        .name = "metrics-cert-key", .arg = "FILE", .value = "tls.key", .empty = APP_EMPTY_REFUSED, \
        APP_AT(metrics_cert_key), .help = "the private key in DIR"                                 \
    }
#define APP_FLAG_HEALTH                                                                            \
    {                                                                                              \
        .name = "health-probe-bind-address", .arg = "ADDR", .value = ":8081", APP_AT(health_addr), \
        .help = "serve /healthz and /readyz at ADDR; 0 turns it off"                               \
    }
#define APP_FLAG_HELP                                                                              \
    {                                                                                              \
        .name = "help", .short_name = 'h', .kind = APP_FLAG_SWITCH, APP_AT(help),                  \
        .help = "print this help and exit"                                                         \
    }
#define APP_FLAG_VERSION                                                                           \
    {                                                                                              \
        .name = "version", .kind = APP_FLAG_SWITCH, APP_AT(version),                               \
        .help = "print the version and exit"                                                       \
    }

static const app_flag app_operator_flags[] = {
    APP_FLAG_KUBECONFIG,
    APP_FLAG_CONTEXT,
    APP_FLAG_NAMESPACE("watch one namespace only"),
    APP_FLAG_LOG_LEVEL,
    APP_FLAG_LOG_FORMAT,
    {.name = "leader-elect",
     .kind = APP_FLAG_BOOL,
     .value = "false",
     APP_AT(leader_elect),
     .help = "compete for a Lease so that of several replicas only one writes; the others keep "
             "their caches warm"},
    {.name = "leader-election-id",
     .arg = "NAME",
     .value = "modelpool-operator",
     .empty = APP_EMPTY_REFUSED,
     APP_AT(leader_election_id),
     .help = "the Lease's name"},
    {.name = "leader-election-namespace",
     .arg = "NS",
     .env = "POD_NAMESPACE",
     .shown = "the service account's namespace in a cluster",
     .empty = APP_EMPTY_UNSET,
     APP_AT(leader_election_ns),
     .help = "the Lease's namespace"},
    APP_FLAG_METRICS_ADDR(":8443 (:8080 with --metrics-secure=false)"),
    APP_FLAG_METRICS_SECURE,
    APP_FLAG_CERT_PATH,
    APP_FLAG_CERT_NAME,
    APP_FLAG_CERT_KEY,
    APP_FLAG_HEALTH,
    /* Each reconcile in flight holds a plan and at most one API call or probe batch, so the
     * cap only guards against a typo. */
    {.name = "max-concurrent-reconciles",
     .kind = APP_FLAG_INT,
     .arg = "N",
     .value = "4",
     .min = 1,
     .max = 1000,
     APP_AT(max_concurrent_reconciles),
     .help = "pools reconciled at once (a pool never twice at once)"},
    {.name = "probe-timeout",
     APP_DURATION("2s", 1),
     APP_AT(probe_timeout_ms),
     .help = "timeout of each idle probe request, a Go duration (500ms, 2s, 1m)"},
    /* At least 100ms: the router's half of it must outlast a read of the pool. */
    {.name = "drain-fence",
     APP_DURATION("2s", API_DRAIN_FENCE_MIN_MS),
     APP_AT(drain_fence_ms),
     .help = "in a swap, the resident is unloaded only on an idle probe sent this long after the "
             "swap began: routers forward only on a read of the pool younger than half of it, so "
             "their last request has reached the Pod; set the routers' to the same value"},
    {.name = "fence-acks",
     .kind = APP_FLAG_BOOL,
     .value = "true",
     APP_AT(fence_acks),
     .help = "end a swap's drain fence early once every router replica has acknowledged the swap "
             "in its Lease (or its Lease has expired); routers must be upgraded first; false "
             "always waits the whole fence"},
    {.name = "router-lease-namespace",
     .arg = "NS",
     .shown = "--leader-election-namespace's (the operator's own namespace)",
     .empty = APP_EMPTY_UNSET,
     APP_AT(router_lease_ns),
     .help = "where the router replicas keep their Leases (watched for --fence-acks)"},
    APP_FLAG_HELP,
    APP_FLAG_VERSION,
};

static const app_flag app_router_flags[] = {
    APP_FLAG_KUBECONFIG,
    APP_FLAG_CONTEXT,
    APP_FLAG_NAMESPACE("front the pools of one namespace"),
    /* Its fallbacks ($POD_NAMESPACE among them) are options.c's app_home_namespace. */
    {.name = "home-namespace",
     .arg = "NS",
     .shown = "--namespace, else POD_NAMESPACE, else the in-cluster service account's namespace",
     .empty = APP_EMPTY_REFUSED,
     APP_AT(home_namespace),
     .help = "a model name without \"<namespace>/\" selects among this namespace's pools only; "
             "another namespace's models are named \"<namespace>/<model>\""},
    {.name = "label-selector",
     .arg = "SEL",
     .shown = "all pools",
     .empty = APP_EMPTY_UNSET,
     APP_AT(label_selector),
     .help = "front only the ModelPools with these labels (a=b,c)"},
    {.name = "bind-address",
     .arg = "ADDR",
     .value = ":8080",
     APP_AT(bind_addr),
     .help = "serve the OpenAI API at ADDR"},
    {.name = "max-body-size",
     .kind = APP_FLAG_SIZE,
     .arg = "N",
     .value = "32Mi",
     .min = 1,
     .max = 64 * APP_GI,
     APP_AT(max_body_bytes),
     .help = "largest request body in bytes (or 32Mi, 1Gi); larger ones get 413"},
    {.name = "body-buffer-budget",
     .kind = APP_FLAG_SIZE,
     .arg = "N",
     .value = "128Mi",
     .min = 1LL << 20,
     .max = 64 * APP_GI,
     APP_AT(body_budget_bytes),
     .help = "request body bytes kept in memory by all requests at once (until each one's model "
             "is known, and while held); past it new requests get 503"},
    {.name = "body-idle-timeout",
     APP_DURATION("30s", 1),
     APP_AT(body_idle_ms),
     .help = "an upload that sends nothing this long before its model is known gets 408"},
    {.name = "resident-grace",
     APP_DURATION("10s", 1),
     APP_AT(resident_grace_ms),
     .help = "while requests wait for another member, a busy resident keeps the slot this long "
             "before that member is asked for; its new requests go to it until the pool takes "
             "the request"},
    {.name = "upstream-timeout",
     APP_DURATION("10m", 1),
     APP_AT(upstream_timeout_ms),
     .help = "once the request is sent, the longest a member may send no byte (head or body): "
             "502 before its head, the answer cut after"},
    {.name = "max-connections",
     .kind = APP_FLAG_UINT,
     .arg = "N",
     .value = "0",
     .shown = "0: (open-files limit - 256) / 2, at most 16384",
     .max = APP_CONNECTIONS_MAX,
     APP_AT(max_connections),
     .help = "inbound connections open at once; past them a connection waiting for a request, of "
             "the client holding the most, is closed for a new one; at most (open-files limit - "
             "256) / 2"},
    {.name = "max-connections-per-client",
     .kind = APP_FLAG_UINT,
     .arg = "N",
     .value = "256",
     .max = APP_CONNECTIONS_MAX,
     APP_AT(max_per_client),
     .help = "connections open at once from one client IP address; 0: no cap"},
    {.name = "header-timeout",
     APP_DURATION("10s", 1),
     APP_AT(header_timeout_ms),
     .help = "a connection's request head must arrive whole within this of its accept or of its "
             "previous answer, else it is closed (idle keep-alive too)"},
    {.name = "drain-fence",
     APP_DURATION("2s", API_DRAIN_FENCE_MIN_MS),
     APP_AT(drain_fence_ms),
     .help = "forward to a resident only on a read of its pool from the API server (not the "
             "cache) younger than half of this, else hold the request; the operator's value"},
    {.name = "router-lease-namespace",
     .arg = "NS",
     .value = "modelpool-system",
     .empty = APP_EMPTY_REFUSED,
     APP_AT(router_lease_ns),
     .help = "register there with a Lease of this replica's own, which acknowledges swaps so the "
             "operator need not wait the whole fence (nothing is forwarded unregistered); the "
             "operator's value"},
    APP_FLAG_LOG_LEVEL,
    APP_FLAG_LOG_FORMAT,
    APP_FLAG_METRICS_ADDR(":8443 (:9090 with --metrics-secure=false)"),
    APP_FLAG_METRICS_SECURE,
    APP_FLAG_CERT_PATH,
    APP_FLAG_CERT_NAME,
    APP_FLAG_CERT_KEY,
    APP_FLAG_HEALTH,
    APP_FLAG_HELP,
    APP_FLAG_VERSION,
};

_Static_assert(sizeof(app_operator_flags) / sizeof(*app_operator_flags) <= APP_FLAGS_MAX &&
                   sizeof(app_router_flags) / sizeof(*app_router_flags) <= APP_FLAGS_MAX,
               "more flags than APP_FLAGS_MAX");

const app_flag *app_flags(app_program program, size_t *n)
{
    if (program == APP_ROUTER) {
        *n = sizeof(app_router_flags) / sizeof(*app_router_flags);
        return app_router_flags;
    }
    *n = sizeof(app_operator_flags) / sizeof(*app_operator_flags);
    return app_operator_flags;
}

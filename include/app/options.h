/* options: the command line and environment of both programs, parsed into a plain struct by a
 * pure function driven by one flag table per program (option_table.c), so every flag and every
 * bad-flag message is unit-tested without running anything. */
#ifndef MP_APP_OPTIONS_H
#define MP_APP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

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
    /* --drain-fence DURATION, both programs': the rule both keep is api/fence.h's. 2s */
    long drain_fence_ms;
    /* --fence-acks (the operator's): end a swap's fence once every router acknowledged it
     * (api/fence.h); true */
    bool fence_acks;
    /* --router-lease-namespace NS, both programs': where router replicas keep their Leases
     * (api/fence.h). Router: modelpool-system; operator: NULL, the leader-election Lease's
     * namespace */
    const char *router_lease_ns;
    /* The router's own. */
    const char *bind_addr;       /* --bind-address: the OpenAI endpoint; :8080 */
    const char *label_selector;  /* --label-selector: the ModelPools fronted; NULL all */
    long long max_body_bytes;    /* --max-body-size BYTES (or 32Mi, 1Gi): larger is 413; 32 MiB */
    long resident_grace_ms;      /* --resident-grace DURATION: while another member waits, a busy
                                    resident keeps the slot this long before it is asked for; 10s */
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

/* One flag: its name, kind, default, range, help, and where its value goes. Each program has one
 * table of them (app_flags), which drives the parser, --help and the defaults alike; a test holds
 * docs/configuration.md and the chart to it. */
typedef enum {
    APP_FLAG_STRING,   /* const char *: the text given */
    APP_FLAG_BOOL,     /* bool: bare or =true, =false (as Go's flags) */
    APP_FLAG_SWITCH,   /* bool: set by the bare flag (--help, --version) */
    APP_FLAG_INT,      /* int: a whole number from min to max */
    APP_FLAG_UINT,     /* unsigned: a whole number from min to max */
    APP_FLAG_DURATION, /* long: a Go duration (2s, 500ms, 1m30s) from min to max, in ms */
    APP_FLAG_SIZE,     /* long long: bytes, or with Ki, Mi, Gi, from min to max bytes */
    APP_FLAG_FORMAT,   /* bool (true: json): the log format, text or json */
} app_flag_kind;

/* What an empty string flag means: itself, unset (NULL), or an error. */
typedef enum { APP_EMPTY_KEEP = 0, APP_EMPTY_UNSET, APP_EMPTY_REFUSED } app_flag_empty;

typedef struct app_flag {
    const char *name; /* the long name, without "--" */
    char short_name;  /* -v, -h; 0: none */
    app_flag_kind kind;
    const char *arg;      /* the value's name in --help (PATH, N, DURATION); NULL for bools */
    const char *env;      /* read when the flag is not given; NULL: none */
    const char *value;    /* the default, read as the flag's value is; NULL: none (unset, 0) */
    const char *shown;    /* the default as --help and the docs say it; NULL: value */
    long long min, max;   /* of numbers, durations (ms) and sizes (bytes) */
    app_flag_empty empty; /* of strings */
    size_t offset;        /* the field of app_options the value goes to */
    const char *help;
} app_flag;

/* The most flags a table holds (the parser's room for them). */
#define APP_FLAGS_MAX 48

/* The flags of program, n of them. */
const app_flag *app_flags(app_program program, size_t *n);
/* The default of f as --help and the docs say it ("2s", "all namespaces"); NULL: none. */
const char *app_flag_shown(const app_flag *f);

/* Parses argv (and the environment through getenv_fn, so tests pass their own) by program's
 * table: a flag of the other program is an unknown flag. Returns 0, or -1 with a one-line
 * message in err (size errlen) naming the bad flag or value. Strings point into argv, the
 * environment or the table. */
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

/* Writes program's --help, made from its table, to out. */
void app_options_usage(app_program program, FILE *out);

#endif

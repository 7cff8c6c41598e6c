/* options: getopt_long over the flags users know from other operators; each flag may also come
 * from an environment variable (flag wins), the habit in Kubernetes manifests. */
#include "app/options.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd/httpd.h"
#include "pool/plan.h"

/* Bounds of --max-concurrent-reconciles: each reconcile in flight holds a plan and at most one
 * API call or probe batch, so the cap only guards against a typo. */
#define APP_MAX_CONCURRENT 1000
/* The smallest --drain-fence: the router's half of it must outlast a read of the pool. */
#define APP_MIN_DRAIN_FENCE_MS 100
/* The router's inbound connections: open files kept for everything else (the probe and metrics
 * servers' connections, the API server's, listeners, the loop), and the most it takes by default.
 * Each inbound connection may need one outbound to a member, so inbound gets at most half the
 * rest: the router's own sockets can never be starved by its clients. An idle connection costs
 * about 6 KiB (bench/limits-results.md), so the default's ceiling, ~100 MiB, fits the chart's
 * memory limit with room for request bodies. */
#define APP_FD_RESERVE 256ULL
#define APP_MAX_CONNECTIONS_DEFAULT 16384ULL

const char *app_options_usage(void)
{
    return "Usage: modelpool-operator [flags]\n"
           "\n"
           "Runs the ModelPool controller: members of a pool share one exclusive GPU slot.\n"
           "\n"
           "Flags (environment variable in brackets):\n"
           "  --kubeconfig PATH   kubeconfig to use [KUBECONFIG]; default: in-cluster,\n"
           "                      then ~/.kube/config\n"
           "  --context NAME      kubeconfig context (default: its current-context)\n"
           "  --namespace NS      watch one namespace only [WATCH_NAMESPACE]; default: all\n"
           "  -v, --log-level N   0 info, 1 debug, 2-4 trace [LOG_LEVEL]; default 0\n"
           "  --log-format F      text or json, one record a line [LOG_FORMAT]; default text\n"
           "  --leader-elect      compete for a Lease so that of several replicas only one\n"
           "                      writes; the others keep their caches warm (default off)\n"
           "  --leader-election-id NAME\n"
           "                      the Lease's name; default modelpool-operator\n"
           "  --leader-election-namespace NS\n"
           "                      the Lease's namespace [POD_NAMESPACE]; default: the\n"
           "                      service account's namespace when in a cluster\n"
           "  --metrics-bind-address ADDR\n"
           "                      serve Prometheus metrics on /metrics at ADDR (:PORT,\n"
           "                      HOST:PORT, [V6]:PORT); 0 turns it off; default :8443\n"
           "                      (:8080 with --metrics-secure=false)\n"
           "  --metrics-secure[=true|false]\n"
           "                      metrics over HTTPS, only to callers whose bearer token\n"
           "                      may get /metrics (TokenReview, SubjectAccessReview);\n"
           "                      default true; false serves plain HTTP to anyone\n"
           "  --metrics-cert-path DIR\n"
           "                      directory of the metrics certificate and key; default:\n"
           "                      a self-signed certificate made at start\n"
           "  --metrics-cert-name FILE\n"
           "                      the certificate in DIR; default tls.crt\n"
           "  --metrics-cert-key FILE\n"
           "                      the private key in DIR; default tls.key\n"
           "  --health-probe-bind-address ADDR\n"
           "                      serve /healthz and /readyz at ADDR; 0 turns it off;\n"
           "                      default :8081\n"
           "  --max-concurrent-reconciles N\n"
           "                      pools reconciled at once (a pool never twice at once);\n"
           "                      default 4\n"
           "  --probe-timeout DURATION\n"
           "                      timeout of each idle probe request, a Go duration\n"
           "                      (500ms, 2s, 1m); default 2s\n"
           "  --drain-fence DURATION\n"
           "                      in a swap, the resident is unloaded only on an idle\n"
           "                      probe sent this long after the swap began: routers\n"
           "                      forward only on a read of the pool younger than half\n"
           "                      of it, so their last request has reached the Pod; set\n"
           "                      the routers' to the same value; default 2s\n"
           "  -h, --help          print this help and exit\n"
           "      --version       print the version and exit\n";
}

const char *app_options_usage_for(app_program program)
{
    if (program == APP_OPERATOR)
        return app_options_usage();
    return "Usage: modelpool-router [flags]\n"
           "\n"
           "One OpenAI-compatible endpoint for every model of the ModelPools it fronts: a\n"
           "request for a member that is not resident is held while the pool swaps it in\n"
           "(within the pool's swapBudget), then forwarded.\n"
           "\n"
           "Flags (environment variable in brackets):\n"
           "  --kubeconfig PATH   kubeconfig to use [KUBECONFIG]; default: in-cluster,\n"
           "                      then ~/.kube/config\n"
           "  --context NAME      kubeconfig context (default: its current-context)\n"
           "  --namespace NS      front the pools of one namespace [WATCH_NAMESPACE];\n"
           "                      default: all\n"
           "  --home-namespace NS a model name without \"<namespace>/\" selects among this\n"
           "                      namespace's pools only; another namespace's models are\n"
           "                      named \"<namespace>/<model>\"; default: --namespace, else\n"
           "                      the router's own [POD_NAMESPACE]\n"
           "  --label-selector SEL\n"
           "                      front only the ModelPools with these labels (a=b,c)\n"
           "  --bind-address ADDR serve the OpenAI API at ADDR; default :8080\n"
           "  --max-body-size N   largest request body in bytes (or 32Mi, 1Gi); larger\n"
           "                      ones get 413; default 32Mi\n"
           "  --body-buffer-budget N\n"
           "                      request body bytes kept in memory by all requests at\n"
           "                      once (until each one's model is known, and while held);\n"
           "                      past it new requests get 503; default 128Mi\n"
           "  --body-idle-timeout DURATION\n"
           "                      an upload that sends nothing this long before its model\n"
           "                      is known gets 408; default 30s\n"
           "  --resident-grace DURATION\n"
           "                      while requests wait for another member, new requests\n"
           "                      for a busy resident still go to it for this long, then\n"
           "                      wait their turn; default 10s\n"
           "  --upstream-timeout DURATION\n"
           "                      once the request is sent, the longest a member may send\n"
           "                      no byte (head or body): 502 before its head, the answer\n"
           "                      cut after; default 10m\n"
           "  --max-connections N inbound connections open at once; past them the one\n"
           "                      waiting longest for a request is closed for a new one;\n"
           "                      at most (open-files limit - 256) / 2; default 0: that,\n"
           "                      up to 16384\n"
           "  --max-connections-per-client N\n"
           "                      connections open at once from one client IP address;\n"
           "                      0: no cap; default 256\n"
           "  --header-timeout DURATION\n"
           "                      a connection's request head must arrive whole within\n"
           "                      this of its accept or of its previous answer, else it\n"
           "                      is closed (idle keep-alive too); default 10s\n"
           "  --drain-fence DURATION\n"
           "                      forward to a resident only on a read of its pool from\n"
           "                      the API server (not the cache) younger than half of\n"
           "                      this, else hold the request; the operator's value;\n"
           "                      default 2s\n"
           "  -v, --log-level N   0 info, 1 debug, 2-4 trace [LOG_LEVEL]; default 0\n"
           "  --log-format F      text or json, one record a line [LOG_FORMAT]; default text\n"
           "  --metrics-bind-address ADDR\n"
           "                      serve Prometheus metrics on /metrics at ADDR; 0 turns\n"
           "                      it off; default :8443 (:9090 with --metrics-secure=false)\n"
           "  --metrics-secure[=true|false]\n"
           "                      metrics over HTTPS to callers allowed to get /metrics;\n"
           "                      default true\n"
           "  --metrics-cert-path DIR, --metrics-cert-name FILE, --metrics-cert-key FILE\n"
           "                      as the operator's; default: a self-signed certificate\n"
           "  --health-probe-bind-address ADDR\n"
           "                      serve /healthz and /readyz at ADDR; 0 turns it off;\n"
           "                      default :8081\n"
           "  -h, --help          print this help and exit\n"
           "      --version       print the version and exit\n";
}

/* A size in bytes: a whole number with an optional Ki, Mi or Gi suffix, 1 byte to 64 GiB. */
static int app_parse_size(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 1)
        return -1;
    int shift = strcmp(end, "Ki") == 0   ? 10
                : strcmp(end, "Mi") == 0 ? 20
                : strcmp(end, "Gi") == 0 ? 30
                : *end == '\0'           ? 0
                                         : -1;
    if (shift < 0 || v > (64LL << 30) >> shift)
        return -1;
    *out = v << shift;
    return 0;
}

static int app_parse_format(const char *s, bool *json)
{
    if (strcmp(s, "text") != 0 && strcmp(s, "json") != 0)
        return -1;
    *json = strcmp(s, "json") == 0;
    return 0;
}

/* A boolean flag as Go's flag package takes it: bare, =true or =false. */
static int app_parse_bool(const char *arg, bool *out)
{
    if (!arg || strcmp(arg, "true") == 0)
        *out = true;
    else if (strcmp(arg, "false") == 0)
        *out = false;
    else
        return -1;
    return 0;
}

static int app_parse_count(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > APP_MAX_CONCURRENT)
        return -1;
    *out = (int)v;
    return 0;
}

/* A Go duration of at least 1 ms and at most a day (a longer idle probe is surely a typo). */
static int app_parse_timeout(const char *s, long *out)
{
    int64_t ms;
    if (plan_parse_duration_ms(s, &ms) < 0 || ms < 1 || ms > 86400000)
        return -1;
    *out = (long)ms;
    return 0;
}

/* A count of connections from min to APP_CONNECTIONS_MAX. */
static int app_parse_connections(const char *s, unsigned min, unsigned *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < (long)min || v > (long)APP_CONNECTIONS_MAX)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int app_parse_level(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 4)
        return -1;
    *out = (int)v;
    return 0;
}

/* The same address and port, other than port 0 (a fresh port each time, so never a clash). */
static bool app_same_fixed_address(const struct sockaddr_storage *a, socklen_t al,
                                   const struct sockaddr_storage *b, socklen_t bl)
{
    in_port_t port = a->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
                                              : ((const struct sockaddr_in *)a)->sin_port;
    return port != 0 && al == bl && memcmp(a, b, al) == 0;
}

int app_options_parse(app_options *o, int argc, char **argv, const char *(*getenv_fn)(const char *),
                      char *err, size_t errlen)
{
    return app_options_parse_for(APP_OPERATOR, o, argc, argv, getenv_fn, err, errlen);
}

/* The long flags (getopt_long's codes). */
enum {
    OPT_KUBECONFIG = 256,
    OPT_CONTEXT,
    OPT_NAMESPACE,
    OPT_VERSION,
    OPT_LOG_FORMAT,
    OPT_LEADER_ELECT,
    OPT_LEADER_ID,
    OPT_LEADER_NS,
    OPT_METRICS_ADDR,
    OPT_HEALTH_ADDR,
    OPT_METRICS_SECURE,
    OPT_METRICS_CERT_PATH,
    OPT_METRICS_CERT_NAME,
    OPT_METRICS_CERT_KEY,
    OPT_MAX_CONCURRENT,
    OPT_PROBE_TIMEOUT,
    OPT_DRAIN_FENCE, /* both programs' */
    OPT_BIND_ADDR,   /* the router's from here on */
    OPT_LABEL_SELECTOR,
    OPT_HOME_NS,
    OPT_MAX_BODY,
    OPT_RESIDENT_GRACE,
    OPT_UPSTREAM_TIMEOUT,
    OPT_BODY_BUDGET,
    OPT_BODY_IDLE,
    OPT_MAX_CONNECTIONS,
    OPT_MAX_PER_CLIENT,
    OPT_HEADER_TIMEOUT,
};

/* Whether flag c is one of program's. */
static bool app_flag_of(app_program program, int c);

/* The router's home namespace: the flag, else the one namespace watched, else $POD_NAMESPACE
 * (NULL: main takes the in-cluster service account's). Pools outside the namespace watched
 * would never be seen, so a flag naming another one is an error. */
static int app_home_namespace(app_options *o, const char *(*getenv_fn)(const char *), char *err,
                              size_t errlen)
{
    if (o->home_namespace && !*o->home_namespace) {
        snprintf(err, errlen, "--home-namespace must not be empty");
        return -1;
    }
    if (o->home_namespace && o->namespace_ && strcmp(o->home_namespace, o->namespace_) != 0) {
        snprintf(err, errlen,
                 "--home-namespace %s: the router watches only namespace %s (--namespace)",
                 o->home_namespace, o->namespace_);
        return -1;
    }
    if (!o->home_namespace)
        o->home_namespace = o->namespace_;
    if (!o->home_namespace) {
        const char *pod_ns = getenv_fn("POD_NAMESPACE");
        o->home_namespace = pod_ns && *pod_ns ? pod_ns : NULL;
    }
    return 0;
}

/* Checks that the listening addresses parse and do not clash. */
static int app_check_binds(const app_options *o, char *err, size_t errlen);

int app_options_parse_for(app_program program, app_options *o, int argc, char **argv,
                          const char *(*getenv_fn)(const char *), char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"context", required_argument, NULL, OPT_CONTEXT},
        {"namespace", required_argument, NULL, OPT_NAMESPACE},
        {"log-level", required_argument, NULL, 'v'},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"leader-elect", optional_argument, NULL, OPT_LEADER_ELECT},
        {"leader-election-id", required_argument, NULL, OPT_LEADER_ID},
        {"leader-election-namespace", required_argument, NULL, OPT_LEADER_NS},
        {"metrics-bind-address", required_argument, NULL, OPT_METRICS_ADDR},
        {"health-probe-bind-address", required_argument, NULL, OPT_HEALTH_ADDR},
        {"metrics-secure", optional_argument, NULL, OPT_METRICS_SECURE},
        {"metrics-cert-path", required_argument, NULL, OPT_METRICS_CERT_PATH},
        {"metrics-cert-name", required_argument, NULL, OPT_METRICS_CERT_NAME},
        {"metrics-cert-key", required_argument, NULL, OPT_METRICS_CERT_KEY},
        {"max-concurrent-reconciles", required_argument, NULL, OPT_MAX_CONCURRENT},
        {"probe-timeout", required_argument, NULL, OPT_PROBE_TIMEOUT},
        {"drain-fence", required_argument, NULL, OPT_DRAIN_FENCE},
        {"bind-address", required_argument, NULL, OPT_BIND_ADDR},
        {"label-selector", required_argument, NULL, OPT_LABEL_SELECTOR},
        {"home-namespace", required_argument, NULL, OPT_HOME_NS},
        {"max-body-size", required_argument, NULL, OPT_MAX_BODY},
        {"resident-grace", required_argument, NULL, OPT_RESIDENT_GRACE},
        {"upstream-timeout", required_argument, NULL, OPT_UPSTREAM_TIMEOUT},
        {"body-buffer-budget", required_argument, NULL, OPT_BODY_BUDGET},
        {"body-idle-timeout", required_argument, NULL, OPT_BODY_IDLE},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"max-connections-per-client", required_argument, NULL, OPT_MAX_PER_CLIENT},
        {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    *o = (app_options){0};
    o->program = program;
    o->bind_addr = ":8080";
    o->max_body_bytes = 32LL << 20;
    o->resident_grace_ms = 10000;
    o->upstream_timeout_ms = 600000;
    o->body_budget_bytes = 128LL << 20;
    o->body_idle_ms = 30000;
    o->max_per_client = 256;
    o->header_timeout_ms = 10000;
    o->kubeconfig = getenv_fn("KUBECONFIG");
    o->namespace_ = getenv_fn("WATCH_NAMESPACE");
    o->leader_election_id = "modelpool-operator";
    o->leader_election_ns = getenv_fn("POD_NAMESPACE");
    o->metrics_secure = true;
    o->metrics_cert_name = "tls.crt";
    o->metrics_cert_key = "tls.key";
    o->health_addr = ":8081";
    o->max_concurrent_reconciles = 4;
    o->probe_timeout_ms = 2000;
    o->drain_fence_ms = 2000;
    const char *level = getenv_fn("LOG_LEVEL");
    if (level && *level && app_parse_level(level, &o->log_level) < 0) {
        snprintf(err, errlen, "LOG_LEVEL=%s: want a number from 0 to 4", level);
        return -1;
    }
    const char *format = getenv_fn("LOG_FORMAT");
    if (format && *format && app_parse_format(format, &o->log_json) < 0) {
        snprintf(err, errlen, "LOG_FORMAT=%s: want text or json", format);
        return -1;
    }

    /* getopt keeps its cursor in globals; reset it so the parser can run more than once. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hv:", longopts, NULL)) != -1) {
        if (c != ':' && c != '?' && !app_flag_of(program, c))
            c = '?';
        switch (c) {
        case OPT_KUBECONFIG:
            o->kubeconfig = optarg;
            break;
        case OPT_CONTEXT:
            o->context = optarg;
            break;
        case OPT_NAMESPACE:
            o->namespace_ = optarg;
            break;
        case 'v':
            if (app_parse_level(optarg, &o->log_level) < 0) {
                snprintf(err, errlen, "--log-level %s: want a number from 0 to 4", optarg);
                return -1;
            }
            break;
        case OPT_LOG_FORMAT:
            if (app_parse_format(optarg, &o->log_json) < 0) {
                snprintf(err, errlen, "--log-format %s: want text or json", optarg);
                return -1;
            }
            break;
        case OPT_LEADER_ELECT:
            /* --leader-elect or --leader-elect=true|false, as Go's boolean flags take it. */
            if (!optarg || strcmp(optarg, "true") == 0) {
                o->leader_elect = true;
            } else if (strcmp(optarg, "false") == 0) {
                o->leader_elect = false;
            } else {
                snprintf(err, errlen, "--leader-elect=%s: want true or false", optarg);
                return -1;
            }
            break;
        case OPT_LEADER_ID:
            o->leader_election_id = optarg;
            break;
        case OPT_LEADER_NS:
            o->leader_election_ns = optarg;
            break;
        case OPT_METRICS_ADDR:
            o->metrics_addr = optarg;
            break;
        case OPT_HEALTH_ADDR:
            o->health_addr = optarg;
            break;
        case OPT_METRICS_SECURE:
            if (app_parse_bool(optarg, &o->metrics_secure) < 0) {
                snprintf(err, errlen, "--metrics-secure=%s: want true or false", optarg);
                return -1;
            }
            break;
        case OPT_METRICS_CERT_PATH:
            o->metrics_cert_path = optarg;
            break;
        case OPT_METRICS_CERT_NAME:
            o->metrics_cert_name = optarg;
            break;
        case OPT_METRICS_CERT_KEY:
            o->metrics_cert_key = optarg;
            break;
        case OPT_MAX_CONCURRENT:
            if (app_parse_count(optarg, &o->max_concurrent_reconciles) < 0) {
                snprintf(err, errlen, "--max-concurrent-reconciles %s: want a number from 1 to %d",
                         optarg, APP_MAX_CONCURRENT);
                return -1;
            }
            break;
        case OPT_PROBE_TIMEOUT:
            if (app_parse_timeout(optarg, &o->probe_timeout_ms) < 0) {
                snprintf(err, errlen,
                         "--probe-timeout %s: want a duration from 1ms to 24h, like 2s or 500ms",
                         optarg);
                return -1;
            }
            break;
        case OPT_DRAIN_FENCE:
            /* Half of it is the router's window, which must outlast a read of the pool. */
            if (app_parse_timeout(optarg, &o->drain_fence_ms) < 0 ||
                o->drain_fence_ms < APP_MIN_DRAIN_FENCE_MS) {
                snprintf(err, errlen,
                         "--drain-fence %s: want a duration from 100ms to 24h, like 2s or 500ms",
                         optarg);
                return -1;
            }
            break;
        case OPT_BIND_ADDR:
            o->bind_addr = optarg;
            break;
        case OPT_LABEL_SELECTOR:
            o->label_selector = *optarg ? optarg : NULL;
            break;
        case OPT_HOME_NS:
            o->home_namespace = optarg;
            break;
        case OPT_MAX_BODY:
            if (app_parse_size(optarg, &o->max_body_bytes) < 0) {
                snprintf(err, errlen,
                         "--max-body-size %s: want a size from 1 byte to 64Gi, like 33554432 or "
                         "32Mi",
                         optarg);
                return -1;
            }
            break;
        case OPT_RESIDENT_GRACE:
            if (app_parse_timeout(optarg, &o->resident_grace_ms) < 0) {
                snprintf(err, errlen,
                         "--resident-grace %s: want a duration from 1ms to 24h, like 10s", optarg);
                return -1;
            }
            break;
        case OPT_UPSTREAM_TIMEOUT:
            if (app_parse_timeout(optarg, &o->upstream_timeout_ms) < 0) {
                snprintf(err, errlen,
                         "--upstream-timeout %s: want a duration from 1ms to 24h, like 10m",
                         optarg);
                return -1;
            }
            break;
        case OPT_BODY_BUDGET:
            if (app_parse_size(optarg, &o->body_budget_bytes) < 0 ||
                o->body_budget_bytes < (1LL << 20)) {
                snprintf(err, errlen,
                         "--body-buffer-budget %s: want a size from 1Mi to 64Gi, like 128Mi",
                         optarg);
                return -1;
            }
            break;
        case OPT_BODY_IDLE:
            if (app_parse_timeout(optarg, &o->body_idle_ms) < 0) {
                snprintf(err, errlen,
                         "--body-idle-timeout %s: want a duration from 1ms to 24h, like 30s",
                         optarg);
                return -1;
            }
            break;
        case OPT_MAX_CONNECTIONS:
            if (app_parse_connections(optarg, 0, &o->max_connections) < 0) {
                snprintf(err, errlen,
                         "--max-connections %s: want a number from 0 (from the open-files limit) "
                         "to %u",
                         optarg, APP_CONNECTIONS_MAX);
                return -1;
            }
            break;
        case OPT_MAX_PER_CLIENT:
            if (app_parse_connections(optarg, 0, &o->max_per_client) < 0) {
                snprintf(err, errlen,
                         "--max-connections-per-client %s: want a number from 0 (no cap) to %u",
                         optarg, APP_CONNECTIONS_MAX);
                return -1;
            }
            break;
        case OPT_HEADER_TIMEOUT:
            if (app_parse_timeout(optarg, &o->header_timeout_ms) < 0) {
                snprintf(err, errlen,
                         "--header-timeout %s: want a duration from 1ms to 24h, like 10s", optarg);
                return -1;
            }
            break;
        case 'h':
            o->help = true;
            break;
        case OPT_VERSION:
            o->version = true;
            break;
        case ':':
            snprintf(err, errlen, "%s needs a value", argv[optind - 1]);
            return -1;
        default:
            snprintf(err, errlen, "unknown flag %s (see --help)", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    if (o->kubeconfig && !*o->kubeconfig)
        o->kubeconfig = NULL;
    if (o->namespace_ && !*o->namespace_)
        o->namespace_ = NULL;
    if (o->leader_election_ns && !*o->leader_election_ns)
        o->leader_election_ns = NULL;
    if (program == APP_ROUTER && app_home_namespace(o, getenv_fn, err, errlen) < 0)
        return -1;
    if (!*o->leader_election_id) {
        snprintf(err, errlen, "--leader-election-id must not be empty");
        return -1;
    }
    if (o->metrics_cert_path && !*o->metrics_cert_path)
        o->metrics_cert_path = NULL;
    if (!*o->metrics_cert_name || !*o->metrics_cert_key) {
        snprintf(err, errlen, "--metrics-cert-name and --metrics-cert-key must not be empty");
        return -1;
    }
    if (o->metrics_cert_path && !o->metrics_secure) {
        snprintf(err, errlen,
                 "--metrics-cert-path needs --metrics-secure (plain HTTP has no "
                 "certificate)");
        return -1;
    }
    if (!o->metrics_addr) /* the ports kubebuilder's manifests use for each */
        o->metrics_addr = o->metrics_secure ? ":8443" : program == APP_ROUTER ? ":9090" : ":8080";
    return app_check_binds(o, err, errlen);
}

static bool app_flag_of(app_program program, int c)
{
    switch (c) {
    case OPT_LEADER_ELECT:
    case OPT_LEADER_ID:
    case OPT_LEADER_NS:
    case OPT_MAX_CONCURRENT:
    case OPT_PROBE_TIMEOUT:
        return program == APP_OPERATOR;
    case OPT_BIND_ADDR:
    case OPT_LABEL_SELECTOR:
    case OPT_HOME_NS:
    case OPT_MAX_BODY:
    case OPT_RESIDENT_GRACE:
    case OPT_UPSTREAM_TIMEOUT:
    case OPT_BODY_BUDGET:
    case OPT_BODY_IDLE:
    case OPT_MAX_CONNECTIONS:
    case OPT_MAX_PER_CLIENT:
    case OPT_HEADER_TIMEOUT:
        return program == APP_ROUTER;
    default:
        return true;
    }
}

static int app_check_binds(const app_options *o, char *err, size_t errlen)
{
    struct {
        const char *flag, *addr;
        struct sockaddr_storage ss;
        socklen_t len;
        int rc;
    } b[3] = {{.flag = "--metrics-bind-address", .addr = o->metrics_addr},
              {.flag = "--health-probe-bind-address", .addr = o->health_addr},
              {.flag = "--bind-address", .addr = o->bind_addr}};
    size_t n = o->program == APP_ROUTER ? 3 : 2;
    char why[160];
    for (size_t i = 0; i < n; i++) {
        b[i].rc = httpd_parse_bind(b[i].addr, &b[i].ss, &b[i].len, why, sizeof(why));
        if (b[i].rc < 0 || (i == 2 && b[i].rc == 1)) {
            snprintf(err, errlen, "%s: %s", b[i].flag,
                     b[i].rc < 0 ? why : "the router must serve: 0 is not allowed");
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (b[i].rc == 0 && b[j].rc == 0 &&
                app_same_fixed_address(&b[i].ss, b[i].len, &b[j].ss, b[j].len)) {
                snprintf(err, errlen, "%s and %s are both %s; they need different ports", b[i].flag,
                         b[j].flag, b[i].addr);
                return -1;
            }
    return 0;
}

int app_router_connections(const app_options *o, unsigned long long fd_limit, unsigned *out,
                           char *err, size_t errlen)
{
    unsigned long long reserve = APP_FD_RESERVE < fd_limit / 2 ? APP_FD_RESERVE : fd_limit / 2;
    unsigned long long most = (fd_limit - reserve) / 2;
    if (!o->max_connections) {
        most = most < APP_MAX_CONNECTIONS_DEFAULT ? most : APP_MAX_CONNECTIONS_DEFAULT;
        if (!most) {
            snprintf(err, errlen, "the open-files limit %llu leaves no room for connections",
                     fd_limit);
            return -1;
        }
        *out = (unsigned)most;
        return 0;
    }
    if (o->max_connections > most) {
        snprintf(err, errlen,
                 "--max-connections %u: the open-files limit %llu allows at most %llu (each may "
                 "need one more to a member, and %llu are kept for the rest)",
                 o->max_connections, fd_limit, most, reserve);
        return -1;
    }
    *out = o->max_connections;
    return 0;
}

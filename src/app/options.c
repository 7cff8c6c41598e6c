/* options: getopt_long over the flags users know from other operators, driven by each program's
 * table (option_table.c): the defaults, the environment fallbacks (flag wins, the habit in
 * Kubernetes manifests), each value's check and --help all come from its entry. */
#include "app/options.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd/httpd.h"
#include "util/duration.h"

/* The router's inbound connections: open files kept for everything else (the probe and metrics
 * servers' connections, the API server's, listeners, the loop), and the most it takes by default.
 * Each inbound connection may need one outbound to a member, so inbound gets at most half the
 * rest: the router's own sockets can never be starved by its clients. An idle connection costs
 * about 6 KiB (bench/limits-results.md), so the default's ceiling, ~100 MiB, fits the chart's
 * memory limit with room for request bodies. */
#define APP_FD_RESERVE 256ULL
#define APP_MAX_CONNECTIONS_DEFAULT 16384ULL
/* getopt_long's code of the flag at table index i. */
#define APP_OPT_BASE 256
/* The --help columns: where each flag's words start, and the most a line takes. */
#define APP_HELP_COLUMN 22
#define APP_HELP_WIDTH 79

const char *app_flag_shown(const app_flag *f)
{
    return f->shown ? f->shown : f->value;
}

/* A whole number from min to max. */
static int app_parse_number(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* A size in bytes: a whole number with an optional Ki, Mi or Gi suffix, from min to max. */
static int app_parse_size(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    int shift = strcmp(end, "Ki") == 0   ? 10
                : strcmp(end, "Mi") == 0 ? 20
                : strcmp(end, "Gi") == 0 ? 30
                : *end == '\0'           ? 0
                                         : -1;
    if (shift < 0 || v > max >> shift || v << shift < min)
        return -1;
    *out = v << shift;
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

/* Reads val (NULL: a bare flag) into f's field of o. */
static int app_flag_read(const app_flag *f, app_options *o, const char *val)
{
    void *p = (char *)o + f->offset;
    long long n;
    int64_t ms;
    switch (f->kind) {
    case APP_FLAG_STRING:
        *(const char **)p = val;
        return 0;
    case APP_FLAG_BOOL:
        return app_parse_bool(val, p);
    case APP_FLAG_SWITCH:
        *(bool *)p = true;
        return 0;
    case APP_FLAG_FORMAT:
        if (strcmp(val, "text") != 0 && strcmp(val, "json") != 0)
            return -1;
        *(bool *)p = strcmp(val, "json") == 0;
        return 0;
    case APP_FLAG_INT:
    case APP_FLAG_UINT:
        if (app_parse_number(val, f->min, f->max, &n) < 0)
            return -1;
        if (f->kind == APP_FLAG_INT)
            *(int *)p = (int)n;
        else
            *(unsigned *)p = (unsigned)n;
        return 0;
    case APP_FLAG_DURATION:
        if (duration_parse_ms(val, &ms) < 0 || ms < f->min || ms > f->max)
            return -1;
        *(long *)p = (long)ms;
        return 0;
    case APP_FLAG_SIZE:
        return app_parse_size(val, f->min, f->max, p);
    }
    return -1;
}

/* v in the largest unit that divides it: ms, s, m or h for durations, Ki, Mi or Gi for sizes. */
static void app_flag_unit(const app_flag *f, long long v, char *buf, size_t len)
{
    static const struct {
        app_flag_kind kind;
        long long per;
        const char *unit;
    } units[] = {{APP_FLAG_DURATION, 3600000, "h"}, {APP_FLAG_DURATION, 60000, "m"},
                 {APP_FLAG_DURATION, 1000, "s"},    {APP_FLAG_DURATION, 1, "ms"},
                 {APP_FLAG_SIZE, 1LL << 30, "Gi"},  {APP_FLAG_SIZE, 1LL << 20, "Mi"},
                 {APP_FLAG_SIZE, 1LL << 10, "Ki"}};
    for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
        if (units[i].kind == f->kind && v && v % units[i].per == 0) {
            snprintf(buf, len, "%lld%s", v / units[i].per, units[i].unit);
            return;
        }
    snprintf(buf, len, "%lld", v);
}

/* What f wants, for an error: "a duration from 1ms to 24h, like 2s". */
static void app_flag_wants(const app_flag *f, char *buf, size_t len)
{
    char lo[32], hi[32];
    app_flag_unit(f, f->min, lo, sizeof(lo));
    app_flag_unit(f, f->max, hi, sizeof(hi));
    switch (f->kind) {
    case APP_FLAG_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case APP_FLAG_FORMAT:
        snprintf(buf, len, "text or json");
        break;
    case APP_FLAG_DURATION:
    case APP_FLAG_SIZE:
        snprintf(buf, len, "a %s from %s to %s, like %s",
                 f->kind == APP_FLAG_SIZE ? "size" : "duration", lo, hi, f->value);
        break;
    default:
        snprintf(buf, len, "a number from %s to %s", lo, hi);
    }
}

/* Sets f from val, given as "--name val" (from NULL) or as "FROM=val" (an environment variable,
 * or "default" for the table's own); -1 with err naming both. */
static int app_flag_set(const app_flag *f, app_options *o, const char *val, const char *from,
                        char *err, size_t errlen)
{
    if (app_flag_read(f, o, val) == 0)
        return 0;
    char wants[96];
    app_flag_wants(f, wants, sizeof(wants));
    if (from)
        snprintf(err, errlen, "%s=%s: want %s", from, val, wants);
    else
        snprintf(err, errlen, "--%s%s%s: want %s", f->name, f->kind == APP_FLAG_BOOL ? "=" : " ",
                 val, wants);
    return -1;
}

/* The table's defaults, then the environment's values. */
static int app_flags_preset(const app_flag *t, size_t n, app_options *o,
                            const char *(*getenv_fn)(const char *), char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].value && app_flag_set(&t[i], o, t[i].value, "default", err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < n; i++) {
        const char *v = t[i].env ? getenv_fn(t[i].env) : NULL;
        if (v && *v && app_flag_set(&t[i], o, v, t[i].env, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* getopt_long's view of a table: its long options and its short ones (":hv:"). */
static void app_flags_getopt(const app_flag *t, size_t n, struct option *lo, char *shorts)
{
    size_t k = 0;
    shorts[k++] = ':';
    for (size_t i = 0; i < n; i++) {
        int has = t[i].kind == APP_FLAG_SWITCH ? no_argument
                  : t[i].kind == APP_FLAG_BOOL ? optional_argument
                                               : required_argument;
        lo[i] = (struct option){t[i].name, has, NULL, APP_OPT_BASE + (int)i};
        if (t[i].short_name) {
            shorts[k++] = t[i].short_name;
            if (has == required_argument)
                shorts[k++] = ':';
        }
    }
    lo[n] = (struct option){0};
    shorts[k] = '\0';
}

/* The table entry getopt_long's code c stands for; NULL: not a flag of the table. */
static const app_flag *app_flag_of(const app_flag *t, size_t n, int c)
{
    if (c >= APP_OPT_BASE && (size_t)(c - APP_OPT_BASE) < n)
        return &t[c - APP_OPT_BASE];
    for (size_t i = 0; i < n && c > 0; i++)
        if (t[i].short_name == c)
            return &t[i];
    return NULL;
}

/* The command line over the defaults. */
static int app_flags_argv(const app_flag *t, size_t n, app_options *o, int argc, char **argv,
                          char *err, size_t errlen)
{
    struct option lo[APP_FLAGS_MAX + 1];
    char shorts[2 * APP_FLAGS_MAX + 2];
    app_flags_getopt(t, n, lo, shorts);
    /* getopt keeps its cursor in globals; reset it so the parser can run more than once. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        const app_flag *f = app_flag_of(t, n, c);
        if (c == ':') {
            snprintf(err, errlen, "%s needs a value", argv[optind - 1]);
            return -1;
        }
        if (!f) {
            snprintf(err, errlen, "unknown flag %s (see --help)", argv[optind - 1]);
            return -1;
        }
        if (app_flag_set(f, o, optarg, NULL, err, errlen) < 0)
            return -1;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    return 0;
}

/* Empty strings: unset, or refused, as each flag says. */
static int app_flags_empty(const app_flag *t, size_t n, app_options *o, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const char **p = (const char **)(void *)((char *)o + t[i].offset);
        if (t[i].kind != APP_FLAG_STRING || !*p || **p || t[i].empty == APP_EMPTY_KEEP)
            continue;
        if (t[i].empty == APP_EMPTY_REFUSED) {
            snprintf(err, errlen, "--%s must not be empty", t[i].name);
            return -1;
        }
        *p = NULL;
    }
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

/* The router's home namespace: the flag, else the one namespace watched, else $POD_NAMESPACE
 * (NULL: main takes the in-cluster service account's). Pools outside the namespace watched
 * would never be seen, so a flag naming another one is an error. */
static int app_home_namespace(app_options *o, const char *(*getenv_fn)(const char *), char *err,
                              size_t errlen)
{
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

/* What no one flag decides alone: the router's home namespace, a certificate without TLS, the
 * metrics port's default, and the listening addresses. */
static int app_options_finish(app_program program, app_options *o,
                              const char *(*getenv_fn)(const char *), char *err, size_t errlen)
{
    if (program == APP_ROUTER && app_home_namespace(o, getenv_fn, err, errlen) < 0)
        return -1;
    if (o->metrics_cert_path && !o->metrics_secure) {
        snprintf(err, errlen,
                 "--metrics-cert-path needs --metrics-secure (plain HTTP has no certificate)");
        return -1;
    }
    if (!o->metrics_addr) /* the ports kubebuilder's manifests use for each */
        o->metrics_addr = o->metrics_secure ? ":8443" : program == APP_ROUTER ? ":9090" : ":8080";
    return app_check_binds(o, err, errlen);
}

int app_options_parse_for(app_program program, app_options *o, int argc, char **argv,
                          const char *(*getenv_fn)(const char *), char *err, size_t errlen)
{
    size_t n;
    const app_flag *t = app_flags(program, &n);
    *o = (app_options){.program = program};
    if (app_flags_preset(t, n, o, getenv_fn, err, errlen) < 0 ||
        app_flags_argv(t, n, o, argc, argv, err, errlen) < 0 ||
        app_flags_empty(t, n, o, err, errlen) < 0)
        return -1;
    return app_options_finish(program, o, getenv_fn, err, errlen);
}

/* "-v, --log-level N", "--leader-elect[=true|false]". */
static void app_flag_spec(const app_flag *f, char *buf, size_t len)
{
    char shortname[8] = "";
    if (f->short_name)
        snprintf(shortname, sizeof(shortname), "-%c, ", f->short_name);
    snprintf(buf, len, "%s--%s%s%s%s", shortname, f->name,
             f->kind == APP_FLAG_BOOL ? "[=true|false]" : "", f->arg ? " " : "",
             f->arg ? f->arg : "");
}

/* One flag's lines of --help: its spec, then its words wrapped in the column beside it. */
static void app_flag_usage(const app_flag *f, FILE *out)
{
    char spec[96], text[640];
    app_flag_spec(f, spec, sizeof(spec));
    const char *shown = app_flag_shown(f);
    snprintf(text, sizeof(text), "%s%s%s%s%s%s", f->help, f->env ? " [" : "", f->env ? f->env : "",
             f->env ? "]" : "", shown ? "; default " : "", shown ? shown : "");
    int col = fprintf(out, "  %s", spec);
    bool fresh = true; /* nothing yet in the help column of this line */
    if (col >= APP_HELP_COLUMN) {
        fputc('\n', out);
        col = 0;
    }
    for (const char *w = text; *w; w += strspn(w, " ")) {
        int wl = (int)strcspn(w, " ");
        if (!fresh && col + 1 + wl > APP_HELP_WIDTH) {
            fputc('\n', out);
            col = 0;
            fresh = true;
        }
        col += fresh ? fprintf(out, "%*s", APP_HELP_COLUMN - col, "") : fprintf(out, " ");
        fresh = false;
        col += fprintf(out, "%.*s", wl, w);
        w += wl;
    }
    fputc('\n', out);
}

void app_options_usage(app_program program, FILE *out)
{
    if (program == APP_ROUTER)
        fputs("Usage: modelpool-router [flags]\n"
              "\n"
              "One OpenAI-compatible endpoint for every model of the ModelPools it fronts: a\n"
              "request for a member that is not resident is held while the pool swaps it in\n"
              "(within the pool's swapBudget), then forwarded.\n",
              out);
    else
        fputs("Usage: modelpool-operator [flags]\n"
              "\n"
              "Runs the ModelPool controller: members of a pool share one exclusive GPU slot.\n",
              out);
    fputs("\nFlags (environment variable in brackets):\n", out);
    size_t n;
    const app_flag *t = app_flags(program, &n);
    for (size_t i = 0; i < n; i++)
        app_flag_usage(&t[i], out);
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

/* telemetry: process series are read from /proc when a scrape asks (nothing polls); API requests
 * are counted as the client reports each attempt. Both servers answer GET (and HEAD) only. A
 * secure scrape waits (its connection suspended) for kube_access's verdict; the check is work of
 * its request (httpd_req_work), cancelled if the scraper leaves first. */
#include "app/telemetry.h"

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd/tls.h"
#include "kube/access.h"
#include "log/log.h"

/* The probe server's limits: kubelet opens a fresh connection for each probe and sends at once, so
 * a connection still without a whole request after a couple of seconds is not a probe. At the
 * limit a waiting connection of the client holding the most is closed for a new one, so idle
 * connections, however many, cannot keep a probe out (httpd_config). */
#define TELEMETRY_HEALTH_CONNECTIONS 32u
#define TELEMETRY_HEALTH_TIMEOUT_S 2u
/* Scrapers keep their connection between scrapes (every 15-60 s). */
#define TELEMETRY_METRICS_CONNECTIONS 64u
#define TELEMETRY_METRICS_IDLE_S 30u
#define TELEMETRY_METRICS_HEAD_MS 10000u
#define TELEMETRY_SERVERS 4

struct telemetry {
    metrics *reg;
    metrics_family *api, *cpu, *rss, *rss_peak, *fds, *start, *conns;
    httpd *metrics_srv, *health_srv;
    struct {
        const char *port;
        const httpd *h;
    } counted[TELEMETRY_SERVERS]; /* modelpool_http_connections' series */
    size_t ncounted;
    httpd_tls tls;       /* set by telemetry_secure */
    kube_access *access; /* idem: who may scrape */
    const char *(*unready)(void *ud);
    void *ready_ud;
};

/* /proc/self/stat: utime and stime (fields 14, 15) in clock ticks, starttime (22) since boot. */
static void telemetry_proc_stat(telemetry *t)
{
    FILE *f = fopen("/proc/self/stat", "r");
    char line[1024];
    if (!f)
        return;
    char *ok = fgets(line, sizeof(line), f);
    fclose(f);
    char *p = ok ? strrchr(line, ')') : NULL; /* the command name may hold spaces */
    unsigned long long utime = 0, stime = 0, start = 0;
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
                     "%*d %*d %*d %llu",
                     &utime, &stime, &start) != 3)
        return;
    double hz = (double)sysconf(_SC_CLK_TCK);
    metrics_set(t->cpu, NULL, (double)(utime + stime) / hz);
    /* Boot time from /proc/stat's btime, so the start time is seconds since the epoch. */
    f = fopen("/proc/stat", "r");
    unsigned long long btime = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    if (f)
        fclose(f);
    if (btime)
        metrics_set(t->start, NULL, (double)btime + (double)start / hz);
}

/* /proc/self/status: VmRSS and VmHWM (peak), in kB. */
static void telemetry_proc_status(telemetry *t)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            metrics_set(t->rss, NULL, (double)kb * 1024);
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            metrics_set(t->rss_peak, NULL, (double)kb * 1024);
    }
    if (f)
        fclose(f);
}

static void telemetry_collect(void *ud)
{
    telemetry *t = ud;
    telemetry_proc_stat(t);
    telemetry_proc_status(t);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    metrics_set(t->fds, NULL, (double)(n ? n - 1 : 0)); /* not the one reading the directory */
}

static void telemetry_list_connections(void *ud, metrics_emitter *out)
{
    telemetry *t = ud;
    for (size_t i = 0; i < t->ncounted; i++)
        metrics_emit(out, (const char *[]){t->counted[i].port},
                     (double)httpd_connections(t->counted[i].h));
}

void telemetry_count_connections(telemetry *t, const char *port, const httpd *h)
{
    if (!h || t->ncounted == TELEMETRY_SERVERS)
        return;
    t->counted[t->ncounted].port = port;
    t->counted[t->ncounted++].h = h;
}

static const char *const telemetry_api_labels[] = {"verb", "code", NULL};
static const char *const telemetry_port_labels[] = {"port", NULL};

#define TELEMETRY_DEF(...) METRICS_DEF(telemetry, __VA_ARGS__)

static const metrics_def telemetry_defs[] = {
    TELEMETRY_DEF(api, METRICS_COUNTER, "modelpool_api_requests_total",
                  "Requests to the API server by verb (GET, LIST, WATCH, POST, PUT, PATCH, DELETE) "
                  "and HTTP code (0: no answer), retries included.",
                  telemetry_api_labels),
    TELEMETRY_DEF(cpu, METRICS_COUNTER, "process_cpu_seconds_total",
                  "User and system CPU time spent in seconds.", NULL),
    TELEMETRY_DEF(rss, METRICS_GAUGE, "process_resident_memory_bytes",
                  "Resident memory size in bytes.", NULL),
    TELEMETRY_DEF(rss_peak, METRICS_GAUGE, "process_resident_memory_max_bytes",
                  "Peak resident memory size in bytes (VmHWM).", NULL),
    TELEMETRY_DEF(fds, METRICS_GAUGE, "process_open_fds", "Number of open file descriptors.", NULL),
    TELEMETRY_DEF(start, METRICS_GAUGE, "process_start_time_seconds",
                  "Start time of the process since the Unix epoch in seconds.", NULL),
    {.at = offsetof(telemetry, conns),
     .kind = METRICS_GAUGE,
     .name = "modelpool_http_connections",
     .help = "Connections open to each HTTP server (api: the router's endpoint; metrics; health: "
             "the probes').",
     .labels = telemetry_port_labels,
     .list = telemetry_list_connections},
};

telemetry *telemetry_new(void)
{
    telemetry *t = calloc(1, sizeof(*t));
    if (!t || !(t->reg = metrics_new())) {
        free(t);
        return NULL;
    }
    if (metrics_declare(t->reg, telemetry_defs, sizeof(telemetry_defs) / sizeof(*telemetry_defs),
                        t) < 0 ||
        metrics_on_collect(t->reg, telemetry_collect, t) < 0) {
        telemetry_free(t);
        return NULL;
    }
    return t;
}

void telemetry_free(telemetry *t)
{
    if (!t)
        return;
    httpd_stop(t->metrics_srv); /* first: cancels the checks its requests wait on */
    kube_access_free(t->access);
    httpd_stop(t->health_srv);
    metrics_free(t->reg);
    httpd_tls_clear(&t->tls);
    free(t);
}

metrics *telemetry_registry(telemetry *t)
{
    return t->reg;
}

void telemetry_api_request(void *ud, const char *verb, long http_code)
{
    telemetry *t = ud;
    char code[16];
    snprintf(code, sizeof(code), "%ld", http_code);
    metrics_add(t->api, (const char *[]){verb, code}, 1);
}

static void telemetry_text(httpd_reply *out, unsigned code, const char *text)
{
    out->code = code;
    out->body = strdup(text);
    out->len = out->body ? strlen(text) : 0;
}

static bool telemetry_method_ok(const char *method, httpd_reply *out)
{
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return true;
    telemetry_text(out, 405, "method not allowed\n");
    return false;
}

/* Method and path: the answer when they are wrong (true), before any access review. */
static bool telemetry_metrics_refused(const char *method, const char *path, httpd_reply *out)
{
    if (!telemetry_method_ok(method, out))
        return true;
    if (strcmp(path, "/metrics") != 0) {
        telemetry_text(out, 404, "not found: metrics are at /metrics\n");
        return true;
    }
    return false;
}

static void telemetry_render(telemetry *t, httpd_reply *out)
{
    size_t len = 0;
    char *text = metrics_render(t->reg, &len);
    if (!text) {
        telemetry_text(out, 500, "out of memory\n");
        return;
    }
    *out = (httpd_reply){.code = 200,
                         .content_type = "text/plain; version=0.0.4; charset=utf-8",
                         .body = text,
                         .len = len};
}

static void telemetry_on_metrics(void *ud, const char *method, const char *path, httpd_reply *out)
{
    if (!telemetry_metrics_refused(method, path, out))
        telemetry_render(ud, out);
}

/* A secure scrape waiting for its verdict: the check, and its registration with the request. */
typedef struct telemetry_scrape {
    httpd_req *req;
    kube_access_waiter *check;
    httpd_work *work;
} telemetry_scrape;

/* The scraper left (or the server stops) before the verdict: the check goes, unanswered. */
static void telemetry_on_scraper_gone(void *ud)
{
    telemetry_scrape *s = ud;
    kube_access_cancel(s->check);
    free(s);
}

static void telemetry_on_access(void *ud, int code, const char *why)
{
    telemetry_scrape *s = ud;
    httpd_req *req = s->req;
    httpd_work_done(s->work);
    free(s);
    telemetry *t = httpd_req_ud(req);
    httpd_reply out = {0};
    char c[8];
    snprintf(c, sizeof(c), "%d", code);
    if (code == 200) {
        log_kv(LOG_TRACE, "metrics scrape allowed", "why", why, NULL);
        telemetry_render(t, &out);
    } else if (code == 401 || code == 403) {
        log_kv(LOG_DEBUG, "metrics scrape refused", "code", c, "why", why, NULL);
        telemetry_text(&out, (unsigned)code, code == 401 ? "Unauthorized\n" : "Forbidden\n");
    } else {
        /* Never an open door: the caller is refused until the API server can vouch for it. */
        log_kv(LOG_ERROR, "metrics scrape refused: access could not be checked", "code", c, "why",
               why, NULL);
        telemetry_text(&out, 503, "Service Unavailable: access could not be checked\n");
    }
    httpd_req_reply(req, &out);
}

static void telemetry_on_secure_metrics(void *ud, httpd_req *req)
{
    telemetry *t = ud;
    httpd_reply out = {0};
    if (telemetry_metrics_refused(httpd_req_method(req), httpd_req_path(req), &out)) {
        httpd_req_reply(req, &out);
        return;
    }
    telemetry_scrape *s = calloc(1, sizeof(*s));
    if (!s || !(s->work = httpd_req_work(req, telemetry_on_scraper_gone, s))) {
        free(s);
        telemetry_text(&out, 503, "Service Unavailable: out of memory\n");
        httpd_req_reply(req, &out);
        return;
    }
    s->req = req;
    /* NULL when the verdict came at once (s is gone then): only a check that waits is kept. */
    kube_access_waiter *w = kube_access_check(t->access, httpd_req_header(req, "Authorization"),
                                              telemetry_on_access, s);
    if (w)
        s->check = w;
}

int telemetry_secure(telemetry *t, const telemetry_secure_opts *o, char *err, size_t errlen)
{
    char why[300];
    if (o->cert_dir) {
        if (httpd_tls_load(&t->tls, o->cert_dir, o->cert_name, o->key_name, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "metrics certificate: %s", why);
            return -1;
        }
        log_kv(LOG_INFO, "metrics over HTTPS", "certificate", o->cert_dir, NULL);
    } else {
        /* As controller-runtime does without a certificate: good for encryption, and for
         * scrapers that pin this certificate, not for anyone who must verify a CA. */
        char host[256] = "", list[400] = "";
        gethostname(host, sizeof(host) - 1);
        const char *ip = getenv("POD_IP");
        const char *names[5] = {0};
        size_t n = 0;
        if (host[0] && httpd_tls_name_ok(host)) /* a host name is not always a DNS name */
            names[n++] = host;
        names[n++] = "localhost";
        if (ip && *ip && strcmp(ip, "127.0.0.1") != 0)
            names[n++] = ip;
        names[n++] = "127.0.0.1";
        if (httpd_tls_self_signed(&t->tls, names, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "metrics certificate: %s", why);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? "," : "",
                     names[i]);
        log_kv(LOG_INFO, "metrics over HTTPS with a self-signed certificate", "names", list, NULL);
    }
    kube_access_opts ao = {.path = "/metrics", .verb = "get"};
    if (!(t->access = kube_access_new(o->client, &ao))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void telemetry_on_health(void *ud, const char *method, const char *path, httpd_reply *out)
{
    telemetry *t = ud;
    if (!telemetry_method_ok(method, out))
        return;
    if (strcmp(path, "/healthz") == 0) {
        telemetry_text(out, 200, "ok\n"); /* answered from the loop: a stuck loop cannot */
    } else if (strcmp(path, "/readyz") == 0) {
        const char *why = t->unready(t->ready_ud); /* asked once: text and code agree */
        if (!why) {
            telemetry_text(out, 200, "ok\n");
        } else {
            char *text = NULL;
            if (asprintf(&text, "%s\n", why) < 0)
                text = NULL;
            telemetry_text(out, 503, text ? text : "not ready\n");
            free(text);
        }
    } else {
        telemetry_text(out, 404, "not found: /healthz, /readyz\n");
    }
}

int telemetry_serve(telemetry *t, ev_loop *loop, const char *metrics_addr, const char *health_addr,
                    const char *(*unready)(void *ud), void *ready_ud, char *err, size_t errlen)
{
    t->unready = unready;
    t->ready_ud = ready_ud;
    char why[200];
    httpd_config mc = {.bind = metrics_addr, .answer = telemetry_on_metrics, .ud = t};
    if (t->access) {
        mc.answer = NULL;
        mc.request = telemetry_on_secure_metrics;
        mc.tls_cert_pem = t->tls.cert_pem;
        mc.tls_key_pem = t->tls.key_pem;
    }
    mc.max_connections = TELEMETRY_METRICS_CONNECTIONS;
    mc.idle_timeout_s = TELEMETRY_METRICS_IDLE_S;
    mc.head_timeout_ms = TELEMETRY_METRICS_HEAD_MS;
    if (strcmp(metrics_addr, "0") != 0 &&
        !(t->metrics_srv = httpd_start_config(loop, &mc, why, sizeof(why)))) {
        snprintf(err, errlen, "metrics server: %s", why);
        return -1;
    }
    httpd_config hc = {.bind = health_addr,
                       .answer = telemetry_on_health,
                       .ud = t,
                       .max_connections = TELEMETRY_HEALTH_CONNECTIONS,
                       .idle_timeout_s = TELEMETRY_HEALTH_TIMEOUT_S,
                       .head_timeout_ms = TELEMETRY_HEALTH_TIMEOUT_S * 1000};
    if (strcmp(health_addr, "0") != 0 &&
        !(t->health_srv = httpd_start_config(loop, &hc, why, sizeof(why)))) {
        snprintf(err, errlen, "health probe server: %s", why);
        return -1;
    }
    telemetry_count_connections(t, "metrics", t->metrics_srv);
    telemetry_count_connections(t, "health", t->health_srv);
    return 0;
}

int telemetry_metrics_port(const telemetry *t)
{
    return t->metrics_srv ? httpd_port(t->metrics_srv) : 0;
}

int telemetry_health_port(const telemetry *t)
{
    return t->health_srv ? httpd_port(t->health_srv) : 0;
}

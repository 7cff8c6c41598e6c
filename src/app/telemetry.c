/* telemetry: process series are read from /proc when a scrape asks (nothing polls); API requests
 * are counted as the client reports each attempt. Both servers answer GET (and HEAD) only. */
#include "app/telemetry.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd/httpd.h"

struct telemetry {
    metrics *reg;
    metrics_family *api, *cpu, *rss, *rss_peak, *fds, *start;
    httpd *metrics_srv, *health_srv;
    bool (*ready)(void *ud, char *why, size_t whylen);
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

telemetry *telemetry_new(void)
{
    telemetry *t = calloc(1, sizeof(*t));
    if (!t || !(t->reg = metrics_new())) {
        free(t);
        return NULL;
    }
    static const char *const api[] = {"verb", "code", NULL};
    t->api = metrics_family_new(t->reg, METRICS_COUNTER, "modelpool_api_requests_total",
                                "Requests to the API server by verb (GET, LIST, WATCH, POST, PUT, "
                                "PATCH, DELETE) and HTTP code (0: no answer), retries included.",
                                api, NULL, 0);
    t->cpu = metrics_family_new(t->reg, METRICS_COUNTER, "process_cpu_seconds_total",
                                "User and system CPU time spent in seconds.", NULL, NULL, 0);
    t->rss = metrics_family_new(t->reg, METRICS_GAUGE, "process_resident_memory_bytes",
                                "Resident memory size in bytes.", NULL, NULL, 0);
    t->rss_peak = metrics_family_new(t->reg, METRICS_GAUGE, "process_resident_memory_max_bytes",
                                     "Peak resident memory size in bytes (VmHWM).", NULL, NULL, 0);
    t->fds = metrics_family_new(t->reg, METRICS_GAUGE, "process_open_fds",
                                "Number of open file descriptors.", NULL, NULL, 0);
    t->start = metrics_family_new(t->reg, METRICS_GAUGE, "process_start_time_seconds",
                                  "Start time of the process since the Unix epoch in seconds.",
                                  NULL, NULL, 0);
    if (!t->api || !t->cpu || !t->rss || !t->rss_peak || !t->fds || !t->start ||
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
    httpd_stop(t->metrics_srv);
    httpd_stop(t->health_srv);
    metrics_free(t->reg);
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

static void telemetry_on_metrics(void *ud, const char *method, const char *path, httpd_reply *out)
{
    telemetry *t = ud;
    if (!telemetry_method_ok(method, out))
        return;
    if (strcmp(path, "/metrics") != 0) {
        telemetry_text(out, 404, "not found: metrics are at /metrics\n");
        return;
    }
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

static void telemetry_on_health(void *ud, const char *method, const char *path, httpd_reply *out)
{
    telemetry *t = ud;
    if (!telemetry_method_ok(method, out))
        return;
    if (strcmp(path, "/healthz") == 0) {
        telemetry_text(out, 200, "ok\n"); /* answered from the loop: a stuck loop cannot */
    } else if (strcmp(path, "/readyz") == 0) {
        /* Asked once: the answer and its code agree. Not ready, it says what it waits for. */
        char why[1024] = "";
        bool ready = t->ready(t->ready_ud, why, sizeof(why));
        char text[sizeof(why) + 32];
        snprintf(text, sizeof(text), "not ready: waiting for %s\n", *why ? why : "the caches");
        telemetry_text(out, ready ? 200 : 503, ready ? "ok\n" : text);
    } else {
        telemetry_text(out, 404, "not found: /healthz, /readyz\n");
    }
}

int telemetry_serve(telemetry *t, ev_loop *loop, const char *metrics_addr, const char *health_addr,
                    bool (*ready)(void *ud, char *why, size_t whylen), void *ready_ud, char *err,
                    size_t errlen)
{
    t->ready = ready;
    t->ready_ud = ready_ud;
    char why[200];
    if (strcmp(metrics_addr, "0") != 0 &&
        !(t->metrics_srv =
              httpd_start(loop, metrics_addr, telemetry_on_metrics, t, why, sizeof(why)))) {
        snprintf(err, errlen, "metrics server: %s", why);
        return -1;
    }
    if (strcmp(health_addr, "0") != 0 &&
        !(t->health_srv =
              httpd_start(loop, health_addr, telemetry_on_health, t, why, sizeof(why)))) {
        snprintf(err, errlen, "health probe server: %s", why);
        return -1;
    }
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

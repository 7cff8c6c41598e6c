/* boot: flags, log, API configuration, signals, the API client and telemetry, shared by both
 * programs' mains. */
#include "app/boot.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kube/error.h"
#include "log/log.h"

/* The soft open-files limit is often 1024 while the hard one is far higher: a server with a few
 * thousand clients would run out of fds, for its own outbound sockets too. */
static void boot_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) /* an infinite hard limit is above fs.nr_open */
            rl.rlim_cur = was;
    }
    char soft[24], hard[24];
    snprintf(soft, sizeof(soft), "%llu", (unsigned long long)rl.rlim_cur);
    snprintf(hard, sizeof(hard), "%llu", (unsigned long long)rl.rlim_max);
    log_kv(LOG_INFO, "open files limit", "soft", soft, "hard", hard, NULL);
}

unsigned long long app_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    return rl.rlim_cur == RLIM_INFINITY ? 1ULL << 20 : (unsigned long long)rl.rlim_cur;
}

static const char *boot_getenv(const char *name)
{
    return getenv(name);
}

int app_boot(app_program program, const char *name, int argc, char **argv, app_options *o,
             kube_config *cfg)
{
    char msg[256];
    if (app_options_parse_for(program, o, argc, argv, boot_getenv, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "%s: %s\n", name, msg);
        return 2;
    }
    if (o->help) {
        app_options_usage(program, stdout);
        return 0;
    }
    if (o->version) {
        printf("%s %s\n", name, MP_VERSION);
        return 0;
    }
    log_setup(stderr,
              o->log_level == 0   ? LOG_INFO
              : o->log_level == 1 ? LOG_DEBUG
                                  : LOG_TRACE,
              o->log_json ? LOG_JSON : LOG_TEXT);
    boot_raise_fd_limit();
    kube_error err = {0};
    kube_config_opts copts = {.kubeconfig = o->kubeconfig, .context = o->context};
    *cfg = (kube_config){0};
    if (kube_config_resolve(cfg, &copts, &err) < 0) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        kube_error_clear(&err);
        return 2;
    }
    /* Named in managedFields and audit logs (a kubeconfig has no say in it). */
    free(cfg->user_agent);
    if (asprintf(&cfg->user_agent, "%s/%s", name, MP_VERSION) < 0) {
        cfg->user_agent = NULL;
        fprintf(stderr, "%s: out of memory\n", name);
        kube_config_clear(cfg);
        return 1;
    }
    return -1;
}

static void boot_on_signal(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    app_sig *s = ud;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) != sizeof(si))
        return;
    if (s->stopping) {
        log_kv(LOG_INFO, "second signal, exiting now", NULL);
        ev_stop(loop);
        return;
    }
    s->stopping = true;
    log_kv(LOG_INFO, "shutting down", "signal", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT",
           NULL);
    s->shutdown(s->ud);
}

int app_signals_start(app_sig *s, ev_loop *loop, void (*shutdown)(void *ud), void *ud)
{
    *s = (app_sig){.loop = loop, .fd = -1, .shutdown = shutdown, .ud = ud};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    s->fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->fd < 0)
        return -errno;
    int rc = ev_fd_set(loop, s->fd, EV_READ, boot_on_signal, s);
    if (rc < 0) {
        app_signals_stop(s);
        return rc;
    }
    return 0;
}

void app_signals_stop(app_sig *s)
{
    if (s->fd < 0)
        return;
    ev_fd_clear(s->loop, s->fd);
    close(s->fd);
    s->fd = -1;
}

int app_runtime_start(app_runtime *rt, const kube_config *cfg, void (*shutdown)(void *ud), void *ud,
                      char *err, size_t errlen)
{
    *rt = (app_runtime){.sig = {.fd = -1}};
    kube_error kerr = {0};
    if (!(rt->loop = ev_new()) || app_signals_start(&rt->sig, rt->loop, shutdown, ud) < 0) {
        snprintf(err, errlen, "cannot set up the event loop or signals");
        return -1;
    }
    if (!(rt->client = kube_client_new(rt->loop, cfg, &kerr))) {
        snprintf(err, errlen, "%s", kerr.message);
        kube_error_clear(&kerr);
        return -1;
    }
    if (!(rt->tm = telemetry_new())) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    kube_client_observe(rt->client, telemetry_api_request, rt->tm);
    return 0;
}

int app_runtime_serve(app_runtime *rt, const char *name, const app_options *o,
                      const char *(*unready)(void *ud), void *ud)
{
    char msg[256];
    telemetry_secure_opts mso = {.client = rt->client,
                                 .cert_dir = o->metrics_cert_path,
                                 .cert_name = o->metrics_cert_name,
                                 .key_name = o->metrics_cert_key};
    if (o->metrics_secure && strcmp(o->metrics_addr, "0") != 0 &&
        telemetry_secure(rt->tm, &mso, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "%s: %s\n", name, msg);
        return 2;
    }
    if (telemetry_serve(rt->tm, rt->loop, o->metrics_addr, o->health_addr, unready, ud, msg,
                        sizeof(msg)) < 0) {
        fprintf(stderr, "%s: %s\n", name, msg);
        return 1;
    }
    return 0;
}

void app_runtime_stop(app_runtime *rt)
{
    telemetry_free(rt->tm);
    kube_client_free(rt->client);
    app_signals_stop(&rt->sig);
    ev_free(rt->loop);
    *rt = (app_runtime){.sig = {.fd = -1}};
}

char *app_identity(const char *prefix, const char *sep, size_t n_random, bool label)
{
    char host[256] = "";
    const char *base = getenv("POD_NAME");
    if (!base || !*base) {
        gethostname(host, sizeof(host) - 1);
        base = host;
    }
    char name[256];
    size_t n = 0, cap = label ? 199 : sizeof(name) - 1;
    for (const char *c = base; *c && n < cap; c++)
        name[n++] = !label                       ? *c
                    : isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c)
                                                 : '-';
    name[n] = '\0';
    unsigned char r[16];
    char hex[2 * sizeof(r) + 1] = "";
    if (n_random > sizeof(r) || getrandom(r, n_random, 0) != (ssize_t)n_random)
        return NULL;
    for (size_t i = 0; i < n_random; i++)
        snprintf(hex + 2 * i, 3, "%02x", r[i]);
    char *id = NULL;
    if (asprintf(&id, "%s%s%s%s", prefix, name, n || !label ? sep : "", hex) < 0)
        return NULL;
    return id;
}

/* modelpool-operator: parses flags, loads the API configuration, and runs the ModelPool
 * controller on one event loop until SIGTERM/SIGINT, then lets the reconcile in flight finish
 * and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "app/log.h"
#include "app/options.h"
#include "kube/client.h"
#include "kube/config.h"
#include "loop/ev.h"
#include "pool/controller.h"

typedef struct main_state {
    ev_loop *loop;
    pool_controller *pc;
    int sigfd;
    bool stopping;
} main_state;

static const char *main_getenv(const char *name)
{
    return getenv(name);
}

static void main_drained(void *ud)
{
    main_state *m = ud;
    ev_stop(m->loop);
}

static void main_on_signal(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)events;
    main_state *m = ud;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) != sizeof(si))
        return;
    if (m->stopping) {
        log_kv(LOG_INFO, "second signal, exiting now", NULL);
        ev_stop(m->loop);
        return;
    }
    m->stopping = true;
    log_kv(LOG_INFO, "shutting down", "signal", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT",
           NULL);
    pool_controller_shutdown(m->pc, main_drained, m);
}

static int main_signals(main_state *m)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    /* A peer closing a socket must be an error value, not a fatal signal. */
    signal(SIGPIPE, SIG_IGN);
    m->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (m->sigfd < 0)
        return -1;
    return ev_fd_set(m->loop, m->sigfd, EV_READ, main_on_signal, m);
}

int main(int argc, char **argv)
{
    app_options opts;
    char msg[256];
    if (app_options_parse(&opts, argc, argv, main_getenv, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "modelpool-operator: %s\n", msg);
        return 2;
    }
    if (opts.help) {
        fputs(app_options_usage(), stdout);
        return 0;
    }
    if (opts.version) {
        printf("modelpool-operator %s\n", MP_VERSION);
        return 0;
    }
    log_setup(stderr,
              opts.log_level == 0   ? LOG_INFO
              : opts.log_level == 1 ? LOG_DEBUG
                                    : LOG_TRACE,
              opts.log_json ? LOG_JSON : LOG_TEXT);

    kube_config cfg = {0};
    kube_error err = {0};
    kube_config_opts copts = {.kubeconfig = opts.kubeconfig, .context = opts.context};
    if (kube_config_resolve(&cfg, &copts, &err) < 0) {
        fprintf(stderr, "modelpool-operator: %s\n", err.message);
        kube_error_clear(&err);
        return 2;
    }
    int rc = 1;
    main_state m = {.sigfd = -1};
    kube_client *client = NULL;
    if (!(m.loop = ev_new()) || main_signals(&m) < 0) {
        fprintf(stderr, "modelpool-operator: cannot set up the event loop or signals\n");
        goto out;
    }
    if (!(client = kube_client_new(m.loop, &cfg, &err))) {
        fprintf(stderr, "modelpool-operator: %s\n", err.message);
        goto out;
    }
    pool_controller_opts popts = {.namespace_ = opts.namespace_, .instance = getenv("POD_NAME")};
    if (!(m.pc = pool_controller_new(m.loop, client, &popts)) || pool_controller_start(m.pc) < 0) {
        fprintf(stderr, "modelpool-operator: cannot start the controller (out of memory)\n");
        goto out;
    }
    log_kv(LOG_INFO, "started", "version", MP_VERSION, "server", cfg.server, "config", cfg.origin,
           "namespace", opts.namespace_ ? opts.namespace_ : "(all)", NULL);
    rc = ev_run(m.loop) < 0 ? 1 : 0;
    log_kv(LOG_INFO, "stopped", NULL);
out:
    pool_controller_free(m.pc);
    kube_client_free(client);
    if (m.sigfd >= 0)
        close(m.sigfd);
    ev_free(m.loop);
    kube_config_clear(&cfg);
    kube_error_clear(&err);
    return rc;
}

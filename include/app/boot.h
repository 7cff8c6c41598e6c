/* boot: what both programs do before their own work starts: flags (and --help, --version), the
 * log, the API configuration under the program's own User-Agent, signals as an fd on the loop,
 * the API client and the telemetry servers. One place, so the operator and the router start and
 * stop alike. */
#ifndef MP_APP_BOOT_H
#define MP_APP_BOOT_H

#include <stdbool.h>

#include "app/options.h"
#include "app/telemetry.h"
#include "kube/client.h"
#include "kube/config.h"
#include "loop/ev.h"

/* Parses the flags of program (named name in messages), prints --help or --version, sets up the
 * log, raises the soft open-files limit to the hard one, and resolves the API configuration into
 * *cfg (User-Agent name/<version>). Returns -1 when the program should go on (cfg then needs
 * kube_config_clear), else the exit status: 0 after
 * --help or --version, 2 for a bad flag or kubeconfig (said on stderr), 1 out of memory. */
int app_boot(app_program program, const char *name, int argc, char **argv, app_options *o,
             kube_config *cfg);

/* The soft open-files limit, which app_boot raised to the hard one (and logged at info). */
unsigned long long app_fd_limit(void);

/* SIGTERM and SIGINT as the programs take them: the first calls shutdown(ud) (the program drains
 * and stops its loop when done), a second stops the loop at once. SIGPIPE is ignored: a closed
 * socket is an error value. The caller owns the struct. */
typedef struct app_sig {
    ev_loop *loop;
    int fd;
    bool stopping;
    void (*shutdown)(void *ud);
    void *ud;
} app_sig;

/* Blocks the signals and watches them through a signalfd on the loop. 0 or a negative errno. */
int app_signals_start(app_sig *s, ev_loop *loop, void (*shutdown)(void *ud), void *ud);
/* Stops watching and closes the fd; a no-op for one never started. */
void app_signals_stop(app_sig *s);

/* What both programs run on: the loop, the signals on it, the API client and the telemetry that
 * counts the client's requests. The caller owns the struct. */
typedef struct app_runtime {
    ev_loop *loop;
    app_sig sig;
    kube_client *client;
    telemetry *tm;
} app_runtime;

/* Sets up rt for cfg; the first SIGTERM or SIGINT calls shutdown(ud). 0, or -1 with the reason in
 * err; app_runtime_stop frees what was made either way. */
int app_runtime_start(app_runtime *rt, const kube_config *cfg, void (*shutdown)(void *ud), void *ud,
                      char *err, size_t errlen);
/* Serves /metrics (HTTPS unless --metrics-secure=false, when served at all) and /healthz, /readyz
 * (telemetry_serve: unready(ud) says why not ready) as o says. 0, or the exit status said on
 * stderr: 2 for a bad metrics certificate (a configuration fault, like a bad flag), 1 when it
 * cannot listen. */
int app_runtime_serve(app_runtime *rt, const char *name, const app_options *o,
                      const char *(*unready)(void *ud), void *ud);
void app_runtime_stop(app_runtime *rt);

/* This replica's name for the Leases it holds: prefix, $POD_NAME (else the host name), sep, then
 * n_random (at most 16) random bytes in hex. With label, the name part is lowered to [a-z0-9-] and
 * cut to 199 bytes (a Lease's name is a DNS subdomain), and sep left out when that part is empty.
 * NULL when out of memory or without randomness. */
char *app_identity(const char *prefix, const char *sep, size_t n_random, bool label);

#endif

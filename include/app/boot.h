/* boot: what both programs do before their own work starts: flags (and --help, --version), the
 * log, the API configuration under the program's own User-Agent, and signals as an fd on the
 * loop. One place, so the operator and the router start and stop alike. */
#ifndef MP_APP_BOOT_H
#define MP_APP_BOOT_H

#include <stdbool.h>

#include "app/options.h"
#include "kube/config.h"
#include "loop/ev.h"

/* Parses the flags of program (named name in messages), prints --help or --version, sets up the
 * log and resolves the API configuration into *cfg (User-Agent name/<version>). Returns -1 when
 * the program should go on (cfg then needs kube_config_clear), else the exit status: 0 after
 * --help or --version, 2 for a bad flag or kubeconfig (said on stderr), 1 out of memory. */
int app_boot(app_program program, const char *name, int argc, char **argv, app_options *o,
             kube_config *cfg);

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

/* Blocks the signals and watches them through a signalfd on the loop. 0 or -1. */
int app_signals_start(app_sig *s, ev_loop *loop, void (*shutdown)(void *ud), void *ud);
/* Stops watching and closes the fd; a no-op for one never started. */
void app_signals_stop(app_sig *s);

#endif

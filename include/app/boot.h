/* boot: what both programs do before their own work starts: flags (and --help, --version), the
 * log, the API configuration under the program's own User-Agent, and signals as an fd on the
 * loop. One place, so the operator and the router start and stop alike. */
#ifndef MP_APP_BOOT_H
#define MP_APP_BOOT_H

#include "app/options.h"
#include "kube/config.h"
#include "loop/ev.h"

/* Parses the flags of program (named name in messages), prints --help or --version, sets up the
 * log and resolves the API configuration into *cfg (User-Agent name/<version>). Returns -1 when
 * the program should go on (cfg then needs kube_config_clear), else the exit status: 0 after
 * --help or --version, 2 for a bad flag or kubeconfig (said on stderr), 1 out of memory. */
int app_boot(app_program program, const char *name, int argc, char **argv, app_options *o,
             kube_config *cfg);

/* Blocks SIGTERM and SIGINT (and ignores SIGPIPE: a closed socket is an error value) and watches
 * them through a signalfd on the loop: fn runs with the fd readable (read a signalfd_siginfo).
 * The fd (close it at the end), or -1. */
int app_signals(ev_loop *loop, ev_fd_fn fn, void *ud);

#endif

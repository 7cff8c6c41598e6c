/* member-sim: the test tree's stand-in for the InferenceService controller and the kubelet, built
 * on the project's own kube client, informers and event loop. Flags and signals live here; the
 * controller is sim_ctl.c, the probe servers run on src/httpd. Usage: member-sim --help. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kube/client.h"
#include "kube/config.h"
#include "log/log.h"
#include "loop/ev.h"
#include "sim.h"

static const char sim_usage[] =
    "Usage: member-sim [flags]\n"
    "Plays the InferenceService controller for tests: spec.replicas Pods per member, created at\n"
    "once as a ReplicaSet does, their status written as a kubelet would, each Pod's idle probe\n"
    "served on its own 127.0.0.N:<port>.\n"
    "  --kubeconfig PATH     kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)\n"
    "  --namespace NS        watch one namespace (default: all)\n"
    "  --finalizer           put sim.modelpool.test/hold on Pods, so they are seen terminating\n"
    "  --load-ms N           Pod creation to Running (default 1000)\n"
    "  --terminate-ms N      Pod terminating to gone, with --finalizer (default 0)\n"
    "  --ip-first N          first Pod address index: 127.<N>>16>.<N>>8&255>.<N&255> (default 2)\n"
    "  --ip-count N          how many addresses from there (default 253: 127.0.0.2-254)\n"
    "  --ip-block B          the addresses in 127.B.0.0/16 (1..254): --ip-first counts from\n"
    "                        127.B.0.0 and the range must stay in it (a test run's own block)\n"
    "  --ip-round-robin      a new Pod takes the next free address after the last one given\n"
    "                        (host-local IPAM); default: the lowest free one, reused at once\n"
    "  --llama-server PATH   llamacpp members' Pods are real llama-server processes (this binary)\n"
    "  --llama-model PATH    the GGUF model they load (required with --llama-server)\n"
    "  --llama-log-dir DIR   each server's output to DIR/<pod>.log (default: discarded)\n"
    "  --llama-ctx N         their context size in tokens (default 2048)\n"
    "  -v                    more logs (repeat for more)\n"
    "  --help                this text\n"
    "Per member, annotations "
    "sim.modelpool.test/{load-ms,terminate-ms,busy,probe,fail,evict,loading,\n"
    "waiting-for-gpu} change what it does; see test/sim/sim.h.\n";

typedef struct sim_flags {
    const char *kubeconfig;
    sim_options opt;
    int verbose;
    bool help;
} sim_flags;

static int sim_parse_num(const char *flag, const char *v, const char *what, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long ms = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno) {
        fprintf(stderr, "member-sim: %s wants %s, not \"%s\"\n", flag, what, v);
        return -1;
    }
    *out = ms;
    return 0;
}

/* sim_parse_num, within lo..hi. */
static int sim_parse_range(const char *flag, const char *v, const char *what, uint64_t lo,
                           uint64_t hi, uint64_t *out)
{
    if (sim_parse_num(flag, v, what, out) < 0)
        return -1;
    if (*out < lo || *out > hi) {
        fprintf(stderr, "member-sim: %s wants %llu..%llu\n", flag, (unsigned long long)lo,
                (unsigned long long)hi);
        return -1;
    }
    return 0;
}

/* 0, or -1 after saying what was wrong. */
static int sim_parse_flags(sim_flags *f, int argc, char **argv)
{
    enum {
        F_KUBECONFIG = 256,
        F_NAMESPACE,
        F_FINALIZER,
        F_LOAD,
        F_TERMINATE,
        F_IP_FIRST,
        F_IP_COUNT,
        F_IP_BLOCK,
        F_IP_ROUND_ROBIN,
        F_LLAMA_SERVER,
        F_LLAMA_MODEL,
        F_LLAMA_LOG_DIR,
        F_LLAMA_CTX,
        F_HELP
    };
    static const struct option longs[] = {
        {"kubeconfig", required_argument, NULL, F_KUBECONFIG},
        {"namespace", required_argument, NULL, F_NAMESPACE},
        {"finalizer", no_argument, NULL, F_FINALIZER},
        {"load-ms", required_argument, NULL, F_LOAD},
        {"terminate-ms", required_argument, NULL, F_TERMINATE},
        {"ip-first", required_argument, NULL, F_IP_FIRST},
        {"ip-count", required_argument, NULL, F_IP_COUNT},
        {"ip-block", required_argument, NULL, F_IP_BLOCK},
        {"ip-round-robin", no_argument, NULL, F_IP_ROUND_ROBIN},
        {"llama-server", required_argument, NULL, F_LLAMA_SERVER},
        {"llama-model", required_argument, NULL, F_LLAMA_MODEL},
        {"llama-log-dir", required_argument, NULL, F_LLAMA_LOG_DIR},
        {"llama-ctx", required_argument, NULL, F_LLAMA_CTX},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, F_HELP},
        {NULL, 0, NULL, 0},
    };
    *f = (sim_flags){.opt = {.load_ms = 1000, .terminate_ms = 0, .llama_ctx = 2048}};
    opterr = 0;
    int c, block = 0;
    while ((c = getopt_long(argc, argv, ":v", longs, NULL)) != -1) {
        switch (c) {
        case F_KUBECONFIG:
            f->kubeconfig = optarg;
            break;
        case F_NAMESPACE:
            if (!*optarg) {
                fprintf(stderr, "member-sim: --namespace wants a name\n");
                return -1;
            }
            f->opt.namespace_ = optarg;
            break;
        case F_FINALIZER:
            f->opt.finalizer = true;
            break;
        case F_LOAD:
            if (sim_parse_num("--load-ms", optarg, "a number of milliseconds", &f->opt.load_ms) < 0)
                return -1;
            break;
        case F_TERMINATE:
            if (sim_parse_num("--terminate-ms", optarg, "a number of milliseconds",
                              &f->opt.terminate_ms) < 0)
                return -1;
            break;
        case F_IP_FIRST:
        case F_IP_COUNT: {
            uint64_t v;
            const char *flag = c == F_IP_FIRST ? "--ip-first" : "--ip-count";
            if (sim_parse_range(flag, optarg, "a number", 1, 0xffffff, &v) < 0)
                return -1;
            *(c == F_IP_FIRST ? &f->opt.ip_first : &f->opt.ip_count) = (int)v;
            break;
        }
        case F_IP_BLOCK: {
            uint64_t v;
            if (sim_parse_range("--ip-block", optarg, "a number", 1, 254, &v) < 0)
                return -1;
            block = (int)v;
            break;
        }
        case F_IP_ROUND_ROBIN:
            f->opt.ip_round_robin = true;
            break;
        case F_LLAMA_SERVER:
        case F_LLAMA_MODEL:
        case F_LLAMA_LOG_DIR: {
            const char *flag = c == F_LLAMA_SERVER  ? "--llama-server"
                               : c == F_LLAMA_MODEL ? "--llama-model"
                                                    : "--llama-log-dir";
            int mode = c == F_LLAMA_SERVER ? X_OK : c == F_LLAMA_MODEL ? R_OK : W_OK;
            if (access(optarg, mode) < 0) {
                fprintf(stderr, "member-sim: %s %s: %s\n", flag, optarg, strerror(errno));
                return -1;
            }
            *(c == F_LLAMA_SERVER  ? &f->opt.llama_server
              : c == F_LLAMA_MODEL ? &f->opt.llama_model
                                   : &f->opt.llama_log_dir) = optarg;
            break;
        }
        case F_LLAMA_CTX: {
            uint64_t v;
            if (sim_parse_range("--llama-ctx", optarg, "a number of tokens", 64, 1048576, &v) < 0)
                return -1;
            f->opt.llama_ctx = (int)v;
            break;
        }
        case 'v':
            f->verbose++;
            break;
        case F_HELP:
            f->help = true;
            break;
        case ':':
            fprintf(stderr, "member-sim: %s needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "member-sim: unknown flag %s\n", argv[optind - 1]);
            return -1;
        }
    }
    int first = f->opt.ip_first ? f->opt.ip_first : SIM_IP_FIRST_DEFAULT;
    int count = f->opt.ip_count ? f->opt.ip_count : SIM_IP_COUNT_DEFAULT;
    if (first + count - 1 > (block ? 0xfffe : 0xfffffe)) {
        fprintf(stderr, "member-sim: --ip-first + --ip-count passes 127.%d.255.254\n",
                block ? block : 255);
        return -1;
    }
    if (!f->opt.llama_server != !f->opt.llama_model) {
        fprintf(stderr, "member-sim: --llama-server and --llama-model go together\n");
        return -1;
    }
    f->opt.ip_first = block << 16 | first;
    f->opt.ip_count = count;
    if (optind < argc) {
        fprintf(stderr, "member-sim: unexpected argument \"%s\"\n", argv[optind]);
        return -1;
    }
    return 0;
}

static void sim_on_signal(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    (void)ud;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        log_kv(LOG_INFO, "stopping", "signal", strsignal((int)si.ssi_signo), NULL);
    ev_stop(loop);
}

int main(int argc, char **argv)
{
    sim_flags f;
    if (sim_parse_flags(&f, argc, argv) < 0) {
        fputs("Run member-sim --help for the flags.\n", stderr);
        return 2;
    }
    if (f.help) {
        fputs(sim_usage, stdout);
        return 0;
    }
    log_setup(stderr, f.verbose >= 2 ? LOG_TRACE : f.verbose ? LOG_DEBUG : LOG_INFO, LOG_TEXT);

    kube_config cfg = {0};
    kube_error err = {0};
    kube_config_opts co = {.kubeconfig = f.kubeconfig};
    if (kube_config_resolve(&cfg, &co, &err) < 0) {
        fprintf(stderr, "member-sim: %s\n", err.message);
        kube_error_clear(&err);
        return 1;
    }
    free(cfg.user_agent);
    cfg.user_agent = strdup("member-sim/" MP_VERSION);

    /* Signals arrive as reads on the loop; SIGPIPE from a closed probe connection is no reason
     * to die. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    signal(SIGPIPE, SIG_IGN);
    int sfd = -1;
    if (sigprocmask(SIG_BLOCK, &set, NULL) == 0)
        sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);

    int rc = 1;
    ev_loop *loop = ev_new();
    kube_client *client = loop ? kube_client_new(loop, &cfg, &err) : NULL;
    sim *s = client ? sim_new(loop, client, &f.opt) : NULL;
    if (sfd < 0 || !loop) {
        fprintf(stderr, "member-sim: cannot set up the event loop: %s\n", strerror(errno));
    } else if (!client) {
        fprintf(stderr, "member-sim: %s\n", err.message);
    } else if (!s) {
        fprintf(stderr, "member-sim: out of memory\n");
    } else if (ev_fd_set(loop, sfd, EV_READ, sim_on_signal, NULL) < 0 || sim_start(s) < 0) {
        fprintf(stderr, "member-sim: cannot start\n");
    } else {
        log_kv(LOG_INFO, "started", "server", cfg.server, "namespace",
               f.opt.namespace_ ? f.opt.namespace_ : "(all)", "llama_server",
               f.opt.llama_server ? f.opt.llama_server : "(simulated)", NULL);
        rc = ev_run(loop) < 0 ? 1 : 0;
        sim_print_requests(s, stdout);
    }
    sim_free(s);
    kube_client_free(client);
    ev_free(loop);
    if (sfd >= 0)
        close(sfd);
    kube_config_clear(&cfg);
    kube_error_clear(&err);
    return rc;
}

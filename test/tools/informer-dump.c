/* informer-dump: runs one of the project's informers against a real API server and prints, one
 * flushed line per callback, what it delivered (SYNCED, ADD, UPD, DEL, ERR) and the informer's
 * counters after every change (STATS), for end-to-end tests to grep. Exits 0 on SIGTERM/SIGINT. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "informer/informer.h"
#include "kube/client.h"
#include "kube/config.h"
#include "loop/ev.h"

/* Counters can change without a callback (a watch that ends cleanly and is resumed, a bookmark),
 * so they are also compared on a timer and printed when they moved. */
enum { DUMP_STATS_POLL_MS = 100 };

typedef struct dump {
    ev_loop *loop;
    informer *inf;
    informer_stats shown; /* the counters of the last STATS line */
    bool shown_any;
    uint64_t timer;
} dump;

static void dump_usage(FILE *f)
{
    fprintf(f, "usage: informer-dump [--kubeconfig PATH] [--group G] [--version V] --resource R\n"
               "                     [--namespace NS] [--page-size N] [--label-selector SEL]\n");
}

static void dump_stats(dump *d, bool only_if_changed)
{
    informer_stats s;
    informer_stats_get(d->inf, &s);
    if (only_if_changed && d->shown_any && memcmp(&s, &d->shown, sizeof(s)) == 0)
        return;
    d->shown = s;
    d->shown_any = true;
    printf("STATS lists=%llu relists=%llu restarts=%llu events=%llu errors=%llu\n",
           (unsigned long long)s.lists, (unsigned long long)s.relists,
           (unsigned long long)s.watch_restarts, (unsigned long long)s.watch_events,
           (unsigned long long)s.errors);
    fflush(stdout);
}

static const char *dump_rv(const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *rv =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion"));
    return rv ? rv : "-";
}

/* One line for an object event, then the counters: a test reading the event line can rely on the
 * STATS line after it being current. */
static void dump_object(dump *d, const char *what, const cJSON *obj, bool with_rv)
{
    char *key = store_key_of(obj);
    if (with_rv)
        printf("%s %s rv=%s\n", what, key ? key : "?", dump_rv(obj));
    else
        printf("%s %s\n", what, key ? key : "?");
    free(key);
    fflush(stdout);
    dump_stats(d, false);
}

static void dump_on_add(void *ud, const void *obj)
{
    dump_object(ud, "ADD", obj, true);
}

static void dump_on_update(void *ud, const void *old_obj, const void *new_obj)
{
    (void)old_obj;
    dump_object(ud, "UPD", new_obj, true);
}

static void dump_on_delete(void *ud, const void *obj)
{
    dump_object(ud, "DEL", obj, false);
}

static void dump_on_synced(void *ud)
{
    dump *d = ud;
    printf("SYNCED\n");
    fflush(stdout);
    dump_stats(d, false);
}

/* stdout keeps to "ERR <code> <reason>" so tests can match it exactly; the message, which holds
 * the server's or curl's words, goes to stderr for the log. */
static void dump_on_error(void *ud, const kube_error *err)
{
    dump *d = ud;
    printf("ERR %ld %s\n", err->http_code, err->reason ? err->reason : "-");
    fflush(stdout);
    fprintf(stderr, "informer-dump: %s\n", err->message ? err->message : "(no message)");
    dump_stats(d, false);
}

static void dump_on_poll(ev_loop *loop, void *ud)
{
    dump *d = ud;
    dump_stats(d, true);
    d->timer = ev_timer_add(loop, DUMP_STATS_POLL_MS, dump_on_poll, d);
}

static void dump_on_signal(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    (void)ud;
    struct signalfd_siginfo si;
    /* Drained so the fd does not stay readable; which signal it was does not matter. */
    if (read(fd, &si, sizeof(si)) < 0)
        perror("informer-dump: read signalfd");
    ev_stop(loop);
}

static int dump_parse_long(const char *s, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"group", required_argument, NULL, 'g'},
        {"version", required_argument, NULL, 'V'},
        {"resource", required_argument, NULL, 'r'},
        {"namespace", required_argument, NULL, 'n'},
        {"page-size", required_argument, NULL, 'p'},
        {"label-selector", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    informer_config ic = {.group = "", .version = "v1", .codec = &store_codec_json_trimmed};
    kube_config_opts copts = {0};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'k':
            copts.kubeconfig = optarg;
            break;
        case 'g':
            ic.group = optarg;
            break;
        case 'V':
            ic.version = optarg;
            break;
        case 'r':
            ic.resource = optarg;
            break;
        case 'n':
            ic.namespace_ = *optarg ? optarg : NULL;
            break;
        case 'p':
            if (dump_parse_long(optarg, &ic.page_size) < 0) {
                fprintf(stderr, "informer-dump: bad --page-size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'l':
            ic.label_selector = optarg;
            break;
        case 'h':
            dump_usage(stdout);
            return 0;
        default:
            dump_usage(stderr);
            return 2;
        }
    }
    if (optind != argc || !ic.resource || !*ic.resource || !*ic.version) {
        dump_usage(stderr);
        return 2;
    }

    /* Blocked before anything starts, so a signal that comes early is queued, not fatal. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        perror("informer-dump: sigprocmask");
        return 1;
    }

    int rc = 1, sfd = -1;
    kube_config cfg = {0};
    kube_error err = {0};
    kube_client *client = NULL;
    dump d = {0};
    if (kube_config_resolve(&cfg, &copts, &err) < 0) {
        fprintf(stderr, "informer-dump: %s\n", err.message);
        goto out;
    }
    if (!(d.loop = ev_new())) {
        perror("informer-dump: ev_new");
        goto out;
    }
    if (!(client = kube_client_new(d.loop, &cfg, &err))) {
        fprintf(stderr, "informer-dump: %s\n", err.message);
        goto out;
    }
    informer_handlers h = {
        .on_add = dump_on_add,
        .on_update = dump_on_update,
        .on_delete = dump_on_delete,
        .on_synced = dump_on_synced,
        .on_error = dump_on_error,
        .ud = &d,
    };
    if (!(d.inf = informer_new(d.loop, client, &ic, &h))) {
        fprintf(stderr, "informer-dump: cannot create the informer\n");
        goto out;
    }
    if ((sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        perror("informer-dump: signalfd");
        goto out;
    }
    int r = ev_fd_set(d.loop, sfd, EV_READ, dump_on_signal, &d);
    if (r < 0) {
        fprintf(stderr, "informer-dump: ev_fd_set: %s\n", strerror(-r));
        goto out;
    }
    if ((r = informer_start(d.inf)) < 0) {
        fprintf(stderr, "informer-dump: informer_start: %s\n", strerror(-r));
        goto out;
    }
    if (!(d.timer = ev_timer_add(d.loop, DUMP_STATS_POLL_MS, dump_on_poll, &d))) {
        fprintf(stderr, "informer-dump: cannot arm the stats timer\n");
        goto out;
    }
    if ((r = ev_run(d.loop)) < 0) {
        fprintf(stderr, "informer-dump: ev_run: %s\n", strerror(-r));
        goto out;
    }
    rc = 0;

out:
    /* The informer before the client (it cancels its call), the client before the loop. */
    informer_free(d.inf);
    kube_client_free(client);
    if (d.loop) {
        ev_timer_cancel(d.loop, d.timer);
        if (sfd >= 0)
            ev_fd_clear(d.loop, sfd);
        ev_free(d.loop);
    }
    if (sfd >= 0)
        close(sfd);
    kube_config_clear(&cfg);
    kube_error_clear(&err);
    return rc;
}

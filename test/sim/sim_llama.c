/* sim_llama: one llama-server process per Pod. Its load is watched by polling /health over libcurl
 * on the loop (llama.cpp answers 503 while it loads the model, 200 once it can serve) and its exit
 * by a pidfd, so the simulator reacts to both at once and never blocks, except when it frees a
 * process that is still running: that one is SIGKILLed and reaped on the spot. */
#include "sim_llama.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "loop/evcurl.h"

/* How often /health is asked while the model loads: the Pod turns ready at most this late. */
#define SIM_LLAMA_POLL_MS 50

struct sim_llama {
    ev_loop *loop;
    sim_llama_state state;
    pid_t pid;
    int pidfd;
    int wait_status;
    bool stopping;
    uint64_t poll_timer, kill_timer;
    evcurl *ec;
    CURL *health; /* the /health request in flight, or NULL */
    char url[64];
    sim_llama_fn changed;
    void *ud;
};

int sim_llama_can_bind(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, rc = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static void sim_llama_health_end(sim_llama *l)
{
    if (!l->health)
        return;
    curl_multi_remove_handle(evcurl_multi(l->ec), l->health);
    curl_easy_cleanup(l->health);
    l->health = NULL;
}

static size_t sim_llama_discard(char *data, size_t size, size_t n, void *ud)
{
    (void)data;
    (void)ud;
    return size * n;
}

static void sim_llama_poll(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_llama *l = ud;
    l->poll_timer = 0;
    if (l->state != SIM_LLAMA_LOADING || l->stopping || l->health)
        return;
    CURL *h = curl_easy_init();
    if (!h) {
        l->poll_timer = ev_timer_add(l->loop, SIM_LLAMA_POLL_MS, sim_llama_poll, l);
        return;
    }
    curl_easy_setopt(h, CURLOPT_URL, l->url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sim_llama_discard);
    curl_easy_setopt(h, CURLOPT_PRIVATE, l);
    if (curl_multi_add_handle(evcurl_multi(l->ec), h) != CURLM_OK) {
        curl_easy_cleanup(h);
        l->poll_timer = ev_timer_add(l->loop, SIM_LLAMA_POLL_MS, sim_llama_poll, l);
        return;
    }
    l->health = h;
}

/* A /health answer: 200 is loaded; anything else (503 while loading, refused before it listens)
 * is asked again a moment later. */
static void sim_llama_progress(void *ud)
{
    sim_llama *l = ud;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(evcurl_multi(l->ec), &left))) {
        if (msg->msg != CURLMSG_DONE || msg->easy_handle != l->health)
            continue;
        long code = 0;
        if (msg->data.result == CURLE_OK)
            curl_easy_getinfo(l->health, CURLINFO_RESPONSE_CODE, &code);
        sim_llama_health_end(l);
        if (code == 200 && l->state == SIM_LLAMA_LOADING && !l->stopping) {
            l->state = SIM_LLAMA_READY;
            l->changed(l->ud);
            return;
        }
        if (l->state == SIM_LLAMA_LOADING && !l->stopping)
            l->poll_timer = ev_timer_add(l->loop, SIM_LLAMA_POLL_MS, sim_llama_poll, l);
        return;
    }
}

static void sim_llama_forget_process(sim_llama *l)
{
    ev_timer_cancel(l->loop, l->poll_timer);
    ev_timer_cancel(l->loop, l->kill_timer);
    l->poll_timer = l->kill_timer = 0;
    sim_llama_health_end(l);
    if (l->pidfd >= 0) {
        ev_fd_clear(l->loop, l->pidfd);
        close(l->pidfd);
        l->pidfd = -1;
    }
    l->state = SIM_LLAMA_EXITED;
}

static void sim_llama_on_exit(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    sim_llama *l = ud;
    int st = 0;
    pid_t r = waitpid(l->pid, &st, WNOHANG);
    if (r == 0)
        return; /* not yet (a spurious wakeup) */
    l->wait_status = r == l->pid ? st : 0;
    sim_llama_forget_process(l);
    l->changed(l->ud);
}

static void sim_llama_on_kill(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_llama *l = ud;
    l->kill_timer = 0;
    if (l->state != SIM_LLAMA_EXITED)
        kill(l->pid, SIGKILL);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void sim_llama_exec(char *const argv[], const char *log_path, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a simulator that dies takes its servers along */
    if (getppid() != parent)
        _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* the simulator blocks SIGTERM for its signalfd */
    signal(SIGPIPE, SIG_DFL);
    int in = open("/dev/null", O_RDONLY);
    int out = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
        _exit(127);
    for (int fd = 3; fd < 4096; fd++)
        close(fd);
    execv(argv[0], argv);
    _exit(127);
}

sim_llama *sim_llama_start(ev_loop *loop, const sim_llama_config *cfg, const char *name,
                           const char *ip, int port, const char *alias, sim_llama_fn changed,
                           void *ud, char *err, size_t errlen)
{
    sim_llama *l = calloc(1, sizeof(*l));
    char log_path[4096] = "/dev/null";
    if (cfg->log_dir)
        snprintf(log_path, sizeof(log_path), "%s/%s.log", cfg->log_dir, name);
    evcurl *ec = l ? evcurl_new(loop, sim_llama_progress, l) : NULL;
    if (!ec) {
        snprintf(err, errlen, "out of memory");
        free(l);
        return NULL;
    }
    *l = (sim_llama){.loop = loop, .pidfd = -1, .ec = ec, .changed = changed, .ud = ud};
    snprintf(l->url, sizeof(l->url), "http://%s:%d/health", ip, port);

    char port_s[8], ctx_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    snprintf(ctx_s, sizeof(ctx_s), "%d", cfg->ctx_size);
    /* One slot, one thread (the machine is shared), its own name for /v1/models and answers;
     * /slots on explicitly (the idle probe reads it); no web UI. */
    char *const argv[] = {(char *)cfg->server,
                          "-m",
                          (char *)cfg->model,
                          "--host",
                          (char *)ip,
                          "--port",
                          port_s,
                          "--alias",
                          (char *)alias,
                          "-np",
                          "1",
                          "-c",
                          ctx_s,
                          "-t",
                          "1",
                          "-tb",
                          "1",
                          "--slots",
                          "--no-webui",
                          NULL};
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        evcurl_free(l->ec);
        free(l);
        return NULL;
    }
    if (pid == 0)
        sim_llama_exec(argv, log_path, parent);
    l->pid = pid;
    l->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (l->pidfd < 0 || ev_fd_set(loop, l->pidfd, EV_READ, sim_llama_on_exit, l) < 0 ||
        !(l->poll_timer = ev_timer_add(loop, SIM_LLAMA_POLL_MS, sim_llama_poll, l))) {
        snprintf(err, errlen, "cannot watch llama-server %d: %s", (int)pid, strerror(errno));
        sim_llama_free(l);
        return NULL;
    }
    return l;
}

sim_llama_state sim_llama_state_of(const sim_llama *l)
{
    return l->state;
}

int sim_llama_pid(const sim_llama *l)
{
    return (int)l->pid;
}

int sim_llama_wait_status(const sim_llama *l)
{
    return l->wait_status;
}

void sim_llama_stop(sim_llama *l)
{
    if (!l || l->stopping || l->state == SIM_LLAMA_EXITED)
        return;
    l->stopping = true;
    ev_timer_cancel(l->loop, l->poll_timer);
    l->poll_timer = 0;
    sim_llama_health_end(l);
    kill(l->pid, SIGTERM);
    l->kill_timer = ev_timer_add(l->loop, SIM_LLAMA_KILL_MS, sim_llama_on_kill, l);
}

void sim_llama_free(sim_llama *l)
{
    if (!l)
        return;
    if (l->state != SIM_LLAMA_EXITED && l->pid > 0) {
        kill(l->pid, SIGKILL);
        while (waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    sim_llama_forget_process(l);
    evcurl_free(l->ec);
    free(l);
}

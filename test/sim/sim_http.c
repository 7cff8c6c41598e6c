/* sim_http: libmicrohttpd in "external epoll" mode. MHD keeps its own epoll set; its fd becomes
 * readable whenever a listener or connection needs work, and MHD_get_timeout says when idle
 * connections must be looked at, so one ev fd and one ev timer drive the whole server. */
#include "sim_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Idle keep-alive connections (a prober's) are closed after this, so a stopped prober leaves no
 * sockets behind. */
#define SIM_HTTP_IDLE_TIMEOUT_S 30

struct sim_http {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    uint64_t timer;
    sim_http_answer_fn answer;
    void *ud;
    char lasterr[160]; /* MHD's last log line: the reason a start failed */
};

/* The first call for a request only announces it; MHD expects the answer on a later call. */
static char sim_http_seen;

__attribute__((format(printf, 2, 0))) static void sim_http_on_log(void *cls, const char *fmt,
                                                                  va_list ap)
{
    sim_http *h = cls;
    vsnprintf(h->lasterr, sizeof(h->lasterr), fmt, ap);
    h->lasterr[strcspn(h->lasterr, "\n")] = 0;
}

static enum MHD_Result sim_http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                           const char *method, const char *version,
                                           const char *upload, size_t *upload_size, void **req_cls)
{
    (void)version;
    (void)upload;
    sim_http *h = cls;
    if (!*req_cls) {
        *req_cls = &sim_http_seen;
        return MHD_YES;
    }
    if (*upload_size) { /* a body nobody reads */
        *upload_size = 0;
        return MHD_YES;
    }
    sim_reply r;
    h->answer(h->ud, method, url, &r);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(r.body), r.body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    enum MHD_Result ret = MHD_add_response_header(resp, "Content-Type", r.content_type);
    if (ret == MHD_YES)
        ret = MHD_queue_response(conn, r.code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void sim_http_on_timer(ev_loop *loop, void *ud);

/* After every run MHD may have work queued that no fd will announce (a connection whose request
 * is complete, one that timed out); its timeout says so, 0 meaning "run again now". */
static void sim_http_run(sim_http *h)
{
    MHD_run(h->d);
    ev_timer_cancel(h->loop, h->timer);
    h->timer = 0;
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) == MHD_YES)
        h->timer = ev_timer_add(h->loop, ms, sim_http_on_timer, h);
}

static void sim_http_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    sim_http *h = ud;
    h->timer = 0;
    sim_http_run(h);
}

static void sim_http_on_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    sim_http_run(ud);
}

sim_http *sim_http_start(ev_loop *loop, const char *ip, int port, sim_http_answer_fn answer,
                         void *ud, char *err, size_t errlen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port < 1 || port > 65535 || inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad address %s:%d", ip, port);
        return NULL;
    }
    sim_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->answer = answer;
    h->ud = ud;
    h->epfd = -1;
    /* Address reuse: a Pod that comes back on the same IP must not wait out TIME_WAIT. */
    h->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
                            sim_http_on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SIM_HTTP_IDLE_TIMEOUT_S,
                            MHD_OPTION_EXTERNAL_LOGGER, sim_http_on_log, h, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info)
        h->epfd = info->epoll_fd;
    if (h->epfd < 0 || ev_fd_set(loop, h->epfd, EV_READ, sim_http_on_fd, h) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", ip, port,
                 h->lasterr[0] ? h->lasterr : "MHD could not start");
        h->epfd = -1;
        sim_http_stop(h);
        return NULL;
    }
    return h;
}

void sim_http_stop(sim_http *h)
{
    if (!h)
        return;
    if (h->epfd >= 0)
        ev_fd_clear(h->loop, h->epfd);
    ev_timer_cancel(h->loop, h->timer);
    if (h->d)
        MHD_stop_daemon(h->d);
    free(h);
}

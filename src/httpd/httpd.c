/* httpd: libmicrohttpd in "external epoll" mode. MHD keeps its own epoll set; its fd becomes
 * readable whenever a listener or connection needs work, and MHD_get_timeout says when idle
 * connections must be looked at, so one ev fd and one ev timer drive the whole server. Waiting
 * (for an answer, a paused body's reader, a stream's next bytes) is a suspended connection: MHD
 * neither polls nor times it out, and nothing spins; resuming it schedules a run from the loop.
 * Here: the daemon's start and stop, its runs, and each request's hand-out (refused at intake, an
 * immediate answer, or a req whose life is req.c's and whose streamed answer is stream.c's). */
#include "httpd/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "httpd/intake.h"
#include "httpd_internal.h"

/* Idle keep-alive connections (a scraper's, a prober's) are closed after this. */
#define HTTPD_IDLE_TIMEOUT_S 30u
/* Scrapers and probes are few; a flood of connections must not exhaust our fds. */
#define HTTPD_MAX_CONNECTIONS 64u
/* MHD's own cap is this far above ours: connections evicted (shut down) in one run are closed by
 * MHD in a later one, and a newcomer must not find MHD full meanwhile. Past it, MHD stops
 * accepting (new connections wait in the listen backlog) until one closes. */
#define HTTPD_EVICT_SLACK 16u

/* TLS 1.2 and 1.3 only, as Go servers (kubebuilder's metrics endpoint) accept by default. */
#define HTTPD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* The first call for a request only announces it; MHD expects the answer on a later call. */
static char httpd_seen;
/* What the URI callback hands the first call for a request whose raw path httpd refuses. */
static char httpd_odd_path;

static void httpd_on_timer(ev_loop *loop, void *ud);

int httpd_parse_bind(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
                     size_t errlen)
{
    if (!s || !*s) {
        snprintf(err, errlen, "empty bind address (want HOST:PORT, :PORT, or 0 to disable)");
        return -1;
    }
    if (strcmp(s, "0") == 0)
        return 1;
    const char *colon = strrchr(s, ':');
    if (!colon) {
        snprintf(err, errlen, "bind address %s has no port (want HOST:PORT, :PORT, or 0)", s);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || port < 0 || port > 65535) {
        snprintf(err, errlen, "bind address %s: bad port", s);
        return -1;
    }
    size_t hl = (size_t)(colon - s);
    char host[64];
    bool v6 = hl >= 2 && s[0] == '[' && s[hl - 1] == ']';
    if (v6) {
        s++;
        hl -= 2;
    }
    if (hl >= sizeof(host)) {
        snprintf(err, errlen, "bind address %s: bad host", s);
        return -1;
    }
    memcpy(host, s, hl);
    host[hl] = 0;
    memset(ss, 0, sizeof(*ss));
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            snprintf(err, errlen, "bind address [%s]: not an IPv6 address", host);
            return -1;
        }
        *len = sizeof(*a);
        return 0;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    if (hl && inet_pton(AF_INET, host, &a->sin_addr) != 1) {
        snprintf(err, errlen,
                 "bind address %s: host %s is not an IPv4 address (names are not "
                 "resolved; use [v6] for IPv6)",
                 s, host);
        return -1;
    }
    *len = sizeof(*a);
    return 0;
}

__attribute__((format(printf, 2, 0))) static void httpd_on_log(void *cls, const char *fmt,
                                                               va_list ap)
{
    httpd *h = cls;
    vsnprintf(h->lasterr, sizeof(h->lasterr), fmt, ap);
    h->lasterr[strcspn(h->lasterr, "\n")] = 0;
}

void httpd_kick(httpd *h)
{
    if (h->stopping) /* a cancel answering another request: MHD is not run again */
        return;
    ev_timer_cancel(h->loop, h->timer);
    h->timer = ev_timer_add(h->loop, 0, httpd_on_timer, h);
}

/* MHD hands the raw request target here before it decodes the path; what this returns is the
 * request's first *req_cls. */
static void *httpd_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    return httpd_intake_raw_path(uri) ? &httpd_odd_path : NULL;
}

static enum MHD_Result httpd_on_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                        const char *value)
{
    (void)kind;
    httpd_framing_add(cls, key, value ? value : "");
    return MHD_YES;
}

/* Why a new request is refused (400) before its owner sees it, or NULL. */
static const char *httpd_intake(struct MHD_Connection *conn, const char *url, bool odd_path)
{
    httpd_framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, httpd_on_framing, &f);
    const char *why = httpd_framing_check(&f);
    if (!why && odd_path)
        why = "the path's percent-encoding is ambiguous (an encoded reserved character, "
              "backslash or control character, or a bad escape)";
    return why ? why : httpd_intake_path(url);
}

static httpd_reply httpd_refusal(const char *why)
{
    char *body = NULL;
    int n = asprintf(&body, "bad request: %s\n", why);
    return (httpd_reply){.code = 400, .body = n < 0 ? NULL : body, .len = n < 0 ? 0 : (size_t)n};
}

static enum MHD_Result httpd_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                        const char *method, const char *version, const char *upload,
                                        size_t *upload_size, void **req_cls)
{
    httpd *h = cls;
    httpd_conns_busy(conn);
    bool odd_path = *req_cls == &httpd_odd_path;
    if (odd_path)
        *req_cls = NULL;
    if (h->answer) { /* the immediate form: no body wanted */
        if (!*req_cls) {
            *req_cls = &httpd_seen;
            const char *why = httpd_intake(conn, url, odd_path);
            if (why) {
                httpd_reply rep = httpd_refusal(why);
                return httpd_queue(conn, &rep);
            }
            return MHD_YES;
        }
        if (*upload_size) {
            *upload_size = 0;
            return MHD_YES;
        }
        httpd_reply r = {0};
        h->answer(h->ud, method, url, &r);
        return httpd_queue(conn, &r);
    }
    httpd_req *r = *req_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof(*r))))
            return MHD_NO;
        *r = (httpd_req){.h = h, .conn = conn, .method = method, .path = url, .next = h->reqs};
        r->http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        if (h->reqs)
            h->reqs->prev = r;
        h->reqs = r;
        *req_cls = r; /* freed when MHD says the request is over (httpd_on_completed) */
        const char *why = httpd_intake(conn, url, odd_path);
        if (why) {
            httpd_reply rep = httpd_refusal(why);
            httpd_req_reply(r, &rep);
        } else {
            h->request(h->ud, r);
        }
    }
    return httpd_req_step(r, upload, upload_size);
}

static void httpd_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    httpd_conns_waiting(conn);
    httpd_req *r = *req_cls;
    *req_cls = NULL;
    if (!r || r == (void *)&httpd_seen || r == (void *)&httpd_odd_path)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        httpd_req_gone(r);
    httpd_req_free(r);
}

/* After every run MHD may have work queued that no fd will announce (a connection whose request
 * is complete, one that timed out); its timeout says so, 0 meaning "run again now". */
static void httpd_run(httpd *h)
{
    MHD_run(h->d);
    ev_timer_cancel(h->loop, h->timer);
    h->timer = 0;
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) == MHD_YES)
        h->timer = ev_timer_add(h->loop, ms, httpd_on_timer, h);
}

static void httpd_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    httpd *h = ud;
    h->timer = 0;
    httpd_run(h);
}

static void httpd_on_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)fd;
    (void)events;
    httpd_run(ud);
}

httpd *httpd_start(ev_loop *loop, const char *bind, httpd_answer_fn answer, void *ud, char *err,
                   size_t errlen)
{
    httpd_config cfg = {.bind = bind, .answer = answer, .ud = ud};
    return httpd_start_config(loop, &cfg, err, errlen);
}

httpd *httpd_start_config(ev_loop *loop, const httpd_config *cfg, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    const char *bind = cfg->bind;
    int rc = httpd_parse_bind(bind, &ss, &sl, err, errlen);
    if (rc != 0) {
        if (rc > 0)
            snprintf(err, errlen, "bind address 0 means no server");
        return NULL;
    }
    bool tls = cfg->tls_cert_pem || cfg->tls_key_pem;
    if (tls && (!cfg->tls_cert_pem || !cfg->tls_key_pem)) {
        snprintf(err, errlen, "TLS needs both a certificate and a key");
        return NULL;
    }
    if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "libmicrohttpd was built without TLS support");
        return NULL;
    }
    httpd *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->answer = cfg->answer;
    h->request = cfg->request;
    h->ud = cfg->ud;
    h->epfd = -1;
    unsigned limit = cfg->max_connections ? cfg->max_connections : HTTPD_MAX_CONNECTIONS;
    if (!(h->conns = httpd_conns_new(loop, limit, cfg->head_timeout_ms))) {
        snprintf(err, errlen, "out of memory");
        httpd_stop(h);
        return NULL;
    }
    if (tls &&
        (!(h->tls_cert = strdup(cfg->tls_cert_pem)) || !(h->tls_key = strdup(cfg->tls_key_pem)))) {
        snprintf(err, errlen, "out of memory");
        httpd_stop(h);
        return NULL;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (h->request)
        flags |= MHD_ALLOW_SUSPEND_RESUME; /* its wake-up fd sits in MHD's epoll set */
    if (tls)
        flags |= MHD_USE_TLS;
    uint16_t port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)HTTPD_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    if (!tls)
        tls_opts[0].option = MHD_OPTION_END;
    /* MHD sets SO_REUSEADDR by default (a restarted server need not wait out TIME_WAIT) but not
     * SO_REUSEPORT, so a port another process holds is an error, not a shared listener. */
    h->d = MHD_start_daemon(
        flags, port, NULL, NULL, httpd_on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s ? cfg->idle_timeout_s : HTTPD_IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, limit + HTTPD_EVICT_SLACK, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        cfg->max_per_client, MHD_OPTION_NOTIFY_CONNECTION, httpd_conns_notify, h->conns,
        MHD_OPTION_URI_LOG_CALLBACK, httpd_on_uri, h, MHD_OPTION_EXTERNAL_LOGGER, httpd_on_log, h,
        MHD_OPTION_NOTIFY_COMPLETED, httpd_on_completed, h, MHD_OPTION_ARRAY, tls_opts,
        MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info)
        h->epfd = info->epoll_fd;
    info = h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    h->port = info ? info->port : port;
    if (h->epfd < 0 || ev_fd_set(loop, h->epfd, EV_READ, httpd_on_fd, h) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", bind,
                 h->lasterr[0] ? h->lasterr : "MHD could not start");
        h->epfd = -1;
        httpd_stop(h);
        return NULL;
    }
    return h;
}

size_t httpd_pending(const httpd *h)
{
    size_t n = 0;
    for (const httpd_req *r = h ? h->reqs : NULL; r; r = r->next)
        n++;
    return n;
}

size_t httpd_connections(const httpd *h)
{
    return h ? httpd_conns_open(h->conns) : 0;
}

int httpd_port(const httpd *h)
{
    return h->port;
}

void httpd_stop(httpd *h)
{
    if (!h)
        return;
    if (h->epfd >= 0)
        ev_fd_clear(h->loop, h->epfd);
    ev_timer_cancel(h->loop, h->timer);
    h->timer = 0;
    h->stopping = true;
    /* Work started for requests not finished ends first, while every request is still here; no
     * cancel can free one (only MHD does, and it does not run from a cancel). */
    for (httpd_req *r = h->reqs; r; r = r->next)
        httpd_req_gone(r);
    /* MHD refuses to stop with suspended connections: resumed unanswered, they are closed. */
    for (httpd_req *r = h->reqs; r; r = r->next)
        if (r->suspended) {
            httpd_req_unwatch(r); /* before MHD closes the fd */
            r->suspended = false;
            MHD_resume_connection(r->conn);
        }
    if (h->d)
        MHD_stop_daemon(h->d);
    httpd_conns_free(h->conns);
    /* Requests MHD dropped without telling (suspended ones, at shutdown), cancelled above. */
    while (h->reqs)
        httpd_req_free(h->reqs);
    if (h->tls_key)
        explicit_bzero(h->tls_key, strlen(h->tls_key)); /* no private key left in freed memory */
    free(h->tls_key);
    free(h->tls_cert);
    free(h);
}

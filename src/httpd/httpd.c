/* httpd: libmicrohttpd in "external epoll" mode. MHD keeps its own epoll set; its fd becomes
 * readable whenever a listener or connection needs work, and MHD_get_timeout says when idle
 * connections must be looked at, so one ev fd and one ev timer drive the whole server. Requests
 * are GETs with no body worth reading; anything uploaded is discarded. An answer that needs the
 * network (an access review) suspends its connection until the reply comes. */
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

/* Idle keep-alive connections (a scraper's, a prober's) are closed after this. */
#define HTTPD_IDLE_TIMEOUT_S 30
/* Scrapers and probes are few; a flood of connections must not exhaust our fds. */
#define HTTPD_MAX_CONNECTIONS 64

/* TLS 1.2 and 1.3 only, as Go servers (kubebuilder's metrics endpoint) accept by default. */
#define HTTPD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct httpd_req {
    httpd *h;
    struct MHD_Connection *conn;
    const char *method, *path; /* MHD's, valid for the request's life */
    httpd_reply reply;
    bool replied;
    bool suspended;
    httpd_req *prev, *next; /* the server's list of requests being answered asynchronously */
};

struct httpd {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    int port;
    uint64_t timer;
    httpd_answer_fn answer;
    httpd_request_fn request;
    void *ud;
    char *tls_cert, *tls_key; /* kept until MHD stops: it may read them after the start */
    httpd_req *reqs;
    char lasterr[160]; /* MHD's last log line: the reason a start failed */
};

/* The first call for a request only announces it; MHD expects the answer on a later call. */
static char httpd_seen;

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

static enum MHD_Result httpd_queue(struct MHD_Connection *conn, httpd_reply *r)
{
    struct MHD_Response *resp =
        r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        r->body = NULL;
        return MHD_NO;
    }
    r->body = NULL; /* the response owns it now */
    enum MHD_Result ret = MHD_add_response_header(
        resp, "Content-Type", r->content_type ? r->content_type : "text/plain; charset=utf-8");
    if (ret == MHD_YES && r->code == 401)
        ret = MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (ret == MHD_YES)
        ret = MHD_queue_response(conn, r->code ? r->code : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void httpd_req_unlink(httpd_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        r->h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

static void httpd_req_free(httpd_req *r)
{
    httpd_req_unlink(r);
    free(r->reply.body);
    free(r);
}

static enum MHD_Result httpd_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                        const char *method, const char *version, const char *upload,
                                        size_t *upload_size, void **req_cls)
{
    (void)version;
    (void)upload;
    httpd *h = cls;
    if (!*req_cls) {
        *req_cls = &httpd_seen;
        return MHD_YES;
    }
    if (*upload_size) { /* a body nobody reads */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*req_cls == &httpd_seen && h->answer) {
        httpd_reply r = {0};
        h->answer(h->ud, method, url, &r);
        return httpd_queue(conn, &r);
    }
    httpd_req *r = *req_cls;
    if (r == (void *)&httpd_seen) {
        if (!(r = calloc(1, sizeof(*r))))
            return MHD_NO;
        *r = (httpd_req){.h = h, .conn = conn, .method = method, .path = url, .next = h->reqs};
        if (h->reqs)
            h->reqs->prev = r;
        h->reqs = r;
        *req_cls = r; /* freed when MHD says the request is over (httpd_on_completed) */
        h->request(h->ud, r);
        if (!r->replied) {
            r->suspended = true;
            MHD_suspend_connection(conn);
            return MHD_YES;
        }
    }
    if (!r->replied) /* resumed without a reply: the server is stopping */
        return MHD_YES;
    return httpd_queue(conn, &r->reply);
}

static void httpd_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    if (*req_cls && *req_cls != (void *)&httpd_seen)
        httpd_req_free(*req_cls);
    *req_cls = NULL;
}

const char *httpd_req_method(const httpd_req *r)
{
    return r->method;
}

const char *httpd_req_path(const httpd_req *r)
{
    return r->path;
}

const char *httpd_req_header(const httpd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

void *httpd_req_ud(const httpd_req *r)
{
    return r->h->ud;
}

void httpd_req_reply(httpd_req *r, httpd_reply *reply)
{
    r->reply = *reply;
    *reply = (httpd_reply){0};
    r->replied = true;
    if (!r->suspended)
        return; /* answered inside the request callback: httpd_on_request queues it */
    r->suspended = false;
    MHD_resume_connection(r->conn);
    /* MHD picks the connection up on its next run; run it from the loop, not from inside the
     * caller (which may be any callback). */
    httpd *h = r->h;
    ev_timer_cancel(h->loop, h->timer);
    h->timer = ev_timer_add(h->loop, 0, httpd_on_timer, h);
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
    h->d = MHD_start_daemon(flags, port, NULL, NULL, httpd_on_request, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)HTTPD_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)HTTPD_MAX_CONNECTIONS, MHD_OPTION_EXTERNAL_LOGGER,
                            httpd_on_log, h, MHD_OPTION_NOTIFY_COMPLETED, httpd_on_completed, h,
                            MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
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
    /* MHD refuses to stop with suspended connections: resumed unanswered, they are closed. */
    for (httpd_req *r = h->reqs; r; r = r->next)
        if (r->suspended) {
            r->suspended = false;
            MHD_resume_connection(r->conn);
        }
    if (h->d)
        MHD_stop_daemon(h->d);
    /* Requests MHD dropped without telling (suspended ones, at shutdown). */
    while (h->reqs)
        httpd_req_free(h->reqs);
    if (h->tls_key)
        explicit_bzero(h->tls_key, strlen(h->tls_key)); /* no private key left in freed memory */
    free(h->tls_key);
    free(h->tls_cert);
    free(h);
}

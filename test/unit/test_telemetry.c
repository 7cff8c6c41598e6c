/* Tests of the HTTP endpoints: bind-address parsing, and real requests over loopback to the
 * libmicrohttpd server driven by the project's event loop (the client socket runs on the same
 * loop): /metrics, /healthz, /readyz, 404 and 405. And secure /metrics against a scripted API
 * server, a scraper that leaves while its TokenReview is in flight (no TLS close_notify): with an
 * RST it is seen gone, the review is cancelled (the API call aborted) and no verdict reaches its
 * request; with a FIN (over TLS, a half-close looks the same) the request stays and gets it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_main.h"
#include <openssl/ssl.h>

#include "loop_run.h"
#include "loopback.h"
#include "peer.h"
#include "scripted_http.h"

#include "app/telemetry.h"
#include "httpd/httpd.h"
#include "kube/client.h"
#include "log/log.h"
#include "loop/ev.h"

static void test_parse_bind(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    char err[160];
    assert_int_equal(httpd_parse_bind(":8080", &ss, &len, err, sizeof(err)), 0);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(ntohs(v4->sin_port), 8080);
    assert_int_equal(v4->sin_addr.s_addr, htonl(INADDR_ANY));
    assert_int_equal(httpd_parse_bind("127.0.0.1:0", &ss, &len, err, sizeof(err)), 0);
    assert_int_equal(v4->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    assert_int_equal(httpd_parse_bind("[::1]:9", &ss, &len, err, sizeof(err)), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 9);
    assert_int_equal(httpd_parse_bind("0", &ss, &len, err, sizeof(err)), 1);

    static const struct {
        const char *in, *why;
    } bad[] = {
        {"", "empty"},
        {"8080", "has no port"},
        {":", "bad port"},
        {":x", "bad port"},
        {":-1", "bad port"},
        {":65536", "bad port"},
        {"host:80", "not an IPv4 address"},
        {"[1.2.3.4]:80", "not an IPv6 address"},
        {"[::1:80", "not an IPv4 address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        assert_int_equal(httpd_parse_bind(bad[i].in, &ss, &len, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].why))
            fail_msg("%s: message '%s' lacks '%s'", bad[i].in, err, bad[i].why);
    }
}

/* The full answer (status line, headers, body) to method path on 127.0.0.1:port. */
static const char *request(ev_loop *loop, test_peer *c, int port, const char *method,
                           const char *path)
{
    test_peer_http(loop, c, port, method, path, NULL);
    test_loop_run(loop, 10000);
    close(c->fd);
    return c->buf;
}

static const char *test_unready;

static const char *ready_fn(void *ud)
{
    (void)ud;
    return test_unready;
}

/* Telemetry serving plain HTTP on two ports the kernel picks, ready as test_unready says. */
static telemetry *serve_plain(ev_loop *loop)
{
    telemetry *t = telemetry_new();
    assert_non_null(t);
    char err[200];
    assert_int_equal(
        telemetry_serve(t, loop, "127.0.0.1:0", "127.0.0.1:0", ready_fn, NULL, err, sizeof(err)),
        0);
    return t;
}

static void test_endpoints(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    telemetry *t = serve_plain(loop);
    int mp = telemetry_metrics_port(t), hp = telemetry_health_port(t);
    assert_true(mp > 0 && hp > 0 && mp != hp);
    test_peer c;

    telemetry_api_request(t, "LIST", 200);
    telemetry_api_request(t, "PATCH", 409);
    const char *r = request(loop, &c, mp, "GET", "/metrics");
    assert_non_null(strstr(r, "HTTP/1.0 200") ? r : strstr(r, "HTTP/1.1 200"));
    assert_non_null(strstr(r, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r, "modelpool_api_requests_total{verb=\"LIST\",code=\"200\"} 1\n"));
    assert_non_null(strstr(r, "modelpool_api_requests_total{verb=\"PATCH\",code=\"409\"} 1\n"));
    assert_non_null(strstr(r, "\nprocess_resident_memory_bytes "));
    assert_non_null(strstr(r, "\nprocess_cpu_seconds_total "));
    assert_non_null(strstr(r, "\nprocess_open_fds "));
    assert_non_null(strstr(r, "\nprocess_start_time_seconds "));

    /* Not ready: 503 and the reason, as the callback words it, on one line. */
    test_unready = "caches not synced yet";
    r = request(loop, &c, hp, "GET", "/readyz");
    assert_non_null(strstr(r, " 503 "));
    assert_non_null(strstr(r, "\r\n\r\ncaches not synced yet\n"));
    test_unready = NULL;
    r = request(loop, &c, hp, "GET", "/readyz");
    assert_non_null(strstr(r, " 200 "));
    r = request(loop, &c, hp, "GET", "/healthz");
    assert_non_null(strstr(r, " 200 "));
    assert_non_null(strstr(r, "\r\n\r\nok\n"));
    /* Each server serves its own paths only; writes are refused. */
    r = request(loop, &c, hp, "GET", "/metrics");
    assert_non_null(strstr(r, " 404 "));
    r = request(loop, &c, mp, "GET", "/healthz");
    assert_non_null(strstr(r, " 404 "));
    r = request(loop, &c, mp, "POST", "/metrics");
    assert_non_null(strstr(r, " 405 "));

    /* A port in use is a clear error. */
    telemetry *t2 = telemetry_new();
    char addr[32], err[200];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mp);
    assert_int_equal(telemetry_serve(t2, loop, addr, "0", ready_fn, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "metrics server: cannot listen on 127.0.0.1:"));
    telemetry_free(t2);
    telemetry_free(t);
    ev_free(loop);
}

/* ---- secure /metrics: the scraper leaves before the API server answers ---- */

/* A TLS scraper on its own thread (the server's handshake needs the loop, which the main thread
 * runs): connects, sends a scrape with a bearer token and returns, the connection left open. */
typedef struct scraper {
    int port;
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    bool sent;
} scraper;

static void *scraper_run(void *ud)
{
    scraper *s = ud;
    s->fd = test_connect_loopback(s->port);
    s->ctx = SSL_CTX_new(TLS_client_method());
    s->ssl = s->ctx ? SSL_new(s->ctx) : NULL;
    if (!s->ssl || SSL_set_fd(s->ssl, s->fd) != 1 || SSL_connect(s->ssl) != 1)
        return NULL;
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: Bearer made-up-token\r\n\r\n";
    s->sent = SSL_write(s->ssl, req, sizeof(req) - 1) == (int)sizeof(req) - 1;
    return NULL;
}

/* The scraper leaves as a killed process or a dropped link does: no close_notify, a FIN (or an
 * RST with reset). */
static void scraper_leave(scraper *s, bool reset)
{
    if (reset) {
        struct linger lg = {1, 0};
        assert_int_equal(setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    }
    close(s->fd);
    SSL_free(s->ssl); /* sends nothing: no SSL_shutdown */
    SSL_CTX_free(s->ctx);
}

/* The log written so far holds what. */
static bool log_has(FILE *f, const char *what)
{
    static char text[65536];
    fflush(f);
    ssize_t n = pread(fileno(f), text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = 0;
    return strstr(text, what) != NULL;
}

typedef struct api_watch {
    srv *api;   /* set: until it has no connection left (the review's call was aborted) */
    FILE *logf; /* else: until the verdict was logged (it reached the request) */
    uint64_t timer;
} api_watch;

static void api_idle_poll(ev_loop *loop, void *ud)
{
    api_watch *w = ud;
    w->timer = 0;
    bool done = w->api ? true : log_has(w->logf, "metrics scrape refused");
    for (int i = 0; w->api && i < SRV_MAX; i++)
        done &= w->api->conns[i].fd < 0;
    if (!done) {
        w->timer = ev_timer_add(loop, 5, api_idle_poll, w);
        return;
    }
    ev_stop(loop);
}

static void guard_expired(ev_loop *loop, void *ud)
{
    bool *expired = ud;
    *expired = true;
    ev_stop(loop);
}

static void test_secure_scraper_gone(void **state)
{
    (void)state;
    FILE *logf = tmpfile();
    assert_non_null(logf);
    log_setup(logf, LOG_TRACE, LOG_TEXT);
    for (int reset = 0; reset < 2; reset++) {
        fflush(logf);
        assert_int_equal(ftruncate(fileno(logf), 0), 0);
        rewind(logf);
        ev_loop *loop = ev_new();
        assert_non_null(loop);
        /* The TokenReview is answered late: the scraper is gone by then. Were the answer to
         * reach the freed request, ASan would report the use after free here. */
        srv_reply replies[] = {
            {.match = "POST /apis/authentication.k8s.io/v1/tokenreviews",
             .delay_ms = 300,
             .pieces = {NULL}},
        };
        srv api;
        srv_start(&api, loop, replies, 1);
        replies[0].pieces[0] = srv_own(
            &api, srv_http("201 Created", "",
                           "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":false}}"));
        api.stop_at = 1;
        kube_config cfg = {0};
        kube_error kerr = {0};
        assert_true(asprintf(&cfg.server, "http://127.0.0.1:%d", api.port) > 0);
        kube_client *kc = kube_client_new(loop, &cfg, &kerr);
        kube_config_clear(&cfg);
        assert_non_null(kc);
        telemetry *t = telemetry_new();
        assert_non_null(t);
        char err[300];
        telemetry_secure_opts so = {.client = kc};
        assert_int_equal(telemetry_secure(t, &so, err, sizeof(err)), 0);
        assert_int_equal(
            telemetry_serve(t, loop, "127.0.0.1:0", "0", ready_fn, NULL, err, sizeof(err)), 0);

        /* The scrape's TokenReview reaches the API server, then the scraper leaves. */
        scraper s = {.port = telemetry_metrics_port(t), .fd = -1};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, scraper_run, &s), 0);
        bool expired = false;
        uint64_t guard = ev_timer_add(loop, 10000, guard_expired, &expired);
        ev_run(loop);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_false(expired);
        assert_true(s.sent);
        assert_int_equal(api.nrequests, 1);
        scraper_leave(&s, reset);

        if (reset) {
            /* Seen gone: the review is cancelled, its call aborted (the API server's connection
             * closes before its answer is due) and its verdict never reaches the request. */
            api_watch w = {.api = &api, .logf = logf};
            w.timer = ev_timer_add(loop, 5, api_idle_poll, &w);
            ev_run(loop);
            ev_timer_cancel(loop, w.timer);
            assert_false(log_has(logf, "metrics scrape"));
        } else {
            /* A FIN over TLS may be a client that only half-closed and still reads: the request
             * stays, and the verdict is answered to it (the write then fails). */
            api_watch w = {.logf = logf};
            w.timer = ev_timer_add(loop, 5, api_idle_poll, &w);
            ev_run(loop);
            ev_timer_cancel(loop, w.timer);
        }
        ev_timer_cancel(loop, guard);
        assert_false(expired);
        assert_int_equal(api.nrequests, 1);

        telemetry_free(t);
        kube_client_free(kc);
        srv_stop(&api);
        ev_free(loop);
    }
    log_setup(NULL, LOG_INFO, LOG_TEXT);
    fclose(logf);
}

/* The finding: 64 idle connections to the probe port kept /healthz out. Now 200 idle ones (and
 * 200 on /metrics' port) do not: each new connection closes the one waiting longest. The gauge
 * counts each server's connections. */
static void test_idle_flood(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    telemetry *t = serve_plain(loop);
    int mp = telemetry_metrics_port(t), hp = telemetry_health_port(t);
    enum { FLOOD = 200 };
    static int idle[2 * FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        idle[i] = test_connect_loopback(hp);
        idle[FLOOD + i] = test_connect_loopback(mp);
    }
    test_peer c;
    const char *r = request(loop, &c, hp, "GET", "/healthz");
    assert_non_null(strstr(r, " 200 "));
    r = request(loop, &c, mp, "GET", "/metrics");
    assert_non_null(strstr(r, " 200 "));
    assert_non_null(strstr(r, "\nmodelpool_http_connections{port=\"health\"} "));
    assert_non_null(strstr(r, "\nmodelpool_http_connections{port=\"metrics\"} "));
    for (int i = 0; i < 2 * FLOOD; i++)
        close(idle[i]);
    telemetry_free(t);
    ev_free(loop);
}

TEST_MAIN(cmocka_unit_test(test_parse_bind), cmocka_unit_test(test_endpoints),
          cmocka_unit_test(test_secure_scraper_gone), cmocka_unit_test(test_idle_flood))

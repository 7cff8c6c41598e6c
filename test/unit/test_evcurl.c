/* Tests of evcurl against a tiny HTTP responder on loopback, both driven by one ev loop: the
 * progress callback sees finished transfers and may add handles (so it runs outside curl's
 * callbacks) and even free the evcurl; curl's timer reaches the loop; and evcurl_free leaves no
 * fd registered and no timer pending. ev cannot be asked what it watches, so the fds curl used
 * (recorded by open/close socket callbacks) are re-created after the free and must register as
 * new ones, which fails when the loop still holds a stale registration for the number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loop_run.h"
#include "loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/evcurl.h"

#define T_MAX 8

/* ---- the responder: answers every request on a connection, or never answers ---- */

typedef struct srv srv;

typedef struct {
    srv *s;
    int fd;
    char in[4096];
    size_t inlen;
} srv_conn;

struct srv {
    ev_loop *loop;
    int lfd, port;
    bool silent; /* read requests but never answer */
    int stop_at; /* ev_stop when this many requests arrived (0: never) */
    int nrequests, naccepts;
    srv_conn conns[T_MAX];
};

static const char srv_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

static void srv_close(srv_conn *k)
{
    if (k->fd < 0)
        return;
    ev_fd_clear(k->s->loop, k->fd);
    close(k->fd);
    k->fd = -1;
    k->inlen = 0;
}

static void srv_on_read(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    srv_conn *k = ud;
    srv *s = k->s;
    ssize_t n = recv(fd, k->in + k->inlen, sizeof(k->in) - 1 - k->inlen, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        srv_close(k);
        return;
    }
    k->inlen += (size_t)n;
    k->in[k->inlen] = '\0';
    char *end;
    while ((end = strstr(k->in, "\r\n\r\n"))) { /* GETs only: a request ends with its head */
        size_t len = (size_t)(end - k->in) + 4;
        memmove(k->in, k->in + len, k->inlen - len + 1);
        k->inlen -= len;
        s->nrequests++;
        if (!s->silent)
            assert_int_equal(send(fd, srv_answer, strlen(srv_answer), MSG_NOSIGNAL),
                             (ssize_t)strlen(srv_answer));
        if (s->nrequests == s->stop_at)
            ev_stop(loop);
    }
}

/* The first connection slot free; the test fails when none is. */
static srv_conn *srv_free_conn(srv *s)
{
    for (int i = 0; i < T_MAX; i++)
        if (s->conns[i].fd < 0)
            return &s->conns[i];
    fail_msg("too many connections");
    return NULL;
}

static void srv_on_accept(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    srv *s = ud;
    srv_conn *k = srv_free_conn(s);
    k->fd = test_accept_watch(loop, fd, srv_on_read, k);
    s->naccepts += k->fd >= 0;
}

static void srv_start(srv *s, ev_loop *loop, bool silent, int stop_at)
{
    *s = (srv){.loop = loop, .silent = silent, .stop_at = stop_at};
    for (int i = 0; i < T_MAX; i++)
        s->conns[i] = (srv_conn){.s = s, .fd = -1};
    s->lfd = test_listen_loopback(8, &s->port);
    assert_int_equal(ev_fd_set(loop, s->lfd, EV_READ, srv_on_accept, s), 0);
}

static void srv_stop(srv *s)
{
    for (int i = 0; i < T_MAX; i++)
        srv_close(&s->conns[i]);
    ev_fd_clear(s->loop, s->lfd);
    close(s->lfd);
}

/* ---- the curl side ---- */

typedef struct {
    ev_loop *loop;
    evcurl *ec;
    int port;
    int progress;     /* calls of the progress callback */
    int started;      /* transfers started */
    int want;         /* transfers to run one after the other */
    bool free_at_end; /* evcurl_free from inside the progress callback after the last one */
    long timeout_ms;  /* of the first transfer (0: none) */
    CURL *easy;       /* in flight */
    int done;
    CURLcode result[T_MAX];
    long code[T_MAX];
    char body[T_MAX][16];
    size_t len;
    int fds[T_MAX]; /* sockets curl opened */
    bool closed[T_MAX];
    int nfds;
    bool timed_out;
} t_state;

static size_t t_write(char *p, size_t size, size_t n, void *ud)
{
    t_state *t = ud;
    size_t len = size * n;
    char *b = t->body[t->done];
    if (t->len + len >= sizeof(t->body[0]))
        return 0;
    memcpy(b + t->len, p, len);
    t->len += len;
    b[t->len] = '\0';
    return len;
}

static curl_socket_t t_open(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)purpose;
    t_state *t = ud;
    int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    assert_true(fd >= 0);
    assert_true(t->nfds < T_MAX);
    t->closed[t->nfds] = false;
    t->fds[t->nfds++] = fd;
    return fd;
}

static int t_close(void *ud, curl_socket_t fd)
{
    t_state *t = ud;
    for (int i = 0; i < t->nfds; i++)
        if (t->fds[i] == fd && !t->closed[i])
            t->closed[i] = true;
    return close(fd);
}

static void t_start(t_state *t)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%d", t->port, t->started);
    CURL *e = curl_easy_init();
    assert_non_null(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, t_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, t_open);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, t_close);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, t);
    if (t->started == 0 && t->timeout_ms)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, t->timeout_ms);
    /* Inside a curl callback this would be CURLM_RECURSIVE_API_CALL. */
    assert_int_equal(curl_multi_add_handle(evcurl_multi(t->ec), e), CURLM_OK);
    t->easy = e;
    t->started++;
    t->len = 0;
}

/* libcurl refuses add_handle from inside its callbacks (CURLM_RECURSIVE_API_CALL), so a handle
 * added and removed again shows that progress does not run inside one. */
static void t_not_in_curl(CURLM *multi)
{
    CURL *probe = curl_easy_init();
    assert_non_null(probe);
    assert_int_equal(curl_multi_add_handle(multi, probe), CURLM_OK);
    assert_int_equal(curl_multi_remove_handle(multi, probe), CURLM_OK);
    curl_easy_cleanup(probe);
}

static void t_progress(void *ud)
{
    t_state *t = ud;
    t->progress++;
    t_not_in_curl(evcurl_multi(t->ec));
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(evcurl_multi(t->ec), &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *e = m->easy_handle;
        assert_ptr_equal(e, t->easy);
        assert_true(t->done < T_MAX);
        t->result[t->done] = m->data.result;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t->code[t->done]);
        t->done++;
        assert_int_equal(curl_multi_remove_handle(evcurl_multi(t->ec), e), CURLM_OK);
        curl_easy_cleanup(e);
        t->easy = NULL;
        if (t->started < t->want) {
            t_start(t);
        } else if (t->free_at_end) {
            evcurl_free(t->ec); /* with the connection still cached */
            t->ec = NULL;
            ev_stop(t->loop);
            return;
        } else {
            ev_stop(t->loop);
        }
    }
}

/* t's evcurl on t's loop, with t_progress. */
static void t_evcurl(t_state *t)
{
    t->ec = evcurl_new(t->loop, t_progress, t);
    assert_non_null(t->ec);
}

static void t_guard(ev_loop *loop, void *ud)
{
    t_state *t = ud;
    t->timed_out = true;
    ev_stop(loop);
}

static void t_run(t_state *t, uint64_t ms)
{
    uint64_t guard = ev_timer_add(t->loop, ms, t_guard, t);
    assert_int_equal(ev_run(t->loop), 0);
    ev_timer_cancel(t->loop, guard);
}

static void t_never_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)events;
    (void)ud;
    fail_msg("fd %d reported after the free", fd);
}

/* After evcurl_free: curl closed every socket it opened, none is still registered in the loop,
 * and the loop runs idle with no timer of evcurl's left to fire. */
static void t_check_freed(t_state *t)
{
    assert_true(t->nfds > 0);
    for (int i = 0; i < t->nfds; i++)
        assert_true(t->closed[i]);
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    for (int i = 0; i < t->nfds; i++) {
        int fd = t->fds[i];
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue; /* the number went to someone else meanwhile (the responder) */
        assert_int_equal(dup2(sp[0], fd), fd);
        /* A stale registration would make this an EPOLL_CTL_MOD of an unwatched fd: ENOENT. */
        assert_int_equal(ev_fd_set(t->loop, fd, EV_READ, t_never_fd, NULL), 0);
        ev_fd_clear(t->loop, fd);
        close(fd);
    }
    close(sp[0]);
    close(sp[1]);
    int progress = t->progress;
    t_run(t, 200); /* a timer of a freed evcurl would run here (a use after free) */
    assert_true(t->timed_out);
    assert_int_equal(t->progress, progress);
}

static void test_transfers_and_free_in_progress(void **state)
{
    (void)state;
    ev_loop *loop = test_loop_new();
    srv s;
    srv_start(&s, loop, false, 0);
    t_state t = {.loop = loop, .port = s.port, .want = 2, .free_at_end = true};
    t_evcurl(&t);
    t_start(&t);
    t_run(&t, 5000);
    assert_false(t.timed_out);
    assert_null(t.ec);
    assert_int_equal(t.done, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(t.result[i], CURLE_OK);
        assert_int_equal(t.code[i], 200);
        assert_string_equal(t.body[i], "hello");
    }
    assert_true(t.progress >= 2);
    /* The second transfer reused the first's connection, so the free had one cached to close. */
    assert_int_equal(s.nrequests, 2);
    assert_int_equal(s.naccepts, 1);
    assert_int_equal(t.nfds, 1);
    t_check_freed(&t);
    srv_stop(&s);
    ev_free(loop);
}

static void test_timeout_and_free_in_flight(void **state)
{
    (void)state;
    ev_loop *loop = test_loop_new();
    srv s;
    srv_start(&s, loop, true, 2);
    t_state t = {.loop = loop, .port = s.port, .want = 2, .timeout_ms = 100};
    t_evcurl(&t);
    t_start(&t);
    t_run(&t, 5000); /* stops when the second request reached the responder */
    assert_false(t.timed_out);
    /* Only curl's timer could end the first transfer: the responder never answers. */
    assert_int_equal(t.done, 1);
    assert_int_equal(t.result[0], CURLE_OPERATION_TIMEDOUT);
    assert_non_null(t.easy);
    assert_int_equal(curl_multi_remove_handle(evcurl_multi(t.ec), t.easy), CURLM_OK);
    curl_easy_cleanup(t.easy);
    evcurl_free(t.ec);
    evcurl_free(NULL);
    t_check_freed(&t);
    assert_int_equal(t.done, 1);
    srv_stop(&s);
    ev_free(loop);
}

/* A transfer added and removed before the loop ever ran: its 0 ms start timer must go with it. */
static void test_free_before_run(void **state)
{
    (void)state;
    ev_loop *loop = test_loop_new();
    t_state t = {.loop = loop, .port = 9 /* discard: never reached */};
    t_evcurl(&t);
    t_start(&t);
    assert_int_equal(curl_multi_remove_handle(evcurl_multi(t.ec), t.easy), CURLM_OK);
    curl_easy_cleanup(t.easy);
    evcurl_free(t.ec);
    t_run(&t, 100);
    assert_true(t.timed_out);
    assert_int_equal(t.progress, 0);
    assert_int_equal(t.nfds, 0);
    ev_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transfers_and_free_in_progress),
        cmocka_unit_test(test_timeout_and_free_in_flight),
        cmocka_unit_test(test_free_before_run),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}

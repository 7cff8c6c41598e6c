/* sim_hang: a hung model server as a client sees it: the TCP connection is accepted and the
 * request read, so the client waits for an answer (its own timeout decides), not on a refused
 * connection. Plain sockets on the loop, since the project's httpd answers every request at once.
 */
#include "sim_hang.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A request line and headers larger than this are not a probe: the connection is dropped. */
#define SIM_HANG_MAX_REQUEST 4096

typedef struct sim_hang_conn sim_hang_conn;
struct sim_hang_conn {
    sim_hang_conn *next;
    sim_hang *h;
    int fd;
    size_t len;
    bool complete; /* the headers have all arrived */
    char buf[SIM_HANG_MAX_REQUEST + 1];
};

struct sim_hang {
    ev_loop *loop;
    int fd;
    sim_hang_held_fn held;
    void *ud;
    sim_hang_conn *conns;
};

static void sim_hang_conn_close(sim_hang_conn *c)
{
    sim_hang *h = c->h;
    for (sim_hang_conn **pp = &h->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    ev_fd_clear(h->loop, c->fd);
    close(c->fd);
    free(c);
}

/* The request line's path, or "" for a request that has none. */
static void sim_hang_path(const sim_hang_conn *c, char *path, size_t len)
{
    const char *sp = strchr(c->buf, ' ');
    size_t n = sp ? strcspn(sp + 1, " \r\n") : 0;
    if (n >= len)
        n = len - 1;
    memcpy(path, sp ? sp + 1 : "", n);
    path[n] = 0;
}

static void sim_hang_tell(const sim_hang_conn *c)
{
    char path[1024];
    sim_hang_path(c, path, sizeof(path));
    c->h->held(c->h->ud, path);
}

/* Reads what the client sends; a closed or misbehaving connection is dropped. Bytes after the
 * headers are read and ignored, so a client's further sends never fill the socket. */
static void sim_hang_on_conn(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    (void)events;
    sim_hang_conn *c = ud;
    char sink[512];
    for (;;) {
        char *dst = c->complete ? sink : c->buf + c->len;
        size_t room = c->complete ? sizeof(sink) : SIM_HANG_MAX_REQUEST - c->len;
        if (room == 0)
            break; /* headers too large */
        ssize_t n = read(fd, dst, room);
        if (n > 0) {
            if (!c->complete) {
                c->len += (size_t)n;
                c->buf[c->len] = 0;
                c->complete = strstr(c->buf, "\r\n\r\n") != NULL;
                if (c->complete && c->h->held)
                    sim_hang_tell(c);
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        break; /* EOF or an error */
    }
    sim_hang_conn_close(c);
}

static void sim_hang_on_accept(ev_loop *loop, int fd, int events, void *ud)
{
    (void)events;
    sim_hang *h = ud;
    for (;;) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return; /* EAGAIN, or a connection that went away before we took it */
        sim_hang_conn *c = calloc(1, sizeof(*c));
        if (!c || ev_fd_set(loop, cfd, EV_READ, sim_hang_on_conn, c) < 0) {
            free(c);
            close(cfd);
            continue;
        }
        c->h = h;
        c->fd = cfd;
        c->next = h->conns;
        h->conns = c;
    }
}

sim_hang *sim_hang_start(ev_loop *loop, const char *ip, int port, sim_hang_held_fn held, void *ud,
                         char *err, size_t errlen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad address %s", ip);
        return NULL;
    }
    sim_hang *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->held = held;
    h->ud = ud;
    h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    /* As the httpd listener it replaces (MHD sets it too): rebinding right after a switch must not
     * wait for the old connections' TIME_WAIT. */
    if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(h->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(h->fd, 16) < 0 ||
        ev_fd_set(loop, h->fd, EV_READ, sim_hang_on_accept, h) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", ip, port, strerror(errno));
        if (h->fd >= 0)
            close(h->fd);
        free(h);
        return NULL;
    }
    return h;
}

/* Answers c's request as answer says, in one write (a small reply on loopback fits the socket
 * buffer; a short write only truncates what a test reads). */
static void sim_hang_answer(sim_hang_conn *c, sim_hang_answer_fn answer, void *ud)
{
    char path[1024];
    sim_hang_path(c, path, sizeof(path));
    sim_reply r;
    answer(ud, path, &r);
    char out[1536];
    int n = snprintf(out, sizeof(out),
                     "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     r.code, r.code < 400 ? "OK" : "Error", r.content_type, strlen(r.body), r.body);
    if (n > 0 && (size_t)n < sizeof(out)) {
        ssize_t w = write(c->fd, out, (size_t)n);
        (void)w; /* a client that gave up meanwhile reads nothing: nothing to do */
    }
}

void sim_hang_stop(sim_hang *h, sim_hang_answer_fn answer, void *ud)
{
    if (!h)
        return;
    ev_fd_clear(h->loop, h->fd);
    close(h->fd);
    while (h->conns) {
        sim_hang_conn *c = h->conns;
        if (answer && c->complete)
            sim_hang_answer(c, answer, ud);
        sim_hang_conn_close(c);
    }
    free(h);
}

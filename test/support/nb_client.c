/* nb_client: the non-blocking client of nb_client.h. */
#include "nb_client.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop_run.h"
#include "loopback.h"

static void nb_client_on_io(ev_loop *loop, int fd, int events, void *ud);

char nb_client_pattern(size_t i)
{
    return (char)(i * 7 + i / 251);
}

void nb_client_watch(nb_client *c)
{
    int ev = EV_READ | (c->out_off < c->out_len ? EV_WRITE : 0);
    assert_int_equal(ev_fd_set(c->loop, c->fd, ev, nb_client_on_io, c), 0);
}

static void nb_client_on_io(ev_loop *loop, int fd, int events, void *ud)
{
    nb_client *c = ud;
    if (events & EV_WRITE) {
        while (c->out_off < c->out_len) {
            ssize_t n = send(fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (n > 0) {
                c->out_off += (size_t)n;
                continue;
            }
            if (n < 0 && errno == EAGAIN) {
                c->blocked = true;
                if (c->on_blocked)
                    c->on_blocked(c);
            } else {
                c->out_off = c->out_len; /* the server closed its side: stop sending */
            }
            break;
        }
        if (c->out_off == c->out_len)
            nb_client_watch(c);
    }
    if (!(events & EV_READ))
        return;
    if (c->in_cap - c->in_len < 65536) {
        c->in_cap = c->in_cap * 2 + 65536;
        c->in = realloc(c->in, c->in_cap + 1);
        assert_non_null(c->in);
    }
    ssize_t n = read(fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n > 0) {
        c->in_len += (size_t)n;
        c->in[c->in_len] = 0;
        if (c->on_data)
            c->on_data(c);
        return;
    }
    if (n < 0 && errno == EAGAIN)
        return;
    c->closed = true;
    ev_fd_clear(loop, fd);
    ev_stop(loop);
}

void nb_client_start(nb_client *c, ev_loop *loop, int port, const char *head, size_t body_len)
{
    *c = (nb_client){.loop = loop};
    c->fd = test_connect_loopback(port);
    int sndbuf = 65536; /* small, so a server that stops reading blocks the client soon */
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    assert_int_equal(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
    size_t hl = strlen(head);
    c->out_len = hl + body_len;
    c->out = malloc(c->out_len + 1);
    assert_non_null(c->out);
    memcpy(c->out, head, hl);
    for (size_t i = 0; i < body_len; i++)
        c->out[hl + i] = nb_client_pattern(i);
    nb_client_watch(c);
}

void nb_client_append(nb_client *c, const char *data, size_t len)
{
    c->out = realloc(c->out, c->out_len + len + 1);
    assert_non_null(c->out);
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

void nb_client_start_chunked(nb_client *c, ev_loop *loop, int port, const char *head,
                             size_t body_len, size_t chunk)
{
    nb_client_start(c, loop, port, head, 0);
    char *piece = malloc(chunk);
    assert_non_null(piece);
    char line[32];
    for (size_t sent = 0; sent < body_len;) {
        size_t k = body_len - sent < chunk ? body_len - sent : chunk;
        nb_client_append(c, line, (size_t)snprintf(line, sizeof(line), "%zx\r\n", k));
        for (size_t i = 0; i < k; i++, sent++)
            piece[i] = nb_client_pattern(sent);
        nb_client_append(c, piece, k);
        nb_client_append(c, "\r\n", 2);
    }
    nb_client_append(c, "0\r\n\r\n", 5);
    free(piece);
    nb_client_watch(c);
}

void nb_client_get(nb_client *c, ev_loop *loop, int port, const char *path)
{
    char head[256];
    snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    nb_client_start(c, loop, port, head, 0);
}

void nb_client_run(nb_client *c)
{
    test_loop_run(c->loop, 20000);
    assert_true(c->closed);
}

const char *nb_client_body(const nb_client *c)
{
    const char *body = strstr(c->in, "\r\n\r\n");
    assert_non_null(body);
    return body + 4;
}

void nb_client_half_close(nb_client *c)
{
    size_t left = c->out_len - c->out_off;
    assert_int_equal(send(c->fd, c->out + c->out_off, left, 0), (ssize_t)left);
    c->out_off = c->out_len;
    assert_int_equal(shutdown(c->fd, SHUT_WR), 0);
    nb_client_watch(c);
}

void nb_client_leave(nb_client *c)
{
    ev_fd_clear(c->loop, c->fd);
    close(c->fd);
    c->fd = -1;
}

static void nb_client_poll_leave(ev_loop *loop, void *ud)
{
    nb_client *c = ud;
    if (*c->leave_when)
        nb_client_leave(c);
    else
        assert_true(ev_timer_add(loop, 1, nb_client_poll_leave, c) > 0);
}

void nb_client_leave_when(nb_client *c, const bool *flag)
{
    c->leave_when = flag;
    assert_true(ev_timer_add(c->loop, 1, nb_client_poll_leave, c) > 0);
}

void nb_client_free(nb_client *c)
{
    if (c->fd >= 0) {
        ev_fd_clear(c->loop, c->fd);
        close(c->fd);
    }
    free(c->out);
    free(c->in);
    c->fd = -1;
    c->out = c->in = NULL;
}

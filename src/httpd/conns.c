/* httpd_conns: eviction at the limit, the head timeout, and the count of open connections, for one
 * httpd server. Waiting connections sit in a list ordered by the time they began to wait (oldest
 * first), so the next head deadline is its first element and the one to evict is found among its
 * first few; one ev timer serves the deadlines. The heaviest client pays: each connection belongs
 * to its client (the peer's address, counted in a map), and the victim is, among the first few,
 * one of the client holding the most connections. A flood that reopens each connection closed at
 * once therefore churns through its own connections and never through a probe from another
 * address that has not sent its head yet (age alone would pick the probe once the flood had opened
 * as many new ones as the limit). Memory: one connection record per open connection, one client
 * record per address with an open connection. */
#include "conns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "util/strmap.h"

/* Waiting connections looked at, oldest first, for one to evict. */
#define HTTPD_EVICT_SCAN 16

typedef struct httpd_conn httpd_conn;

/* The connections kept open from one address. */
typedef struct httpd_client {
    strmap_node node;
    char addr[INET6_ADDRSTRLEN];
    size_t kept; /* open and not closing */
    size_t refs; /* open */
} httpd_client;

/* A list of connections, oldest first. */
typedef struct httpd_conn_list {
    httpd_conn *first, *last;
} httpd_conn_list;

struct httpd_conn {
    httpd_conns *cs;
    httpd_client *client;
    int fd;
    bool busy;    /* inside a request */
    bool closing; /* shut down here; MHD has yet to close it */
    uint64_t since_ms;
    httpd_conn_list *in;
    httpd_conn *prev, *next;
};

struct httpd_conns {
    ev_loop *loop;
    unsigned limit, head_ms;
    size_t open;             /* accepted, not yet closed by MHD */
    size_t kept;             /* open and not closing */
    httpd_conn_list waiting; /* for a request head */
    httpd_conn_list other;   /* busy or closing */
    strmap clients;          /* httpd_client by address */
    uint64_t timer;
};

static void httpd_conns_on_timer(ev_loop *loop, void *ud);

static void httpd_conn_unlink(httpd_conn *c)
{
    httpd_conn_list *l = c->in;
    if (!l)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->last = c->prev;
    c->prev = c->next = NULL;
    c->in = NULL;
}

static void httpd_conn_append(httpd_conn *c, httpd_conn_list *l)
{
    httpd_conn_unlink(c);
    c->prev = l->last;
    if (l->last)
        l->last->next = c;
    else
        l->first = c;
    l->last = c;
    c->in = l;
}

/* A timer is pending whenever a head deadline is. */
static void httpd_conns_arm(httpd_conns *cs)
{
    if (cs->timer || !cs->head_ms || !cs->waiting.first)
        return;
    uint64_t now = ev_now_ms(), due = cs->waiting.first->since_ms + cs->head_ms;
    cs->timer = ev_timer_add(cs->loop, due > now ? due - now : 0, httpd_conns_on_timer, cs);
}

/* MHD owns the socket and closes it: a shutdown makes it readable (end of stream), MHD reads
 * that on its next run and finishes the connection. The client sees the close at once. */
static void httpd_conn_close(httpd_conn *c)
{
    httpd_conns *cs = c->cs;
    shutdown(c->fd, SHUT_RDWR);
    c->closing = true;
    cs->kept--;
    c->client->kept--;
    httpd_conn_append(c, &cs->other);
}

/* Bytes the kernel holds for c that MHD has not read yet: a request on its way in (a fresh probe,
 * accepted in the same run as a burst of newer connections), which is not the one to evict. */
static bool httpd_conn_has_input(const httpd_conn *c)
{
    int n = 0;
    return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* Among the first few waiting connections (never the newcomer), one of the client holding the most
 * connections; among those of equal weight, the oldest with nothing to read, else the oldest.
 * NULL when none. */
static httpd_conn *httpd_conns_victim(httpd_conns *cs, const httpd_conn *newcomer)
{
    httpd_conn *best = NULL;
    bool best_input = false;
    int scanned = 0;
    for (httpd_conn *c = cs->waiting.first; c && scanned < HTTPD_EVICT_SCAN; c = c->next) {
        if (c == newcomer)
            continue;
        scanned++;
        if (best && c->client->kept < best->client->kept)
            continue;
        if (best && c->client->kept == best->client->kept && !best_input)
            continue; /* the older one, already without input, stays */
        bool input = httpd_conn_has_input(c);
        if (best && c->client->kept == best->client->kept && input)
            continue;
        best = c;
        best_input = input;
    }
    return best;
}

/* The client record of addr, made when it is the first connection from there; NULL: no memory. */
static httpd_client *httpd_client_ref(httpd_conns *cs, const struct sockaddr *sa)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, addr,
                  sizeof(addr));
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, addr,
                  sizeof(addr));
    strmap_node *n = strmap_get(&cs->clients, addr);
    httpd_client *cl = n ? STRMAP_OWNER(n, httpd_client, node) : calloc(1, sizeof(*cl));
    if (!cl)
        return NULL;
    if (!n) {
        snprintf(cl->addr, sizeof(cl->addr), "%s", addr);
        strmap_insert(&cs->clients, &cl->node, cl->addr);
    }
    cl->refs++;
    cl->kept++;
    return cl;
}

static void httpd_client_unref(httpd_conns *cs, httpd_client *cl)
{
    if (--cl->refs)
        return;
    strmap_remove(&cs->clients, &cl->node);
    free(cl);
}

static void httpd_conns_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    httpd_conns *cs = ud;
    cs->timer = 0;
    uint64_t now = ev_now_ms();
    while (cs->waiting.first && cs->waiting.first->since_ms + cs->head_ms <= now)
        httpd_conn_close(cs->waiting.first);
    httpd_conns_arm(cs);
}

static httpd_conn *httpd_conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

httpd_conns *httpd_conns_new(ev_loop *loop, unsigned limit, unsigned head_timeout_ms)
{
    httpd_conns *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return NULL;
    *cs = (httpd_conns){.loop = loop, .limit = limit, .head_ms = head_timeout_ms};
    if (strmap_init(&cs->clients) < 0) {
        free(cs);
        return NULL;
    }
    return cs;
}

void httpd_conns_free(httpd_conns *cs)
{
    if (!cs)
        return;
    ev_timer_cancel(cs->loop, cs->timer);
    httpd_conn_list *lists[] = {&cs->waiting, &cs->other};
    for (size_t i = 0; i < 2; i++)
        while (lists[i]->first) {
            httpd_conn *c = lists[i]->first;
            httpd_conn_unlink(c);
            httpd_client_unref(cs, c->client);
            free(c);
        }
    strmap_fini(&cs->clients);
    free(cs);
}

void httpd_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    httpd_conns *cs = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        httpd_conn *c = *socket_context;
        *socket_context = NULL;
        if (!c)
            return;
        cs->open--;
        if (!c->closing) {
            cs->kept--;
            c->client->kept--;
        }
        httpd_conn_unlink(c);
        httpd_client_unref(cs, c->client);
        free(c);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    httpd_conn *c = ci ? calloc(1, sizeof(*c)) : NULL;
    httpd_client *cl = c ? httpd_client_ref(cs, ai ? ai->client_addr : NULL) : NULL;
    if (!cl) { /* not tracked: MHD's own limit and idle timeout still hold it */
        free(c);
        return;
    }
    *c = (httpd_conn){.cs = cs, .client = cl, .fd = ci->connect_fd, .since_ms = ev_now_ms()};
    *socket_context = c;
    cs->open++;
    cs->kept++;
    httpd_conn_append(c, &cs->waiting);
    /* Over the limit: a waiting one of the heaviest client makes room (never the newcomer itself,
     * and never a connection inside a request; with every other one busy, MHD's own limit
     * decides). */
    httpd_conn *victim;
    while (cs->limit && cs->kept > cs->limit && (victim = httpd_conns_victim(cs, c)))
        httpd_conn_close(victim);
    httpd_conns_arm(cs);
}

void httpd_conns_busy(struct MHD_Connection *conn)
{
    httpd_conn *c = httpd_conn_of(conn);
    if (!c || c->busy || c->closing)
        return;
    c->busy = true;
    httpd_conn_append(c, &c->cs->other);
}

void httpd_conns_waiting(struct MHD_Connection *conn)
{
    httpd_conn *c = httpd_conn_of(conn);
    if (!c || !c->busy || c->closing)
        return;
    c->busy = false;
    c->since_ms = ev_now_ms();
    httpd_conn_append(c, &c->cs->waiting);
    httpd_conns_arm(c->cs);
}

size_t httpd_conns_open(const httpd_conns *cs)
{
    return cs ? cs->open : 0;
}

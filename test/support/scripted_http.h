/* scripted_http: a tiny HTTP/1.1 responder on loopback for the unit tests of the kube client, the
 * informer and the controller, for what a real API server cannot be made to do on demand (503 with
 * Retry-After, 429, a reset connection, a chunked watch cut at odd points, a Pod its watch has not
 * delivered). Each reply is picked by a substring of the request line and written in pieces.
 * Part of the test-support library (test/support); failures fail the test (cmocka asserts). */
#ifndef MP_TEST_SCRIPTED_HTTP_H
#define MP_TEST_SCRIPTED_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"

#define SRV_GAP_MS 30 /* between pieces, so each reaches the client on its own */
#define SRV_MAX 48

typedef enum { SRV_KEEP, SRV_CLOSE, SRV_RESET } srv_then;

typedef struct {
    const char *match;      /* substring of the request line that picks this reply */
    const char *pieces[12]; /* raw bytes written in turn; NULL ends */
    srv_then then;          /* after the last piece */
    int delay_ms;           /* before the first piece */
    bool stop;              /* the loop stops when a request picks this reply */
    bool used;
} srv_reply;

typedef struct srv srv;

typedef struct {
    srv *s;
    int fd;
    char *in;
    size_t inlen;
    srv_reply *reply; /* being written */
    int piece;
    uint64_t timer;
} srv_conn;

struct srv {
    ev_loop *loop;
    int lfd, port;
    srv_reply *replies;
    size_t nreplies;
    char *requests[SRV_MAX];
    int nrequests, naccepts;
    int stop_at; /* when set, the loop stops once this many requests came in */
    srv_conn conns[SRV_MAX];
    char *owned[SRV_MAX]; /* strings built for replies */
    int nowned;
};

/* Listens on a loopback port (s->port) and answers from replies, which must outlive s. */
void srv_start(srv *s, ev_loop *loop, srv_reply *replies, size_t n);
/* Closes every connection and the listener, and frees what s recorded and owns. */
void srv_stop(srv *s);
/* str, freed by srv_stop: for the pieces of replies built at run time. */
const char *srv_own(srv *s, char *str);
/* A whole HTTP/1.1 answer with its Content-Length (malloc'd). */
char *srv_http(const char *status, const char *headers, const char *body);
/* One chunk of a chunked body (malloc'd). */
char *srv_chunk(const char *data, size_t len);

#endif

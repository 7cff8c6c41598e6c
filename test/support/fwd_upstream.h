/* fwd_upstream: a small HTTP/1.1 member on loopback for the forwarder's tests (test_forward_*.c),
 * run on the test's ev loop: it parses requests (Content-Length or chunked) byte by byte, records
 * the last one's head and body, and answers as its mode says (a plain 200, an SSE stream sent an
 * event at a time, a large body, a reset, silence, an interim 103, a malformed head). It can hold a
 * body unread until told, reset the Nth request's connection, and check every body byte against
 * up_pattern. Part of the test-support library (test/support); failures fail the test (cmocka). */
#ifndef MP_TEST_FWD_UPSTREAM_H
#define MP_TEST_FWD_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop/ev.h"

typedef enum {
    UP_OK,               /* 200 with hop-by-hop headers and "ok <method> <body bytes>" */
    UP_STREAM,           /* chunked SSE, one event per up_stream_next() */
    UP_BULK,             /* 200 with up.bulk pattern bytes, written as fast as the socket takes */
    UP_RESET_BEFORE,     /* reset the connection once the request is in */
    UP_RESET_AFTER_HEAD, /* a head promising 100 bytes, 10 of them, then up_reset() */
    UP_SILENT,           /* never answer */
    UP_EARLY_HINTS,      /* a 103 before the 200 */
    UP_BAD_HEAD,         /* a header name with a space */
} up_mode;

#define UP_CONNS 8
#define UP_EVENTS 50

typedef struct up up;

typedef struct {
    up *u;
    int fd;
    char head[8192];
    size_t hlen;
    bool in_body;
    bool chunked;
    uint64_t rem; /* Content-Length bytes left, or of the current chunk */
    int cstate;   /* chunked: 0 size line, 1 data, 2 CRLF after data, 3 trailer */
    size_t linelen;
    char *out;
    size_t outlen, outoff;
    bool held; /* not read while up.hold */
} up_conn;

struct up {
    ev_loop *loop;
    int lfd, port;
    up_mode mode;
    int naccepts, nrequests, ncloses;
    bool stop_on_close;
    bool hold;     /* after a request head, stop reading until up_release */
    int reset_nth; /* reset the connection instead of answering the request of this number */
    size_t bulk;   /* UP_BULK's body size */
    char last_head[8192];
    uint64_t body_len; /* of the last request */
    bool body_pattern; /* check every body byte against up_pattern */
    bool body_bad;     /* a byte was not the expected one */
    char body[4096];   /* its start */
    up_conn conns[UP_CONNS];
    up_conn *stream; /* UP_STREAM's connection */
    int stream_sent;
    void (*on_body)(void *ud); /* after each read of body bytes */
    void *on_body_ud;
};

/* The byte at offset i of every patterned body, up and down. */
unsigned char up_pattern(uint64_t i);

/* Listens on a loopback port (u->port) on loop, answering in mode; every field starts zero. */
void up_start(up *u, ev_loop *loop, up_mode mode);
/* Closes every connection and the listener. */
void up_stop(up *u);
/* Resets (RST, not FIN) every open connection. */
void up_reset(up *u);
/* Reads the bodies held since u->hold was set, and stops holding. */
void up_release(up *u);
/* UP_STREAM: sends the next event, or the stream's end after UP_EVENTS of them. */
void up_stream_next(up *u);

#endif

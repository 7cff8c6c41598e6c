/* peer: a client socket of a unit test, watched on the event loop: what it read, and whether the
 * server closed it; and a one-shot HTTP/1.0 request through one. Part of the test-support library
 * (test/support); failures fail the test (cmocka). */
#ifndef MP_TEST_PEER_H
#define MP_TEST_PEER_H

#include <stdbool.h>
#include <stddef.h>

#include "loop/ev.h"

typedef struct test_peer {
    int fd;
    char buf[65536]; /* what was read, NUL-terminated */
    size_t len;
    bool closed; /* end of stream, or reset */
    bool stop;   /* the loop stops when the server closes */
} test_peer;

/* Connects to 127.0.0.1:port, writes send (when set), and watches what comes back. */
void test_peer_open(ev_loop *loop, test_peer *p, int port, const char *send);

/* The same from the loopback address src (NULL: 127.0.0.1). */
void test_peer_open_from(ev_loop *loop, test_peer *p, const char *src, int port, const char *send);

/* Stops watching p and closes it. */
void test_peer_close(ev_loop *loop, test_peer *p);

/* Sends "method path HTTP/1.0" (with an Authorization header when auth is set) through p without
 * waiting; the loop stops once the server closed the connection. */
void test_peer_http(ev_loop *loop, test_peer *p, int port, const char *method, const char *path,
                    const char *auth);

#endif

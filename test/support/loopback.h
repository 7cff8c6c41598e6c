/* loopback: the unit tests' sockets on 127.0.0.1, for the small HTTP responders and clients they
 * run on the event loop (test_evcurl, test_kube_client, test_leader, test_httpd, test_telemetry,
 * fwd_upstream, nb_client). Part of the test-support library (test/support); failures fail the
 * test (cmocka asserts). */
#ifndef MP_TEST_LOOPBACK_H
#define MP_TEST_LOOPBACK_H

#include "loop/ev.h"

/* A non-blocking listener on a port the kernel picks; *port is set to it. */
int test_listen_loopback(int backlog, int *port);

/* A port on 127.0.0.1 nothing listens on (bound, then closed): a target that refuses. */
int test_closed_port_loopback(void);

/* Accepts the connection pending on the listener lfd (non-blocking, close-on-exec) and watches it
 * for reading on loop with fn(ud); -1 when none was pending. */
int test_accept_watch(ev_loop *loop, int lfd, ev_fd_fn fn, void *ud);

/* A blocking client connected to 127.0.0.1:port. */
int test_connect_loopback(int port);

/* The same from the loopback address src (another client, such as "127.3.0.1"). */
int test_connect_loopback_from(const char *src, int port);

#endif

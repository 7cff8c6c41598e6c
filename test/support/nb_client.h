/* nb_client: a non-blocking HTTP client of a unit test on the event loop, with a small send buffer:
 * it sends its request as the socket takes it (a server that stops reading blocks it soon, which
 * it notes and reports), and keeps everything it receives until the server closes. Part of the
 * test-support library (test/support); failures fail the test (cmocka). */
#ifndef MP_TEST_NB_CLIENT_H
#define MP_TEST_NB_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "loop/ev.h"

typedef struct nb_client nb_client;
struct nb_client {
    ev_loop *loop;
    int fd;
    char *out; /* the request, sent as the socket takes it */
    size_t out_len, out_off;
    bool blocked; /* a send met a full socket */
    char *in;     /* everything received, NUL-terminated */
    size_t in_len, in_cap;
    bool closed;                   /* the server closed: the loop was stopped */
    void (*on_data)(nb_client *c); /* after each read */
    void (*on_blocked)(nb_client *c);
    void *ud;
    const bool *leave_when; /* nb_client_leave_when's */
};

/* Byte i of every body the client sends. */
char nb_client_pattern(size_t i);

/* Connects c to 127.0.0.1:port and starts sending head followed by body_len bytes of the pattern.
 */
void nb_client_start(nb_client *c, ev_loop *loop, int port, const char *head, size_t body_len);

/* nb_client_start's "GET path" (Connection: close). */
void nb_client_get(nb_client *c, ev_loop *loop, int port, const char *path);

/* Runs c's loop until it stops, which must be for c's connection closed by the server (the test
 * fails after 20 s). */
void nb_client_run(nb_client *c);

/* The body of the answer c received, after its head. */
const char *nb_client_body(const nb_client *c);

/* Sends what is left of c's request now, at once, and shuts its sending side (a half close). */
void nb_client_half_close(nb_client *c);

/* The client leaves: its socket is closed. */
void nb_client_leave(nb_client *c);

/* The client leaves once *flag holds (looked at every millisecond). */
void nb_client_leave_when(nb_client *c, const bool *flag);

/* Adds len bytes of data to what c sends (before the loop runs, or followed by nb_client_watch). */
void nb_client_append(nb_client *c, const char *data, size_t len);

/* nb_client_start with a chunked body (head says so) of body_len bytes of the pattern, in chunks of
 * chunk bytes and the last one shorter, then the empty chunk that ends it. */
void nb_client_start_chunked(nb_client *c, ev_loop *loop, int port, const char *head,
                             size_t body_len, size_t chunk);

/* Watches c for reading, and for writing while it has bytes to send: after a change of c->out. */
void nb_client_watch(nb_client *c);

/* Closes c (unless the test did) and frees what it sent and received. */
void nb_client_free(nb_client *c);

#endif

/* sim_http: one small HTTP server (libmicrohttpd) bound to one address, driven by the process's ev
 * loop through MHD's epoll fd and timeout, so a simulated Pod serves its probe endpoints without a
 * thread. It answers GETs through a callback and knows nothing about members. */
#ifndef MP_SIM_HTTP_H
#define MP_SIM_HTTP_H

#include <stddef.h>

#include "loop/ev.h"
#include "sim_isvc.h"

typedef struct sim_http sim_http;

/* Fills out for a request of method to path; runs from ev_run(). */
typedef void (*sim_http_answer_fn)(void *ud, const char *method, const char *path, sim_reply *out);

/* Listens on ip:port (IPv4). NULL when the address cannot be bound, with the reason in err. */
sim_http *sim_http_start(ev_loop *loop, const char *ip, int port, sim_http_answer_fn answer,
                         void *ud, char *err, size_t errlen);
/* Closes the listener and every connection (clients then see "connection refused"). NULL is a
 * no-op. Not from inside the answer callback. */
void sim_http_stop(sim_http *h);

#endif

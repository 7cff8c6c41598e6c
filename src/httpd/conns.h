/* httpd_conns: the connections of one httpd server, for the limits MHD lacks. Internal to
 * src/httpd. A connection is "waiting" from its accept, and again from the end of each request,
 * until its next request head is in; only waiting connections are ever closed here (by a
 * shutdown of their socket, which MHD then sees and finishes): one of the heaviest client's when
 * a new one would pass the limit, and any whose head has not arrived within the head timeout. */
#ifndef MP_HTTPD_CONNS_H
#define MP_HTTPD_CONNS_H

#include <microhttpd.h>
#include <stddef.h>

#include "loop/ev.h"

typedef struct httpd_conns httpd_conns;

/* limit: connections kept open at most (0: no eviction); head_timeout_ms: 0 none. NULL: no
 * memory. */
httpd_conns *httpd_conns_new(ev_loop *loop, unsigned limit, unsigned head_timeout_ms);
/* After MHD stopped. NULL is a no-op. */
void httpd_conns_free(httpd_conns *cs);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the httpd_conns. */
void httpd_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* A request's head is in (any call of the request callback). */
void httpd_conns_busy(struct MHD_Connection *conn);
/* The connection's request is over; it waits for its next head (or closes). */
void httpd_conns_waiting(struct MHD_Connection *conn);

/* Connections open now (accepted and not yet closed by MHD). */
size_t httpd_conns_open(const httpd_conns *cs);

#endif

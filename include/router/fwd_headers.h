/* fwd_headers: the forwarder's header rules, pure (no I/O, no state): what may be sent as a method,
 * a header name or value and a path; which headers describe one connection and stop at a proxy
 * (RFC 9110 7.6.1: hop-by-hop, and those the Connection header names); and the header list sent to
 * a member, built from the client's. Used by fwd (forward.c) for both directions and tested as
 * tables in test/unit/test_fwd_headers.c. */
#ifndef MP_ROUTER_FWD_HEADERS_H
#define MP_ROUTER_FWD_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

#include "router/forward.h"

struct curl_slist;

/* A request may carry this many Connection headers at most (each names hop-by-hop headers). */
#define FWD_MAX_CONNECTION_HEADERS 16

/* Is ch a tchar of RFC 9110 5.6.2 (a character of a token: a method or a header name)? */
bool fwd_is_tchar(unsigned char ch);
/* Is s a token (one tchar or more)? false for NULL. */
bool fwd_is_token(const char *s);
/* Can s be sent as a header value (no CR, no LF: it must not end the line it is on)? false for
 * NULL. */
bool fwd_is_value(const char *s);
/* Is name (namelen bytes) among the comma-separated tokens of list, case aside? */
bool fwd_in_list(const char *list, const char *name, size_t namelen);
/* Is the header name hop-by-hop: one of RFC 9110's (Connection, Keep-Alive, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-*, and "Trailers"), or named by one of the nconn values of the
 * message's Connection headers? */
bool fwd_hop_by_hop(const char *name, const char *const *conn_values, size_t nconn);
/* Can p be sent as a request's path: starts with '/', no control character, space or '#'? */
bool fwd_path_ok(const char *p);
/* Appends "name: value" to *l ("name;" for an empty value, curl's way to send one). 0, or -ENOMEM
 * (*l is as it was). */
int fwd_add_header(struct curl_slist **l, const char *name, const char *value);
/* Appends to *l the headers to send for req (which passed fwd_request_invalid): the client's minus
 * hop-by-hop ones and those curl writes itself (Host, Content-Length, Expect), X-Forwarded-For with
 * the client's address appended, and curl's own defaults (Accept unless the client sent one,
 * Expect: 100-continue) switched off. 0, or -ENOMEM (*l holds what was appended: the caller frees
 * it with curl_slist_free_all). */
int fwd_build_headers(struct curl_slist **l, const fwd_request *req);

#endif

/* httpd_intake: what httpd refuses (400) before a request reaches its owner, as pure checks of its
 * head: a framing two readers could take two ways (RFC 9112 section 6), and a path whose percent-
 * encoding would change what it names once decoded, or that climbs out of where it points. */
#ifndef MP_HTTPD_INTAKE_H
#define MP_HTTPD_INTAKE_H

#include <stdbool.h>
#include <stdint.h>

/* The request's Content-Length and Transfer-Encoding fields, fed one header at a time. */
typedef struct httpd_framing {
    int lengths, encodings; /* fields seen */
    uint64_t length;        /* the first Content-Length's value */
    const char *why;        /* the first fault found, or NULL */
} httpd_framing;

/* Feeds one header field (any name: others are ignored). */
void httpd_framing_add(httpd_framing *f, const char *name, const char *value);
/* NULL when the body's length can be read one way only, else why not (a sentence for a 400):
 * Content-Length fields with different values, or one that is not a number; Transfer-Encoding
 * beside Content-Length; a Transfer-Encoding other than one field "chunked". Repeated fields with
 * one value are accepted (RFC 9110 section 8.6 allows it: the length is not in doubt). */
const char *httpd_framing_check(const httpd_framing *f);

/* The raw request target's path (up to '?', as the client sent it): NULL when decoding it
 * changes nothing but spelling, else why not: a percent-encoded reserved character ("%2F" is not
 * "/", RFC 3986 section 2.2), control character or backslash, a raw backslash, or a '%' not
 * followed by two hex digits. */
const char *httpd_intake_raw_path(const char *target);
/* The decoded path: NULL, or why not: a "." or ".." segment (the path would resolve elsewhere
 * than it reads; a forwarder's client library would remove them). */
const char *httpd_intake_path(const char *path);

#endif

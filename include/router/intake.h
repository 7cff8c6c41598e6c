/* intake: how the router takes a request in (src/router/intake.c); here its pure rules: a
 * request's Content-Length against the limits, and the body budget's reservation. */
#ifndef MP_ROUTER_INTAKE_H
#define MP_ROUTER_INTAKE_H

#include <stddef.h>
#include <stdint.h>

/* Reads a request's Content-Length (header NULL: none sent, *out -1) against the largest body
 * (max_body) and what the body budget can ever hold for one large body (budget less its last
 * eighth). 0 with *out; -EINVAL with "bad Content-Length" in msg (not a decimal number, negative);
 * -EFBIG with "request body larger than N bytes" in msg, N the lower of the two limits. */
int rt_intake_length(const char *header, long long max_body, long long budget, int64_t *out,
                     char *msg, size_t len);

/* Whether a request holding reserved bytes of the budget may grow its reservation to want, with
 * buffered bytes reserved by all requests: 0, or -ENOSPC. Reservations larger than one small body
 * (RT_MODEL_BODY_EXACT_MAX) stay out of the budget's last eighth, so large uploads alone cannot
 * refuse a small request. */
int rt_intake_fits(uint64_t buffered, uint64_t budget, size_t reserved, size_t want);

#endif

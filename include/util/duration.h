/* duration: Go's duration syntax, the one the CRD's swapBudget, the pool annotations and the
 * duration flags share. Pure. */
#ifndef MP_UTIL_DURATION_H
#define MP_UTIL_DURATION_H

#include <stdint.h>

/* Parses a Go duration ("300s", "5m", "1h30m", "1.5h", "250ms"; a leading '-' is rejected) into
 * milliseconds, rounded down. 0 or -EINVAL. */
int duration_parse_ms(const char *s, int64_t *out_ms);

#endif

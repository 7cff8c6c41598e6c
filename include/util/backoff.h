/* backoff: the project's one retry delay. Exponential: base_ms doubled at each failure up to
 * cap_ms; then jittered down into [step/2, step] so that clients that failed together do not
 * retry together, and the cap still holds. Pure: the caller brings the random word. */
#ifndef MP_UTIL_BACKOFF_H
#define MP_UTIL_BACKOFF_H

#include <stdint.h>

/* The step after `failures` earlier failures (0 for the first retry): base_ms * 2^failures, at
 * most cap_ms. The longest delay util_backoff_ms can give. */
uint64_t util_backoff_step_ms(uint64_t base_ms, uint64_t cap_ms, unsigned failures);
/* The delay to wait: the step, jittered into [step/2, step] by rnd (any random word, e.g.
 * util_rng_next(); 0 gives the shortest). */
uint64_t util_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned failures, uint64_t rnd);

#endif

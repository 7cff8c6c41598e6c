/* rng: the process's one pseudo-random generator, for jitter (retry delays, watch timeouts); never
 * for secrets or identities, which read getrandom or OpenSSL. Seeded once, from getrandom on first
 * use, or by util_rng_seed: a test fixes the seed to replay a run. Single-threaded, as the loop. */
#ifndef MP_UTIL_RNG_H
#define MP_UTIL_RNG_H

#include <stdint.h>

/* Restarts the sequence from seed (any value, 0 included). */
void util_rng_seed(uint64_t seed);
/* The next 64 random bits. */
uint64_t util_rng_next(void);
/* Uniform in [0, 1). */
double util_rng_unit(void);

#endif

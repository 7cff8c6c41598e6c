/* rng: splitmix64 over one process-wide state, seeded once from getrandom (the clock and the pid
 * when getrandom cannot answer) unless a test seeded it first. */
#include "util/rng.h"

#include <stdbool.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t util_rng_state;
static bool util_rng_seeded;

void util_rng_seed(uint64_t seed)
{
    util_rng_state = seed;
    util_rng_seeded = true;
}

uint64_t util_rng_next(void)
{
    if (!util_rng_seeded) {
        uint64_t s;
        if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            s = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                ((uint64_t)getpid() << 32);
        }
        util_rng_seed(s);
    }
    uint64_t z = (util_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double util_rng_unit(void)
{
    return (double)(util_rng_next() >> 11) / 9007199254740992.0; /* 2^53 */
}

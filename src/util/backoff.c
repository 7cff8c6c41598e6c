/* backoff: exponential with a cap, then "equal jitter" (half fixed, half random), as the API
 * client's retries always did; the work queue, the informers, the leader and the router share it.
 */
#include "util/backoff.h"

uint64_t util_backoff_step_ms(uint64_t base_ms, uint64_t cap_ms, unsigned failures)
{
    uint64_t d = base_ms;
    for (unsigned i = 0; i < failures && d < cap_ms; i++)
        d *= 2;
    return d < cap_ms ? d : cap_ms;
}

uint64_t util_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned failures, uint64_t rnd)
{
    uint64_t d = util_backoff_step_ms(base_ms, cap_ms, failures);
    return d / 2 + rnd % (d - d / 2 + 1);
}

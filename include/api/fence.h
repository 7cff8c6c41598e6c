/* fence: the drain fence, the one rule the operator and the routers keep together so that a
 * request on its way to a resident never meets it unloaded. Both take the same --drain-fence F. */
#ifndef MP_API_FENCE_H
#define MP_API_FENCE_H

/* The rule. Operator: a swap's resident is unloaded only on an idle probe sent at least F after
 * this replica first saw the swap (pendingMember set). Router: it stops forwarding to a resident
 * once it sees pendingMember, and forwards only on a read of the pool from the API server that was
 * sent less than F/2 ago and showed that member resident. So a request forwarded on such a read
 * reaches the Pod before the probe that could let it go. */

/* F when not configured (0). */
#define API_DRAIN_FENCE_DEFAULT_MS 2000
/* The smallest F accepted: the router's half of it must outlast a read of the pool. */
#define API_DRAIN_FENCE_MIN_MS 100

/* F in force for a configured value: the default when not set (0 or less). */
static inline long api_fence_ms(long configured_ms)
{
    return configured_ms > 0 ? configured_ms : API_DRAIN_FENCE_DEFAULT_MS;
}

/* The router's window: how long after sending a read of the pool it may forward on it. */
static inline long api_fence_window_ms(long fence_ms)
{
    return fence_ms / 2;
}

#endif

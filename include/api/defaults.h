/* defaults: what an absent spec field means, the same for the operator and the router (the seed
 * schema's defaults and the member kind's). */
#ifndef MP_API_DEFAULTS_H
#define MP_API_DEFAULTS_H

/* spec.swapBudget when the pool leaves it out: 300s. */
#define API_SWAP_BUDGET_DEFAULT_MS 300000
/* A member's spec.replicas when absent, as records hold it; the InferenceService then runs 1. */
#define API_REPLICAS_UNSET (-1)

#endif

/* status: the two questions both binaries ask of a ModelPool status (which condition, and whether
 * a swap awaits its resident's probe), answered once; the names are api/status.h's. */
#include "api/status.h"

#include <string.h>

static bool status_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

const api_condition *api_status_cond(const api_status *st, const char *type)
{
    for (size_t i = 0; i < st->n_conditions; i++)
        if (status_eq(st->conditions[i].type, type))
            return &st->conditions[i];
    return NULL;
}

bool api_status_awaits_probe(const api_status *st)
{
    const api_condition *sw = api_status_cond(st, API_COND_SWAPPING);
    return st->pending_member && *st->pending_member && sw && status_eq(sw->status, "True") &&
           status_eq(sw->reason, API_REASON_AWAITING_PROBE);
}

/* status: the questions both binaries ask of a ModelPool status (which condition, whether a swap
 * awaits its resident's probe, whether a Degraded pool's fault concerns a member), answered once;
 * the names are api/status.h's. The fault shapes below are the messages of the operator's rule 5
 * (src/pool/plan_validate.c), each tested against a real plan in test_plan_reported. */
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

/* One fault of rule 5 as its clause reads: head, then (named) a member's name and after, then
 * anything but "; "; or (not named) head, anything, and tail at the clause's end. */
typedef struct {
    const char *head;
    bool named;
    const char *after; /* named: what follows the name; else the clause's tail */
} status_fault_shape;

static const status_fault_shape status_faults[] = {
    {"spec.members is empty", false, ""},
    {"spec.members[", false, "] has an empty name"},
    {"member ", true, " is listed "},
    {"member ", true, " is also claimed by pool "},
    {"default ", true, " is not in spec.members"},
    {"swapBudget \"", false, "\" is not a positive duration such as 300s or 5m"},
    {"annotation modelpool-operator.dev/unprobeable-unload-after \"", false,
     "\" is not a positive duration such as 10m"},
    {"swapPolicy ", false, " is not supported (sticky is)"},
    {"residentMember ", true, " was removed from spec.members "},
    {"pendingMember ", true, " was removed from spec.members "},
    {"InferenceService ", true, " not found in namespace "},
};

/* The clause c (n bytes) is a fault of a known shape that does not name member. */
static bool status_clause_spares(const char *c, size_t n, const char *member)
{
    for (size_t i = 0; i < sizeof(status_faults) / sizeof(status_faults[0]); i++) {
        const status_fault_shape *f = &status_faults[i];
        size_t h = strlen(f->head), a = strlen(f->after);
        if (n < h + a || strncmp(c, f->head, h) != 0)
            continue;
        if (!f->named) {
            if (strncmp(c + n - a, f->after, a) == 0)
                return true;
            continue;
        }
        const char *name = c + h, *end = memchr(name, ' ', n - h);
        if (end == NULL || (size_t)(c + n - end) < a || strncmp(end, f->after, a) != 0)
            continue;
        return (size_t)(end - name) != strlen(member) ||
               strncmp(name, member, (size_t)(end - name)) != 0;
    }
    return false; /* a fault of another shape: about every member, for all this reader knows */
}

bool api_status_fault_spares(const api_status *st, const char *member)
{
    const api_condition *v = api_status_cond(st, API_COND_MEMBERS_VALID);
    if (!status_eq(st->phase, API_PHASE_DEGRADED) || member == NULL || *member == '\0' ||
        v == NULL || !status_eq(v->status, "False") || v->message == NULL || *v->message == '\0')
        return false;
    for (const char *c = v->message;;) {
        const char *sep = strstr(c, "; ");
        size_t n = sep ? (size_t)(sep - c) : strlen(c);
        if (!status_clause_spares(c, n, member))
            return false;
        if (sep == NULL)
            return true;
        c = sep + 2;
    }
}

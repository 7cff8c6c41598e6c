/* status: the questions both binaries ask of a ModelPool status (which condition, whether a swap
 * awaits its resident's probe, whether a Degraded pool's fault concerns a member), answered once;
 * the names, and the faults' wording the operator writes (rule 5, src/pool/plan_validate.c), are
 * api/status.h's; test_plan_reported reads the faults of a real plan back. */
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

/* The faults of rule 5 (api/status.h); named: its first conversion is a member's name. */
static const struct {
    const char *fmt;
    bool named;
} status_faults[] = {
    {API_FAULT_NO_MEMBERS, false},     {API_FAULT_EMPTY_NAME, false},
    {API_FAULT_DUPLICATE, true},       {API_FAULT_DEFAULT, true},
    {API_FAULT_BUDGET, false},         {API_FAULT_UNLOAD_AFTER, false},
    {API_FAULT_POLICY, false},         {API_FAULT_RESIDENT_REMOVED, true},
    {API_FAULT_PENDING_REMOVED, true}, {API_FAULT_CLAIMED, true},
    {API_FAULT_MISSING, true},
};

/* A format's literal text before its first conversion (*head_len bytes of fmt) and the literal
 * text after that conversion, up to the next one or the end (*after, *after_len; "" when fmt has
 * no conversion). */
static void status_fault_parts(const char *fmt, size_t *head_len, const char **after,
                               size_t *after_len)
{
    const char *pct = strchr(fmt, '%');
    *head_len = pct ? (size_t)(pct - fmt) : strlen(fmt);
    *after = "";
    *after_len = 0;
    if (!pct)
        return;
    const char *conv = pct + 1 + strspn(pct + 1, "zlh"); /* length modifiers */
    *after = *conv ? conv + 1 : conv;
    *after_len = strcspn(*after, "%");
}

/* The clause c (n bytes) is a fault of a known shape that does not name member: its head, then
 * (named) a member's name and the text after it, or (not named) anything and the text after the
 * conversion at the clause's end. */
static bool status_clause_spares(const char *c, size_t n, const char *member)
{
    for (size_t i = 0; i < sizeof(status_faults) / sizeof(status_faults[0]); i++) {
        size_t h, a;
        const char *after;
        status_fault_parts(status_faults[i].fmt, &h, &after, &a);
        if (n < h + a || strncmp(c, status_faults[i].fmt, h) != 0)
            continue;
        if (!status_faults[i].named) {
            if (strncmp(c + n - a, after, a) == 0)
                return true;
            continue;
        }
        const char *name = c + h, *end = memchr(name, ' ', n - h);
        if (end == NULL || (size_t)(c + n - end) < a || strncmp(end, after, a) != 0)
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

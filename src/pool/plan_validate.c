/* plan_validate: rule 5, the spec judged against what exists (each fault named, the first one's
 * reason reported), and the Go-style durations its fields hold. */
#include "plan_ctx.h"

#include <errno.h>

FMT(4, 5)
static void fault(const char **reason, plan_msg *msg, const char *r, const char *fmt, ...)
{
    if (*reason == NULL)
        *reason = r;
    plan_msg_sep(msg);
    va_list ap;
    va_start(ap, fmt);
    plan_msg_vadd(msg, fmt, ap);
    va_end(ap);
}

/* Returns the reason of the first fault (NULL if the spec is valid), each fault named in msg. */
const char *plan_validate(const plan_snapshot *s, int64_t *budget_ms, plan_msg *msg)
{
    const char *reason = NULL;

    if (s->n_members == 0)
        fault(&reason, msg, "NoMembers", API_FAULT_NO_MEMBERS);
    for (size_t i = 0; i < s->n_members; i++)
        if (is_empty(s->members[i].name))
            fault(&reason, msg, "EmptyMemberName", API_FAULT_EMPTY_NAME, i);
    for (size_t i = 0; i < s->n_members; i++) {
        if (!plan_first_of_name(s, i))
            continue;
        size_t n = 0;
        for (size_t j = i; j < s->n_members; j++)
            n += str_eq(s->members[j].name, s->members[i].name);
        if (n > 1)
            fault(&reason, msg, "DuplicateMember", API_FAULT_DUPLICATE, s->members[i].name, n);
    }
    if (!is_empty(s->default_member) && plan_member_named(s, s->default_member) == NULL)
        fault(&reason, msg, "DefaultNotMember", API_FAULT_DEFAULT, s->default_member);
    *budget_ms = API_SWAP_BUDGET_DEFAULT_MS;
    if (!is_empty(s->swap_budget) &&
        (duration_parse_ms(s->swap_budget, budget_ms) != 0 || *budget_ms <= 0))
        fault(&reason, msg, "InvalidSwapBudget", API_FAULT_BUDGET, s->swap_budget);
    int64_t unload_ms = 0;
    if (!is_empty(s->unload_after) &&
        (duration_parse_ms(s->unload_after, &unload_ms) != 0 || unload_ms <= 0))
        fault(&reason, msg, "InvalidUnloadAfter", API_FAULT_UNLOAD_AFTER, s->unload_after);
    if (!is_empty(s->swap_policy) && !str_eq(s->swap_policy, "sticky"))
        fault(&reason, msg, "UnsupportedSwapPolicy", API_FAULT_POLICY, s->swap_policy);
    /* A member dropped from the spec mid-flight would hold the GPU out of our sight. */
    const char *res = or_null(s->status.resident_member), *pend = or_null(s->status.pending_member);
    if (res && plan_member_named(s, res) == NULL)
        fault(&reason, msg, "ResidentNotMember", API_FAULT_RESIDENT_REMOVED, res);
    if (pend && plan_member_named(s, pend) == NULL)
        fault(&reason, msg, "PendingNotMember", API_FAULT_PENDING_REMOVED, pend);
    for (size_t i = 0; i < s->n_members; i++)
        if (plan_first_of_name(s, i) && !is_empty(s->members[i].claimed_by))
            fault(&reason, msg, "MemberInMultiplePools", API_FAULT_CLAIMED, s->members[i].name,
                  s->members[i].claimed_by);
    for (size_t i = 0; i < s->n_members; i++)
        if (plan_first_of_name(s, i) && !s->members[i].exists)
            fault(&reason, msg, "MissingMembers", API_FAULT_MISSING, s->members[i].name,
                  s->ns ? s->ns : "");
    return reason;
}

/* A member is absent from a cache that may not have caught up with the pool yet. */
bool plan_unsure_of_members(const plan_snapshot *s)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (!is_empty(s->members[i].name) && !s->members[i].exists &&
            s->members[i].absence_unconfirmed)
            return true;
    return false;
}

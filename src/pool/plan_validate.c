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
        fault(&reason, msg, "NoMembers", "spec.members is empty");
    for (size_t i = 0; i < s->n_members; i++)
        if (is_empty(s->members[i].name))
            fault(&reason, msg, "EmptyMemberName", "spec.members[%zu] has an empty name", i);
    for (size_t i = 0; i < s->n_members; i++) {
        if (!plan_first_of_name(s, i))
            continue;
        size_t n = 0;
        for (size_t j = i; j < s->n_members; j++)
            n += str_eq(s->members[j].name, s->members[i].name);
        if (n > 1)
            fault(&reason, msg, "DuplicateMember", "member %s is listed %zu times",
                  s->members[i].name, n);
    }
    if (!is_empty(s->default_member) && plan_member_named(s, s->default_member) == NULL)
        fault(&reason, msg, "DefaultNotMember", "default %s is not in spec.members",
              s->default_member);
    *budget_ms = API_SWAP_BUDGET_DEFAULT_MS;
    if (!is_empty(s->swap_budget) &&
        (duration_parse_ms(s->swap_budget, budget_ms) != 0 || *budget_ms <= 0))
        fault(&reason, msg, "InvalidSwapBudget",
              "swapBudget \"%s\" is not a positive duration such as 300s or 5m", s->swap_budget);
    int64_t unload_ms = 0;
    if (!is_empty(s->unload_after) &&
        (duration_parse_ms(s->unload_after, &unload_ms) != 0 || unload_ms <= 0))
        fault(&reason, msg, "InvalidUnloadAfter",
              "annotation modelpool-operator.dev/unprobeable-unload-after \"%s\" is not a "
              "positive duration such as 10m",
              s->unload_after);
    if (!is_empty(s->swap_policy) && !str_eq(s->swap_policy, "sticky"))
        fault(&reason, msg, "UnsupportedSwapPolicy", "swapPolicy %s is not supported (sticky is)",
              s->swap_policy);
    /* A member dropped from the spec mid-flight would hold the GPU out of our sight. */
    const char *res = or_null(s->status.resident_member), *pend = or_null(s->status.pending_member);
    if (res && plan_member_named(s, res) == NULL)
        fault(&reason, msg, "ResidentNotMember",
              "residentMember %s was removed from spec.members (add it back, move the slot to "
              "another member, then remove it)",
              res);
    if (pend && plan_member_named(s, pend) == NULL)
        fault(&reason, msg, "PendingNotMember",
              "pendingMember %s was removed from spec.members (add it back until the swap ends)",
              pend);
    for (size_t i = 0; i < s->n_members; i++)
        if (plan_first_of_name(s, i) && !is_empty(s->members[i].claimed_by))
            fault(&reason, msg, "MemberInMultiplePools", "member %s is also claimed by pool %s",
                  s->members[i].name, s->members[i].claimed_by);
    for (size_t i = 0; i < s->n_members; i++)
        if (plan_first_of_name(s, i) && !s->members[i].exists)
            fault(&reason, msg, "MissingMembers", "InferenceService %s not found in namespace %s",
                  s->members[i].name, s->ns ? s->ns : "");
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

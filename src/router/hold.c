/* hold: which requests of a pool go now, wait or are refused, and which member the router asks
 * for. The order of service is the order of arrival: members are taken in the order their oldest
 * held request arrived (A A B B C C, never A B A B), so every member gets its turn within the
 * budget. While another member waits, a busy resident is asked away from only after grace_ms, and
 * keeps its new requests until the operator has taken that request (the pool Swapping to it); it
 * gets them only within the drain fence's window after a read of the pool confirmed it. A Degraded
 * pool changes no replicas: its resident serves unless the fault concerns it, the rest is 503. */
#include "router/hold.h"

#include <stdio.h>
#include <string.h>

#include "api/status.h"

static bool str_eq(const char *a, const char *b)
{
    if (a == NULL || *a == '\0' || b == NULL || *b == '\0')
        return false;
    return strcmp(a, b) == 0;
}

static bool is_empty(const char *s)
{
    return s == NULL || *s == '\0';
}

/* A member that cannot load: its own controller says so. WaitingForGPU only counts for the
 * swap's target (a member at 0 may still carry the phase of its last run). */
static bool cannot_load(const rt_hold_pool *p, const rt_hold_member *m)
{
    if (!m->exists)
        return !m->absence_unsure;
    if (str_eq(m->phase, "Failed") || str_eq(m->phase, "Suspended"))
        return true;
    return str_eq(m->phase, "WaitingForGPU") && str_eq(m->name, p->pending);
}

/* The resident serves while no swap is pending, or while the pending swap has not begun to drain
 * it (#26: its idle probe cannot decide, so the operator cannot unload it). */
static bool servable(const rt_hold_pool *p, const rt_hold_member *m)
{
    return str_eq(m->name, p->resident) && (is_empty(p->pending) || p->awaiting_probe) &&
           m->ready_pods > 0;
}

/* A read sent less than the window ago showed m resident with no swap. */
static bool fence_open(const rt_hold_pool *p, const rt_hold_member *m)
{
    return str_eq(p->fence_member, m->name) && p->now_ms - p->fence_read_ms < p->fence_window_ms &&
           p->now_ms < p->registered_until_ms && !p->resident_blocked;
}

/* The verdict of one member before fairness, and why when it is REJECT. */
static rt_hold_verdict judge(const rt_hold_pool *p, const rt_hold_member *m, rt_hold_reject *why)
{
    *why = RT_REJECT_NONE;
    if (p->fence_refused)
        *why = RT_REJECT_FENCE_REFUSED;
    else if (str_eq(p->phase, API_PHASE_DEGRADED) &&
             !(p->degraded_spares_resident && servable(p, m)))
        *why = RT_REJECT_DEGRADED;
    else if (servable(p, m))
        return fence_open(p, m) ? RT_HOLD_SERVE : RT_HOLD_FENCE;
    else if (cannot_load(p, m))
        *why = RT_REJECT_MEMBER_PHASE;
    else if (p->dropped && is_empty(p->pending) && !str_eq(m->name, p->resident))
        *why = RT_REJECT_DROPPED;
    return *why == RT_REJECT_NONE ? RT_HOLD_WAIT : RT_HOLD_REJECT;
}

/* The fence's read: asked while the serving member's requests wait for it, and ahead of time
 * once the read that lets them go is three quarters of its window old (so a steady stream costs
 * about one read per window and a quarter, and a read has the last quarter to come back before
 * anyone waits for it). */
static void fence_decide(const rt_hold_pool *p, const rt_hold_verdict *verdicts,
                         rt_hold_decision *out)
{
    out->fence_read = p->fence_refused;
    /* A read is of no use unregistered, or while the acknowledgement stands: the registry marks
     * the pool when either ends. */
    if (p->now_ms >= p->registered_until_ms || p->resident_blocked)
        return;
    out->send_by_ms = p->fence_read_ms + p->fence_window_ms;
    if (out->send_by_ms > p->registered_until_ms)
        out->send_by_ms = p->registered_until_ms;
    for (size_t i = 0; i < p->n_members; i++) {
        if (p->members[i].waiting == 0)
            continue;
        if (verdicts[i] == RT_HOLD_FENCE ||
            (verdicts[i] == RT_HOLD_SERVE &&
             p->now_ms - p->fence_read_ms >= p->fence_window_ms - p->fence_window_ms / 4))
            out->fence_read = true;
    }
}

/* What the pool's waiting annotation names: nothing (absent, or a member that does not exist or
 * cannot load), a member to bring in (its index in *i), or a member being brought in or resident
 * (its clients are being answered: left as it is). */
typedef enum { NAMED_NONE, NAMED_QUEUED, NAMED_SERVING } named_state;

static named_state waiting_named(const rt_hold_pool *p, ptrdiff_t *i)
{
    *i = -1;
    if (is_empty(p->waiting_member))
        return NAMED_NONE;
    for (size_t k = 0; k < p->n_members; k++) {
        const rt_hold_member *m = &p->members[k];
        if (!str_eq(m->name, p->waiting_member))
            continue;
        if (str_eq(m->name, p->resident) || str_eq(m->name, p->pending) ||
            str_eq(m->name, p->requested))
            return NAMED_SERVING;
        if (!m->exists || cannot_load(p, m))
            return NAMED_NONE;
        *i = (ptrdiff_t)k;
        return NAMED_QUEUED;
    }
    return NAMED_NONE;
}

void rt_hold_decide(const rt_hold_pool *p, rt_hold_verdict *verdicts, rt_hold_reject *reasons,
                    rt_hold_decision *out)
{
    *out = (rt_hold_decision){.activate = -1, .advertise = -1, .wake_at_ms = 0};

    /* The next member to bring in: the one whose oldest held request is the oldest of all. */
    ptrdiff_t head = -1;
    for (size_t i = 0; i < p->n_members; i++) {
        const rt_hold_member *m = &p->members[i];
        verdicts[i] = judge(p, m, &reasons[i]);
        /* One not known to exist is not asked for: it waits for the cache. */
        if (verdicts[i] == RT_HOLD_WAIT && m->exists && m->waiting > 0 &&
            (head < 0 || m->first_wait_ms < p->members[head].first_wait_ms))
            head = (ptrdiff_t)i;
    }
    fence_decide(p, verdicts, out);
    if (head < 0)
        return;

    /* Another replica's waiter named in the pool, if it waited longer than this router's head:
     * its member is asked for instead (fairness across replicas). */
    ptrdiff_t named;
    named_state ns = waiting_named(p, &named);
    uint64_t first = p->members[head].first_wait_ms;
    if (ns == NAMED_QUEUED && p->waiting_since_ms < first) {
        head = named;
        first = p->waiting_since_ms;
    }
    const rt_hold_member *h = &p->members[head];
    uint64_t grace_end = first + p->grace_ms;
    bool grace_over = p->now_ms >= grace_end;

    /* The resident, if it serves, is busy while it has a request in flight or one held from
     * within the grace: the head is asked for once it is idle or the grace is over. Its new
     * requests keep going until the operator takes that request (the drain then begins and it is
     * not servable). */
    bool resident_busy = false;
    for (size_t i = 0; i < p->n_members; i++) {
        const rt_hold_member *m = &p->members[i];
        if (verdicts[i] != RT_HOLD_SERVE && verdicts[i] != RT_HOLD_FENCE)
            continue;
        resident_busy = m->in_flight > 0 || (m->waiting > 0 && m->first_wait_ms < grace_end);
    }

    /* Ask only when no swap is in flight and no request waits to be taken, ours or another's:
     * the operator takes the newest request, so a second one would cut a swap short. Kept from
     * asking by another's swap or request, the head is named in the pool for whoever asks next,
     * unless an older waiter is named there already or the head is what is being brought in. */
    if (p->request_unseen)
        return;
    if (!is_empty(p->pending) || !is_empty(p->requested)) {
        bool replace = ns == NAMED_NONE ||
                       (ns == NAMED_QUEUED && named != head && first < p->waiting_since_ms);
        if (replace && !str_eq(h->name, p->pending) && !str_eq(h->name, p->requested))
            out->advertise = head;
        return;
    }
    if (str_eq(h->name, p->resident) && h->up)
        return;
    /* The resident named for another replica's clients: theirs first, within the grace. */
    if (ns == NAMED_SERVING && str_eq(p->waiting_member, p->resident) && p->resident_since_ms &&
        p->now_ms < p->resident_since_ms + p->grace_ms) {
        out->wake_at_ms = p->resident_since_ms + p->grace_ms;
        return;
    }
    if (resident_busy && !grace_over) {
        out->wake_at_ms = grace_end;
        return;
    }
    out->activate = head;
}

const char *rt_hold_ack(const char *resident, const char *pending, bool awaiting_probe,
                        size_t outstanding)
{
    return !is_empty(resident) && !is_empty(pending) && !awaiting_probe && outstanding == 0
               ? resident
               : NULL;
}

bool rt_hold_waiting_parse(const char *s, char *member, size_t len, uint64_t *since_unix_ms)
{
    const char *at = s ? strrchr(s, '@') : NULL;
    if (!at || at == s || (size_t)(at - s) >= len || !at[1])
        return false;
    uint64_t v = 0;
    for (const char *d = at + 1; *d; d++) {
        if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*d - '0');
    }
    memcpy(member, s, (size_t)(at - s));
    member[at - s] = '\0';
    *since_unix_ms = v;
    return true;
}

uint32_t rt_hold_retry_after_s(uint64_t estimate_ms, uint64_t swap_started_ms, uint64_t now_ms,
                               uint64_t budget_ms)
{
    uint64_t left_ms;
    if (estimate_ms > 0) {
        uint64_t elapsed =
            swap_started_ms > 0 && now_ms > swap_started_ms ? now_ms - swap_started_ms : 0;
        left_ms = elapsed < estimate_ms ? estimate_ms - elapsed : 0;
    } else {
        left_ms = budget_ms / 10;
        if (left_ms > 30000)
            left_ms = 30000;
    }
    /* Never past the budget: an estimate learnt from a slow swap (an hour) would tell the client
     * to wait longer than the pool ever holds a request. Whole seconds, rounded down there. */
    uint64_t s = (left_ms + 999) / 1000, most = budget_ms / 1000;
    if (s > most)
        s = most;
    return s < 1 ? 1 : (uint32_t)(s > UINT32_MAX ? UINT32_MAX : s);
}

bool rt_hold_fence_refused(long code, const char *ns, char *buf, size_t len)
{
    if (code != 401 && code != 403)
        return false;
    snprintf(buf, len, "cannot get modelpools in namespace %s: %s", ns ? ns : "",
             code == 403 ? "forbidden (the router's role lacks get on "
                           "modelpools.inference.llmkube.dev there)"
                         : "unauthorized (the API server refuses the router's credentials)");
    return true;
}

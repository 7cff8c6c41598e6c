/* test_plan_reported: what is reported rather than acted on: a swap's target loading, failed, stuck
 * or waiting for a GPU (rule 7), and a bad spec, a clear status and never a replica change (rule
 * 5), with the way back once it is fixed; the status mirrored and re-planned to nothing new; the
 * duration parser and bad arguments (src/pool/plan_swap.c, plan_validate.c, api_status.c). Every
 * plan also passes the safety rules (test/support/plan_case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/status.h"
#include "plan_case.h"

/* ---- the target: loading, Ready, failed, stuck ---- */

static void test_target(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title =
                 "target loading: wait, TargetReady says since when, looked at again at the budget",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .phase = "Swapping", .conds = "TargetReady=False/Loading Swapping=True/Loading",
             .actions = "status", .requeue_ms = 299750),
        CASE(.title = "target loading for 100 s of 300: still waits",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .load_age_s = 100, .phase = "Swapping", .conds = "TargetReady=False/Loading",
             .actions = "status", .requeue_ms = 199750),
        CASE(.title =
                 "target not Ready past swapBudget, Pod Pending: TargetNotReady, Warning (#26)",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .load_age_s = 300, .phase = "Degraded", .want_pending = "b",
             .conds = "SlotAllocated=False/TargetNotReady TargetReady=False/TargetNotReady "
                      "Swapping=True/Loading",
             .msg_has = "target b is not Ready within swapBudget (300000 ms) of its start: phase "
                        "Creating; pod b-0 Pending",
             .actions = "status event:W:TargetNotReady"),
        CASE(.title = "target Progressing past a budget of 10s, Pod running, not ready",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Progressing", "R"}}, .budget = "10s",
             SWAP("a", "b", "Loading"), .load_age_s = 11, .phase = "Degraded",
             .msg_has = "phase Progressing; pod b-0 Running, not ready",
             .actions = "status event:W:TargetNotReady"),
        CASE(.title = "target with no Pod past the budget: said so",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Pending"}}, SWAP("a", "b", "Loading"),
             .load_age_s = 400, .phase = "Degraded", .msg_has = "phase Pending; no pod",
             .actions = "status event:W:TargetNotReady"),
        CASE(.title = "the drain's time does not count: TargetReady starts with the load",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .stage_age_s = 1000, .load_age_s = 10, .phase = "Swapping", .actions = "status",
             .requeue_ms = 289750),
        CASE(.title = "target Ready with a pod: swap complete",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}}, SWAP("a", "b", "Loading"),
             .phase = "Ready", .want_resident = "b", .want_pending = "",
             .conds = "SlotAllocated=True/Resident SwapDeferred=False/NotDeferred "
                      "Swapping=False/NotSwapping",
             .actions = "status event:N:SwapCompleted"),
        CASE(.title = "cold warm-up completes the same way",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .pending = "a", .stage = "Loading",
             .phase = "Ready", .want_resident = "a", .actions = "status event:N:SwapCompleted"),
        CASE(.title = "target Ready but incumbent pod still terminating: not complete",
             .m = {{"a", 0, "Stopped", "t"}, {"b", 1, "Ready", "R"}}, SWAP("a", "b", "Loading"),
             .phase = "Swapping", .actions = "status"),
        CASE(.title = "loading target scaled to 0 by someone: cancelled, never a fight (#19)",
             .m = {{"a", 0}, {"b", 0, "Stopped", "t"}}, SWAP("a", "b", "Loading"), .phase = "Ready",
             .want_resident = "b", .want_pending = "",
             .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
             .msg_has = "b is resident, scaled to 0 (stopped)",
             .actions = "status event:W:SwapCancelled"),
        CASE(.title = "loading target at 2 replicas: back to 1",
             .m = {{"a", 0}, {"b", 2, "Creating", "P P"}}, SWAP("a", "b", "Loading"),
             .phase = "Swapping", .msg_has = "member b was scaled to 2 replicas",
             .actions = "status event:W:TooManyReplicas scale:b=1", .requeue_ms = 299750),
        CASE(.title = "target Ready at 2 replicas: settles, and back to 1",
             .m = {{"a", 0}, {"b", 2, "Ready", "R P"}}, SWAP("a", "b", "Loading"), .phase = "Ready",
             .actions = "status event:N:SwapCompleted event:W:TooManyReplicas scale:b=1"),
        CASE(.title = "target Failed: reported, Degraded, Warning",
             .m = {{"a", 0}, {"b", 1, "Failed", "F"}}, SWAP("a", "b", "Loading"),
             .phase = "Degraded", .want_pending = "b",
             .conds = "SlotAllocated=False/TargetFailed MembersValid=True/Valid",
             .msg_has = "target b is Failed", .actions = "status event:W:TargetFailed"),
        CASE(.title = "target Suspended: reported", .m = {{"a", 0}, {"b", 1, "Suspended"}},
             SWAP("a", "b", "Loading"), .phase = "Degraded",
             .conds = "SlotAllocated=False/TargetSuspended",
             .actions = "status event:W:TargetSuspended"),
        CASE(.title = "WaitingForGPU within budget: wait, requeue at the budget",
             .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}}, SWAP("a", "b", "Loading"),
             .stage_age_s = 100, .phase = "Swapping", .conds = "SlotAllocated=False/SwapInProgress",
             .actions = "status", .requeue_ms = 200000 - 250),
        CASE(.title = "WaitingForGPU past the budget: reported",
             .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}}, SWAP("a", "b", "Loading"),
             .stage_age_s = 300, .phase = "Degraded",
             .conds = "SlotAllocated=False/TargetWaitingForGPU", .msg_has = "WaitingForGPU longer",
             .actions = "status event:W:TargetWaitingForGPU"),
        CASE(.title = "WaitingForGPU past a custom budget of 1m",
             .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}}, .budget = "1m",
             SWAP("a", "b", "Loading"), .stage_age_s = 61, .phase = "Degraded",
             .actions = "status event:W:TargetWaitingForGPU"),
        CASE(.title = "a stale Failed phase is not judged before the target is started",
             .m = {{"a", 0}, {"b", 0, "Failed"}}, SWAP("a", "b", "Draining"), .phase = "Swapping",
             .actions = "status scale:b=1"),
    };
    CASE_RUN_TABLE(t);
}

/* TargetNotReady names why the target's Pod does not run, when its status says. */
static void test_target_waiting(void **state)
{
    (void)state;
    static const t_case tc = {.m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
                              .resident = "a",
                              .pending = "b",
                              .stage = "Loading",
                              .load_age_s = 300};
    t_fix *f = case_fix_new(&tc);
    f->pods[1][0].waiting = "ImagePullBackOff";
    plan_result *p = NULL;
    p = case_plan(&f->s);
    const api_condition *c = case_cond(&p->status, "TargetReady");
    assert_non_null(c);
    assert_string_equal(c->message, "target b is not Ready within swapBudget (300000 ms) of its "
                                    "start: phase Creating; pod b-0 Pending (ImagePullBackOff)");
    plan_free(p);
    free(f);
}

/* ---- rule 5: a bad spec is a clear status and never a replica change ---- */

static void test_invalid(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title =
                 "#26: a member not in a cache older than the pool (applied together): nothing "
                 "judged yet, no Degraded, no Event",
             .m = {{"a", 1, "Ready", "R"}, {.name = "b", .missing = true, .unsure = true}},
             .dflt = "a", .phase = "", .actions = ""),
        CASE(.title = "#26: the same in a warm pool: no status change, no swap, no Event",
             .m = {{"a", 1, "Ready", "R"},
                   {.name = "b", .replicas = 1, .missing = true, .unsure = true}},
             .resident = "a", .requested = "b", .phase = "", .want_resident = "a", .actions = ""),
        CASE(.title = "missing member",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1, NULL, NULL, NULL, NULL, 0, true}},
             .resident = "a", .phase = "Degraded", .want_resident = "a",
             .conds = "MembersValid=False/MissingMembers",
             .msg_has = "InferenceService b not found in namespace ml",
             .actions = "status event:W:MissingMembers"),
        CASE(.title = "two missing members: both named",
             .m = {{"a", 0, NULL, NULL, NULL, NULL, 0, true},
                   {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
             .phase = "Degraded",
             .msg_has = "InferenceService a not found in namespace ml; "
                        "InferenceService b not found",
             .actions = "status event:W:MissingMembers"),
        CASE(.title = "duplicate member", .m = {{"a", 1, "Ready", "R"}, {"a", 1, "Ready", "R"}},
             .phase = "Degraded", .conds = "MembersValid=False/DuplicateMember",
             .msg_has = "member a is listed 2 times", .actions = "status event:W:DuplicateMember"),
        CASE(.title = "empty member name", .m = {{"a", 0}, {"", 1}}, .phase = "Degraded",
             .conds = "MembersValid=False/EmptyMemberName", .msg_has = "spec.members[1]",
             .actions = "status event:W:EmptyMemberName"),
        CASE(.title = "default not a member", .m = {{"a", 0}}, .dflt = "z", .phase = "Degraded",
             .conds = "MembersValid=False/DefaultNotMember", .msg_has = "default z",
             .actions = "status event:W:DefaultNotMember"),
        CASE(.title = "member claimed by another pool",
             .m = {{"a", 0}, {"b", 1, NULL, NULL, NULL, NULL, 0, false, "other"}},
             .phase = "Degraded", .conds = "MembersValid=False/MemberInMultiplePools",
             .msg_has = "pool other", .actions = "status event:W:MemberInMultiplePools"),
        CASE(.title = "unparsable swapBudget", .m = {{"a", 1}}, .budget = "soon",
             .phase = "Degraded", .conds = "MembersValid=False/InvalidSwapBudget",
             .msg_has = "\"soon\"", .actions = "status event:W:InvalidSwapBudget"),
        CASE(.title = "negative swapBudget", .m = {{"a", 0}}, .budget = "-5s", .phase = "Degraded",
             .conds = "MembersValid=False/InvalidSwapBudget",
             .actions = "status event:W:InvalidSwapBudget"),
        CASE(.title = "zero swapBudget", .m = {{"a", 0}}, .budget = "0", .phase = "Degraded",
             .actions = "status event:W:InvalidSwapBudget"),
        CASE(.title = "unknown swapPolicy", .m = {{"a", 0}}, .policy = "greedy",
             .phase = "Degraded", .conds = "MembersValid=False/UnsupportedSwapPolicy",
             .actions = "status event:W:UnsupportedSwapPolicy"),
        CASE(.title = "resident removed from spec.members", .m = {{"b", 1}}, .resident = "a",
             .phase = "Degraded", .want_resident = "a",
             .conds = "MembersValid=False/ResidentNotMember", .msg_has = "residentMember a",
             .actions = "status event:W:ResidentNotMember"),
        CASE(.title = "pending removed from spec.members", .m = {{"a", 1, "Ready", "R"}},
             SWAP("a", "b", "Loading"), .phase = "Degraded", .want_pending = "b",
             .conds = "MembersValid=False/PendingNotMember Swapping=True/Loading",
             .actions = "status event:W:PendingNotMember"),
        CASE(.title = "mid-swap with an idle incumbent: still nothing scaled",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}, {"c", 0, NULL, NULL, NULL, NULL, 0, true}},
             SWAP("a", "b", "Draining"), .phase = "Degraded", .want_pending = "b",
             .actions = "status event:W:MissingMembers"),
        CASE(.title = "several faults: first sets the reason, message names each",
             .m = {{"a", 0}, {"a", 0}, {"", 0}, {"c", 0, NULL, NULL, NULL, NULL, 0, true}},
             .dflt = "z", .budget = "x", .phase = "Degraded",
             .conds = "MembersValid=False/EmptyMemberName",
             .msg_has =
                 "spec.members[2] has an empty name; member a is listed 2 times; default z is "
                 "not in spec.members; swapBudget \"x\"",
             .actions = "status event:W:EmptyMemberName"),
        CASE(.title = "no members at all", .phase = "Degraded",
             .conds = "MembersValid=False/NoMembers", .actions = "status event:W:NoMembers"),
    };
    CASE_RUN_TABLE(t);
}

/* Fixing the spec recovers the pool: MembersValid=True and no condition left over. */
static void test_recovery(void **state)
{
    (void)state;
    t_case bad = {.m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
                  .resident = "a"};
    t_fix *f = case_fix_new(&bad);
    api_condition stale = {"Ready", "True", "Old", "from an older operator", NOW - 5000};
    f->s.status.conditions = &stale;
    f->s.status.n_conditions = 1;
    plan_result *p1 = NULL, *p2 = NULL;
    p1 = case_plan(&f->s);
    assert_string_equal(p1->status.phase, "Degraded");
    assert_int_equal(p1->status.n_conditions, 1); /* unknown types dropped, nothing invented */
    assert_true(case_cond_is(&p1->status, "MembersValid", "False", "MissingMembers"));

    f->members[1].exists = true; /* kubectl apply of the missing InferenceService */
    f->s.status = p1->status;
    f->s.now_ms = NOW + 60000;
    p2 = case_plan(&f->s);
    assert_string_equal(p2->status.phase, "Ready");
    assert_string_equal(p2->status.resident_member, "a");
    assert_int_equal(p2->status.n_conditions, 4);
    const char *types[4] = {"MembersValid", "SlotAllocated", "SwapDeferred", "Swapping"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(p2->status.conditions[i].type, types[i]);
    assert_true(case_cond_is(&p2->status, "MembersValid", "True", "Valid"));
    assert_int_equal(case_cond(&p2->status, "MembersValid")->last_transition_ms, NOW + 60000);
    assert_false(case_has_kind(p2, PLAN_SCALE));
    case_check_converges(&f->s, p2);
    plan_free(p2);
    plan_free(p1);
    free(f);
}

/* The router reads the operator's Degraded messages (api_status_fault_spares): a resident serves
 * on while the pool is Degraded only by faults not about it. Each row a pool with resident a (up,
 * Ready) as the real plan reports it, and whether the fault spares a and b. */
typedef struct {
    t_case c;
    bool spares_a, spares_b;
} t_spare;
/* A row: whether the fault spares a and b, then the case's fields. */
// clang-format off
#define SPARES(a, b, ...) {.spares_a = a, .spares_b = b, .c = {__VA_ARGS__}}
// clang-format on

static void test_faults_attributed(void **state)
{
    (void)state;
    static const t_spare t[] = {
        SPARES(true, false, .title = "b not created yet",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, true}}),
        SPARES(false, true, .title = "the resident's InferenceService missing",
               .m = {{"a", 1, NULL, NULL, NULL, NULL, 0, true}, {"b", 0}}),
        SPARES(true, false, .title = "b claimed by another pool",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, false, "other"}}),
        SPARES(false, true, .title = "the resident claimed by another pool",
               .m = {{"a", 1, "Ready", "R", NULL, NULL, 0, false, "other"}, {"b", 0}}),
        SPARES(true, false, .title = "b listed twice",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0}, {"b", 0}}),
        SPARES(false, true, .title = "the resident listed twice",
               .m = {{"a", 1, "Ready", "R"}, {"a", 1}, {"b", 0}}),
        SPARES(true, true, .title = "an empty member name",
               .m = {{"a", 1, "Ready", "R"}, {"", 0}, {"b", 0}}),
        SPARES(true, true, .title = "default not a member", .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
               .dflt = "z"),
        SPARES(true, true, .title = "bad swapBudget", .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
               .budget = "soon"),
        SPARES(false, false,
               .title =
                   "a swapBudget that reads as two faults: no clause of a known shape for its rest",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .budget = "x; member q is listed 2 times"),
        SPARES(true, true, .title = "bad unload-after annotation",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .unload_after = "later"),
        SPARES(true, true, .title = "unsupported swapPolicy",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .policy = "greedy"),
        SPARES(false, true, .title = "the resident removed from spec.members", .m = {{"b", 0}}),
        SPARES(true, false, .title = "the pending member removed from spec.members",
               .m = {{"a", 1, "Ready", "R"}}, .pending = "b", .stage = "Loading"),
        SPARES(false, false, .title = "several faults, one about the resident",
               .m = {{"a", 1, "Ready", "R", NULL, NULL, 0, false, "other"},
                     {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
               .budget = "soon"),
        SPARES(true, true, .title = "a prefix of the resident's name is not its name",
               .m = {{"a", 1, "Ready", "R"}, {"ab", 0, NULL, NULL, NULL, NULL, 0, true}}),
        SPARES(false, false, .title = "valid: not Degraded",
               .m = {{"a", 1, "Ready", "R"}, {"b", 0}}),
        SPARES(false, false, .title = "a swap's target Failed (SlotAllocated): not a spec fault",
               .m = {{"a", 0, "Stopped"}, {"b", 1, "Failed", "P"}}, .pending = "b",
               .stage = "Loading"),
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        t_case c = t[i].c;
        c.resident = "a";
        t_fix *f = case_fix_new(&c);
        plan_result *p = case_plan(&f->s);
        bool a = api_status_fault_spares(&p->status, "a"),
             b = api_status_fault_spares(&p->status, "b");
        const api_condition *v = case_cond(&p->status, "MembersValid");
        if (a != t[i].spares_a || b != t[i].spares_b)
            fail_msg("%s: spares a %d (want %d), b %d (want %d); phase %s, MembersValid %s",
                     c.title, a, t[i].spares_a, b, t[i].spares_b, case_nz(p->status.phase),
                     v ? case_nz(v->message) : "(none)");
        plan_free(p);
        free(f);
    }
    api_status none = {.phase = "Degraded"};
    assert_false(api_status_fault_spares(&none, "a")); /* no MembersValid: fail closed */
    api_condition empty = {"MembersValid", "False", "MissingMembers", "", NOW};
    none.conditions = &empty;
    none.n_conditions = 1;
    assert_false(api_status_fault_spares(&none, "a")); /* no message: fail closed */
    api_condition other = {"MembersValid", "False", "SomethingNew", "member b is odd", NOW};
    none.conditions = &other;
    assert_false(api_status_fault_spares(&none, "a")); /* a shape not known: fail closed */
    assert_false(api_status_fault_spares(&none, NULL));
}

/* members[] mirrors phase and residency, once per name; observedGeneration follows the spec;
 * lastTransitionTime moves only when a condition's status does. */
static void test_status_mirror(void **state)
{
    (void)state;
    t_case tc = {.m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}, {"c", 0}}, .resident = "a"};
    t_fix *f = case_fix_new(&tc);
    f->s.generation = 42;
    plan_result *p = NULL, *q = NULL;
    p = case_plan(&f->s);
    assert_int_equal(p->status.observed_generation, 42);
    assert_int_equal(p->status.n_members, 3);
    assert_string_equal(p->status.members[0].name, "a");
    assert_string_equal(p->status.members[0].phase, "Ready");
    assert_true(p->status.members[0].resident);
    assert_string_equal(p->status.members[1].phase, "Stopped");
    assert_false(p->status.members[1].resident);
    assert_null(p->status.members[2].phase);
    for (size_t i = 0; i < p->status.n_conditions; i++)
        assert_int_equal(p->status.conditions[i].last_transition_ms, NOW);

    /* later: b requested. SlotAllocated flips (new time), MembersValid does not (time kept) */
    f->members[1].replicas = 1;
    f->s.status = p->status;
    f->s.now_ms = NOW + 7777;
    f->s.generation = 43;
    q = case_plan(&f->s);
    assert_int_equal(q->status.observed_generation, 43);
    assert_int_equal(case_cond(&q->status, "MembersValid")->last_transition_ms, NOW);
    assert_int_equal(case_cond(&q->status, "SlotAllocated")->last_transition_ms, NOW + 7000);
    assert_int_equal(case_cond(&q->status, "Swapping")->last_transition_ms, NOW + 7000);
    assert_int_equal(case_cond(&q->status, "SwapDeferred")->last_transition_ms, NOW);
    plan_free(q);
    plan_free(p);
    free(f);
}

/* Plan, apply the status, plan again: no status write, no Event; stable states do nothing. */
static void test_idempotence(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .resident = "a"),
        CASE(.m = {{"a", 0}, {"b", 0}}),
        CASE(.m = {{"a", 1, "Ready", "R"}, {"b", 1, "Ready", "R"}}),
        CASE(.m = {{"a", 1, "Ready", "Rb"}, {"b", 0}}, SWAP("a", "b", "Draining")),
        CASE(.m = {{"a", 0}, {"b", 1, "Failed"}}, SWAP("a", "b", "Loading")),
        CASE(.m = {{"a", 0, NULL, NULL, NULL, NULL, 0, true}}),
        CASE(.m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, SWAP("a", "b", "Draining")),
    };
    const bool stable[] = {true, true, false, true, true, true, true};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        t_fix *f = case_fix_new(&t[i]);
        plan_result *p = NULL, *q = NULL;
        p = case_plan(&f->s);
        assert_true(case_has_kind(p, PLAN_WRITE_STATUS));
        f->s.status = p->status;
        q = case_plan(&f->s);
        assert_false(case_has_kind(q, PLAN_WRITE_STATUS));
        assert_false(case_has_kind(q, PLAN_EVENT));
        if (stable[i])
            assert_int_equal(q->n_actions, 0);
        plan_free(q);
        plan_free(p);
        free(f);
    }
}

/* The port a Pod's spec names beats what the member's spec implies (#19). */

static void test_bad_args(void **state)
{
    (void)state;
    plan_snapshot s = {.n_members = 2};
    plan_result *p = NULL;
    assert_int_equal(plan_build(NULL, &p), -EINVAL);
    assert_int_equal(plan_build(&s, NULL), -EINVAL);
    assert_int_equal(plan_build(&s, &p), -EINVAL); /* members NULL with a count */
    plan_free(NULL);
}

TEST_MAIN(cmocka_unit_test(test_target), cmocka_unit_test(test_target_waiting),
          cmocka_unit_test(test_invalid), cmocka_unit_test(test_faults_attributed),
          cmocka_unit_test(test_recovery), cmocka_unit_test(test_status_mirror),
          cmocka_unit_test(test_idempotence), cmocka_unit_test(test_bad_args))

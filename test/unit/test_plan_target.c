/* test_plan_target: a swap's target loading, Ready, failed, stuck, or waiting for a GPU (rule 7,
 * src/pool/plan_swap.c). Every case also passes the safety rules (plan_case). */
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

#include "plan_case.h"

/* ---- the target: loading, Ready, failed, stuck ---- */

static void test_target(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title =
             "target loading: wait, TargetReady says since when, looked at again at the budget",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .conds = "TargetReady=False/Loading Swapping=True/Loading",
         .actions = "status",
         .requeue_ms = 299750},
        {.title = "target loading for 100 s of 300: still waits",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .load_age_s = 100,
         .phase = "Swapping",
         .conds = "TargetReady=False/Loading",
         .actions = "status",
         .requeue_ms = 199750},
        {.title = "target not Ready past swapBudget, Pod Pending: TargetNotReady, Warning (#26)",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .load_age_s = 300,
         .phase = "Degraded",
         .want_pending = "b",
         .conds = "SlotAllocated=False/TargetNotReady TargetReady=False/TargetNotReady "
                  "Swapping=True/Loading",
         .msg_has = "target b is not Ready within swapBudget (300000 ms) of its start: phase "
                    "Creating; pod b-0 Pending",
         .actions = "status event:W:TargetNotReady"},
        {.title = "target Progressing past a budget of 10s, Pod running, not ready",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Progressing", "R"}},
         .budget = "10s",
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .load_age_s = 11,
         .phase = "Degraded",
         .msg_has = "phase Progressing; pod b-0 Running, not ready",
         .actions = "status event:W:TargetNotReady"},
        {.title = "target with no Pod past the budget: said so",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Pending"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .load_age_s = 400,
         .phase = "Degraded",
         .msg_has = "phase Pending; no pod",
         .actions = "status event:W:TargetNotReady"},
        {.title = "the drain's time does not count: TargetReady starts with the load",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .stage_age_s = 1000,
         .load_age_s = 10,
         .phase = "Swapping",
         .actions = "status",
         .requeue_ms = 289750},
        {.title = "target Ready with a pod: swap complete",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Ready",
         .want_resident = "b",
         .want_pending = "",
         .conds = "SlotAllocated=True/Resident SwapDeferred=False/NotDeferred "
                  "Swapping=False/NotSwapping",
         .actions = "status event:N:SwapCompleted"},
        {.title = "cold warm-up completes the same way",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .pending = "a",
         .stage = "Loading",
         .phase = "Ready",
         .want_resident = "a",
         .actions = "status event:N:SwapCompleted"},
        {.title = "target Ready but incumbent pod still terminating: not complete",
         .m = {{"a", 0, "Stopped", "t"}, {"b", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .actions = "status"},
        {.title = "loading target scaled to 0 by someone: cancelled, never a fight (#19)",
         .m = {{"a", 0}, {"b", 0, "Stopped", "t"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Ready",
         .want_resident = "b",
         .want_pending = "",
         .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
         .msg_has = "b is resident, scaled to 0 (stopped)",
         .actions = "status event:W:SwapCancelled"},
        {.title = "loading target at 2 replicas: back to 1",
         .m = {{"a", 0}, {"b", 2, "Creating", "P P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .msg_has = "member b was scaled to 2 replicas",
         .actions = "status event:W:TooManyReplicas scale:b=1",
         .requeue_ms = 299750},
        {.title = "target Ready at 2 replicas: settles, and back to 1",
         .m = {{"a", 0}, {"b", 2, "Ready", "R P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Ready",
         .actions = "status event:N:SwapCompleted event:W:TooManyReplicas scale:b=1"},
        {.title = "target Failed: reported, Degraded, Warning",
         .m = {{"a", 0}, {"b", 1, "Failed", "F"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Degraded",
         .want_pending = "b",
         .conds = "SlotAllocated=False/TargetFailed MembersValid=True/Valid",
         .msg_has = "target b is Failed",
         .actions = "status event:W:TargetFailed"},
        {.title = "target Suspended: reported",
         .m = {{"a", 0}, {"b", 1, "Suspended"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Degraded",
         .conds = "SlotAllocated=False/TargetSuspended",
         .actions = "status event:W:TargetSuspended"},
        {.title = "WaitingForGPU within budget: wait, requeue at the budget",
         .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .stage_age_s = 100,
         .phase = "Swapping",
         .conds = "SlotAllocated=False/SwapInProgress",
         .actions = "status",
         .requeue_ms = 200000 - 250},
        {.title = "WaitingForGPU past the budget: reported",
         .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .stage_age_s = 300,
         .phase = "Degraded",
         .conds = "SlotAllocated=False/TargetWaitingForGPU",
         .msg_has = "WaitingForGPU longer",
         .actions = "status event:W:TargetWaitingForGPU"},
        {.title = "WaitingForGPU past a custom budget of 1m",
         .m = {{"a", 0}, {"b", 1, "WaitingForGPU", "P"}},
         .budget = "1m",
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .stage_age_s = 61,
         .phase = "Degraded",
         .actions = "status event:W:TargetWaitingForGPU"},
        {.title = "a stale Failed phase is not judged before the target is started",
         .m = {{"a", 0}, {"b", 0, "Failed"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Swapping",
         .actions = "status scale:b=1"},
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
    const plan_condition *c = case_cond(&p->status, "TargetReady");
    assert_non_null(c);
    assert_string_equal(c->message, "target b is not Ready within swapBudget (300000 ms) of its "
                                    "start: phase Creating; pod b-0 Pending (ImagePullBackOff)");
    plan_free(p);
    free(f);
}

TEST_MAIN(cmocka_unit_test(test_target), cmocka_unit_test(test_target_waiting))

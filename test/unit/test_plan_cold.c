/* test_plan_cold: a new pool (default, first request, staying cold), adoption of a member already
 * serving, and a warm pool's sticky resident (src/pool/plan.c, plan_requests.c). Table-driven:
 * every case also passes the safety rules and re-plans to nothing new (test/support/plan_case). */
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

/* ---- cold pools: default, first request, staying cold ---- */

static void test_cold(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "cold, nothing requested, no default: stays Pending",
         .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped"}},
         .phase = "Pending",
         .want_resident = "",
         .want_pending = "",
         .conds = "MembersValid=True/Valid SlotAllocated=False/NoResident "
                  "SwapDeferred=False/NotDeferred Swapping=False/NotSwapping",
         .actions = "status"},
        {.title = "cold with default: warms default, intent only",
         .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped"}},
         .dflt = "b",
         .phase = "Swapping",
         .want_pending = "b",
         .conds = "Swapping=True/Draining",
         .actions = "status event:N:SwapStarted"},
        {.title = "cold, no default: first member scaled up in declaration order",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}, {"c", 2, "Creating"}},
         .phase = "Swapping",
         .want_resident = "",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted"},
        {.title = "cold, unset replicas count as 1",
         .m = {{"a", 0}, {"b", U}},
         .want_pending = "b",
         .actions = "status event:N:SwapStarted"},
        {.title = "cold with default while others are up: default wins",
         .m = {{"a", U, "Creating", "P"}, {"b", U}, {"c", U}},
         .dflt = "c",
         .want_pending = "c",
         .actions = "status event:N:SwapStarted"},
        {.title = "cold, a member at 0 with a terminating pod is no request",
         .m = {{"a", 0, "Stopped", "T"}, {"b", 0}},
         .phase = "Pending",
         .actions = "status"},
    };
    CASE_RUN_TABLE(t);
}

/* ---- adoption of an already serving member ---- */

static void test_adoption(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "one member already serving: adopted without restart",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}},
         .dflt = "a",
         .phase = "Ready",
         .want_resident = "b",
         .want_pending = "",
         .conds = "SlotAllocated=True/Resident",
         .actions = "status event:N:Adopted"},
        {.title = "two members serving: the first kept, the other released (rule 3)",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1, "Ready", "R"}, {"c", 0}},
         .dflt = "c",
         .phase = "Swapping",
         .want_resident = "",
         .want_pending = "a",
         .want_releasing = "b",
         .conds = "MembersValid=True/Valid SlotAllocated=False/SwapInProgress",
         .actions = "status event:N:SwapStarted"},
        {.title = "two serving, after the intent: the kept one is not held, the other drained",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "Ri"}, {"c", 0}},
         .dflt = "c",
         .pending = "a",
         .stage = "Draining",
         .releasing = "b",
         .phase = "Swapping",
         .want_releasing = "b",
         .actions = "status scale:b=0"},
        {.title = "two serving, the other one busy: it is never unloaded, the kept one stays",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "Rb"}},
         .pending = "a",
         .stage = "Draining",
         .releasing = "b",
         .conds = "SwapDeferred=True/PodsBusy",
         .actions = "status event:N:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "one serving, another up and waiting for the GPU: kept, the other held (#19)",
         .m = {{"a", 1, "WaitingForGPU", "P"},
               {"b", 1, "Ready", "R"},
               {"c", 1, "WaitingForGPU", "P"}},
         .dflt = "a",
         .want_pending = "b",
         .want_releasing = "a c",
         .actions = "status event:N:SwapStarted"},
        {.title = "...then the waiting ones go to 0 unprobed, the serving one untouched",
         .m = {{"a", 1, "WaitingForGPU", "P"},
               {"b", 1, "Ready", "R"},
               {"c", 1, "WaitingForGPU", "P"}},
         .dflt = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "a c",
         .actions = "status scale:a=0 scale:c=0"},
        {.title = "...and once they are clear the pool settles on the serving one",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}, {"c", 0, "Stopped"}},
         .dflt = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Ready",
         .want_resident = "b",
         .want_releasing = "",
         .actions = "status event:N:SwapCompleted"},
        {.title = "Ready but scaled to 0 is not serving",
         .m = {{"a", 0, "Ready", "T"}, {"b", 0}},
         .dflt = "b",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted"},
        {.title = "Ready without a live pod is not serving",
         .m = {{"a", 1, "Ready", "S"}},
         .want_pending = "a",
         .actions = "status event:N:SwapStarted"},
    };
    CASE_RUN_TABLE(t);
}

/* ---- warm pools: sticky resident, activation ---- */

static void test_sticky(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "warm, nothing requested: stays Ready, default ignored",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}},
         .dflt = "b",
         .resident = "a",
         .phase = "Ready",
         .want_resident = "a",
         .want_pending = "",
         .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
         .actions = "status"},
        {.title = "warm, resident scaled to 0 by hand: still resident, not restarted",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .resident = "a",
         .phase = "Ready",
         .want_resident = "a",
         .actions = "status"},
        {.title = "warm, another member scaled up: the intent, then held back at once (#26)",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Stopped"}},
         .resident = "a",
         .phase = "Swapping",
         .want_resident = "a",
         .want_pending = "b",
         .conds = "SlotAllocated=False/SwapInProgress Swapping=True/Draining",
         .msg_has = "swapping from a to b",
         .actions = "status event:N:SwapStarted scale:b=0"},
        {.title = "#26: a request loading beside a busy resident whose probe fails: held back in "
                  "the plan that records it, no probe, no fence",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 1, "Progressing", "Re"}},
         .resident = "a",
         .fence = 2000,
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted scale:b=0"},
        {.title = "#26: a request through the pool for a member up beside the resident: held back "
                  "after the intent",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .requested = "b",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted clear:b scale:b=0"},
        {.title = "#26: a request that serves already (started while the operator was away) is "
                  "not held back unprobed",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "R"}},
         .resident = "a",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted"},
        {.title = "warm, two requests: first in declaration order, the other released",
         .m = {{"a", 0}, {"b", 1, "Ready", "R"}, {"c", 1}, {"d", 1}},
         .resident = "b",
         .want_pending = "c",
         .want_releasing = "b d",
         .actions = "status event:N:SwapStarted event:N:RequestSuperseded scale:c=0"},
        {.title = "warm, two requests, the later one already runs a Pod: it wins (rule 3)",
         .m = {{"a", 0}, {"b", 1, "Ready", "R"}, {"c", 1, "Creating", "P"}, {"d", 1, "Ready", "R"}},
         .resident = "b",
         .want_pending = "d",
         .want_releasing = "b c",
         .actions = "status event:N:SwapStarted event:N:RequestSuperseded"},
        {.title = "warm, resident at 2 replicas: back to 1 unprobed (one running), Warning",
         .m = {{"a", 2, "Ready", "R P"}, {"b", 0}},
         .resident = "a",
         .phase = "Ready",
         .conds = "SlotAllocated=True/Resident",
         .msg_has = "member a was scaled to 2 replicas",
         .actions = "status event:W:TooManyReplicas scale:a=1"},
        {.title = "warm, resident at 2 with two running Pods: both probed first",
         .m = {{"a", 2, "Ready", "R R"}, {"b", 0}},
         .resident = "a",
         .phase = "Ready",
         .actions = "status event:W:TooManyReplicas probe:a[a-0,a-1]@8080"},
        {.title = "warm, resident at 2, one Pod busy: held, reported, re-probed",
         .m = {{"a", 2, "Ready", "Ri Rb"}, {"b", 0}},
         .resident = "a",
         .conds = "SlotAllocated=True/Resident SwapDeferred=True/PodsBusy",
         .actions = "status event:N:SwapDeferred event:W:TooManyReplicas",
         .requeue_ms = 1250},
        {.title = "warm, resident at 3, all idle: back to 1",
         .m = {{"a", 3, "Ready", "Ri Ri Ri"}, {"b", 0}},
         .resident = "a",
         .actions = "status event:W:TooManyReplicas scale:a=1"},
        {.title = "warm, a member with replicas 0 but live pods is no request",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped", "T"}},
         .resident = "a",
         .phase = "Ready",
         .actions = "status"},
    };
    CASE_RUN_TABLE(t);
}

TEST_MAIN(cmocka_unit_test(test_cold), cmocka_unit_test(test_adoption),
          cmocka_unit_test(test_sticky))

/* test_plan_requests: how the slot is asked for and held (rules 3 and 4): a new pool (default,
 * first request, staying cold), adoption of a member already serving, a warm pool's sticky
 * resident, newer requests superseding the pending one, and requests through the pool's annotation
 * (#19) (src/pool/plan.c, plan_requests.c). Table-driven: every case also passes the safety rules
 * and re-plans to nothing new (test/support/plan_case). */
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
        CASE(.title = "cold, nothing requested, no default: stays Pending",
             .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped"}}, .phase = "Pending",
             .want_resident = "", .want_pending = "",
             .conds = "MembersValid=True/Valid SlotAllocated=False/NoResident "
                      "SwapDeferred=False/NotDeferred Swapping=False/NotSwapping",
             .actions = "status"),
        CASE(.title = "cold with default: warms default, intent only",
             .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped"}}, .dflt = "b", .phase = "Swapping",
             .want_pending = "b", .conds = "Swapping=True/Draining",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "cold, no default: first member scaled up in declaration order",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}, {"c", 2, "Creating"}},
             .phase = "Swapping", .want_resident = "", .want_pending = "b",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "cold, unset replicas count as 1", .m = {{"a", 0}, {"b", U}},
             .want_pending = "b", .actions = "status event:N:SwapStarted"),
        CASE(.title = "cold with default while others are up: default wins",
             .m = {{"a", U, "Creating", "P"}, {"b", U}, {"c", U}}, .dflt = "c", .want_pending = "c",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "cold, a member at 0 with a terminating pod is no request",
             .m = {{"a", 0, "Stopped", "T"}, {"b", 0}}, .phase = "Pending", .actions = "status"),
    };
    CASE_RUN_TABLE(t);
}

/* ---- adoption of an already serving member ---- */

static void test_adoption(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title = "one member already serving: adopted without restart",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}}, .dflt = "a", .phase = "Ready",
             .want_resident = "b", .want_pending = "", .conds = "SlotAllocated=True/Resident",
             .actions = "status event:N:Adopted"),
        CASE(.title = "two members serving: the first kept, the other released (rule 3)",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1, "Ready", "R"}, {"c", 0}}, .dflt = "c",
             .phase = "Swapping", .want_resident = "", .want_pending = "a", .want_releasing = "b",
             .conds = "MembersValid=True/Valid SlotAllocated=False/SwapInProgress",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "two serving, after the intent: the kept one is not held, the other drained",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "Ri"}, {"c", 0}}, .dflt = "c",
             .pending = "a", .stage = "Draining", .releasing = "b", .phase = "Swapping",
             .want_releasing = "b", .actions = "status scale:b=0"),
        CASE(.title = "two serving, the other one busy: it is never unloaded, the kept one stays",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "Rb"}}, .pending = "a",
             .stage = "Draining", .releasing = "b", .conds = "SwapDeferred=True/PodsBusy",
             .actions = "status event:N:SwapDeferred", .requeue_ms = 1250),
        CASE(.title = "one serving, another up and waiting for the GPU: kept, the other held (#19)",
             .m = {{"a", 1, "WaitingForGPU", "P"},
                   {"b", 1, "Ready", "R"},
                   {"c", 1, "WaitingForGPU", "P"}},
             .dflt = "a", .want_pending = "b", .want_releasing = "a c",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "...then the waiting ones go to 0 unprobed, the serving one untouched",
             .m = {{"a", 1, "WaitingForGPU", "P"},
                   {"b", 1, "Ready", "R"},
                   {"c", 1, "WaitingForGPU", "P"}},
             .dflt = "a", .pending = "b", .stage = "Draining", .releasing = "a c",
             .actions = "status scale:a=0 scale:c=0"),
        CASE(.title = "...and once they are clear the pool settles on the serving one",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Ready", "R"}, {"c", 0, "Stopped"}}, .dflt = "a",
             .pending = "b", .stage = "Draining", .phase = "Ready", .want_resident = "b",
             .want_releasing = "", .actions = "status event:N:SwapCompleted"),
        CASE(.title = "Ready but scaled to 0 is not serving",
             .m = {{"a", 0, "Ready", "T"}, {"b", 0}}, .dflt = "b", .want_pending = "b",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "Ready without a live pod is not serving", .m = {{"a", 1, "Ready", "S"}},
             .want_pending = "a", .actions = "status event:N:SwapStarted"),
    };
    CASE_RUN_TABLE(t);
}

/* ---- warm pools: sticky resident, activation ---- */

static void test_sticky(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title = "warm, nothing requested: stays Ready, default ignored",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}}, .dflt = "b", .resident = "a",
             .phase = "Ready", .want_resident = "a", .want_pending = "",
             .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
             .actions = "status"),
        CASE(.title = "warm, resident scaled to 0 by hand: still resident, not restarted",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .resident = "a", .phase = "Ready",
             .want_resident = "a", .actions = "status"),
        CASE(.title = "warm, another member scaled up: the intent, then held back at once (#26)",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Stopped"}}, .resident = "a",
             .phase = "Swapping", .want_resident = "a", .want_pending = "b",
             .conds = "SlotAllocated=False/SwapInProgress Swapping=True/Draining",
             .msg_has = "swapping from a to b", .actions = "status event:N:SwapStarted scale:b=0"),
        CASE(.title =
                 "#26: a request loading beside a busy resident whose probe fails: held back in "
                 "the plan that records it, no probe, no fence",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 1, "Progressing", "Re"}}, .resident = "a",
             .fence = 2000, .phase = "Swapping", .want_pending = "b",
             .actions = "status event:N:SwapStarted scale:b=0"),
        CASE(.title =
                 "#26: a request through the pool for a member up beside the resident: held back "
                 "after the intent",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Creating", "P"}}, .resident = "a",
             .requested = "b", .phase = "Swapping", .want_pending = "b",
             .actions = "status event:N:SwapStarted clear:b scale:b=0"),
        CASE(.title = "#26: a request that serves already (started while the operator was away) is "
                      "not held back unprobed",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "R"}}, .resident = "a",
             .phase = "Swapping", .want_pending = "b", .actions = "status event:N:SwapStarted"),
        CASE(.title = "warm, two requests: first in declaration order, the other released",
             .m = {{"a", 0}, {"b", 1, "Ready", "R"}, {"c", 1}, {"d", 1}}, .resident = "b",
             .want_pending = "c", .want_releasing = "b d",
             .actions = "status event:N:SwapStarted event:N:RequestSuperseded scale:c=0"),
        CASE(.title = "warm, two requests, the later one already runs a Pod: it wins (rule 3)",
             .m = {{"a", 0},
                   {"b", 1, "Ready", "R"},
                   {"c", 1, "Creating", "P"},
                   {"d", 1, "Ready", "R"}},
             .resident = "b", .want_pending = "d", .want_releasing = "b c",
             .actions = "status event:N:SwapStarted event:N:RequestSuperseded"),
        CASE(.title = "warm, resident at 2 replicas: back to 1 unprobed (one running), Warning",
             .m = {{"a", 2, "Ready", "R P"}, {"b", 0}}, .resident = "a", .phase = "Ready",
             .conds = "SlotAllocated=True/Resident", .msg_has = "member a was scaled to 2 replicas",
             .actions = "status event:W:TooManyReplicas scale:a=1"),
        CASE(.title = "warm, resident at 2 with two running Pods: both probed first",
             .m = {{"a", 2, "Ready", "R R"}, {"b", 0}}, .resident = "a", .phase = "Ready",
             .actions = "status event:W:TooManyReplicas probe:a[a-0,a-1]@8080"),
        CASE(.title = "warm, resident at 2, one Pod busy: held, reported, re-probed",
             .m = {{"a", 2, "Ready", "Ri Rb"}, {"b", 0}}, .resident = "a",
             .conds = "SlotAllocated=True/Resident SwapDeferred=True/PodsBusy",
             .actions = "status event:N:SwapDeferred event:W:TooManyReplicas", .requeue_ms = 1250),
        CASE(.title = "warm, resident at 3, all idle: back to 1",
             .m = {{"a", 3, "Ready", "Ri Ri Ri"}, {"b", 0}}, .resident = "a",
             .actions = "status event:W:TooManyReplicas scale:a=1"),
        CASE(.title = "warm, a member with replicas 0 but live pods is no request",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped", "T"}}, .resident = "a",
             .phase = "Ready", .actions = "status"),
    };
    CASE_RUN_TABLE(t);
}

/* ---- newer requests supersede the pending one ---- */

static void test_supersede(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title =
                 "draining, target held, newer request: it takes over (intent, then held back)",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}, {"c", 1}},
             SWAP("a", "b", "Draining"), .phase = "Swapping", .want_resident = "a",
             .want_pending = "c", .msg_has = "swapping from a to c",
             .actions = "status event:N:SwapStarted scale:c=0"),
        CASE(.title = "draining, target not yet held, newer request: takes over at once (rule 3)",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 1}}, SWAP("a", "b", "Draining"),
             .want_pending = "c", .want_releasing = "a b",
             .actions = "status event:N:SwapStarted scale:c=0"),
        CASE(.title = "...then every other member up is dealt with, the new target held first",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 1}}, SWAP("a", "c", "Draining"),
             .releasing = "a b", .want_pending = "c",
             .actions = "status scale:c=0 probe:a[a-0]@8080 scale:b=0"),
        CASE(.title = "two requests while draining: the one running a Pod wins, the other released",
             .m = {{"a", 1, "Ready", "Rb"},
                   {"b", 0},
                   {"c", 1, "Creating", "P"},
                   {"d", 1, "Ready", "R"}},
             SWAP("a", "b", "Draining"), .want_pending = "d", .want_releasing = "a c",
             .actions = "status event:N:SwapStarted event:N:RequestSuperseded"),
        CASE(.title = "loading, newer request: started target becomes the incumbent",
             .m = {{"a", 0}, {"b", 1, "Creating", "P"}, {"c", 1}}, SWAP("a", "b", "Loading"),
             .want_resident = "b", .want_pending = "c", .conds = "Swapping=True/Draining",
             .actions = "status event:N:SwapStarted scale:c=0"),
        CASE(.title = "loading, target still at 0, newer request: plain hand-over",
             .m = {{"a", 0}, {"b", 0}, {"c", 1}}, SWAP("a", "b", "Loading"), .want_resident = "a",
             .want_pending = "c", .actions = "status event:N:SwapStarted"),
        CASE(.title = "loading, failed target, newer request: escapes the failure",
             .m = {{"a", 0}, {"b", 1, "Failed", "F"}, {"c", 1}}, SWAP("a", "b", "Loading"),
             .phase = "Swapping", .want_resident = "b", .want_pending = "c",
             .actions = "status event:N:SwapStarted scale:c=0"),
        CASE(.title = "cold warm-up, draining: members up from before are drained, not obeyed",
             .m = {{"a", U}, {"b", U}, {"c", U, "Ready", "Ri"}}, .pending = "b",
             .stage = "Draining", .releasing = "a c", .want_resident = "", .want_pending = "b",
             .actions = "status scale:b=0 scale:a=0 scale:c=0"),
        CASE(.title = "cold warm-up, loading: a request supersedes",
             .m = {{"a", 1}, {"b", 1, "Creating", "P"}}, .pending = "b", .stage = "Loading",
             .want_resident = "b", .want_pending = "a",
             .actions = "status event:N:SwapStarted scale:a=0"),
        CASE(.title = "loading, resident raised again: a request to go back to it", .releasing = "",
             .m = {{"a", 1, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .phase = "Swapping", .want_resident = "b", .want_pending = "a",
             .conds = "Swapping=True/Draining", .msg_has = "swapping from b to a",
             .actions = "status event:N:SwapStarted scale:a=0"),
        CASE(.title = "#26: draining, a request back to the resident while its readiness flaps: it "
                      "may still serve, so it is drained (probed), never held back unprobed",
             .m = {{"a", 1, "Progressing", "Rb"}, {"b", 1, "Progressing", "R"}},
             SWAP("a", "b", "Draining"), .requested = "a", .phase = "Swapping",
             .want_resident = "a", .want_pending = "a",
             .actions = "status event:N:SwapStarted clear:a"),
        CASE(.title = "loading, failed target, resident raised again: escapes the failure",
             .releasing = "", .m = {{"a", 1, "Stopped", "P"}, {"b", 1, "Failed", "F"}},
             SWAP("a", "b", "Loading"), .phase = "Swapping", .want_resident = "b",
             .want_pending = "a", .actions = "status event:N:SwapStarted scale:a=0"),
        CASE(.title = "loading, target at 0 by hand, resident raised again: returning to it",
             .m = {{"a", 1, "Stopped"}, {"b", 0, "Stopped"}}, .releasing = "",
             SWAP("a", "b", "Loading"), .want_resident = "a", .want_pending = "a",
             .msg_has = "returning to a", .actions = "status event:N:SwapStarted"),
        CASE(.title = "returning to the resident while its old Pod terminates: held at 0 (rule 1)",
             .m = {{"a", 1, "Creating", "t P"}, {"b", 0, "Stopped"}}, SWAP("a", "a", "Draining"),
             .releasing = "", .actions = "status scale:a=0"),
        CASE(.title = "going back after a failed target: the failed one stopped, request held",
             .m = {{"a", 1, "Stopped", "P"}, {"b", 1, "Failed", "F"}}, SWAP("b", "a", "Draining"),
             .phase = "Swapping", .want_resident = "b", .want_pending = "a",
             .actions = "status scale:a=0 scale:b=0"),
        CASE(.title = "going back after a failed target: once it is at 0, the request starts",
             .m = {{"a", 0, "Stopped"}, {"b", 0, "Failed", "F"}}, SWAP("b", "a", "Draining"),
             .conds = "Swapping=True/Draining", .actions = "status scale:a=1"),
        CASE(.title = "re-raising the resident during a swap is no request: drained again",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .want_pending = "b", .actions = "status scale:a=0"),
        CASE(.title = "returned to the resident: it serves, the swap completes",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .resident = "a", .pending = "a",
             .releasing = "", .stage = "Draining", .phase = "Ready", .want_pending = "",
             .actions = "status event:N:SwapCompleted"),
    };
    CASE_RUN_TABLE(t);
}

/* ---- requests through the pool (its annotation, #19) ---- */

static void test_pool_request(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title =
                 "#26: a withdrawal before anything was unloaded: honoured, the resident stays",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}}, SWAP("a", "b", "Draining"),
             .withdrawn = "b", .phase = "Ready", .want_resident = "a", .want_pending = "",
             .want_releasing = "",
             .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
             .actions = "status event:N:RequestWithdrawn unwithdraw:b"),
        CASE(.title =
                 "#26: a withdrawal after the incumbent was scaled down: not honoured, the swap "
                 "goes on",
             .m = {{"a", 0, "Stopped", "t"}, {"b", 0, "Stopped"}}, SWAP("a", "b", "Draining"),
             .withdrawn = "b", .phase = "Swapping", .want_pending = "b",
             .actions = "status unwithdraw:b"),
        CASE(.title = "#26: a withdrawal once the target was started: not honoured",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Loading"),
             .withdrawn = "b", .phase = "Swapping", .want_pending = "b",
             .actions = "status unwithdraw:b", .requeue_ms = 299750),
        CASE(.title = "#26: a withdrawal of another swap (stale): cleared, this swap goes on",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}, {"c", 0}},
             SWAP("a", "b", "Draining"), .withdrawn = "c", .phase = "Swapping", .want_pending = "b",
             .actions = "status event:N:SwapDeferred unwithdraw:c", .requeue_ms = 1250),
        CASE(.title = "warm, requested through the pool: swap intent, then the request is cleared",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}}, .resident = "a", .requested = "b",
             .phase = "Swapping", .want_pending = "b", .want_releasing = "a",
             .actions = "status event:N:SwapStarted clear:b"),
        CASE(.title = "the pool's request beats a member scaled up, which is released",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 0}}, .resident = "a", .requested = "c",
             .want_pending = "c", .want_releasing = "a b",
             .actions = "status event:N:SwapStarted event:N:RequestSuperseded clear:c"),
        CASE(.title = "cold pool: the request wins over default", .m = {{"a", 0}, {"b", 0}},
             .dflt = "a", .requested = "b", .want_pending = "b",
             .actions = "status event:N:SwapStarted clear:b"),
        CASE(.title = "request for the target already pending: cleared, the swap goes on",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"), .requested = "b",
             .want_pending = "b", .actions = "status clear:b scale:a=0"),
        CASE(.title = "request for the settled resident: only cleared",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .resident = "a", .requested = "a",
             .phase = "Ready", .actions = "status clear:a"),
        CASE(.title = "request for the resident at 0: started again, returning to it",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .resident = "a", .requested = "a",
             .want_pending = "a", .msg_has = "returning to a",
             .actions = "status event:N:SwapStarted clear:a"),
        CASE(.title = "request for no member: cleared with a Warning, nothing else",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .resident = "a", .requested = "zz",
             .phase = "Ready", .actions = "status event:W:RequestIgnored clear:zz"),
        CASE(.title = "a Degraded pool takes no request: it waits in the annotation",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
             .resident = "a", .requested = "b", .phase = "Degraded",
             .actions = "status event:W:MissingMembers"),
        CASE(.title = "during a swap, a request for the resident being drained: returning to it",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, SWAP("a", "b", "Draining"), .requested = "a",
             .want_pending = "a", .msg_has = "returning to a",
             .actions = "status event:N:SwapStarted clear:a"),
    };
    CASE_RUN_TABLE(t);
}

TEST_MAIN(cmocka_unit_test(test_cold), cmocka_unit_test(test_adoption),
          cmocka_unit_test(test_sticky), cmocka_unit_test(test_supersede),
          cmocka_unit_test(test_pool_request))

/* test_plan_drain: how the GPU is released (rules 1 and 2): draining the incumbent (probes, busy,
 * errors, unsupported runtimes, terminating Pods, the drain fence, a Pod's own port), members
 * removed from the spec while they hold the GPU, and a resident that cannot be probed, which must
 * not wedge the pool (#26) (src/pool/plan_drain.c, plan_unprobeable.c). Table-driven: every case
 * also passes the safety rules and re-plans to nothing new (test/support/plan_case). */
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

/* ---- draining the incumbent: probes, busy, errors, unsupported runtimes, terminating pods ---- */

static void test_drain(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title = "incumbent running, unprobed: probe it; request held at 0",
             .m = {{"a", 1, "Ready", "R R"}, {"b", 1, "Stopped"}}, SWAP("a", "b", "Draining"),
             .phase = "Swapping", .conds = "SwapDeferred=False/NotDeferred Swapping=True/Draining",
             .actions = "status scale:b=0 probe:a[a-0,a-1]@8080"),
        CASE(.title = "incumbent all idle: scaled to 0",
             .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .actions = "status scale:a=0"),
        CASE(.title = "incumbent busy: kept, PodsBusy, re-probe later",
             .m = {{"a", 1, "Ready", "Ri Rb"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/PodsBusy", .msg_has = "a-1 is busy",
             .actions = "status event:N:SwapDeferred", .requeue_ms = 1250),
        CASE(.title = "drain fence ahead: no probe yet, looked at again when it ends",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = 1000,
             .conds = "SwapDeferred=False/NotDeferred Swapping=True/Draining", .actions = "status",
             .requeue_ms = 750),
        CASE(.title = "idle from before the fence: probed again, not unloaded",
             .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = -400,
             .actions = "status probe:a[a-0,a-1]@8080"),
        CASE(.title = "idle from after the fence: scaled to 0",
             .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = -500,
             .actions = "status scale:a=0"),
        CASE(.title = "idle from a probe sent after the fence, answered slowly: fresh from its "
                      "answer, scaled to 0",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = -3000,
             .probe_took_ms = 2400, .actions = "status scale:a=0"),
        CASE(.title = "idle answered after the fence from a probe sent before it: probed again",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = -1000,
             .probe_took_ms = 600, .actions = "status probe:a[a-0]@8080"),
        CASE(.title = "busy before the fence ends: still reported busy, no probe",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = 3000,
             .conds = "SwapDeferred=True/PodsBusy", .actions = "status event:N:SwapDeferred",
             .requeue_ms = 1250),
        CASE(.title =
                 "returning to the resident while another member is up: the resident is fenced "
                 "too",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Creating", "Ri"}}, .releasing = "b",
             SWAP("a", "a", "Draining"), .fence = 1000, .actions = "status", .requeue_ms = 750),
        CASE(.title = "no running Pod: stopped at once, fence or not",
             .m = {{"a", 1, "Ready", "N"}, {"b", 0}}, SWAP("a", "b", "Draining"), .fence = 1000,
             .actions = "status scale:a=0"),
        CASE(.title = "stale busy: re-probed, still reported busy",
             .m = {{"a", 1, "Ready", "RB"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/PodsBusy",
             .actions = "status event:N:SwapDeferred probe:a[a-0]@8080"),
        CASE(.title = "stale idle is not idle: every running Pod probed again, together",
             .m = {{"a", 1, "Ready", "RI Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=False/NotDeferred", .actions = "status probe:a[a-0,a-1]@8080"),
        CASE(.title = "restarted operator, busy incumbent not probed yet: deferral kept",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .deferred = "True/PodsBusy",
             .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining",
             .actions = "status probe:a[a-0]@8080"),
        CASE(.title = "restarted operator, failing probe: kept, no second Warning",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .deferred = "True/IdleCheckFailed", .conds = "SwapDeferred=True/IdleCheckFailed",
             .actions = "status probe:a[a-0]@8080"),
        CASE(.title = "a known idle result clears an old deferral",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .deferred = "True/PodsBusy", .conds = "SwapDeferred=False/NotDeferred",
             .actions = "status scale:a=0"),
        CASE(.title = "probe error: IdleCheckFailed, fail closed",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/IdleCheckFailed", .msg_has = "connection refused",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 1250),
        CASE(.title = "prober says unsupported: IdleCheckUnsupported",
             .m = {{"a", 1, "Ready", "Ru"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/IdleCheckUnsupported",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 1250),
        CASE(.title = "personaplex cannot be probed: IdleCheckUnsupported, no probe",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/IdleCheckUnsupported", .msg_has = "personaplex",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 299750),
        CASE(.title = "generic without idle-endpoint annotation: unsupported",
             .m = {{"a", 1, "Ready", "R", "generic"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "SwapDeferred=True/IdleCheckUnsupported", .msg_has = "idle-endpoint",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 299750),
        CASE(.title = "generic with the annotation: probed at its path",
             .m = {{"a", 1, "Ready", "R", "generic", "/idle"}, {"b", 0}},
             SWAP("a", "b", "Draining"), .actions = "status probe:a[a-0]@8080/idle"),
        CASE(.title = "vllm default port; endpoint port wins (target held, probed)",
             .m = {{"a", 1, "Ready", "R", "vllm"},
                   {"b", 1, "Ready", "R", "sglang", NULL, 9000},
                   {"c", 0}},
             SWAP("a", "b", "Draining"), .actions = "status probe:b[b-0]@9000 probe:a[a-0]@8000"),
        CASE(.title = "tgi and sglang default ports",
             .m = {{"a", 1, "Ready", "R", "tgi"}, {"b", 1, "Ready", "R", "sglang"}},
             SWAP("a", "b", "Draining"), .actions = "status probe:b[b-0]@30000 probe:a[a-0]@80"),
        CASE(.title = "busy member and unsupported member: first deferred sets reason",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 1, "Ready", "Rb"}},
             SWAP("a", "b", "Draining"), .conds = "SwapDeferred=True/PodsBusy",
             .msg_has = "b-0 is busy", .actions = "status event:N:SwapDeferred",
             .requeue_ms = 1250),
        CASE(.title = "incumbent up but no running container: scaled to 0 unprobed",
             .m = {{"a", 1, "Creating", "P N"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .actions = "status scale:a=0"),
        CASE(.title = "incumbent at 0, pods still terminating: wait, target stays 0",
             .m = {{"a", 0, "Stopped", "T t"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .phase = "Swapping", .conds = "Swapping=True/Draining", .actions = "status"),
        CASE(.title = "terminal pods do not hold the GPU: target started",
             .m = {{"a", 0, "Stopped", "S F"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .conds = "Swapping=True/Draining", .msg_has = "starting b",
             .actions = "status scale:b=1"),
        CASE(.title = "rule 1: the target's own old Pod still terminates: not started yet",
             .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped", "t"}}, SWAP("a", "b", "Draining"),
             .conds = "Swapping=True/Draining", .msg_has = "waiting for pod b-0 of b to terminate",
             .actions = "status"),
        CASE(.title = "rule 1: a terminating Pod with a running container holds it too",
             .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped", "T P"}}, SWAP("a", "b", "Draining"),
             .actions = "status"),
        CASE(.title = "rule 1: the target requested again while its old Pod terminates: held at 0",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "t P"}}, SWAP("a", "b", "Draining"),
             .conds = "Swapping=True/Draining", .actions = "status scale:b=0"),
        CASE(.title = "target's started, the cache shows it up: Loading",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating"}}, SWAP("a", "b", "Draining"),
             .conds = "Swapping=True/Loading", .actions = "status"),
        CASE(.title = "request already up and others clear: Loading, no scale needed",
             .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}}, SWAP("a", "b", "Draining"),
             .conds = "Swapping=True/Loading", .actions = "status"),
        CASE(.title = "#26: a target loading beside the incumbent, its probe failing: held back "
                      "before any fence or probe",
             .m = {{"a", 1, "Ready", "R"}, {"b", 1, "Progressing", "Re"}},
             SWAP("a", "b", "Draining"), .fence = 2000, .phase = "Swapping",
             .actions = "status scale:b=0", .requeue_ms = 1750),
        CASE(.title = "target running beside the incumbent: both probed before unload",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "R"}}, SWAP("a", "b", "Draining"),
             .actions = "status probe:b[b-0]@8080 scale:a=0"),
        CASE(.title = "containerPort is where the server listens, before endpoint.port (#19)",
             .m = {{"a", 1, "Ready", "R", NULL, NULL, 8080, false, NULL, 9090}, {"b", 0}},
             SWAP("a", "b", "Draining"), .actions = "status probe:a[a-0]@9090"),
        CASE(.title = "rule 5: the target's start refused by the API server: reported, retried",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .refused = {"b", 1, "denied by policy no-scale"}, .phase = "Swapping",
             .conds = "SwapDeferred=True/WriteRefused Swapping=True/Draining",
             .msg_has = "scaling member b to 1 was refused by the API server: denied by policy",
             .actions = "status event:W:WriteRefused scale:b=1"),
        CASE(.title = "rule 5: a refused drain is reported the same way",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .refused = {"a", 0, "forbidden"}, .conds = "SwapDeferred=True/WriteRefused",
             .actions = "status event:W:WriteRefused scale:a=0"),
        CASE(.title =
                 "rule 5: a refused drain whose probe went stale: probed again, still reported",
             .m = {{"a", 1, "Ready", "RI"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .refused = {"a", 0, "forbidden"}, .conds = "SwapDeferred=True/WriteRefused",
             .actions = "status event:W:WriteRefused probe:a[a-0]@8080"),
        CASE(.title = "rule 5: a refusal of a write the plan no longer wants says nothing",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .refused = {"b", 1, "denied"}, .conds = "SwapDeferred=False/NotDeferred",
             .actions = "status scale:a=0"),
        CASE(.title = "no Swapping condition recorded: treated as Draining",
             .m = {{"a", 0}, {"b", 0}}, .resident = "a", .pending = "b",
             .conds = "Swapping=True/Draining", .actions = "status scale:b=1"),
    };
    CASE_RUN_TABLE(t);
}

/* ---- rule 1 for members removed from the spec while they hold the GPU (#26) ---- */

static void test_removed(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title = "a releasing member removed while busy: the target waits, x stays recorded",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 1, "Ready", "Rb"}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .phase = "Swapping", .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining",
             .msg_has = "member x: pod x-0 is busy", .actions = "status event:N:SwapDeferred",
             .requeue_ms = 1250),
        CASE(.title = "removed, unprobed: probed after the fence, target held",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 1, "Ready", "R"}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .msg_has = "waiting for pod x-0 of x (removed from spec.members) to be gone",
             .actions = "status probe:x[x-0]@8080"),
        CASE(.title = "removed and idle: scaled to 0, still recorded",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 1, "Ready", "Ri"}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .actions = "status scale:x=0"),
        CASE(.title = "removed at 0, its Pod terminating: the target waits",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 0, "Stopped", "T"}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .conds = "Swapping=True/Draining",
             .msg_has = "waiting for pod x-0 of x (removed from spec.members) to be gone",
             .actions = "status"),
        CASE(.title = "removed and deleted, its Pod terminating: the target waits",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", U, NULL, "t", .missing = true}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .actions = "status"),
        CASE(.title = "removed, at 0, Pods gone: forgotten, the target starts",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 0, "Stopped", "S"}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "",
             .actions = "status scale:b=1"),
        CASE(.title = "removed and deleted, no Pod: forgotten, the target starts",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", U, NULL, NULL, .missing = true}},
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "",
             .actions = "status scale:b=1"),
        CASE(.title = "settled pool, a removed member still up: drained to 0",
             .m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .gone = {{"x", 1, "Ready", "Ri"}},
             .resident = "a", .releasing = "x", .want_releasing = "x", .phase = "Ready",
             .actions = "status scale:x=0"),
        CASE(.title = "cold pool, a removed member's Pod terminating: default waits for it",
             .m = {{"a", 0}, {"b", 0}}, .gone = {{"x", 0, "Stopped", "T"}}, .dflt = "a",
             .releasing = "x", .want_releasing = "x", .phase = "Swapping", .want_pending = "a",
             .actions = "status event:N:SwapStarted"),
        CASE(.title = "the resident removed (Degraded): recorded, not releasing, nothing acts",
             .m = {{"a", 0}, {"b", 0}}, .gone = {{"x", 1, "Ready", "R"}}, .resident = "x",
             .releasing = "", .want_releasing = "", .phase = "Degraded",
             .conds = "MembersValid=False/ResidentNotMember",
             .actions = "status event:W:ResidentNotMember"),
        CASE(.title = "Degraded spec: the removed member stays recorded, nothing acts",
             .m = {{"a", 0, "Stopped"}, {"b", 0}}, .gone = {{"x", 1, "Ready", "R"}}, .dflt = "nope",
             SWAP("a", "b", "Draining"), .releasing = "x", .want_releasing = "x",
             .phase = "Degraded", .actions = "status event:W:DefaultNotMember"),
    };
    CASE_RUN_TABLE(t);
}

static void test_pod_port(void **state)
{
    (void)state;
    static const t_case tc = {.m = {{"a", 1, "Ready", "R R", NULL, NULL, 8080}, {"b", 0}},
                              .resident = "a",
                              .pending = "b",
                              .stage = "Draining"};
    t_fix *f = case_fix_new(&tc);
    f->pods[0][1].port = 7777;
    plan_result *p = NULL;
    p = case_plan(&f->s);
    char got[512];
    case_render(p, got, sizeof got);
    assert_string_equal(got, "status probe:a[a-0,a-1:7777]@8080");
    plan_free(p);
    free(f);
}

/* A drain held back by the fence says until when (the controller moves the reaction clock there);
 * one that is not held says nothing. */
static void test_fenced_until(void **state)
{
    (void)state;
    const t_case held = {.title = "held by the fence",
                         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
                         .resident = "a",
                         .pending = "b",
                         .stage = "Draining",
                         .fence = 1000};
    const t_case open = {.title = "fence over",
                         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
                         .resident = "a",
                         .pending = "b",
                         .stage = "Draining",
                         .fence = -1000};
    const t_case *cases[] = {&held, &open};
    const int64_t want[] = {NOW + 1000, 0};
    for (size_t i = 0; i < 2; i++) {
        t_fix *f = case_fix_new(cases[i]);
        plan_result *p = NULL;
        p = case_plan(&f->s);
        assert_int_equal(p->fenced_until_ms, want[i]);
        plan_free(p);
        free(f);
    }
}

/* ---- a resident that cannot be probed does not wedge the pool (#26) ---- */

/* After a drop: resident a stays, its probes failing, the request for b dropped. */
#define AFTER_DROP .resident = "a", .dropped = true, .deferred = "True/IdleCheckFailed"

static void test_unprobeable(void **state)
{
    (void)state;
    static const t_case t[] = {
        CASE(.title =
                 "probe failing, swap 299 s old of 300: still deferred, looked at at the budget",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 299, .phase = "Swapping", .conds = "SwapDeferred=True/IdleCheckFailed",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 750),
        CASE(.title =
                 "#26: probe failing, no opt-in: the drain has not begun, a serves (AwaitingProbe)",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 10, .deferred = "True/IdleCheckFailed", .phase = "Swapping",
             .want_pending = "b",
             .conds = "SwapDeferred=True/IdleCheckFailed Swapping=True/AwaitingProbe",
             .msg_has =
                 "a serves until its idle probe can decide (pod a-0: connection refused); the "
                 "request for b is dropped if it cannot within swapBudget",
             .actions = "status", .requeue_ms = 1250),
        CASE(.title = "#26: no idle probe for the runtime: AwaitingProbe at once, nothing probed",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 0,
             .conds = "SwapDeferred=True/IdleCheckUnsupported Swapping=True/AwaitingProbe",
             .actions = "status event:W:SwapDeferred", .requeue_ms = 299750),
        CASE(.title = "#26: awaiting, the failed answer went stale: probed again within the fence, "
                      "deferral kept",
             .m = {{"a", 1, "Ready", "RE"}, {"b", 0}}, SWAP("a", "b", "AwaitingProbe"),
             .stage_age_s = 10, .deferred = "True/IdleCheckFailed", .fence = 2000,
             .want_pending = "b",
             .conds = "SwapDeferred=True/IdleCheckFailed Swapping=True/AwaitingProbe",
             .actions = "status probe:a[a-0]@8080", .requeue_ms = 1750),
        CASE(.title = "#26: awaiting, the probe answers idle: the drain begins (Draining), nothing "
                      "unloaded before the fence",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, SWAP("a", "b", "AwaitingProbe"),
             .stage_age_s = 10, .deferred = "True/IdleCheckFailed", .fence = 2000,
             .want_pending = "b", .conds = "Swapping=True/Draining", .actions = "status",
             .requeue_ms = 1750),
        CASE(.title = "#26: with the opt-in the drain has begun: no AwaitingProbe",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, .unload_after = "10m",
             SWAP("a", "b", "Draining"), .stage_age_s = 10, .deferred = "True/IdleCheckFailed",
             .conds = "Swapping=True/Draining", .requeue_ms = 1250),
        CASE(.title = "probe failing past swapBudget: the request is dropped, a serves again",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 300, .deferred = "True/IdleCheckFailed", .phase = "Ready",
             .want_resident = "a", .want_pending = "",
             .conds = "SlotAllocated=True/Resident SwapDeferred=True/IdleCheckFailed "
                      "Swapping=False/RequestDropped",
             .msg_has =
                 "member a: pod a-0: connection refused; the request for b was dropped after "
                 "swapBudget (300000 ms) without a probe that could decide, and a serves again",
             .actions = "status event:W:RequestDropped"),
        CASE(.title = "no idle probe for the runtime past a budget of 10s: dropped, Unsupported",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, .budget = "10s",
             SWAP("a", "b", "Draining"), .stage_age_s = 10, .phase = "Ready", .want_pending = "",
             .conds = "SwapDeferred=True/IdleCheckUnsupported Swapping=False/RequestDropped",
             .msg_has = "runtime personaplex has no idle probe; the request for b was dropped",
             .actions = "status event:W:RequestDropped event:W:SwapDeferred"),
        CASE(.title = "dropped with the target up: it is released and held at 0",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 1, "Creating"}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 300, .deferred = "True/IdleCheckFailed", .want_pending = "",
             .want_releasing = "b", .actions = "status event:W:RequestDropped scale:b=0"),
        CASE(.title = "busy past swapBudget: the probe decided, the swap waits",
             .m = {{"a", 1, "Ready", "Rb"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 400, .deferred = "True/PodsBusy", .want_pending = "b",
             .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining", .actions = "status",
             .requeue_ms = 1250),
        CASE(.title = "one Pod busy, one failing, past swapBudget: waits (busy decides)",
             .m = {{"a", 2, "Ready", "Rb Re"}, {"b", 0}}, SWAP("a", "b", "Draining"),
             .stage_age_s = 400, .deferred = "True/PodsBusy", .want_pending = "b",
             .requeue_ms = 1250),
        CASE(.title = "opt-in: unprobeable resident unloaded once the swap waited 10s",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, .unload_after = "10s",
             SWAP("a", "b", "Draining"), .stage_age_s = 10, .deferred = "True/IdleCheckFailed",
             .phase = "Swapping", .want_pending = "b", .actions = "status scale:a=0",
             .requeue_ms = 1250),
        CASE(.title = "opt-in: not before the drain fence",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, .unload_after = "10s",
             SWAP("a", "b", "Draining"), .stage_age_s = 10, .fence = 1000,
             .deferred = "True/IdleCheckUnsupported", .actions = "status", .requeue_ms = 750),
        CASE(.title = "opt-in: within its grace, deferred and looked at again when it ends",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, .unload_after = "10s",
             SWAP("a", "b", "Draining"), .stage_age_s = 5, .deferred = "True/IdleCheckUnsupported",
             .actions = "status", .requeue_ms = 4750),
        CASE(.title = "opt-in longer than swapBudget: no drop, it waits for the grace",
             .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}}, .unload_after = "10m",
             SWAP("a", "b", "Draining"), .stage_age_s = 400,
             .deferred = "True/IdleCheckUnsupported", .want_pending = "b", .actions = "status",
             .requeue_ms = 199750),
        CASE(.title = "an invalid opt-in: Degraded, nothing acts",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, .unload_after = "soon",
             SWAP("a", "b", "Draining"), .stage_age_s = 400, .phase = "Degraded",
             .conds = "MembersValid=False/InvalidUnloadAfter",
             .actions = "status event:W:InvalidUnloadAfter"),
        CASE(.title = "after a drop: a stale failure is probed again, the episode stands",
             .m = {{"a", 1, "Ready", "RE"}, {"b", 0}}, AFTER_DROP, .phase = "Ready",
             .conds = "Swapping=False/RequestDropped SwapDeferred=True/IdleCheckFailed",
             .actions = "status probe:a[a-0]@8080"),
        CASE(.title = "after a drop: a fresh failure, looked at again when it goes stale",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, AFTER_DROP,
             .conds = "Swapping=False/RequestDropped SwapDeferred=True/IdleCheckFailed",
             .actions = "status", .requeue_ms = 1250),
        CASE(.title = "after a drop: the probe decides again (idle), the episode is over",
             .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}}, AFTER_DROP,
             .conds = "Swapping=False/NotSwapping SwapDeferred=False/NotDeferred",
             .actions = "status"),
        CASE(.title = "after a drop: the pool opts into unloading, the episode is over",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, AFTER_DROP, .unload_after = "1m",
             .conds = "Swapping=False/NotSwapping SwapDeferred=False/NotDeferred",
             .actions = "status"),
        CASE(.title = "after a drop: a new request starts a swap as usual",
             .m = {{"a", 1, "Ready", "Re"}, {"b", 0}}, AFTER_DROP, .requested = "b",
             .want_pending = "b", .conds = "Swapping=True/Draining",
             .actions = "status event:N:SwapStarted clear:b"),
    };
    CASE_RUN_TABLE(t);
}

TEST_MAIN(cmocka_unit_test(test_drain), cmocka_unit_test(test_removed),
          cmocka_unit_test(test_pod_port), cmocka_unit_test(test_fenced_until),
          cmocka_unit_test(test_unprobeable))

/* test_hold: the router's decision core (src/router/hold.c) as tables: one row a pool as the
 * caches show it and the requests held for it, and the verdict each member gets, the member asked
 * for and when to decide again. Then a small simulated run: requests for three members arrive
 * interleaved and are served in the order of their first arrival, none starves. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/hold.h"

/* Rows leave their last fields (spares) out when they are false. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define MAXM 4
#define T0 100000

/* A member as a string: "name:flags:waiting@first:inflight", flags of x (missing), ? (missing from
 * a cache not caught up with the pool), u (up), r (one ready Pod), F (Failed), S (Suspended), G
 * (WaitingForGPU). */
typedef struct {
    const char *title;
    const char *phase, *resident, *pending, *requested;
    bool unseen;
    const char *m[MAXM];
    uint64_t now_ms;  /* T0 + this */
    const char *want; /* verdict letters in member order: S, W, D (degraded), M (phase) */
    int activate;     /* -1 none */
    uint64_t wake;    /* T0 + this, 0 none */
    bool spares;      /* degraded_spares_resident */
} t_case;

static void parse_member(const char *spec, rt_hold_member *m, char *name)
{
    unsigned waiting = 0, first = 0, inflight = 0;
    char flags[16] = "";
    int n = sscanf(spec, "%15[^:]:%15[^:]:%u@%u:%u", name, flags, &waiting, &first, &inflight);
    if (n < 2) /* empty flags */
        n = sscanf(spec, "%15[^:]::%u@%u:%u", name, &waiting, &first, &inflight);
    assert_true(n >= 1);
    *m = (rt_hold_member){.name = name,
                          .exists = strchr(flags, 'x') == NULL && strchr(flags, '?') == NULL,
                          .absence_unsure = strchr(flags, '?') != NULL,
                          .up = strchr(flags, 'u') != NULL,
                          .ready_pods = strchr(flags, 'r') != NULL,
                          .waiting = waiting,
                          .first_wait_ms = T0 + first,
                          .in_flight = inflight};
    if (strchr(flags, 'F'))
        m->phase = "Failed";
    else if (strchr(flags, 'S'))
        m->phase = "Suspended";
    else if (strchr(flags, 'G'))
        m->phase = "WaitingForGPU";
    else
        m->phase = m->ready_pods ? "Ready" : "Stopped";
}

/* A pool's members and what rt_hold_decide made of it: the verdict letters in member order, S
 * serve, F wait for the fence's read, W wait, R refused read, D degraded, M member phase. */
typedef struct {
    rt_hold_member ms[MAXM];
    char names[MAXM][16];
    size_t n;
    rt_hold_verdict v[MAXM];
    rt_hold_reject r[MAXM];
    rt_hold_decision d;
    char got[MAXM + 1];
} t_run;

/* x's members from their strings (parse_member), up to MAXM or the first NULL. */
static void members(t_run *x, const char *const *m)
{
    for (x->n = 0; x->n < MAXM && m[x->n]; x->n++)
        parse_member(m[x->n], &x->ms[x->n], x->names[x->n]);
}

/* Decides p, a pool of x's members. */
static void decide(t_run *x, rt_hold_pool *p)
{
    p->members = x->ms;
    p->n_members = x->n;
    rt_hold_decide(p, x->v, x->r, &x->d);
    for (size_t i = 0; i < x->n; i++)
        x->got[i] = x->v[i] == RT_HOLD_SERVE             ? 'S'
                    : x->v[i] == RT_HOLD_FENCE           ? 'F'
                    : x->v[i] == RT_HOLD_WAIT            ? 'W'
                    : x->r[i] == RT_REJECT_FENCE_REFUSED ? 'R'
                    : x->r[i] == RT_REJECT_DEGRADED      ? 'D'
                                                         : 'M';
    x->got[x->n] = '\0';
}

static void run(const t_case *t, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        t_run x;
        members(&x, t[c].m);
        rt_hold_pool p = {.phase = t[c].phase,
                          .resident = t[c].resident,
                          .pending = t[c].pending,
                          .requested = t[c].requested,
                          .request_unseen = t[c].unseen,
                          .degraded_spares_resident = t[c].spares,
                          .grace_ms = 5000,
                          .now_ms = T0 + t[c].now_ms,
                          /* the fence open for the resident: its own cases are test_fence's */
                          .fence_member = t[c].resident,
                          .fence_read_ms = T0 + t[c].now_ms,
                          .fence_window_ms = 1000,
                          .registered_until_ms = UINT64_MAX};
        decide(&x, &p);
        uint64_t wake = t[c].wake ? T0 + t[c].wake : 0;
        if (strcmp(x.got, t[c].want) != 0 || x.d.activate != t[c].activate ||
            x.d.wake_at_ms != wake)
            fail_msg("%s: verdicts %s (want %s), activate %td (want %d), wake %llu (want %llu)",
                     t[c].title, x.got, t[c].want, x.d.activate, t[c].activate,
                     (unsigned long long)x.d.wake_at_ms, (unsigned long long)wake);
    }
}

/* One row a case reads better than one field a line. */
// clang-format off
static void test_serve_and_activate(void **state)
{
    (void)state;
    static const t_case t[] = {
        {"resident ready: served, nothing asked", "Ready", "a", NULL, NULL, false,
         {"a:ur:3@0:0", "b::0@0:0"}, 10, "SW", -1, 0},
        {"request for a stopped member, resident idle: asked at once", "Ready", "a", NULL, NULL,
         false, {"a:ur:0@0:0", "b::2@0:0"}, 10, "SW", 1, 0},
        {"resident busy, grace running: it keeps serving, wake at grace end", "Ready", "a", NULL,
         NULL, false, {"a:ur:0@0:2", "b::1@100:0"}, 1000, "SW", -1, 5100},
        {"resident busy, grace over: b asked, the resident's new requests still go (not taken)",
         "Ready", "a", NULL, NULL, false, {"a:ur:0@0:2", "b::1@100:0"}, 5100, "SW", 1, 0},
        {"our request for b not taken long past the grace (operator down): the resident serves all",
         "Ready", "a", NULL, "b", false, {"a:ur:3@20000:2", "b::1@100:0"}, 60000, "SW", -1, 0},
        {"our request written, not seen yet, past the grace: the resident serves all", "Ready",
         "a", NULL, NULL, true, {"a:ur:3@20000:2", "b::1@100:0"}, 60000, "SW", -1, 0},
        {"resident's held requests from within the grace keep it busy", "Ready", "a", NULL, NULL,
         false, {"a:ur:2@200:0", "b::1@100:0"}, 300, "SW", -1, 5100},
        {"swap in flight: everything waits, nothing asked", "Swapping", "a", "b", NULL, false,
         {"a:ur:1@0:0", "b:u:4@0:0"}, 10, "WW", -1, 0},
        {"another's request in the annotation: not overwritten", "Ready", "a", NULL, "c", false,
         {"a:ur:0@0:0", "b::1@0:0", "c::0@0:0"}, 10, "SWW", -1, 0},
        {"our own request not seen yet: not asked twice", "Ready", "a", NULL, NULL, true,
         {"a:ur:0@0:0", "b::1@0:0"}, 10, "SW", -1, 0},
        {"target became resident and ready: served", "Ready", "b", NULL, NULL, false,
         {"a::0@0:0", "b:ur:5@0:0"}, 10, "WS", -1, 0},
        {"resident up but not ready (starting): waits, not asked again", "Ready", "a", NULL, NULL,
         false, {"a:u:2@0:0", "b::0@0:0"}, 10, "WW", -1, 0},
        {"resident stopped (cancelled swap): asked again", "Ready", "a", NULL, NULL, false,
         {"a::2@0:0", "b::0@0:0"}, 10, "WW", 0, 0},
        {"cold pool without resident: the first waiter's member asked", "Pending", NULL, NULL,
         NULL, false, {"a::1@50:0", "b::1@20:0"}, 100, "WW", 1, 0},
    };
    run(t, sizeof t / sizeof t[0]);
}

static void test_reject(void **state)
{
    (void)state;
    static const t_case t[] = {
        {"Degraded by a fault about the resident (or unknown): every member 503, nothing asked",
         "Degraded", "a", NULL, NULL, false, {"a:ur:1@0:0", "b::1@0:0"}, 10, "DD", -1, 0},
        {"Degraded by a fault that spares the resident: it serves, the others 503, nothing asked",
         "Degraded", "a", NULL, NULL, false, {"a:ur:1@0:2", "b::1@0:0", "c:x:1@0:0"}, 10000,
         "SDD", -1, 0, true},
        {"Degraded sparing the resident, which has no ready Pod: 503, nothing held", "Degraded",
         "a", NULL, NULL, false, {"a:u:1@0:0", "b::1@0:0"}, 10, "DD", -1, 0, true},
        {"Degraded sparing the resident, a swap pending (its drain begun): 503", "Degraded", "a",
         "b", NULL, false, {"a:ur:1@0:0", "b:u:1@0:0"}, 10, "DD", -1, 0, true},
        {"Degraded sparing the resident, no resident: every member 503", "Degraded", NULL, NULL,
         NULL, false, {"a:ur:1@0:0", "b::1@0:0"}, 10, "DD", -1, 0, true},
        {"Failed member: 503, the others untouched", "Ready", "a", NULL, NULL, false,
         {"a:ur:0@0:0", "b:F:1@0:0", "c::1@5:0"}, 10, "SMW", 2, 0},
        {"Suspended member: 503", "Ready", "a", NULL, NULL, false,
         {"a:ur:0@0:0", "b:S:1@0:0"}, 10, "SM", -1, 0},
        {"WaitingForGPU target: 503", "Swapping", "a", "b", NULL, false,
         {"a::0@0:0", "b:uG:1@0:0"}, 10, "WM", -1, 0},
        {"WaitingForGPU on a member that is not the target: not judged", "Ready", "a", NULL, NULL,
         false, {"a:ur:0@0:0", "b:G:1@0:0"}, 10, "SW", 1, 0},
        {"missing InferenceService: 503", "Ready", "a", NULL, NULL, false,
         {"a:ur:0@0:0", "b:x:1@0:0"}, 10, "SM", -1, 0},
        {"#26: not cached, cache behind the pool: waits, never asked for", "Ready", "a", NULL,
         NULL, false, {"a:ur:0@0:0", "b:?:1@0:0"}, 10, "SW", -1, 0},
        {"#26: the same in a cold pool: waits, not 503 member is missing", "Pending", NULL, NULL,
         NULL, false, {"a:?:1@0:0", "b::0@0:0"}, 10, "WW", -1, 0},
    };
    run(t, sizeof t / sizeof t[0]);
}

// clang-format on
/* The drain fence: a row a pool with its resident "a" ready and b stopped, the last read of the
 * pool (the member it showed resident with no swap, how long ago it was sent: -1 none), whether
 * the API server refuses the read; the verdicts (S serve, F wait for the read, W, R refused, D
 * degraded, M member phase), whether a read is asked for now, and the time a forward must be
 * sending by. The window is 1000 ms. */
typedef struct {
    const char *title;
    const char *phase, *pending;
    const char *m[MAXM];
    const char *read_member;
    int64_t read_age;
    bool refused;
    const char *want;
    bool read;
    int64_t send_by; /* T0 + this */
    bool spares;     /* degraded_spares_resident */
    int64_t reg;     /* registration left in ms: 0 registered for good, -1 not registered */
    bool blocked;    /* resident_blocked */
} t_fence;

static void run_fence(const t_fence *t, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        t_run x;
        members(&x, t[c].m);
        uint64_t now = T0 + 10000, read_at = t[c].read_age >= 0 ? now - t[c].read_age : 0;
        rt_hold_pool p = {.phase = t[c].phase,
                          .resident = "a",
                          .pending = t[c].pending,
                          .grace_ms = 5000,
                          .now_ms = now,
                          .fence_member = t[c].read_member,
                          .fence_read_ms = read_at,
                          .fence_window_ms = 1000,
                          .registered_until_ms = t[c].reg == 0  ? UINT64_MAX
                                                 : t[c].reg < 0 ? 0
                                                                : now + (uint64_t)t[c].reg,
                          .resident_blocked = t[c].blocked,
                          .fence_refused = t[c].refused,
                          .degraded_spares_resident = t[c].spares};
        decide(&x, &p);
        uint64_t send_by = read_at + 1000;
        if (strcmp(x.got, t[c].want) != 0 || x.d.fence_read != t[c].read ||
            (t[c].send_by && x.d.send_by_ms != T0 + (uint64_t)t[c].send_by))
            fail_msg("%s: verdicts %s (want %s), read %d (want %d), send by %llu (%llu)",
                     t[c].title, x.got, t[c].want, x.d.fence_read, t[c].read,
                     (unsigned long long)x.d.send_by_ms, (unsigned long long)send_by);
        if (t[c].refused)
            assert_int_equal(x.d.activate, -1);
    }
}

// clang-format off
static void test_fence(void **state)
{
    (void)state;
    static const t_fence t[] = {
        {"young read of a: served, no read asked", "Ready", NULL,
         {"a:ur:2@0:0", "b::0@0:0"}, "a", 100, false, "SW", false, 9900 + 1000},
        {"read just under three quarters of its window old: served, no read asked yet", "Ready",
         NULL, {"a:ur:2@0:0", "b::0@0:0"}, "a", 749, false, "SW", false, 9251 + 1000},
        {"read three quarters of its window old: served, the next read asked ahead", "Ready", NULL,
         {"a:ur:2@0:0", "b::0@0:0"}, "a", 750, false, "SW", true, 9250 + 1000},
        {"read past its window: the resident's requests wait for a new one", "Ready", NULL,
         {"a:ur:2@0:0", "b::0@0:0"}, "a", 1000, false, "FW", true, 0},
        {"no read yet: they wait, one is asked", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, NULL, -1, false, "FW", true, 0},
        {"the read showed another resident: wait", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "b", 100, false, "FW", true, 0},
        {"no request for the resident: no read asked", "Ready", NULL,
         {"a:ur:0@0:0", "b::0@0:0"}, NULL, -1, false, "FW", false, 0},
        {"the cache shows a swap: the resident waits, a young read does not open it", "Swapping",
         "b", {"a:ur:1@0:0", "b:u:0@0:0"}, "a", 100, false, "WW", false, 0},
        {"the read is refused: every member 503, a read asked to see the right granted", "Ready",
         NULL, {"a:ur:1@0:0", "b::1@0:0"}, "a", 100, true, "RR", true, 0},
        {"refused with nobody waiting: still read", "Ready", NULL,
         {"a:ur:0@0:0", "b::0@0:0"}, NULL, -1, true, "RR", true, 0},
        {"refused beats Degraded", "Degraded", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, true, "RR", true, 0},
        {"Degraded: 503 whatever the read", "Degraded", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "DD", false, 0},
        {"Degraded sparing the resident, young read: served", "Degraded", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "SD", false, 9900 + 1000, true},
        {"Degraded sparing the resident, no read: it waits for one", "Degraded", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, NULL, -1, false, "FD", true, 0, true},
        {"Degraded sparing the resident, the read refused: refused beats it", "Degraded", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, true, "RR", true, 0, true},
        {"not registered: the resident waits, no read asked (of no use yet)", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "FW", false, 0, false, -1},
        {"not registered, no read: still none asked", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, NULL, -1, false, "FW", false, 0, false, -1},
        {"registration ends within the window: sending by its end", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "SW", false, 10000 + 300, false, 300},
        {"registration ends after the window: the window's end", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "SW", false, 9900 + 1000, false, 5000},
        {"an acknowledgement may stand: the resident waits, no read asked", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, false, "FW", false, 0, false, 0, true},
        {"an acknowledgement may stand, refused: refused all the same", "Ready", NULL,
         {"a:ur:1@0:0", "b::0@0:0"}, "a", 100, true, "RR", true, 0, false, 0, true},
    };
    run_fence(t, sizeof t / sizeof t[0]);
}
// clang-format on

/* A request for another member while the resident waits for the fence's read: the resident is
 * busy with it all the same (its requests are served once the read comes), so b is not asked for
 * before the grace ends. */
static void test_fence_keeps_grace(void **state)
{
    (void)state;
    t_run x;
    members(&x, (const char *[]){"a:ur:1@100:0", "b::1@0:0", NULL});
    rt_hold_pool p = {.phase = "Ready",
                      .resident = "a",
                      .grace_ms = 5000,
                      .now_ms = T0 + 1000,
                      .fence_window_ms = 1000,
                      .registered_until_ms = UINT64_MAX};
    decide(&x, &p);
    assert_int_equal(x.v[0], RT_HOLD_FENCE);
    assert_true(x.d.fence_read);
    assert_int_equal(x.d.activate, -1);
    assert_int_equal(x.d.wake_at_ms, T0 + 5000);
}

/* #26: a swap whose resident's idle probe cannot decide has not begun to drain it (Swapping
 * True/AwaitingProbe): the resident serves all its requests, through the fence's read as always,
 * with no grace (holding them would not begin the drain), until the drain begins. The pool: a
 * resident, b pending with a request waiting since T0 (past the grace at T0 + 10000). */
typedef struct {
    const char *title;
    const char *phase;
    bool awaiting;
    const char *a;           /* the resident as parse_member reads it */
    const char *read_member; /* the fence's last read, 100 ms ago */
    const char *want;        /* verdicts of a and b */
    bool read;
    bool spares; /* degraded_spares_resident */
} t_await;

static void test_awaiting_probe(void **state)
{
    (void)state;
    // clang-format off
    static const t_await t[] = {
        {"awaiting: the resident serves, no grace", "Swapping", true, "a:ur:2@8000:1", "a",
         "SW", false},
        {"not awaiting (draining): the resident's requests wait", "Swapping", false,
         "a:ur:2@8000:1", "a", "WW", false},
        {"awaiting, no young read: they wait for one", "Swapping", true, "a:ur:2@8000:0", NULL,
         "FW", true},
        {"awaiting, the resident has no ready Pod: wait", "Swapping", true, "a:u:2@8000:0", "a",
         "WW", false},
        {"awaiting but Degraded: 503", "Degraded", true, "a:ur:2@8000:0", "a", "DD", false},
        {"awaiting, Degraded by a fault sparing the resident: it serves", "Degraded", true,
         "a:ur:2@8000:0", "a", "SD", false, true},
    };
    // clang-format on
    for (size_t c = 0; c < sizeof t / sizeof t[0]; c++) {
        t_run x;
        members(&x, (const char *[]){t[c].a, "b:u:1@0:0", NULL});
        uint64_t now = T0 + 10000;
        rt_hold_pool p = {.phase = t[c].phase,
                          .resident = "a",
                          .pending = "b",
                          .awaiting_probe = t[c].awaiting,
                          .degraded_spares_resident = t[c].spares,
                          .grace_ms = 5000,
                          .now_ms = now,
                          .fence_member = t[c].read_member,
                          .fence_read_ms = now - 100,
                          .fence_window_ms = 1000,
                          .registered_until_ms = UINT64_MAX};
        decide(&x, &p);
        if (strcmp(x.got, t[c].want) != 0 || x.d.fence_read != t[c].read || x.d.activate != -1)
            fail_msg("%s: verdicts %s (want %s), read %d, activate %td", t[c].title, x.got,
                     t[c].want, x.d.fence_read, x.d.activate);
    }
}

/* The pool dropped its last request (its resident cannot be probed): the resident serves, every
 * other member's requests are refused, nothing is asked; a new swap (pending set) ends that. */
static void test_dropped(void **state)
{
    (void)state;
    t_run x;
    members(&x, (const char *[]){"a:ur:2@0:0", "b::1@0:0", "c::0@0:0", NULL});
    rt_hold_pool p = {.phase = "Ready",
                      .resident = "a",
                      .dropped = true,
                      .grace_ms = 5000,
                      .now_ms = T0 + 10000,
                      .fence_member = "a",
                      .fence_read_ms = T0 + 10000,
                      .fence_window_ms = 1000,
                      .registered_until_ms = UINT64_MAX};
    decide(&x, &p);
    assert_int_equal(x.v[0], RT_HOLD_SERVE);
    assert_int_equal(x.v[1], RT_HOLD_REJECT);
    assert_int_equal(x.r[1], RT_REJECT_DROPPED);
    assert_int_equal(x.v[2], RT_HOLD_REJECT);
    assert_int_equal(x.d.activate, -1);

    p.dropped = false; /* the episode is over: b is asked for again */
    decide(&x, &p);
    assert_int_equal(x.v[1], RT_HOLD_WAIT);
    assert_int_equal(x.d.activate, 1);
}
// clang-format off

static void test_order(void **state)
{
    (void)state;
    static const t_case t[] = {
        {"the member whose first request is oldest goes first", "Ready", "a", NULL, NULL, false,
         {"a:ur:0@0:0", "b::3@300:0", "c::1@200:0"}, 1000, "SWW", 2, 0},
        {"ties go to spec order", "Ready", "a", NULL, NULL, false,
         {"a:ur:0@0:0", "b::1@200:0", "c::1@200:0"}, 1000, "SWW", 1, 0},
        {"a busy resident past the grace: a asked, b's new ones still go (not taken yet)",
         "Ready", "b", NULL, NULL, false, {"a::1@100:0", "b:ur:2@50:1", "c::1@200:0"}, 6000,
         "WSW", 0, 0},
    };
    run(t, sizeof t / sizeof t[0]);
}
// clang-format on

/* #27, fairness across replicas: the pool's waiting annotation names another replica's longest
 * waiter. A row: the pool (resident a, b and c stopped, d missing), what this router holds, the
 * named member and how long ago its waiter came (ms; none: NULL), then the member asked for and
 * the member this router names (-1 none), and for a named resident when this router saw its swap
 * end and when to decide again. Now is T0 + 10000; the grace is 5000 ms. */
typedef struct {
    const char *title;
    const char *pending, *requested;
    const char *m[MAXM];
    const char *named;
    uint64_t named_ago;
    int activate, advertise;
    uint64_t settled_ago; /* the last swap ended here that long ago; 0 none seen */
    uint64_t wake_in;     /* wake_at_ms: now + this; 0 none */
} t_fair;

static void test_fair_across_replicas(void **state)
{
    (void)state;
    // clang-format off
    static const t_fair t[] = {
        {"named waiter older than ours: it is asked for, not ours", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "c", 3000, 2, -1},
        {"named waiter younger than ours: ours is asked for", NULL, NULL,
         {"a:ur:0@0:0", "b::1@5000:0", "c::0@0:0"}, "c", 1000, 1, -1},
        {"named waiter for our own member, older: asked (its grace from the older)", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "b", 8000, 1, -1},
        {"no waiter here: another's name is not acted on", NULL, NULL,
         {"a:ur:0@0:0", "b::0@0:0", "c::0@0:0"}, "c", 3000, -1, -1},
        {"named member is the resident: ignored, ours asked", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "a", 9000, 1, -1},
        {"named member does not exist: ignored", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0", "d:x:0@0:0"}, "d", 9000, 1, -1},
        {"swap in flight, nothing named: ours is named", "c", NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c:u:0@0:0"}, NULL, 0, -1, 1},
        {"another's request waits, a younger waiter named: ours replaces it", NULL, "c",
         {"a:ur:0@0:0", "b::1@5000:0", "c::0@0:0", "d::0@0:0"}, "d", 1000, -1, 1},
        {"swap in flight, an older waiter named: left as it is", "c", NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c:u:0@0:0", "d::0@0:0"}, "d", 3000, -1, -1},
        {"swap in flight to our member: nothing named", "b", NULL,
         {"a:ur:0@0:0", "b:u:1@9000:0", "c::0@0:0"}, NULL, 0, -1, -1},
        {"swap in flight to the named member (its clients about to be answered): left", "c",
         NULL, {"a:ur:0@0:0", "b::1@9000:0", "c:u:0@0:0"}, "c", 3000, -1, -1},
        {"the resident named, settled 1 s ago: not asked away from within the grace", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "a", 3000, -1, -1, 1000, 4000},
        {"the resident named, settled 6 s ago: the grace is over, ours asked", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "a", 3000, 1, -1, 6000},
        {"the resident named, its settling not seen here: ours asked", NULL, NULL,
         {"a:ur:0@0:0", "b::1@9000:0", "c::0@0:0"}, "a", 3000, 1, -1},
        {"swap in flight, our member already named (by us, younger): left", "c", NULL,
         {"a:ur:0@0:0", "b::1@5000:0", "c:u:0@0:0"}, "b", 1000, -1, -1},
    };
    // clang-format on
    for (size_t c = 0; c < sizeof t / sizeof t[0]; c++) {
        t_run x;
        members(&x, t[c].m);
        uint64_t now = T0 + 10000;
        rt_hold_pool p = {.phase = t[c].pending ? "Swapping" : "Ready",
                          .resident = "a",
                          .pending = t[c].pending,
                          .requested = t[c].requested,
                          .grace_ms = 5000,
                          .now_ms = now,
                          .fence_member = "a",
                          .fence_read_ms = now,
                          .fence_window_ms = 1000,
                          .registered_until_ms = UINT64_MAX,
                          .waiting_member = t[c].named,
                          .waiting_since_ms = now - t[c].named_ago,
                          .resident_since_ms = t[c].settled_ago ? now - t[c].settled_ago : 0};
        decide(&x, &p);
        uint64_t wake = t[c].wake_in ? now + t[c].wake_in : 0;
        if (x.d.activate != t[c].activate || x.d.advertise != t[c].advertise ||
            x.d.wake_at_ms != wake)
            fail_msg("%s: activate %td (want %d), advertise %td (want %d), wake %llu (want %llu)",
                     t[c].title, x.d.activate, t[c].activate, x.d.advertise, t[c].advertise,
                     (unsigned long long)x.d.wake_at_ms, (unsigned long long)wake);
    }
}

static void test_waiting_parse(void **state)
{
    (void)state;
    char m[16];
    uint64_t since = 0;
    assert_true(rt_hold_waiting_parse("m-b@1700000000123", m, sizeof(m), &since));
    assert_string_equal(m, "m-b");
    assert_true(since == 1700000000123ULL);
    assert_true(rt_hold_waiting_parse("a@b@42", m, sizeof(m), &since)); /* the last '@' */
    assert_string_equal(m, "a@b");
    assert_true(since == 42);
    const char *bad[] = {NULL,
                         "",
                         "m-b",
                         "@5",
                         "m-b@",
                         "m-b@12x",
                         "m-b@-1",
                         "a-member-name-too-long@5",
                         "m@99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(rt_hold_waiting_parse(bad[i], m, sizeof(m), &since));
}

/* A whole run: requests for a, b, c arrive interleaved (a b c a b c ...), each member's requests
 * in a queue of arrival times; the pool follows every request after a fixed swap time, and served
 * requests finish at once. Every request is served, never two members at once, and a member's
 * turn comes in the order of its oldest waiting request. */
#define SIMQ 256
typedef struct {
    uint64_t at[SIMQ];
    size_t head, tail;
} sim_queue;

static void test_no_starvation(void **state)
{
    (void)state;
    const char *names[3] = {"a", "b", "c"};
    rt_hold_member ms[3];
    sim_queue q[3] = {0};
    for (int i = 0; i < 3; i++)
        ms[i] = (rt_hold_member){.name = names[i], .exists = true, .phase = "Stopped"};
    const char *resident = NULL, *pending = NULL;
    uint64_t swap_done = 0, now = T0, max_wait = 0;
    unsigned served[3] = {0}, arrived[3] = {0}, swaps = 0;
    for (int step = 0; step < 600; step++, now += 100) {
        if (step < 300 && step % 3 == 0) { /* a new request every 300 ms */
            int m = (step / 3) % 3;
            q[m].at[q[m].tail++] = now;
            arrived[m]++;
        }
        if (pending && now >= swap_done) { /* the operator finished the swap */
            for (int i = 0; i < 3; i++) {
                ms[i].up = strcmp(names[i], pending) == 0;
                ms[i].ready_pods = ms[i].up;
            }
            resident = pending;
            pending = NULL;
        }
        for (int i = 0; i < 3; i++) {
            ms[i].waiting = q[i].tail - q[i].head;
            ms[i].first_wait_ms = ms[i].waiting ? q[i].at[q[i].head] : 0;
        }
        rt_hold_pool p = {.phase = pending ? "Swapping" : "Ready",
                          .resident = resident,
                          .pending = pending,
                          .members = ms,
                          .n_members = 3,
                          .grace_ms = 1000,
                          .now_ms = now,
                          .fence_member = resident,
                          .fence_read_ms = now,
                          .fence_window_ms = 1000,
                          .registered_until_ms = UINT64_MAX};
        rt_hold_verdict v[3];
        rt_hold_reject r[3];
        rt_hold_decision d;
        rt_hold_decide(&p, v, r, &d);
        int serving = 0;
        for (int i = 0; i < 3; i++) {
            assert_int_not_equal(v[i], RT_HOLD_REJECT);
            if (v[i] != RT_HOLD_SERVE)
                continue;
            serving++;
            while (q[i].head < q[i].tail) {
                uint64_t w = now - q[i].at[q[i].head++];
                max_wait = w > max_wait ? w : max_wait;
                served[i]++;
            }
        }
        assert_true(serving <= 1);
        if (d.activate >= 0) {
            assert_null(pending);
            pending = names[d.activate];
            swap_done = now + 700;
            swaps++;
        }
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(served[i], arrived[i]);
    /* Bounded waits: a request waits at most for the two other members' turns, each a grace, a
     * swap and a step, plus its own swap. */
    assert_true(max_wait <= 3 * (1000 + 700 + 200));
    /* Batching: far fewer swaps than requests (300 ms apart, swaps of 700 ms). */
    assert_true(swaps < (arrived[0] + arrived[1] + arrived[2]) / 2);
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_int_equal(rt_hold_retry_after_s(10000, T0, T0 + 4000, 300000), 6);
    assert_int_equal(rt_hold_retry_after_s(10000, T0, T0 + 12000, 300000), 1);
    assert_int_equal(rt_hold_retry_after_s(0, 0, T0, 300000), 30);
    assert_int_equal(rt_hold_retry_after_s(0, 0, T0, 20000), 2);
    assert_int_equal(rt_hold_retry_after_s(0, 0, T0, 1), 1);
    assert_int_equal(rt_hold_retry_after_s(2500, 0, T0, 300000), 3);
    /* An estimate from one very slow swap never asks for more than the pool's budget. */
    assert_int_equal(rt_hold_retry_after_s(3600000, T0, T0 + 1000, 300000), 300);
    assert_int_equal(rt_hold_retry_after_s(3600000, 0, T0, 2500), 2);
    assert_int_equal(rt_hold_retry_after_s(3600000, 0, T0, 500), 1);
}

/* A drain-fence read the API server refuses (401/403) is a missing right, named; any other answer
 * (a timeout is code 0, a 5xx or 404 may pass) is not. */
static void test_fence_refused(void **state)
{
    (void)state;
    char buf[256] = "untouched";
    assert_false(rt_hold_fence_refused(200, "ml", buf, sizeof(buf)));
    assert_false(rt_hold_fence_refused(0, "ml", buf, sizeof(buf)));
    assert_false(rt_hold_fence_refused(404, "ml", buf, sizeof(buf)));
    assert_false(rt_hold_fence_refused(429, "ml", buf, sizeof(buf)));
    assert_false(rt_hold_fence_refused(500, "ml", buf, sizeof(buf)));
    assert_string_equal(buf, "untouched");
    assert_true(rt_hold_fence_refused(403, "ml", buf, sizeof(buf)));
    assert_string_equal(buf, "cannot get modelpools in namespace ml: forbidden (the router's role "
                             "lacks get on modelpools.inference.llmkube.dev there)");
    assert_true(rt_hold_fence_refused(401, "team-a", buf, sizeof(buf)));
    assert_string_equal(buf, "cannot get modelpools in namespace team-a: unauthorized (the API "
                             "server refuses the router's credentials)");
    char small[16];
    assert_true(rt_hold_fence_refused(403, "ml", small, sizeof(small)));
    assert_string_equal(small, "cannot get mode");
}

/* The acknowledgement of a swap (api/fence.h): the resident, once the drain has begun and nothing
 * sent to it is outstanding (every forward ended, one without an answer's head half a fence ago).
 */
static void test_ack(void **state)
{
    (void)state;
    static const struct {
        const char *resident, *pending;
        bool awaiting;
        size_t unanswered;
        const char *want;
    } t[] = {
        {"a", "b", false, 0, "a"},   {"a", "b", false, 1, NULL}, {"a", "b", true, 0, NULL},
        {"a", NULL, false, 0, NULL}, {"a", "", false, 0, NULL},  {NULL, "b", false, 0, NULL},
        {"", "b", false, 0, NULL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *got = rt_hold_ack(t[i].resident, t[i].pending, t[i].awaiting, t[i].unanswered);
        if (!(got == t[i].want || (got && t[i].want && strcmp(got, t[i].want) == 0)))
            fail_msg("row %zu: %s, want %s", i, got ? got : "none", t[i].want ? t[i].want : "none");
    }
}

TEST_MAIN(cmocka_unit_test(test_serve_and_activate), cmocka_unit_test(test_ack),
          cmocka_unit_test(test_reject), cmocka_unit_test(test_fence),
          cmocka_unit_test(test_fence_keeps_grace), cmocka_unit_test(test_awaiting_probe),
          cmocka_unit_test(test_dropped), cmocka_unit_test(test_order),
          cmocka_unit_test(test_no_starvation), cmocka_unit_test(test_fair_across_replicas),
          cmocka_unit_test(test_waiting_parse), cmocka_unit_test(test_retry_after),
          cmocka_unit_test(test_fence_refused))

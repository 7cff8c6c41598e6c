/* Tests of the operator's early end of the drain fence (pool/fence_ack.h): the rule over a list of
 * router Leases, row by row (acknowledged, not, expired at and around the bound, another pool's or
 * another resident's entry, no Leases, a Lease without a duration), Leases of routers of one
 * namespace's pools, and the table of when each Lease's version was first observed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "pool/fence_ack.h"

#define F 2000L       /* the fence */
#define D 10          /* a router Lease's duration, s */
#define T0 1000000ULL /* when the first Lease's version was first seen */

/* Router Leases r0..r3 as a test row gives them. */
typedef struct lease_row {
    const char *fenced; /* the annotation; NULL none */
    int32_t duration_s;
    uint64_t seen_ms;
} lease_row;

static const struct {
    const char *what;
    lease_row leases[4];
    size_t n;
    uint64_t now_ms;
    const char *resident;
    fence_ack_result want;
    int holder;          /* index of the Lease named as holding the fence up; -1 none */
    uint64_t expires_ms; /* FENCE_ACK_UNACKED */
} rows[] = {
    {"no router Leases at all: nothing says they stopped",
     {{0}},
     0,
     T0,
     "m",
     FENCE_ACK_NO_ROUTERS,
     -1,
     0},
    {"acknowledged", {{"ns/p=m", D, T0}}, 1, T0, "m", FENCE_ACK_CONFIRMED, -1, 0},
    {"acknowledged among other entries",
     {{"other/p=m ns/p=m ns/q=x", D, T0}},
     1,
     T0,
     "m",
     FENCE_ACK_CONFIRMED,
     -1,
     0},
    {"not acknowledged: no annotation",
     {{NULL, D, T0}},
     1,
     T0 + 5,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"not acknowledged: another pool's entry",
     {{"ns/q=m", D, T0}},
     1,
     T0,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"not acknowledged: another namespace's entry",
     {{"other/p=m", D, T0}},
     1,
     T0,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"not acknowledged: another resident's entry (an earlier swap's)",
     {{"ns/p=old", D, T0}},
     1,
     T0,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"no resident: nothing acknowledges it",
     {{"ns/p=m", D, T0}},
     1,
     T0,
     "",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"no resident (NULL)",
     {{"ns/p=m", D, T0}},
     1,
     T0,
     NULL,
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"unchanged for D + F - 1 ms: not expired yet",
     {{NULL, D, T0}},
     1,
     T0 + D * 1000 + F - 1,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"unchanged for exactly D + F: expired",
     {{NULL, D, T0}},
     1,
     T0 + D * 1000 + F,
     "m",
     FENCE_ACK_CONFIRMED,
     -1,
     0},
    {"unchanged for D + F + 1 ms: expired",
     {{"ns/q=m", D, T0}},
     1,
     T0 + D * 1000 + F + 1,
     "m",
     FENCE_ACK_CONFIRMED,
     -1,
     0},
    {"unchanged for D only: not expired (F is on top)",
     {{NULL, D, T0}},
     1,
     T0 + D * 1000,
     "m",
     FENCE_ACK_UNACKED,
     0,
     T0 + D * 1000 + F},
    {"no duration: never expires",
     {{NULL, 0, T0}},
     1,
     T0 + 86400000ULL,
     "m",
     FENCE_ACK_NO_EXPIRY,
     0,
     0},
    {"no duration but acknowledged", {{"ns/p=m", 0, T0}}, 1, T0, "m", FENCE_ACK_CONFIRMED, -1, 0},
    {"one acknowledged, one expired",
     {{"ns/p=m", D, T0 + 20000}, {NULL, 1, T0}},
     2,
     T0 + 20000,
     "m",
     FENCE_ACK_CONFIRMED,
     -1,
     0},
    {"one acknowledged, one not: the second holds it up",
     {{"ns/p=m", D, T0}, {"ns/p=old", D, T0 + 500}},
     2,
     T0 + 600,
     "m",
     FENCE_ACK_UNACKED,
     1,
     T0 + 500 + D * 1000 + F},
    {"two hold it up: the first is named",
     {{"ns/p=m", D, T0}, {NULL, 0, T0}, {NULL, D, T0}, {"ns/p=m", D, T0}},
     4,
     T0,
     "m",
     FENCE_ACK_NO_EXPIRY,
     1,
     0},
};

static void test_rule(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        api_router_lease recs[4];
        fence_ack_lease leases[4];
        char names[4][24];
        for (size_t j = 0; j < rows[i].n; j++) {
            snprintf(names[j], sizeof(names[j]), "r%zu", j);
            recs[j] = (api_router_lease){.name = names[j],
                                         .ns = "modelpool-system",
                                         .rv = "1",
                                         .duration_s = rows[i].leases[j].duration_s,
                                         .fenced = rows[i].leases[j].fenced};
            leases[j] = (fence_ack_lease){&recs[j], rows[i].leases[j].seen_ms};
        }
        fence_ack_verdict v =
            fence_ack_check(leases, rows[i].n, rows[i].now_ms, F, "ns", "p", rows[i].resident);
        if (v.result != rows[i].want)
            fail_msg("row %zu (%s): result %d, want %d", i, rows[i].what, v.result, rows[i].want);
        if (rows[i].holder < 0 ? v.holder != NULL : v.holder != &recs[rows[i].holder])
            fail_msg("row %zu (%s): holder %s, want r%d", i, rows[i].what,
                     v.holder ? v.holder->name : "(none)", rows[i].holder);
        if (v.result == FENCE_ACK_UNACKED && v.expires_ms != rows[i].expires_ms)
            fail_msg("row %zu (%s): expires at %llu, want %llu", i, rows[i].what,
                     (unsigned long long)v.expires_ms, (unsigned long long)rows[i].expires_ms);
    }
}

/* A router of one namespace's pools (API_FRONTS_ANNOTATION) counts for that namespace's swaps only;
 * a swap that no Lease counts for runs its fence. The pool is ns/p, resident m. */
static void test_fronts(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        const char *fronts[2];
        const char *fenced[2];
        size_t n;
        fence_ack_result want;
        int holder;
    } cases[] = {
        {"another namespace's router does not count",
         {"other", NULL},
         {NULL, "ns/p=m"},
         2,
         FENCE_ACK_CONFIRMED,
         -1},
        {"this namespace's router counts", {"ns", NULL}, {NULL, "ns/p=m"}, 2, FENCE_ACK_UNACKED, 0},
        {"this namespace's router acknowledged",
         {"ns", "other"},
         {"ns/p=m", NULL},
         2,
         FENCE_ACK_CONFIRMED,
         -1},
        {"an empty annotation counts for every namespace",
         {"", NULL},
         {NULL, "ns/p=m"},
         2,
         FENCE_ACK_UNACKED,
         0},
        {"a namespace only by its whole name",
         {"n", "nss"},
         {NULL, NULL},
         2,
         FENCE_ACK_NO_ROUTERS,
         -1},
        {"only other namespaces' routers: the fence runs",
         {"other", NULL},
         {NULL, NULL},
         1,
         FENCE_ACK_NO_ROUTERS,
         -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        api_router_lease recs[2];
        fence_ack_lease leases[2];
        for (size_t j = 0; j < cases[i].n; j++) {
            recs[j] = (api_router_lease){.name = j ? "r1" : "r0",
                                         .rv = "1",
                                         .duration_s = D,
                                         .fenced = cases[i].fenced[j],
                                         .fronts = cases[i].fronts[j]};
            leases[j] = (fence_ack_lease){&recs[j], T0};
        }
        fence_ack_verdict v = fence_ack_check(leases, cases[i].n, T0, F, "ns", "p", "m");
        if (v.result != cases[i].want)
            fail_msg("case %zu (%s): result %d, want %d", i, cases[i].what, v.result,
                     cases[i].want);
        if (cases[i].holder < 0 ? v.holder != NULL : v.holder != &recs[cases[i].holder])
            fail_msg("case %zu (%s): holder %s", i, cases[i].what,
                     v.holder ? v.holder->name : "(none)");
    }
}

static void test_expiry(void **state)
{
    (void)state;
    api_router_lease l = {.name = "r", .duration_s = D};
    assert_int_equal(fence_ack_expiry(&l, 5, F), 5 + D * 1000 + F);
    assert_int_equal(fence_ack_expiry(&l, 5, 0), 5 + D * 1000);
    l.duration_s = INT32_MAX; /* no overflow */
    assert_true(fence_ack_expiry(&l, T0, F) == T0 + (uint64_t)INT32_MAX * 1000 + F);
    l.duration_s = 0;
    assert_int_equal(fence_ack_expiry(&l, 5, F), 0);
}

/* When t says key was first seen at rv, noted at now. */
static uint64_t note(fence_seen *t, const char *key, const char *rv, uint64_t now)
{
    uint64_t seen = 0;
    assert_int_equal(fence_seen_note(t, key, rv, now, &seen), 0);
    return seen;
}

static void test_seen(void **state)
{
    (void)state;
    fence_seen *t = fence_seen_new();
    assert_non_null(t);
    assert_int_equal(note(t, "ns/a", "1", 100), 100);
    /* The same version seen again (a list answer, a relist): still from its first observation. */
    assert_int_equal(note(t, "ns/a", "1", 900), 100);
    assert_int_equal(note(t, "ns/b", "1", 200), 200);
    /* A new version counts from when it is seen. */
    assert_int_equal(note(t, "ns/a", "2", 1000), 1000);
    assert_int_equal(note(t, "ns/a", "2", 1500), 1000);
    /* Back to an older version (a lagging watch after a list's answer): counted anew, later. */
    assert_int_equal(note(t, "ns/a", "1", 1600), 1600);
    assert_int_equal(note(t, "ns/b", "1", 1700), 200);
    /* Deleted, then created again at a version seen before: counted anew. */
    fence_seen_forget(t, "ns/b");
    fence_seen_forget(t, "ns/none");
    assert_int_equal(note(t, "ns/b", "1", 1800), 1800);
    assert_int_equal(note(t, "ns/c", NULL, 1900), 1900);
    assert_int_equal(note(t, "ns/c", "", 2000), 1900);
    fence_seen_free(t);
    fence_seen_free(NULL);
}

TEST_MAIN(cmocka_unit_test(test_rule), cmocka_unit_test(test_fronts), cmocka_unit_test(test_expiry),
          cmocka_unit_test(test_seen))

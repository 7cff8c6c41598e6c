/* plan_case: the plan tests' fixtures (test_plan_*.c): a pool described compactly (t_case, members
 * and Pods in a small language) turned into a plan_snapshot, a plan rendered as one line, and the
 * checks every case passes through: the safety rules of DESIGN.md whatever the snapshot, and that
 * re-planning an applied plan repeats nothing. Part of the test-support library (test/support). */
#ifndef MP_TEST_PLAN_CASE_H
#define MP_TEST_PLAN_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/plan.h"

/* Table rows name members positionally and leave the trailing fields zero on purpose. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wmissing-field-initializers"
#endif

#define NOW 1700000000000LL /* whole seconds, like every status timestamp */
#define U API_REPLICAS_UNSET
#define MAXM 8
#define MAXP 8

/* ---- fixtures: a compact description of a pool turned into a plan_snapshot ---- */

/* Pods as space-separated tokens, one a Pod: state letter, then an optional probe result.
 * State: R running, N phase Running without a running container, P pending, T terminating and
 * running, t terminating and stopped, S succeeded, F failed.
 * Probe: i idle, b busy, e error, u unsupported (fresh); I B E U the same but stale. */
typedef struct {
    const char *name;
    int32_t replicas;
    const char *phase;
    const char *pods;
    const char *runtime;
    const char *idle_endpoint;
    int32_t port; /* spec.endpoint.port */
    bool missing;
    const char *claimed_by;
    int32_t container_port; /* spec.containerPort */
    bool unsure;            /* missing, but the cache may lag the pool (absence_unconfirmed) */
} t_member;

typedef struct {
    plan_member members[MAXM];
    plan_pod pods[MAXM][MAXP];
    char pod_names[MAXM][MAXP][32];
    char pod_ips[MAXM][MAXP][32];
    api_condition conds[4];
    char deferred[64];
    api_member_status mstat[MAXM];
    char rel_names[128];
    plan_snapshot s;
} t_fix;

typedef struct {
    const char *title;
    t_member m[MAXM]; /* up to the first entry with name NULL */
    /* members the status records that the spec no longer lists (plan_snapshot.removed) */
    t_member gone[2];
    const char *dflt, *budget, *policy;
    /* current status: resident, pending, and the Swapping condition's reason and age */
    const char *resident, *pending, *stage;
    int64_t stage_age_s;
    int64_t load_age_s; /* > 0: TargetReady False/Loading that long ago (the target's start) */
    bool dropped;       /* Swapping False/RequestDropped: a request was dropped (stage unset) */
    const char *unload_after; /* the pool's unprobeable-unload-after annotation */
    const char *deferred;     /* the SwapDeferred condition as "Status/Reason", or NULL for none */
    /* status.members[].releasing, space-separated names. NULL: as a swap's start wrote it, the
     * resident when it is up and a swap is pending; "" none. */
    const char *releasing;
    const char *want_releasing; /* the same in the plan's status; NULL: not checked */
    plan_refusal refused;       /* the controller's memory of a refused write */
    const char *requested;      /* the pool's request annotation */
    const char *withdrawn;      /* the pool's withdraw annotation */
    /* expected; NULL means "not checked", "" means "empty" */
    const char *phase, *want_resident, *want_pending;
    const char *conds;   /* space-separated Type=Status/Reason that must all be present */
    const char *actions; /* exact rendering of the action list, see case_render() */
    const char *msg_has; /* a substring of some condition's message */
    int64_t requeue_ms;
    int64_t fence;         /* plan_snapshot.drain_after_ms as an offset from NOW; 0 none */
    int64_t probe_took_ms; /* every probe was sent this long before its answer came */
} t_case;

/* A table row: CASE(.title = ..., .m = ..., ...), its fields packed a few to a line (clang-format
 * keeps a macro's arguments together, where it puts each field of a braced row on its own line). */
// clang-format off
#define CASE(...) {__VA_ARGS__}
// clang-format on
/* A swap under way: the resident r, the pending p, and the Swapping condition's stage. */
#define SWAP(r, p, st) .resident = r, .pending = p, .stage = st

/* The snapshot tc describes, in f (which holds every string and array it points to). */
void case_build(t_fix *f, const t_case *tc);
/* The same in a new fixture (free() it). */
t_fix *case_fix_new(const t_case *tc);

/* The plan of s, built (or the test fails) and checked against the safety rules. */
plan_result *case_plan(const plan_snapshot *s);

/* Runs one case: builds its plan, checks what it names, the safety rules and convergence. */
void case_run(const t_case *tc);
void case_run_table(const t_case *t, size_t n);
#define CASE_RUN_TABLE(t) case_run_table(t, sizeof t / sizeof t[0])

/* "status event:N:SwapStarted probe:a[a-0,a-1]@8080 scale:b=1", in plan order. */
void case_render(const plan_result *p, char *buf, size_t cap);

/* The rules every plan keeps, whatever the snapshot (the test fails where one is broken). */
void case_check_safety(const plan_snapshot *s, const plan_result *p);

/* Re-plans on the same world with each plan's status applied: the status settles within a few
 * rounds, after which no status write and no Event comes again and the rest repeats exactly. */
void case_check_converges(const plan_snapshot *s0, plan_result *first);

const api_condition *case_cond(const api_status *st, const char *type);
bool case_cond_is(const api_status *st, const char *type, const char *status, const char *reason);
bool case_has_kind(const plan_result *p, plan_action_kind k);
const char *case_nz(const char *s);          /* s, or "" for NULL */
int32_t case_replicas(const plan_member *m); /* replicas, unset counted as 1 */
bool case_pod_live(const plan_pod *p);       /* holds the GPU: neither Succeeded nor Failed */

#endif

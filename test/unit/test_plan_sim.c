/* test_plan_sim: whole swaps step by step against a small member simulator, scripted and from
 * seeded random inputs (deterministic), each plan checked against the safety rules (plan_case). */
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

/* ---- a member simulator: whole swaps, step by step ----
 * Each step plans, applies the plan like the controller (status, probes answered from a script,
 * replicas), then plays the InferenceService controller: replicas 0 -> pods terminate over two
 * steps and phase Stopped; replicas 1 -> a pod is created, runs next step, phase Ready (or the
 * member's scripted failure phase). The clock moves one second a step; a swap's drain fence is
 * two. */

typedef struct {
    const char *name, *runtime, *fail_phase;
    int32_t replicas;
    const char *phase;
    plan_pod pods[MAXP];
    size_t n_pods;
    char names[MAXP][32];
    int pod_seq;
    int busy_probes; /* how many more probes of this member answer busy */
} sim_member;

typedef struct {
    sim_member m[MAXM];
    size_t n;
    const char *dflt;
    const char *budget; /* spec.swapBudget */
    plan_result *cur;   /* owns the status the pool has now */
    int64_t now;
    int64_t swap_seen; /* when the status first showed pendingMember, as the controller keeps it */
    int steps_idle;
    char log[4096]; /* events, in order */
    plan_member pm[MAXM];
    plan_snapshot s;
} sim;

static void sim_snapshot(sim *w)
{
    for (size_t i = 0; i < w->n; i++) {
        sim_member *m = &w->m[i];
        w->pm[i] = (plan_member){.name = m->name,
                                 .exists = true,
                                 .replicas = m->replicas,
                                 .phase = m->phase,
                                 .runtime = m->runtime,
                                 .pods = m->pods,
                                 .n_pods = m->n_pods};
    }
    w->s = (plan_snapshot){.ns = "ml",
                           .name = "pool",
                           .generation = 1,
                           .members = w->pm,
                           .n_members = w->n,
                           .default_member = w->dflt,
                           .swap_budget = w->budget,
                           .now_ms = w->now};
    if (w->cur)
        w->s.status = w->cur->status;
    const char *pend = w->s.status.pending_member;
    if (!pend || !*pend)
        w->swap_seen = 0;
    else if (!w->swap_seen)
        w->swap_seen = w->now;
    w->s.drain_after_ms = w->swap_seen ? w->swap_seen + 2000 : 0;
}

static sim_member *sim_find(sim *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->m[i].name, name) == 0)
            return &w->m[i];
    return NULL;
}

static void sim_members_act(sim *w)
{
    for (size_t i = 0; i < w->n; i++) {
        sim_member *m = &w->m[i];
        size_t k = 0, live_n = 0; /* pods that were terminating are gone now */
        for (size_t j = 0; j < m->n_pods; j++)
            if (!m->pods[j].terminating) {
                m->pods[k] = m->pods[j];
                memcpy(m->names[k], m->names[j], sizeof m->names[k]);
                m->pods[k].name = m->names[k];
                k++;
            }
        m->n_pods = k;
        int32_t want = case_replicas(&(plan_member){.replicas = m->replicas});
        /* Like a ReplicaSet: extra Pods are deleted newest first, and missing ones are created at
         * once, even beside Pods that still terminate. */
        for (size_t j = m->n_pods; j-- > 0;) {
            if ((int32_t)live_n < want)
                live_n++;
            else
                m->pods[j].terminating = true;
        }
        bool ready = false;
        for (size_t j = 0; j < m->n_pods; j++) {
            plan_pod *p = &m->pods[j];
            if (p->terminating || m->fail_phase)
                continue;
            p->phase = API_POD_RUNNING, p->container_running = true;
            ready = true;
        }
        for (; (int32_t)live_n < want && m->n_pods < MAXP; live_n++) {
            plan_pod *p = &m->pods[m->n_pods];
            memset(p, 0, sizeof *p);
            snprintf(m->names[m->n_pods], sizeof m->names[0], "%s-%d", m->name, m->pod_seq++);
            p->name = m->names[m->n_pods];
            p->ip = "127.0.0.1";
            p->phase = API_POD_PENDING;
            m->n_pods++;
        }
        m->phase = m->fail_phase && want > 0 ? m->fail_phase
                   : ready                   ? "Ready"
                   : want > 0                ? "Creating"
                                             : "Stopped";
    }
}

/* One step. Returns the number of actions the plan had. */
static size_t sim_step(sim *w)
{
    sim_snapshot(w);
    plan_result *p = NULL;
    assert_int_equal(plan_build(&w->s, &p), 0);
    case_check_safety(&w->s, p);
    size_t n = p->n_actions;
    bool wrote = false;
    for (size_t i = 0; i < p->n_actions; i++) {
        const plan_action *a = &p->actions[i];
        sim_member *m = a->member ? sim_find(w, a->member) : NULL;
        switch (a->kind) {
        case PLAN_WRITE_STATUS:
            wrote = true;
            break;
        case PLAN_EVENT: {
            size_t len = strlen(w->log);
            snprintf(w->log + len, sizeof w->log - len, "%s%s", len ? " " : "", a->reason);
            /* Every swap the runs complete was begun under their own status: it is timed from
             * the Swapping condition, at most the whole run long. */
            if (a->fact == PLAN_FACT_SWAP_COMPLETED)
                assert_true(p->swap_ms >= 0 && p->swap_ms <= w->now);
            break;
        }
        case PLAN_SCALE:
            m->replicas = a->replicas;
            break;
        case PLAN_CLEAR_REQUEST: /* the runs make no request through the pool */
        case PLAN_CLEAR_WITHDRAW:
            break;
        case PLAN_PROBE: {
            plan_probe_result r = PLAN_PROBE_IDLE;
            if (m->busy_probes > 0) {
                m->busy_probes--;
                r = PLAN_PROBE_BUSY;
            }
            for (size_t j = 0; j < a->n_pods; j++)
                for (size_t k = 0; k < m->n_pods; k++)
                    if (strcmp(m->pods[k].name, a->pods[j].name) == 0) {
                        m->pods[k].probe = r;
                        m->pods[k].probed_at_ms = m->pods[k].probe_sent_ms = w->now;
                    }
            break;
        }
        }
    }
    if (wrote) {
        plan_free(w->cur);
        w->cur = p;
    } else {
        plan_free(p);
    }
    sim_members_act(w);
    w->now += 1000;
    return n;
}

static const char *sim_status(sim *w, int which)
{
    if (!w->cur)
        return "";
    api_status *st = &w->cur->status;
    return case_nz(which == 0 ? st->phase : which == 1 ? st->resident_member : st->pending_member);
}

/* Steps until the pool has done nothing for three steps in a row (or gives up). */
static void sim_settle(sim *w, int max_steps)
{
    int quiet = 0;
    for (int i = 0; i < max_steps && quiet < 3; i++)
        quiet = sim_step(w) == 0 ? quiet + 1 : 0;
    assert_true(quiet >= 3);
}

/* Exactly one member holds replicas or pods, and it is the resident. */
static void sim_assert_single(sim *w, const char *resident)
{
    assert_string_equal(sim_status(w, 0), "Ready");
    assert_string_equal(sim_status(w, 1), resident);
    assert_string_equal(sim_status(w, 2), "");
    for (size_t i = 0; i < w->n; i++) {
        bool is_res = strcmp(w->m[i].name, resident) == 0;
        assert_int_equal(case_replicas(&(plan_member){.replicas = w->m[i].replicas}),
                         is_res ? 1 : 0);
        if (!is_res)
            assert_int_equal(w->m[i].n_pods, 0);
    }
}

static sim *sim_new(const char *dflt, const char *const *names, const int32_t *replicas)
{
    sim *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->dflt = dflt;
    w->now = NOW;
    for (; names[w->n]; w->n++) {
        w->m[w->n].name = names[w->n];
        w->m[w->n].replicas = replicas[w->n];
        w->m[w->n].phase = "Stopped";
    }
    return w;
}

static void sim_free(sim *w)
{
    plan_free(w->cur);
    free(w);
}

static void test_sim_cold_start_default(void **state)
{
    (void)state;
    /* Members created without replicas (so all start), pool created after: default wins. */
    const char *names[] = {"a", "b", "c", NULL};
    sim *w = sim_new("b", names, (const int32_t[]){U, U, U});
    sim_members_act(w); /* their pods exist before the pool is seen */
    sim_settle(w, 40);
    sim_assert_single(w, "b");
    assert_string_equal(w->log, "SwapStarted SwapCompleted");
    sim_free(w);
}

static void test_sim_swap_busy_then_idle(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", NULL};
    sim *w = sim_new(NULL, names, (const int32_t[]){1, 0});
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    w->m[0].busy_probes = 3; /* a serves a long request: three probes answer busy */
    w->m[1].replicas = 1;    /* the request for b */
    sim_settle(w, 60);
    sim_assert_single(w, "b");
    /* one PodsBusy Event for the whole deferral, however many re-probes */
    assert_string_equal(w->log, "SwapStarted SwapCompleted SwapStarted SwapDeferred SwapCompleted");
    sim_free(w);
}

static void test_sim_three_members_supersede(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d", NULL};
    sim *w = sim_new("a", names, (const int32_t[]){0, 0, 0, 0});
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    w->m[0].busy_probes = 2;
    w->m[1].replicas = 1; /* request b */
    for (int i = 0; i < 3; i++)
        sim_step(w);
    assert_string_equal(sim_status(w, 2), "b");
    w->m[3].replicas = 1; /* then d, while a still drains */
    sim_settle(w, 60);
    sim_assert_single(w, "d");
    sim_free(w);
}

static void test_sim_supersede_while_loading(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", NULL};
    sim *w = sim_new(NULL, names, (const int32_t[]){1, 0, 0});
    sim_settle(w, 40);
    w->m[1].replicas = 1;
    for (int i = 0; i < 40 && w->m[1].n_pods == 0; i++)
        sim_step(w);
    assert_string_equal(sim_status(w, 2), "b"); /* b is starting */
    w->m[2].replicas = 1;
    sim_settle(w, 60);
    sim_assert_single(w, "c");
    sim_free(w);
}

/* The start of member m fails (its Pod Failed): the pool settles in a reported failure. */
static void sim_fail_start(sim *w, size_t m)
{
    w->m[m].fail_phase = "Failed";
    w->m[m].replicas = 1;
    sim_settle(w, 60);
    assert_string_equal(sim_status(w, 0), "Degraded");
}

static void test_sim_failed_target_escape(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", NULL};
    sim *w = sim_new(NULL, names, (const int32_t[]){1, 0, 0});
    sim_settle(w, 40);
    sim_fail_start(w, 1); /* settles in a reported failure, not silently Swapping */
    assert_string_equal(sim_status(w, 2), "b");
    assert_non_null(strstr(w->log, "TargetFailed"));
    w->m[2].replicas = 1; /* someone asks for c instead */
    sim_settle(w, 60);
    sim_assert_single(w, "c");
    sim_free(w);
}

/* The previous resident asked for again once the target was started (here: it failed) is a
 * request, not a member to drain again: the pool goes back to it. */
static void test_sim_failed_target_go_back(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", NULL};
    sim *w = sim_new("a", names, (const int32_t[]){0, 0});
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    sim_fail_start(w, 1);
    w->m[0].replicas = 1; /* the user goes back to a */
    sim_settle(w, 60);
    sim_assert_single(w, "a");
    sim_free(w);
}

/* A pool of a (resident, on a runtime that cannot be probed) and b, swapBudget budget (NULL: the
 * default), settled on a, then asked for b: the swap waits (Swapping). */
static sim *sim_unprobeable_asked(const char *budget)
{
    const char *names[] = {"a", "b", NULL};
    sim *w = sim_new("a", names, (const int32_t[]){0, 0});
    w->m[0].runtime = "personaplex";
    w->budget = budget;
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    w->m[1].replicas = 1;
    sim_settle(w, 40);
    assert_string_equal(sim_status(w, 0), "Swapping");
    return w;
}

static void test_sim_unsupported_waits_for_human(void **state)
{
    (void)state;
    sim *w = sim_unprobeable_asked(NULL);
    assert_int_equal(w->m[0].replicas, 1); /* never unloaded unprobed */
    assert_int_equal(w->m[1].replicas, 0); /* held */
    w->m[0].replicas = 0;                  /* a human decides a may go */
    sim_settle(w, 40);
    sim_assert_single(w, "b");
    sim_free(w);
}

/* #26: past swapBudget the request is dropped instead; a serves on, never unloaded unprobed. */
static void test_sim_unsupported_dropped_after_budget(void **state)
{
    (void)state;
    sim *w = sim_unprobeable_asked("10s");
    for (int i = 0; i < 12; i++) /* the budget's time passes: the plan's requeue */
        sim_step(w);
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    assert_non_null(strstr(w->log, "RequestDropped"));
    assert_string_equal(sim_status(w, 0), "Ready");
    sim_free(w);
}

/* ---- properties over random inputs (seeded, deterministic) ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const char *any(const char *const *v, size_t n)
{
    return v[rnd((uint32_t)n)];
}
#define ANY(...)                                                                                   \
    any((const char *const[]){__VA_ARGS__},                                                        \
        sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void random_snapshot(t_fix *f)
{
    static const char *const names[] = {"a", "b", "c", "d", "e"};
    memset(f, 0, sizeof *f);
    size_t n = 1 + rnd(4);
    size_t gone = rnd(3) == 0; /* a member the status records that the spec no longer lists */
    for (size_t i = 0; i < n + gone; i++) {
        plan_member *m = &f->members[i];
        uint32_t r = rnd(40);
        m->name = i == n ? "x" : r == 0 ? "" : r == 1 && i > 0 ? f->members[i - 1].name : names[i];
        m->exists = rnd(40) != 0;
        m->claimed_by = rnd(80) == 0 ? "other" : NULL;
        m->replicas = (int32_t[]){U, 0, 0, 0, 1, 1, 2}[rnd(7)];
        m->phase = ANY(NULL, "Pending", "Creating", "Progressing", "Ready", "Ready", "Ready",
                       "WaitingForGPU", "Stopped", "Stopped", "Suspended", "Failed");
        m->runtime = ANY(NULL, NULL, NULL, "llamacpp", "llamacpp-router", "vllm", "tgi", "sglang",
                         "personaplex", "generic", "generic", "weird");
        m->idle_endpoint = rnd(2) ? "/idle" : NULL;
        m->endpoint_port = rnd(4) == 0 ? 9000 : 0;
        m->container_port = rnd(4) == 0 ? 7000 : 0;
        size_t np = rnd(4);
        for (size_t j = 0; j < np; j++) {
            plan_pod *p = &f->pods[i][j];
            snprintf(f->pod_names[i][j], sizeof f->pod_names[i][j], "%s-%zu", m->name, j);
            p->name = f->pod_names[i][j];
            p->ip = "127.0.0.1";
            p->phase = (api_pod_phase)rnd(5);
            p->terminating = rnd(4) == 0;
            p->container_running = rnd(3) != 0;
            p->probe = (plan_probe_result)rnd(5);
            p->probed_at_ms = NOW - (int64_t)rnd(4000);
            p->probe_sent_ms = p->probed_at_ms - (int64_t)rnd(3000); /* a slow answer too */
            p->probe_message = rnd(2) ? "timeout" : NULL;
        }
        m->pods = f->pods[i];
        m->n_pods = np;
    }
    f->s.ns = "ml";
    f->s.name = "pool";
    f->s.generation = 1 + rnd(5);
    f->s.members = f->members;
    f->s.n_members = n;
    f->s.removed = &f->members[n];
    f->s.n_removed = gone;
    f->s.now_ms = NOW + rnd(1000);
    f->s.drain_after_ms = rnd(2) ? NOW - 3000 + (int64_t)rnd(6000) : 0;
    f->s.default_member = rnd(3) == 0 ? ANY("a", "b", "c", "z", "") : NULL;
    f->s.swap_budget = rnd(10) ? ANY(NULL, "300s", "1m", "10s", "") : ANY("bogus", "0", "-1s");
    f->s.swap_policy = rnd(30) == 0 ? "greedy" : rnd(2) ? "sticky" : NULL;
    f->s.unload_after = rnd(6) == 0 ? ANY("1s", "10s", "10m", "bad") : NULL;
    f->s.status.resident_member = (char *)(rnd(2) ? ANY("a", "b", "c", "d", "z", "") : NULL);
    f->s.status.pending_member =
        (char *)(rnd(3) ? ANY("a", "b", "a", "b", "c", "d", "z", "") : NULL);
    size_t nc = 0;
    if (rnd(3))
        f->conds[nc++] =
            (api_condition){"Swapping", (char *)ANY("True", "False"),
                            (char *)ANY("Loading", "Draining", "NotSwapping", "RequestDropped"), "",
                            NOW - (int64_t)rnd(600) * 1000};
    if (rnd(3))
        f->conds[nc++] =
            (api_condition){"SwapDeferred", (char *)ANY("True", "False"),
                            (char *)ANY("PodsBusy", "NotDeferred", "IdleCheckFailed"), "x", NOW};
    if (rnd(3))
        f->conds[nc++] = (api_condition){"MembersValid", (char *)ANY("True", "False"),
                                         (char *)ANY("Valid", "MissingMembers"), "", NOW};
    f->s.status.conditions = f->conds;
    f->s.status.n_conditions = nc;
    f->s.status.members = f->mstat;
    for (size_t i = 0; i < n; i++)
        if (rnd(5))
            f->mstat[f->s.status.n_members++] =
                (api_member_status){.name = (char *)f->members[i].name, .releasing = rnd(6) != 0};
    if (gone)
        f->mstat[f->s.status.n_members++] = (api_member_status){.name = "x", .releasing = true};
}

static void test_property_random_snapshots(void **state)
{
    (void)state;
    rng = 0x2545f4914f6cdd1dULL;
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    size_t scales = 0, probes = 0;
    for (int i = 0; i < 20000; i++) {
        random_snapshot(f);
        plan_result *p = NULL;
        assert_int_equal(plan_build(&f->s, &p), 0);
        case_check_safety(&f->s, p);
        scales += case_has_kind(p, PLAN_SCALE);
        probes += case_has_kind(p, PLAN_PROBE);
        case_check_converges(&f->s, p);
        plan_free(p);
    }
    print_message("  %zu plans scaled, %zu probed\n", scales, probes);
    /* the generator must reach the interesting paths, or the property says nothing */
    assert_true(scales > 500);
    assert_true(probes > 400);
    free(f);
}

/* Random runs of the simulator: random requests, random busy answers; every step keeps the
 * safety rules, and once requests stop the pool ends with one resident and nothing else up. */
static void test_property_random_runs(void **state)
{
    (void)state;
    rng = 0xd1b54a32d192ed03ULL;
    const char *names[] = {"a", "b", "c", "d", NULL};
    for (int run = 0; run < 300; run++) {
        int32_t reps0[4];
        for (int i = 0; i < 4; i++)
            reps0[i] = (int32_t[]){U, 0, 0, 1}[rnd(4)];
        sim *w = sim_new(rnd(2) ? ANY("a", "b", "c", "d") : NULL, names, reps0);
        if (rnd(2))
            sim_members_act(w); /* members already running before the pool */
        for (int step = 0; step < 40; step++) {
            if (rnd(5) == 0) /* a request, now and then for two replicas (rule 2) */
                w->m[rnd(4)].replicas = rnd(5) ? 1 : 2;
            if (rnd(15) == 0) /* someone scales a member to 0: a cancellation, or a stop */
                w->m[rnd(4)].replicas = 0;
            if (rnd(6) == 0)
                w->m[rnd(4)].busy_probes = (int)rnd(3);
            sim_step(w);
        }
        sim_settle(w, 80);
        const char *res = sim_status(w, 1);
        bool any_up = false;
        for (size_t i = 0; i < w->n; i++)
            any_up |= w->m[i].replicas > 0 || w->m[i].n_pods > 0;
        if (*res && case_replicas(&(plan_member){.replicas = w->m[*res - 'a'].replicas}) == 0) {
            /* a resident stopped by hand stays resident, and nothing else runs */
            assert_string_equal(sim_status(w, 0), "Ready");
            assert_false(any_up);
        } else if (*res) {
            sim_assert_single(w, res);
        } else if (strcmp(sim_status(w, 0), "Degraded") != 0)
            assert_false(any_up); /* cold and empty: nothing was asked of it */
        sim_free(w);
    }
}

TEST_MAIN(cmocka_unit_test(test_sim_cold_start_default),
          cmocka_unit_test(test_sim_swap_busy_then_idle),
          cmocka_unit_test(test_sim_three_members_supersede),
          cmocka_unit_test(test_sim_supersede_while_loading),
          cmocka_unit_test(test_sim_failed_target_escape),
          cmocka_unit_test(test_sim_failed_target_go_back),
          cmocka_unit_test(test_sim_unsupported_waits_for_human),
          cmocka_unit_test(test_sim_unsupported_dropped_after_budget),
          cmocka_unit_test(test_property_random_snapshots),
          cmocka_unit_test(test_property_random_runs))

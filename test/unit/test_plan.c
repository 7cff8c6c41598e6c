/* test_plan: table-driven tests of the ModelPool decision core (src/pool/plan.c): one table per
 * rule of DESIGN.md, a small member simulator that runs whole swaps, and seeded random property
 * tests. Every case also checks the safety rules and that re-planning an applied plan repeats
 * nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/plan.h"

/* Table rows name members positionally and leave the trailing fields zero on purpose. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wmissing-field-initializers"
#endif

#define NOW 1700000000000LL /* whole seconds, like every status timestamp */
#define U PLAN_REPLICAS_UNSET
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
    plan_condition conds[4];
    char deferred[64];
    plan_member_status mstat[MAXM];
    char rel_names[128];
    plan_snapshot s;
} t_fix;

static void fix_pods(t_fix *f, size_t mi, const char *member, const char *dsl)
{
    size_t n = 0;
    for (const char *c = dsl; c && *c;) {
        if (*c == ' ') {
            c++;
            continue;
        }
        assert_true(n < MAXP);
        plan_pod *p = &f->pods[mi][n];
        memset(p, 0, sizeof *p);
        snprintf(f->pod_names[mi][n], sizeof f->pod_names[mi][n], "%s-%zu", member, n);
        snprintf(f->pod_ips[mi][n], sizeof f->pod_ips[mi][n], "127.0.%zu.%zu", mi, n + 1);
        p->name = f->pod_names[mi][n];
        p->ip = f->pod_ips[mi][n];
        switch (*c++) {
        case 'R':
            p->phase = PLAN_POD_RUNNING, p->container_running = true;
            break;
        case 'N':
            p->phase = PLAN_POD_RUNNING;
            break;
        case 'P':
            p->phase = PLAN_POD_PENDING;
            break;
        case 'T':
            p->phase = PLAN_POD_RUNNING, p->container_running = p->terminating = true;
            break;
        case 't':
            p->phase = PLAN_POD_RUNNING, p->terminating = true;
            break;
        case 'S':
            p->phase = PLAN_POD_SUCCEEDED;
            break;
        case 'F':
            p->phase = PLAN_POD_FAILED;
            break;
        default:
            fail_msg("bad pod token in \"%s\"", dsl);
        }
        if (*c && *c != ' ') {
            const char *codes = "ibeuIBEU";
            const char *k = strchr(codes, *c);
            assert_non_null(k);
            size_t idx = (size_t)(k - codes);
            p->probe = (plan_probe_result)(PLAN_PROBE_IDLE + idx % 4);
            p->probed_at_ms = idx < 4 ? NOW - 500 : NOW - 10000;
            p->probe_sent_ms = p->probed_at_ms; /* answered at once; t_case.probe_took_ms */
            p->probe_message = p->probe == PLAN_PROBE_ERROR ? "connection refused" : NULL;
            c++;
        }
        n++;
    }
    f->members[mi].pods = f->pods[mi];
    f->members[mi].n_pods = n;
}

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
    const char *actions; /* exact rendering of the action list, see render() */
    const char *msg_has; /* a substring of some condition's message */
    int64_t requeue_ms;
    int64_t fence;         /* plan_snapshot.drain_after_ms as an offset from NOW; 0 none */
    int64_t probe_took_ms; /* every probe was sent this long before its answer came */
} t_case;

static int32_t reps(const plan_member *m)
{
    return m->replicas < 0 ? 1 : m->replicas;
}

static void fix_build(t_fix *f, const t_case *tc)
{
    memset(f, 0, sizeof *f);
    size_t n = 0;
    for (; n < MAXM && tc->m[n].name; n++) {
        const t_member *tm = &tc->m[n];
        plan_member *m = &f->members[n];
        m->name = tm->name;
        m->exists = !tm->missing;
        m->absence_unconfirmed = tm->unsure;
        m->replicas = tm->replicas;
        m->phase = tm->phase;
        m->runtime = tm->runtime;
        m->idle_endpoint = tm->idle_endpoint;
        m->endpoint_port = tm->port;
        m->claimed_by = tm->claimed_by;
        m->container_port = tm->container_port;
        fix_pods(f, n, tm->name, tm->pods);
    }
    size_t n_gone = 0;
    for (; n_gone < 2 && n + n_gone < MAXM && tc->gone[n_gone].name; n_gone++) {
        const t_member *tm = &tc->gone[n_gone];
        plan_member *m = &f->members[n + n_gone];
        m->name = tm->name;
        m->exists = !tm->missing;
        m->replicas = tm->replicas;
        m->phase = tm->phase;
        m->runtime = tm->runtime;
        fix_pods(f, n + n_gone, tm->name, tm->pods);
    }
    f->s.removed = &f->members[n];
    f->s.n_removed = n_gone;
    f->s.ns = "ml";
    f->s.name = "pool";
    f->s.generation = 3;
    f->s.members = f->members;
    f->s.n_members = n;
    f->s.default_member = tc->dflt;
    f->s.swap_budget = tc->budget;
    f->s.swap_policy = tc->policy;
    f->s.now_ms = NOW + 250; /* not a whole second: stamps must still be */
    f->s.refused = tc->refused;
    f->s.requested = tc->requested;
    f->s.withdrawn = tc->withdrawn;
    f->s.drain_after_ms = tc->fence ? NOW + tc->fence : 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < f->members[i].n_pods; k++)
            f->pods[i][k].probe_sent_ms -= tc->probe_took_ms;
    f->s.status.resident_member = (char *)tc->resident;
    f->s.status.pending_member = (char *)tc->pending;
    f->s.status.conditions = f->conds;
    if (tc->stage)
        f->conds[f->s.status.n_conditions++] = (plan_condition){
            "Swapping", "True", (char *)tc->stage, "", NOW - tc->stage_age_s * 1000};
    if (tc->dropped)
        f->conds[f->s.status.n_conditions++] =
            (plan_condition){"Swapping", "False", "RequestDropped", "", NOW - 1000};
    f->s.unload_after = tc->unload_after;
    if (tc->load_age_s)
        f->conds[f->s.status.n_conditions++] =
            (plan_condition){"TargetReady", "False", "Loading", "", NOW - tc->load_age_s * 1000};
    const char *rel = tc->releasing;
    if (rel == NULL && tc->pending && tc->resident) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(f->members[i].name, tc->resident) == 0 && reps(&f->members[i]) > 0)
                rel = tc->resident;
    }
    snprintf(f->rel_names, sizeof f->rel_names, "%s", rel ? rel : "");
    f->s.status.members = f->mstat;
    for (char *save = NULL, *tok = strtok_r(f->rel_names, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save))
        f->mstat[f->s.status.n_members++] = (plan_member_status){.name = tok, .releasing = true};
    if (tc->deferred) {
        plan_condition *c = &f->conds[f->s.status.n_conditions++];
        snprintf(f->deferred, sizeof f->deferred, "%s", tc->deferred);
        char *sl = strchr(f->deferred, '/');
        assert_non_null(sl);
        *sl = '\0';
        *c = (plan_condition){"SwapDeferred", f->deferred, sl + 1, "from the last probe",
                              NOW - 5000};
    }
}

/* "status event:N:SwapStarted probe:a[a-0,a-1]@8080 scale:b=1", in plan order. */
static void render(const plan_result *p, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
#define OUT(...) len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, __VA_ARGS__)
    for (size_t i = 0; i < p->n_actions; i++) {
        const plan_action *a = &p->actions[i];
        if (i)
            OUT(" ");
        switch (a->kind) {
        case PLAN_WRITE_STATUS:
            OUT("status");
            break;
        case PLAN_EVENT:
            OUT("event:%c:%s", a->warning ? 'W' : 'N', a->reason);
            /* The facts beside the Event, which the controller reads instead of its text. */
            assert_int_equal(a->fact == PLAN_FACT_SWAP_COMPLETED,
                             strcmp(a->reason, "SwapCompleted") == 0);
            assert_int_equal(a->fact == PLAN_FACT_SWAP_DEFERRED,
                             strcmp(a->reason, "SwapDeferred") == 0);
            if (a->fact == PLAN_FACT_SWAP_DEFERRED) {
                size_t n = strlen(p->deferred_reason);
                assert_true(strncmp(a->message, p->deferred_reason, n) == 0 &&
                            a->message[n] == ':');
            }
            break;
        case PLAN_SCALE:
            OUT("scale:%s=%d", a->member, a->replicas);
            break;
        case PLAN_CLEAR_WITHDRAW:
            OUT("unwithdraw:%s", a->member);
            break;
        case PLAN_CLEAR_REQUEST:
            OUT("clear:%s", a->member);
            break;
        case PLAN_PROBE:
            OUT("probe:%s[", a->member);
            for (size_t j = 0; j < a->n_pods; j++) {
                OUT("%s%s", j ? "," : "", a->pods[j].name);
                if (a->pods[j].port != a->port) /* the Pod's own port */
                    OUT(":%d", a->pods[j].port);
            }
            OUT("]@%d", a->port);
            if (a->idle_path)
                OUT("%s", a->idle_path);
            break;
        }
    }
#undef OUT
}

static const plan_condition *cond_of(const plan_status *st, const char *type)
{
    for (size_t i = 0; i < st->n_conditions; i++)
        if (strcmp(st->conditions[i].type, type) == 0)
            return &st->conditions[i];
    return NULL;
}

static bool cond_is(const plan_status *st, const char *type, const char *status, const char *reason)
{
    const plan_condition *c = cond_of(st, type);
    return c && strcmp(c->status, status) == 0 && (!reason || strcmp(c->reason, reason) == 0);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static const plan_member *snap_member(const plan_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (s->members[i].name && name && strcmp(s->members[i].name, name) == 0)
            return &s->members[i];
    for (size_t i = 0; i < s->n_removed; i++) /* a removed member is still brought to 0 */
        if (s->removed[i].name && name && strcmp(s->removed[i].name, name) == 0)
            return &s->removed[i];
    return NULL;
}

static bool live(const plan_pod *p)
{
    return p->phase != PLAN_POD_SUCCEEDED && p->phase != PLAN_POD_FAILED;
}

/* ---- the rules every plan keeps, whatever the snapshot ---- */

/* A swap is on and member, brought to `to` replicas, is one routers may have been forwarding to:
 * any but the target, and the target too when it is the resident being brought to 0 (a swap
 * superseded by a request for the resident, "returning to" it while another member is up). */
static bool fenced(const plan_snapshot *s, const char *member, int32_t to)
{
    const char *pend = s->status.pending_member;
    if (!pend || !*pend)
        return false;
    return strcmp(pend, member) != 0 ||
           (to == 0 && strcmp(nz(s->status.resident_member), member) == 0);
}

/* The swap's target was started (the status says Swapping=True/Loading): the resident is gone. */
static bool loading_stage(const plan_snapshot *s)
{
    for (size_t i = 0; i < s->status.n_conditions; i++)
        if (strcmp(nz(s->status.conditions[i].type), "Swapping") == 0)
            return strcmp(nz(s->status.conditions[i].status), "True") == 0 &&
                   strcmp(nz(s->status.conditions[i].reason), "Loading") == 0;
    return false;
}

static void check_safety(const plan_snapshot *s, const plan_result *p)
{
    const plan_status *st = &p->status;
    bool valid = cond_is(st, "MembersValid", "True", NULL);
    bool activation = st->pending_member && *st->pending_member &&
                      strcmp(st->pending_member, nz(s->status.pending_member)) != 0;
    size_t n_work = 0;
    for (size_t i = 0; i < p->n_actions; i++) {
        const plan_action *a = &p->actions[i];
        if (a->kind == PLAN_WRITE_STATUS)
            assert_int_equal(i, 0); /* intent is persisted before anything acts on it */
        if (a->kind != PLAN_SCALE && a->kind != PLAN_PROBE)
            continue;
        n_work++;
        assert_true(valid); /* rule 5: no replica change (nor probe) on a bad spec */
        if (a->kind != PLAN_SCALE)
            continue;
        const plan_member *m = snap_member(s, a->member);
        assert_non_null(m);
        size_t running = 0;
        for (size_t k = 0; k < m->n_pods; k++)
            running += live(&m->pods[k]) && m->pods[k].container_running;
        if (a->replicas >= 1 && reps(m) == 0) { /* rule 1: a start needs the whole slot free */
            assert_non_null(st->pending_member);
            assert_string_equal(a->member, st->pending_member);
            for (size_t j = 0; j < s->n_members; j++) {
                const plan_member *o = &s->members[j];
                if (strcmp(o->name, a->member) != 0)
                    assert_int_equal(reps(o), 0);
                for (size_t k = 0; k < o->n_pods; k++)
                    assert_false(live(&o->pods[k])); /* the target's own old Pods too */
            }
            /* and those of members the pool recorded, whatever the spec says now */
            for (size_t j = 0; j < s->n_removed; j++) {
                const plan_member *o = &s->removed[j];
                if (o->exists)
                    assert_int_equal(reps(o), 0);
                for (size_t k = 0; k < o->n_pods; k++)
                    assert_false(live(&o->pods[k]));
            }
            continue;
        }
        if (a->replicas >= 1) { /* rule 2: above one, back to exactly one */
            assert_int_equal(a->replicas, 1);
            assert_true(reps(m) > 1);
        } else {
            assert_true(reps(m) > 0);
        }
        if (running <= (size_t)a->replicas)
            continue; /* the Pods that go never ran */
        if (strcmp(nz(a->reason), "HeldBack") == 0) {
            /* #26: the swap's target, starting (not Ready) beside another member, never had the
             * slot: held back at once, after the pendingMember write */
            assert_string_equal(a->member, nz(st->pending_member));
            assert_string_not_equal(nz(m->phase), "Ready");
            /* ...and is not the resident, which may hold requests until its drain is probed */
            assert_false(strcmp(a->member, nz(s->status.resident_member)) == 0 &&
                         !loading_stage(s));
            assert_int_equal(a->replicas, 0);
            continue;
        }
        if (strcmp(nz(a->reason), "UnprobeableUnload") == 0) {
            /* the pool's opt-in: a resident whose probe cannot decide, never one found busy, and
             * only after the drain fence */
            assert_non_null(s->unload_after);
            assert_true(s->now_ms >= s->drain_after_ms);
            for (size_t k = 0; k < m->n_pods; k++)
                if (live(&m->pods[k]) && m->pods[k].container_running)
                    assert_int_not_equal(m->pods[k].probe, PLAN_PROBE_BUSY);
            continue;
        }
        for (size_t k = 0; k < m->n_pods; k++) { /* never unload a busy member */
            const plan_pod *pod = &m->pods[k];
            if (!live(pod) || !pod->container_running)
                continue;
            assert_int_equal(pod->probe, PLAN_PROBE_IDLE);
            assert_true(s->now_ms - pod->probed_at_ms < PLAN_PROBE_TTL_MS);
            /* in a swap, the drain fence: a member routers may have served (fenced) is
             * unloaded on an idle answer from a probe sent after the fence only */
            if (fenced(s, a->member, a->replicas))
                assert_true(pod->probe_sent_ms >= s->drain_after_ms);
        }
    }
    for (size_t i = 0; i < p->n_actions; i++) /* no probe sent before the drain fence */
        if (p->actions[i].kind == PLAN_PROBE &&
            fenced(s, p->actions[i].member, p->actions[i].replicas))
            assert_true(s->now_ms >= s->drain_after_ms);
    if (activation) { /* rule 3: the pendingMember write comes first; the only work beside it is
                       * holding the new target back (#26), never a probe or another scale */
        assert_int_equal(p->actions[0].kind, PLAN_WRITE_STATUS);
        for (size_t i = 0; i < p->n_actions; i++) {
            const plan_action *a = &p->actions[i];
            if (a->kind != PLAN_SCALE && a->kind != PLAN_PROBE)
                continue;
            assert_int_equal(a->kind, PLAN_SCALE);
            assert_string_equal(nz(a->reason), "HeldBack");
            assert_string_equal(a->member, st->pending_member);
        }
        (void)n_work;
    }
    /* a removed member that still holds the GPU stays recorded, or the next plan forgets it */
    for (size_t j = 0; j < s->n_removed; j++) {
        const plan_member *o = &s->removed[j];
        bool holds = o->exists && reps(o) > 0;
        for (size_t k = 0; k < o->n_pods; k++)
            holds |= live(&o->pods[k]);
        bool recorded = false;
        for (size_t i = 0; i < st->n_members; i++)
            recorded |= strcmp(st->members[i].name, o->name) == 0;
        if (holds)
            assert_true(recorded);
    }
    /* list-map keys stay unique, or the API server rejects the write */
    for (size_t i = 0; i < st->n_members; i++) {
        assert_true(st->members[i].name && *st->members[i].name);
        for (size_t j = i + 1; j < st->n_members; j++)
            assert_string_not_equal(st->members[i].name, st->members[j].name);
    }
    for (size_t i = 0; i < st->n_conditions; i++) {
        assert_true(st->conditions[i].reason && *st->conditions[i].reason);
        assert_int_equal(st->conditions[i].last_transition_ms % 1000, 0);
        for (size_t j = i + 1; j < st->n_conditions; j++)
            assert_string_not_equal(st->conditions[i].type, st->conditions[j].type);
    }
    bool unsure = false; /* #26: a member's absence not confirmed: nothing judged or written */
    for (size_t i = 0; i < s->n_members; i++)
        unsure |= !s->members[i].exists && s->members[i].absence_unconfirmed;
    if (unsure)
        assert_int_equal(p->n_actions, 0);
    assert_int_equal(st->observed_generation,
                     unsure ? s->status.observed_generation : s->generation);
}

static bool has_kind(const plan_result *p, plan_action_kind k)
{
    for (size_t i = 0; i < p->n_actions; i++)
        if (p->actions[i].kind == k)
            return true;
    return false;
}

/* Re-plans on the same world with each plan's status applied: the status settles within a few
 * rounds, after which no status write and no Event comes again and the rest repeats exactly. */
static void check_converges(const plan_snapshot *s0, plan_result *first)
{
    plan_snapshot s = *s0;
    plan_result *prev = NULL, *cur = first;
    char a[2048], b[2048];
    int rounds = 0;
    while (has_kind(cur, PLAN_WRITE_STATUS) || has_kind(cur, PLAN_CLEAR_REQUEST)) {
        assert_true(++rounds <= 4);
        s.status = cur->status;
        if (has_kind(cur, PLAN_CLEAR_REQUEST))
            s.requested = NULL; /* the annotation is gone once the plan ran */
        plan_result *next = NULL;
        assert_int_equal(plan_build(&s, &next), 0);
        check_safety(&s, next);
        if (prev != first)
            plan_free(prev);
        prev = cur;
        cur = next;
    }
    assert_false(has_kind(cur, PLAN_EVENT));
    s.status = cur->status;
    plan_result *again = NULL;
    assert_int_equal(plan_build(&s, &again), 0);
    render(cur, a, sizeof a);
    render(again, b, sizeof b);
    assert_string_equal(a, b);
    assert_true(plan_status_equal(&cur->status, &again->status));
    plan_free(again);
    if (prev != first)
        plan_free(prev);
    if (cur != first)
        plan_free(cur);
}

static void run_case(const t_case *tc)
{
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fix_build(f, tc);
    plan_result *p = NULL;
    assert_int_equal(plan_build(&f->s, &p), 0);
    char got[2048];
    render(p, got, sizeof got);
    print_message("  %-58s -> %s: %s\n", tc->title, nz(p->status.phase), got);

    if (tc->phase)
        assert_string_equal(nz(p->status.phase), tc->phase);
    if (tc->want_resident)
        assert_string_equal(nz(p->status.resident_member), tc->want_resident);
    if (tc->want_pending)
        assert_string_equal(nz(p->status.pending_member), tc->want_pending);
    if (tc->actions)
        assert_string_equal(got, tc->actions);
    if (tc->conds) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", tc->conds);
        for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
             tok = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(tok, '='), *sl = strchr(tok, '/');
            assert_non_null(eq);
            assert_non_null(sl);
            *eq = *sl = '\0';
            if (!cond_is(&p->status, tok, eq + 1, sl + 1))
                fail_msg("%s: want condition %s=%s/%s", tc->title, tok, eq + 1, sl + 1);
        }
    }
    if (tc->want_releasing) {
        char want[256] = "", *w = want;
        for (size_t i = 0; i < p->status.n_members; i++)
            if (p->status.members[i].releasing)
                w += snprintf(w, sizeof want - (size_t)(w - want), "%s%s", w > want ? " " : "",
                              p->status.members[i].name);
        assert_string_equal(want, tc->want_releasing);
    }
    if (tc->msg_has) {
        bool found = false;
        for (size_t i = 0; i < p->status.n_conditions; i++)
            found |= strstr(p->status.conditions[i].message, tc->msg_has) != NULL;
        if (!found)
            fail_msg("%s: no condition message has \"%s\"", tc->title, tc->msg_has);
    }
    assert_int_equal(p->requeue_after_ms, tc->requeue_ms);
    check_safety(&f->s, p);
    check_converges(&f->s, p);
    plan_free(p);
    free(f);
}

static void run_table(const t_case *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        run_case(&t[i]);
}

#define RUN(t) run_table(t, sizeof t / sizeof t[0])

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
    RUN(t);
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
    RUN(t);
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
    RUN(t);
}

/* ---- draining the incumbent: probes, busy, errors, unsupported runtimes, terminating pods ---- */

static void test_drain(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "incumbent running, unprobed: probe it; request held at 0",
         .m = {{"a", 1, "Ready", "R R"}, {"b", 1, "Stopped"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Swapping",
         .conds = "SwapDeferred=False/NotDeferred Swapping=True/Draining",
         .actions = "status scale:b=0 probe:a[a-0,a-1]@8080"},
        {.title = "incumbent all idle: scaled to 0",
         .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status scale:a=0"},
        {.title = "incumbent busy: kept, PodsBusy, re-probe later",
         .m = {{"a", 1, "Ready", "Ri Rb"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/PodsBusy",
         .msg_has = "a-1 is busy",
         .actions = "status event:N:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "drain fence ahead: no probe yet, looked at again when it ends",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = 1000,
         .conds = "SwapDeferred=False/NotDeferred Swapping=True/Draining",
         .actions = "status",
         .requeue_ms = 750},
        {.title = "idle from before the fence: probed again, not unloaded",
         .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = -400,
         .actions = "status probe:a[a-0,a-1]@8080"},
        {.title = "idle from after the fence: scaled to 0",
         .m = {{"a", 1, "Ready", "Ri Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = -500,
         .actions = "status scale:a=0"},
        {.title = "idle from a probe sent after the fence, answered slowly: fresh from its "
                  "answer, scaled to 0",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = -3000,
         .probe_took_ms = 2400,
         .actions = "status scale:a=0"},
        {.title = "idle answered after the fence from a probe sent before it: probed again",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = -1000,
         .probe_took_ms = 600,
         .actions = "status probe:a[a-0]@8080"},
        {.title = "busy before the fence ends: still reported busy, no probe",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = 3000,
         .conds = "SwapDeferred=True/PodsBusy",
         .actions = "status event:N:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "returning to the resident while another member is up: the resident is fenced "
                  "too",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Creating", "Ri"}},
         .releasing = "b",
         .resident = "a",
         .pending = "a",
         .stage = "Draining",
         .fence = 1000,
         .actions = "status",
         .requeue_ms = 750},
        {.title = "no running Pod: stopped at once, fence or not",
         .m = {{"a", 1, "Ready", "N"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = 1000,
         .actions = "status scale:a=0"},
        {.title = "stale busy: re-probed, still reported busy",
         .m = {{"a", 1, "Ready", "RB"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/PodsBusy",
         .actions = "status event:N:SwapDeferred probe:a[a-0]@8080"},
        {.title = "stale idle is not idle: every running Pod probed again, together",
         .m = {{"a", 1, "Ready", "RI Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=False/NotDeferred",
         .actions = "status probe:a[a-0,a-1]@8080"},
        {.title = "restarted operator, busy incumbent not probed yet: deferral kept",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .deferred = "True/PodsBusy",
         .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining",
         .actions = "status probe:a[a-0]@8080"},
        {.title = "restarted operator, failing probe: kept, no second Warning",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .deferred = "True/IdleCheckFailed",
         .conds = "SwapDeferred=True/IdleCheckFailed",
         .actions = "status probe:a[a-0]@8080"},
        {.title = "a known idle result clears an old deferral",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .deferred = "True/PodsBusy",
         .conds = "SwapDeferred=False/NotDeferred",
         .actions = "status scale:a=0"},
        {.title = "probe error: IdleCheckFailed, fail closed",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/IdleCheckFailed",
         .msg_has = "connection refused",
         .actions = "status event:W:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "prober says unsupported: IdleCheckUnsupported",
         .m = {{"a", 1, "Ready", "Ru"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/IdleCheckUnsupported",
         .actions = "status event:W:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "personaplex cannot be probed: IdleCheckUnsupported, no probe",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/IdleCheckUnsupported",
         .msg_has = "personaplex",
         .actions = "status event:W:SwapDeferred",
         .requeue_ms = 299750},
        {.title = "generic without idle-endpoint annotation: unsupported",
         .m = {{"a", 1, "Ready", "R", "generic"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/IdleCheckUnsupported",
         .msg_has = "idle-endpoint",
         .actions = "status event:W:SwapDeferred",
         .requeue_ms = 299750},
        {.title = "generic with the annotation: probed at its path",
         .m = {{"a", 1, "Ready", "R", "generic", "/idle"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status probe:a[a-0]@8080/idle"},
        {.title = "vllm default port; endpoint port wins (target held, probed)",
         .m = {{"a", 1, "Ready", "R", "vllm"},
               {"b", 1, "Ready", "R", "sglang", NULL, 9000},
               {"c", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status probe:b[b-0]@9000 probe:a[a-0]@8000"},
        {.title = "tgi and sglang default ports",
         .m = {{"a", 1, "Ready", "R", "tgi"}, {"b", 1, "Ready", "R", "sglang"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status probe:b[b-0]@30000 probe:a[a-0]@80"},
        {.title = "busy member and unsupported member: first deferred sets reason",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 1, "Ready", "Rb"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "SwapDeferred=True/PodsBusy",
         .msg_has = "b-0 is busy",
         .actions = "status event:N:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "incumbent up but no running container: scaled to 0 unprobed",
         .m = {{"a", 1, "Creating", "P N"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status scale:a=0"},
        {.title = "incumbent at 0, pods still terminating: wait, target stays 0",
         .m = {{"a", 0, "Stopped", "T t"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Swapping",
         .conds = "Swapping=True/Draining",
         .actions = "status"},
        {.title = "terminal pods do not hold the GPU: target started",
         .m = {{"a", 0, "Stopped", "S F"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "Swapping=True/Draining",
         .msg_has = "starting b",
         .actions = "status scale:b=1"},
        {.title = "rule 1: the target's own old Pod still terminates: not started yet",
         .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped", "t"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "Swapping=True/Draining",
         .msg_has = "waiting for pod b-0 of b to terminate",
         .actions = "status"},
        {.title = "rule 1: a terminating Pod with a running container holds it too",
         .m = {{"a", 0, "Stopped"}, {"b", 0, "Stopped", "T P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status"},
        {.title = "rule 1: the target requested again while its old Pod terminates: held at 0",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "t P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "Swapping=True/Draining",
         .actions = "status scale:b=0"},
        {.title = "target's started, the cache shows it up: Loading",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "Swapping=True/Loading",
         .actions = "status"},
        {.title = "request already up and others clear: Loading, no scale needed",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .conds = "Swapping=True/Loading",
         .actions = "status"},
        {.title = "#26: a target loading beside the incumbent, its probe failing: held back "
                  "before any fence or probe",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1, "Progressing", "Re"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .fence = 2000,
         .phase = "Swapping",
         .actions = "status scale:b=0",
         .requeue_ms = 1750},
        {.title = "target running beside the incumbent: both probed before unload",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status probe:b[b-0]@8080 scale:a=0"},
        {.title = "containerPort is where the server listens, before endpoint.port (#19)",
         .m = {{"a", 1, "Ready", "R", NULL, NULL, 8080, false, NULL, 9090}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .actions = "status probe:a[a-0]@9090"},
        {.title = "rule 5: the target's start refused by the API server: reported, retried",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .refused = {"b", 1, "denied by policy no-scale"},
         .phase = "Swapping",
         .conds = "SwapDeferred=True/WriteRefused Swapping=True/Draining",
         .msg_has = "scaling member b to 1 was refused by the API server: denied by policy",
         .actions = "status event:W:WriteRefused scale:b=1"},
        {.title = "rule 5: a refused drain is reported the same way",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .refused = {"a", 0, "forbidden"},
         .conds = "SwapDeferred=True/WriteRefused",
         .actions = "status event:W:WriteRefused scale:a=0"},
        {.title = "rule 5: a refused drain whose probe went stale: probed again, still reported",
         .m = {{"a", 1, "Ready", "RI"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .refused = {"a", 0, "forbidden"},
         .conds = "SwapDeferred=True/WriteRefused",
         .actions = "status event:W:WriteRefused probe:a[a-0]@8080"},
        {.title = "rule 5: a refusal of a write the plan no longer wants says nothing",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .refused = {"b", 1, "denied"},
         .conds = "SwapDeferred=False/NotDeferred",
         .actions = "status scale:a=0"},
        {.title = "no Swapping condition recorded: treated as Draining",
         .m = {{"a", 0}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .conds = "Swapping=True/Draining",
         .actions = "status scale:b=1"},
    };
    RUN(t);
}

/* ---- rule 1 for members removed from the spec while they hold the GPU (#26) ---- */

static void test_removed(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "a releasing member removed while busy: the target waits, x stays recorded",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "Rb"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .phase = "Swapping",
         .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining",
         .msg_has = "member x: pod x-0 is busy",
         .actions = "status event:N:SwapDeferred",
         .requeue_ms = 1250},
        {.title = "removed, unprobed: probed after the fence, target held",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .msg_has = "waiting for pod x-0 of x (removed from spec.members) to be gone",
         .actions = "status probe:x[x-0]@8080"},
        {.title = "removed and idle: scaled to 0, still recorded",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "Ri"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .actions = "status scale:x=0"},
        {.title = "removed at 0, its Pod terminating: the target waits",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 0, "Stopped", "T"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .conds = "Swapping=True/Draining",
         .msg_has = "waiting for pod x-0 of x (removed from spec.members) to be gone",
         .actions = "status"},
        {.title = "removed and deleted, its Pod terminating: the target waits",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", U, NULL, "t", .missing = true}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .actions = "status"},
        {.title = "removed, at 0, Pods gone: forgotten, the target starts",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 0, "Stopped", "S"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "",
         .actions = "status scale:b=1"},
        {.title = "removed and deleted, no Pod: forgotten, the target starts",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", U, NULL, NULL, .missing = true}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "",
         .actions = "status scale:b=1"},
        {.title = "settled pool, a removed member still up: drained to 0",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "Ri"}},
         .resident = "a",
         .releasing = "x",
         .want_releasing = "x",
         .phase = "Ready",
         .actions = "status scale:x=0"},
        {.title = "cold pool, a removed member's Pod terminating: default waits for it",
         .m = {{"a", 0}, {"b", 0}},
         .gone = {{"x", 0, "Stopped", "T"}},
         .dflt = "a",
         .releasing = "x",
         .want_releasing = "x",
         .phase = "Swapping",
         .want_pending = "a",
         .actions = "status event:N:SwapStarted"},
        {.title = "the resident removed (Degraded): recorded, not releasing, nothing acts",
         .m = {{"a", 0}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "R"}},
         .resident = "x",
         .releasing = "",
         .want_releasing = "",
         .phase = "Degraded",
         .conds = "MembersValid=False/ResidentNotMember",
         .actions = "status event:W:ResidentNotMember"},
        {.title = "Degraded spec: the removed member stays recorded, nothing acts",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .gone = {{"x", 1, "Ready", "R"}},
         .dflt = "nope",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .releasing = "x",
         .want_releasing = "x",
         .phase = "Degraded",
         .actions = "status event:W:DefaultNotMember"},
    };
    RUN(t);
}

/* ---- a resident that cannot be probed does not wedge the pool (#26) ---- */

static void test_unprobeable(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "probe failing, swap 299 s old of 300: still deferred, looked at at the budget",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 299,
         .phase = "Swapping",
         .conds = "SwapDeferred=True/IdleCheckFailed",
         .actions = "status event:W:SwapDeferred",
         .requeue_ms = 750},
        {.title = "probe failing past swapBudget: the request is dropped, a serves again",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 300,
         .deferred = "True/IdleCheckFailed",
         .phase = "Ready",
         .want_resident = "a",
         .want_pending = "",
         .conds = "SlotAllocated=True/Resident SwapDeferred=True/IdleCheckFailed "
                  "Swapping=False/RequestDropped",
         .msg_has = "member a: pod a-0: connection refused; the request for b was dropped after "
                    "swapBudget (300000 ms) without a probe that could decide, and a serves again",
         .actions = "status event:W:RequestDropped"},
        {.title = "no idle probe for the runtime past a budget of 10s: dropped, Unsupported",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .budget = "10s",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 10,
         .phase = "Ready",
         .want_pending = "",
         .conds = "SwapDeferred=True/IdleCheckUnsupported Swapping=False/RequestDropped",
         .msg_has = "runtime personaplex has no idle probe; the request for b was dropped",
         .actions = "status event:W:RequestDropped event:W:SwapDeferred"},
        {.title = "dropped with the target up: it is released and held at 0",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 1, "Creating"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 300,
         .deferred = "True/IdleCheckFailed",
         .want_pending = "",
         .want_releasing = "b",
         .actions = "status event:W:RequestDropped scale:b=0"},
        {.title = "busy past swapBudget: the probe decided, the swap waits",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 400,
         .deferred = "True/PodsBusy",
         .want_pending = "b",
         .conds = "SwapDeferred=True/PodsBusy Swapping=True/Draining",
         .actions = "status",
         .requeue_ms = 1250},
        {.title = "one Pod busy, one failing, past swapBudget: waits (busy decides)",
         .m = {{"a", 2, "Ready", "Rb Re"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 400,
         .deferred = "True/PodsBusy",
         .want_pending = "b",
         .requeue_ms = 1250},
        {.title = "opt-in: unprobeable resident unloaded once the swap waited 10s",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .unload_after = "10s",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 10,
         .deferred = "True/IdleCheckFailed",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status scale:a=0",
         .requeue_ms = 1250},
        {.title = "opt-in: not before the drain fence",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .unload_after = "10s",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 10,
         .fence = 1000,
         .deferred = "True/IdleCheckUnsupported",
         .actions = "status",
         .requeue_ms = 750},
        {.title = "opt-in: within its grace, deferred and looked at again when it ends",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .unload_after = "10s",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 5,
         .deferred = "True/IdleCheckUnsupported",
         .actions = "status",
         .requeue_ms = 4750},
        {.title = "opt-in longer than swapBudget: no drop, it waits for the grace",
         .m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .unload_after = "10m",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 400,
         .deferred = "True/IdleCheckUnsupported",
         .want_pending = "b",
         .actions = "status",
         .requeue_ms = 199750},
        {.title = "an invalid opt-in: Degraded, nothing acts",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .unload_after = "soon",
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .stage_age_s = 400,
         .phase = "Degraded",
         .conds = "MembersValid=False/InvalidUnloadAfter",
         .actions = "status event:W:InvalidUnloadAfter"},
        {.title = "after a drop: a stale failure is probed again, the episode stands",
         .m = {{"a", 1, "Ready", "RE"}, {"b", 0}},
         .resident = "a",
         .dropped = true,
         .deferred = "True/IdleCheckFailed",
         .phase = "Ready",
         .conds = "Swapping=False/RequestDropped SwapDeferred=True/IdleCheckFailed",
         .actions = "status probe:a[a-0]@8080"},
        {.title = "after a drop: a fresh failure, looked at again when it goes stale",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .dropped = true,
         .deferred = "True/IdleCheckFailed",
         .conds = "Swapping=False/RequestDropped SwapDeferred=True/IdleCheckFailed",
         .actions = "status",
         .requeue_ms = 1250},
        {.title = "after a drop: the probe decides again (idle), the episode is over",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .dropped = true,
         .deferred = "True/IdleCheckFailed",
         .conds = "Swapping=False/NotSwapping SwapDeferred=False/NotDeferred",
         .actions = "status"},
        {.title = "after a drop: the pool opts into unloading, the episode is over",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .dropped = true,
         .unload_after = "1m",
         .deferred = "True/IdleCheckFailed",
         .conds = "Swapping=False/NotSwapping SwapDeferred=False/NotDeferred",
         .actions = "status"},
        {.title = "after a drop: a new request starts a swap as usual",
         .m = {{"a", 1, "Ready", "Re"}, {"b", 0}},
         .resident = "a",
         .dropped = true,
         .deferred = "True/IdleCheckFailed",
         .requested = "b",
         .want_pending = "b",
         .conds = "Swapping=True/Draining",
         .actions = "status event:N:SwapStarted clear:b"},
    };
    RUN(t);
}

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
    RUN(t);
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
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fix_build(f, &tc);
    f->pods[1][0].waiting = "ImagePullBackOff";
    plan_result *p = NULL;
    assert_int_equal(plan_build(&f->s, &p), 0);
    const plan_condition *c = cond_of(&p->status, "TargetReady");
    assert_non_null(c);
    assert_string_equal(c->message, "target b is not Ready within swapBudget (300000 ms) of its "
                                    "start: phase Creating; pod b-0 Pending (ImagePullBackOff)");
    check_safety(&f->s, p);
    plan_free(p);
    free(f);
}

/* ---- newer requests supersede the pending one ---- */

static void test_supersede(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "draining, target held, newer request: it takes over (intent, then held back)",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}, {"c", 1}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Swapping",
         .want_resident = "a",
         .want_pending = "c",
         .msg_has = "swapping from a to c",
         .actions = "status event:N:SwapStarted scale:c=0"},
        {.title = "draining, target not yet held, newer request: takes over at once (rule 3)",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 1}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .want_pending = "c",
         .want_releasing = "a b",
         .actions = "status event:N:SwapStarted scale:c=0"},
        {.title = "...then every other member up is dealt with, the new target held first",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 1}},
         .resident = "a",
         .pending = "c",
         .stage = "Draining",
         .releasing = "a b",
         .want_pending = "c",
         .actions = "status scale:c=0 probe:a[a-0]@8080 scale:b=0"},
        {.title = "two requests while draining: the one running a Pod wins, the other released",
         .m =
             {{"a", 1, "Ready", "Rb"}, {"b", 0}, {"c", 1, "Creating", "P"}, {"d", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .want_pending = "d",
         .want_releasing = "a c",
         .actions = "status event:N:SwapStarted event:N:RequestSuperseded"},
        {.title = "loading, newer request: started target becomes the incumbent",
         .m = {{"a", 0}, {"b", 1, "Creating", "P"}, {"c", 1}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .want_resident = "b",
         .want_pending = "c",
         .conds = "Swapping=True/Draining",
         .actions = "status event:N:SwapStarted scale:c=0"},
        {.title = "loading, target still at 0, newer request: plain hand-over",
         .m = {{"a", 0}, {"b", 0}, {"c", 1}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .want_resident = "a",
         .want_pending = "c",
         .actions = "status event:N:SwapStarted"},
        {.title = "loading, failed target, newer request: escapes the failure",
         .m = {{"a", 0}, {"b", 1, "Failed", "F"}, {"c", 1}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .want_resident = "b",
         .want_pending = "c",
         .actions = "status event:N:SwapStarted scale:c=0"},
        {.title = "cold warm-up, draining: members up from before are drained, not obeyed",
         .m = {{"a", U}, {"b", U}, {"c", U, "Ready", "Ri"}},
         .pending = "b",
         .stage = "Draining",
         .releasing = "a c",
         .want_resident = "",
         .want_pending = "b",
         .actions = "status scale:b=0 scale:a=0 scale:c=0"},
        {.title = "cold warm-up, loading: a request supersedes",
         .m = {{"a", 1}, {"b", 1, "Creating", "P"}},
         .pending = "b",
         .stage = "Loading",
         .want_resident = "b",
         .want_pending = "a",
         .actions = "status event:N:SwapStarted scale:a=0"},
        {.title = "loading, resident raised again: a request to go back to it",
         .releasing = "",
         .m = {{"a", 1, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .want_resident = "b",
         .want_pending = "a",
         .conds = "Swapping=True/Draining",
         .msg_has = "swapping from b to a",
         .actions = "status event:N:SwapStarted scale:a=0"},
        {.title = "#26: draining, a request back to the resident while its readiness flaps: it "
                  "may still serve, so it is drained (probed), never held back unprobed",
         .m = {{"a", 1, "Progressing", "Rb"}, {"b", 1, "Progressing", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .requested = "a",
         .phase = "Swapping",
         .want_resident = "a",
         .want_pending = "a",
         .actions = "status event:N:SwapStarted clear:a"},
        {.title = "loading, failed target, resident raised again: escapes the failure",
         .releasing = "",
         .m = {{"a", 1, "Stopped", "P"}, {"b", 1, "Failed", "F"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Swapping",
         .want_resident = "b",
         .want_pending = "a",
         .actions = "status event:N:SwapStarted scale:a=0"},
        {.title = "loading, target at 0 by hand, resident raised again: returning to it",
         .m = {{"a", 1, "Stopped"}, {"b", 0, "Stopped"}},
         .releasing = "",
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .want_resident = "a",
         .want_pending = "a",
         .msg_has = "returning to a",
         .actions = "status event:N:SwapStarted"},
        {.title = "returning to the resident while its old Pod terminates: held at 0 (rule 1)",
         .m = {{"a", 1, "Creating", "t P"}, {"b", 0, "Stopped"}},
         .resident = "a",
         .pending = "a",
         .stage = "Draining",
         .releasing = "",
         .actions = "status scale:a=0"},
        {.title = "going back after a failed target: the failed one stopped, request held",
         .m = {{"a", 1, "Stopped", "P"}, {"b", 1, "Failed", "F"}},
         .resident = "b",
         .pending = "a",
         .stage = "Draining",
         .phase = "Swapping",
         .want_resident = "b",
         .want_pending = "a",
         .actions = "status scale:a=0 scale:b=0"},
        {.title = "going back after a failed target: once it is at 0, the request starts",
         .m = {{"a", 0, "Stopped"}, {"b", 0, "Failed", "F"}},
         .resident = "b",
         .pending = "a",
         .stage = "Draining",
         .conds = "Swapping=True/Draining",
         .actions = "status scale:a=1"},
        {.title = "re-raising the resident during a swap is no request: drained again",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .want_pending = "b",
         .actions = "status scale:a=0"},
        {.title = "returned to the resident: it serves, the swap completes",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .pending = "a",
         .releasing = "",
         .stage = "Draining",
         .phase = "Ready",
         .want_pending = "",
         .actions = "status event:N:SwapCompleted"},
    };
    RUN(t);
}

/* ---- requests through the pool (its annotation, #19) ---- */

static void test_pool_request(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "#26: a withdrawal before anything was unloaded: honoured, the resident stays",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .withdrawn = "b",
         .phase = "Ready",
         .want_resident = "a",
         .want_pending = "",
         .want_releasing = "",
         .conds = "SlotAllocated=True/Resident Swapping=False/NotSwapping",
         .actions = "status event:N:RequestWithdrawn unwithdraw:b"},
        {.title = "#26: a withdrawal after the incumbent was scaled down: not honoured, the swap "
                  "goes on",
         .m = {{"a", 0, "Stopped", "t"}, {"b", 0, "Stopped"}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .withdrawn = "b",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status unwithdraw:b"},
        {.title = "#26: a withdrawal once the target was started: not honoured",
         .m = {{"a", 0, "Stopped"}, {"b", 1, "Creating", "P"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .withdrawn = "b",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status unwithdraw:b",
         .requeue_ms = 299750},
        {.title = "#26: a withdrawal of another swap (stale): cleared, this swap goes on",
         .m = {{"a", 1, "Ready", "Rb"}, {"b", 0, "Stopped"}, {"c", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .withdrawn = "c",
         .phase = "Swapping",
         .want_pending = "b",
         .actions = "status event:N:SwapDeferred unwithdraw:c",
         .requeue_ms = 1250},
        {.title = "warm, requested through the pool: swap intent, then the request is cleared",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}},
         .resident = "a",
         .requested = "b",
         .phase = "Swapping",
         .want_pending = "b",
         .want_releasing = "a",
         .actions = "status event:N:SwapStarted clear:b"},
        {.title = "the pool's request beats a member scaled up, which is released",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1}, {"c", 0}},
         .resident = "a",
         .requested = "c",
         .want_pending = "c",
         .want_releasing = "a b",
         .actions = "status event:N:SwapStarted event:N:RequestSuperseded clear:c"},
        {.title = "cold pool: the request wins over default",
         .m = {{"a", 0}, {"b", 0}},
         .dflt = "a",
         .requested = "b",
         .want_pending = "b",
         .actions = "status event:N:SwapStarted clear:b"},
        {.title = "request for the target already pending: cleared, the swap goes on",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .requested = "b",
         .want_pending = "b",
         .actions = "status clear:b scale:a=0"},
        {.title = "request for the settled resident: only cleared",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .requested = "a",
         .phase = "Ready",
         .actions = "status clear:a"},
        {.title = "request for the resident at 0: started again, returning to it",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .resident = "a",
         .requested = "a",
         .want_pending = "a",
         .msg_has = "returning to a",
         .actions = "status event:N:SwapStarted clear:a"},
        {.title = "request for no member: cleared with a Warning, nothing else",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0}},
         .resident = "a",
         .requested = "zz",
         .phase = "Ready",
         .actions = "status event:W:RequestIgnored clear:zz"},
        {.title = "a Degraded pool takes no request: it waits in the annotation",
         .m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
         .resident = "a",
         .requested = "b",
         .phase = "Degraded",
         .actions = "status event:W:MissingMembers"},
        {.title = "during a swap, a request for the resident being drained: returning to it",
         .m = {{"a", 0, "Stopped"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .requested = "a",
         .want_pending = "a",
         .msg_has = "returning to a",
         .actions = "status event:N:SwapStarted clear:a"},
    };
    RUN(t);
}

/* ---- rule 5: a bad spec is a clear status and never a replica change ---- */

static void test_invalid(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.title = "#26: a member not in a cache older than the pool (applied together): nothing "
                  "judged yet, no Degraded, no Event",
         .m = {{"a", 1, "Ready", "R"}, {.name = "b", .missing = true, .unsure = true}},
         .dflt = "a",
         .phase = "",
         .actions = ""},
        {.title = "#26: the same in a warm pool: no status change, no swap, no Event",
         .m = {{"a", 1, "Ready", "R"},
               {.name = "b", .replicas = 1, .missing = true, .unsure = true}},
         .resident = "a",
         .requested = "b",
         .phase = "",
         .want_resident = "a",
         .actions = ""},
        {.title = "missing member",
         .m = {{"a", 1, "Ready", "R"}, {"b", 1, NULL, NULL, NULL, NULL, 0, true}},
         .resident = "a",
         .phase = "Degraded",
         .want_resident = "a",
         .conds = "MembersValid=False/MissingMembers",
         .msg_has = "InferenceService b not found in namespace ml",
         .actions = "status event:W:MissingMembers"},
        {.title = "two missing members: both named",
         .m = {{"a", 0, NULL, NULL, NULL, NULL, 0, true},
               {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
         .phase = "Degraded",
         .msg_has = "InferenceService a not found in namespace ml; "
                    "InferenceService b not found",
         .actions = "status event:W:MissingMembers"},
        {.title = "duplicate member",
         .m = {{"a", 1, "Ready", "R"}, {"a", 1, "Ready", "R"}},
         .phase = "Degraded",
         .conds = "MembersValid=False/DuplicateMember",
         .msg_has = "member a is listed 2 times",
         .actions = "status event:W:DuplicateMember"},
        {.title = "empty member name",
         .m = {{"a", 0}, {"", 1}},
         .phase = "Degraded",
         .conds = "MembersValid=False/EmptyMemberName",
         .msg_has = "spec.members[1]",
         .actions = "status event:W:EmptyMemberName"},
        {.title = "default not a member",
         .m = {{"a", 0}},
         .dflt = "z",
         .phase = "Degraded",
         .conds = "MembersValid=False/DefaultNotMember",
         .msg_has = "default z",
         .actions = "status event:W:DefaultNotMember"},
        {.title = "member claimed by another pool",
         .m = {{"a", 0}, {"b", 1, NULL, NULL, NULL, NULL, 0, false, "other"}},
         .phase = "Degraded",
         .conds = "MembersValid=False/MemberInMultiplePools",
         .msg_has = "pool other",
         .actions = "status event:W:MemberInMultiplePools"},
        {.title = "unparsable swapBudget",
         .m = {{"a", 1}},
         .budget = "soon",
         .phase = "Degraded",
         .conds = "MembersValid=False/InvalidSwapBudget",
         .msg_has = "\"soon\"",
         .actions = "status event:W:InvalidSwapBudget"},
        {.title = "negative swapBudget",
         .m = {{"a", 0}},
         .budget = "-5s",
         .phase = "Degraded",
         .conds = "MembersValid=False/InvalidSwapBudget",
         .actions = "status event:W:InvalidSwapBudget"},
        {.title = "zero swapBudget",
         .m = {{"a", 0}},
         .budget = "0",
         .phase = "Degraded",
         .actions = "status event:W:InvalidSwapBudget"},
        {.title = "unknown swapPolicy",
         .m = {{"a", 0}},
         .policy = "greedy",
         .phase = "Degraded",
         .conds = "MembersValid=False/UnsupportedSwapPolicy",
         .actions = "status event:W:UnsupportedSwapPolicy"},
        {.title = "resident removed from spec.members",
         .m = {{"b", 1}},
         .resident = "a",
         .phase = "Degraded",
         .want_resident = "a",
         .conds = "MembersValid=False/ResidentNotMember",
         .msg_has = "residentMember a",
         .actions = "status event:W:ResidentNotMember"},
        {.title = "pending removed from spec.members",
         .m = {{"a", 1, "Ready", "R"}},
         .resident = "a",
         .pending = "b",
         .stage = "Loading",
         .phase = "Degraded",
         .want_pending = "b",
         .conds = "MembersValid=False/PendingNotMember Swapping=True/Loading",
         .actions = "status event:W:PendingNotMember"},
        {.title = "mid-swap with an idle incumbent: still nothing scaled",
         .m = {{"a", 1, "Ready", "Ri"}, {"b", 0}, {"c", 0, NULL, NULL, NULL, NULL, 0, true}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining",
         .phase = "Degraded",
         .want_pending = "b",
         .actions = "status event:W:MissingMembers"},
        {.title = "several faults: first sets the reason, message names each",
         .m = {{"a", 0}, {"a", 0}, {"", 0}, {"c", 0, NULL, NULL, NULL, NULL, 0, true}},
         .dflt = "z",
         .budget = "x",
         .phase = "Degraded",
         .conds = "MembersValid=False/EmptyMemberName",
         .msg_has = "spec.members[2] has an empty name; member a is listed 2 times; default z is "
                    "not in spec.members; swapBudget \"x\"",
         .actions = "status event:W:EmptyMemberName"},
        {.title = "no members at all",
         .phase = "Degraded",
         .conds = "MembersValid=False/NoMembers",
         .actions = "status event:W:NoMembers"},
    };
    RUN(t);
}

/* Fixing the spec recovers the pool: MembersValid=True and no condition left over. */
static void test_recovery(void **state)
{
    (void)state;
    t_case bad = {.m = {{"a", 1, "Ready", "R"}, {"b", 0, NULL, NULL, NULL, NULL, 0, true}},
                  .resident = "a"};
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fix_build(f, &bad);
    plan_condition stale = {"Ready", "True", "Old", "from an older operator", NOW - 5000};
    f->s.status.conditions = &stale;
    f->s.status.n_conditions = 1;
    plan_result *p1 = NULL, *p2 = NULL;
    assert_int_equal(plan_build(&f->s, &p1), 0);
    assert_string_equal(p1->status.phase, "Degraded");
    assert_int_equal(p1->status.n_conditions, 1); /* unknown types dropped, nothing invented */
    assert_true(cond_is(&p1->status, "MembersValid", "False", "MissingMembers"));

    f->members[1].exists = true; /* kubectl apply of the missing InferenceService */
    f->s.status = p1->status;
    f->s.now_ms = NOW + 60000;
    assert_int_equal(plan_build(&f->s, &p2), 0);
    assert_string_equal(p2->status.phase, "Ready");
    assert_string_equal(p2->status.resident_member, "a");
    assert_int_equal(p2->status.n_conditions, 4);
    const char *types[4] = {"MembersValid", "SlotAllocated", "SwapDeferred", "Swapping"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(p2->status.conditions[i].type, types[i]);
    assert_true(cond_is(&p2->status, "MembersValid", "True", "Valid"));
    assert_int_equal(cond_of(&p2->status, "MembersValid")->last_transition_ms, NOW + 60000);
    assert_false(has_kind(p2, PLAN_SCALE));
    check_converges(&f->s, p2);
    plan_free(p2);
    plan_free(p1);
    free(f);
}

/* members[] mirrors phase and residency, once per name; observedGeneration follows the spec;
 * lastTransitionTime moves only when a condition's status does. */
static void test_status_mirror(void **state)
{
    (void)state;
    t_case tc = {.m = {{"a", 1, "Ready", "R"}, {"b", 0, "Stopped"}, {"c", 0}}, .resident = "a"};
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fix_build(f, &tc);
    f->s.generation = 42;
    plan_result *p = NULL, *q = NULL;
    assert_int_equal(plan_build(&f->s, &p), 0);
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
    assert_int_equal(plan_build(&f->s, &q), 0);
    assert_int_equal(q->status.observed_generation, 43);
    assert_int_equal(cond_of(&q->status, "MembersValid")->last_transition_ms, NOW);
    assert_int_equal(cond_of(&q->status, "SlotAllocated")->last_transition_ms, NOW + 7000);
    assert_int_equal(cond_of(&q->status, "Swapping")->last_transition_ms, NOW + 7000);
    assert_int_equal(cond_of(&q->status, "SwapDeferred")->last_transition_ms, NOW);
    plan_free(q);
    plan_free(p);
    free(f);
}

/* Plan, apply the status, plan again: no status write, no Event; stable states do nothing. */
static void test_idempotence(void **state)
{
    (void)state;
    static const t_case t[] = {
        {.m = {{"a", 1, "Ready", "R"}, {"b", 0}}, .resident = "a"},
        {.m = {{"a", 0}, {"b", 0}}},
        {.m = {{"a", 1, "Ready", "R"}, {"b", 1, "Ready", "R"}}},
        {.m = {{"a", 1, "Ready", "Rb"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining"},
        {.m = {{"a", 0}, {"b", 1, "Failed"}}, .resident = "a", .pending = "b", .stage = "Loading"},
        {.m = {{"a", 0, NULL, NULL, NULL, NULL, 0, true}}},
        {.m = {{"a", 1, "Ready", "R", "personaplex"}, {"b", 0}},
         .resident = "a",
         .pending = "b",
         .stage = "Draining"},
    };
    const bool stable[] = {true, true, false, true, true, true, true};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        t_fix *f = calloc(1, sizeof *f);
        assert_non_null(f);
        fix_build(f, &t[i]);
        plan_result *p = NULL, *q = NULL;
        assert_int_equal(plan_build(&f->s, &p), 0);
        assert_true(has_kind(p, PLAN_WRITE_STATUS));
        f->s.status = p->status;
        assert_int_equal(plan_build(&f->s, &q), 0);
        assert_false(has_kind(q, PLAN_WRITE_STATUS));
        assert_false(has_kind(q, PLAN_EVENT));
        if (stable[i])
            assert_int_equal(q->n_actions, 0);
        plan_free(q);
        plan_free(p);
        free(f);
    }
}

/* The port a Pod's spec names beats what the member's spec implies (#19). */
static void test_pod_port(void **state)
{
    (void)state;
    static const t_case tc = {.m = {{"a", 1, "Ready", "R R", NULL, NULL, 8080}, {"b", 0}},
                              .resident = "a",
                              .pending = "b",
                              .stage = "Draining"};
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fix_build(f, &tc);
    f->pods[0][1].port = 7777;
    plan_result *p = NULL;
    assert_int_equal(plan_build(&f->s, &p), 0);
    char got[512];
    render(p, got, sizeof got);
    assert_string_equal(got, "status probe:a[a-0,a-1:7777]@8080");
    plan_free(p);
    free(f);
}

static void test_parse_duration(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        int64_t ms;
    } t[] = {
        {"300s", 0, 300000},   {"5m", 0, 300000},
        {"1h30m", 0, 5400000}, {"1.5h", 0, 5400000},
        {"250ms", 0, 250},     {"+2s", 0, 2000},
        {"0", 0, 0},           {"1m0.5s", 0, 60500},
        {"1500us", 0, 1},      {".5s", 0, 500},
        {"2.s", 0, 2000},      {"10", -EINVAL, 0},
        {"", -EINVAL, 0},      {"-5s", -EINVAL, 0},
        {"s", -EINVAL, 0},     {"5x", -EINVAL, 0},
        {"5 s", -EINVAL, 0},   {"1e3s", -EINVAL, 0},
        {".s", -EINVAL, 0},    {"99999999999999999h", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int64_t ms = -1;
        int rc = plan_parse_duration_ms(t[i].in, &ms);
        if (rc != t[i].rc || (rc == 0 && ms != t[i].ms))
            fail_msg("\"%s\": rc %d ms %lld", t[i].in, rc, (long long)ms);
    }
    int64_t ms;
    assert_int_equal(plan_parse_duration_ms(NULL, &ms), -EINVAL);
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
        t_fix *f = calloc(1, sizeof *f);
        assert_non_null(f);
        fix_build(f, cases[i]);
        plan_result *p = NULL;
        assert_int_equal(plan_build(&f->s, &p), 0);
        assert_int_equal(p->fenced_until_ms, want[i]);
        plan_free(p);
        free(f);
    }
}

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
        int32_t want = reps(&(plan_member){.replicas = m->replicas});
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
            p->phase = PLAN_POD_RUNNING, p->container_running = true;
            ready = true;
        }
        for (; (int32_t)live_n < want && m->n_pods < MAXP; live_n++) {
            plan_pod *p = &m->pods[m->n_pods];
            memset(p, 0, sizeof *p);
            snprintf(m->names[m->n_pods], sizeof m->names[0], "%s-%d", m->name, m->pod_seq++);
            p->name = m->names[m->n_pods];
            p->ip = "127.0.0.1";
            p->phase = PLAN_POD_PENDING;
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
    check_safety(&w->s, p);
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
    plan_status *st = &w->cur->status;
    return nz(which == 0 ? st->phase : which == 1 ? st->resident_member : st->pending_member);
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
        assert_int_equal(reps(&(plan_member){.replicas = w->m[i].replicas}), is_res ? 1 : 0);
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

static void test_sim_failed_target_escape(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", NULL};
    sim *w = sim_new(NULL, names, (const int32_t[]){1, 0, 0});
    sim_settle(w, 40);
    w->m[1].fail_phase = "Failed";
    w->m[1].replicas = 1;
    sim_settle(w, 60); /* settles in a reported failure, not silently Swapping */
    assert_string_equal(sim_status(w, 0), "Degraded");
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
    w->m[1].fail_phase = "Failed";
    w->m[1].replicas = 1;
    sim_settle(w, 60);
    assert_string_equal(sim_status(w, 0), "Degraded");
    w->m[0].replicas = 1; /* the user goes back to a */
    sim_settle(w, 60);
    sim_assert_single(w, "a");
    sim_free(w);
}

static void test_sim_unsupported_waits_for_human(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", NULL};
    sim *w = sim_new("a", names, (const int32_t[]){0, 0});
    w->m[0].runtime = "personaplex";
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    w->m[1].replicas = 1;
    sim_settle(w, 40);
    assert_string_equal(sim_status(w, 0), "Swapping");
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
    const char *names[] = {"a", "b", NULL};
    sim *w = sim_new("a", names, (const int32_t[]){0, 0});
    w->m[0].runtime = "personaplex";
    w->budget = "10s";
    sim_settle(w, 40);
    sim_assert_single(w, "a");
    w->m[1].replicas = 1;
    sim_settle(w, 40);
    assert_string_equal(sim_status(w, 0), "Swapping");
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
            p->phase = (plan_pod_phase)rnd(5);
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
            (plan_condition){"Swapping", (char *)ANY("True", "False"),
                             (char *)ANY("Loading", "Draining", "NotSwapping", "RequestDropped"),
                             "", NOW - (int64_t)rnd(600) * 1000};
    if (rnd(3))
        f->conds[nc++] =
            (plan_condition){"SwapDeferred", (char *)ANY("True", "False"),
                             (char *)ANY("PodsBusy", "NotDeferred", "IdleCheckFailed"), "x", NOW};
    if (rnd(3))
        f->conds[nc++] = (plan_condition){"MembersValid", (char *)ANY("True", "False"),
                                          (char *)ANY("Valid", "MissingMembers"), "", NOW};
    f->s.status.conditions = f->conds;
    f->s.status.n_conditions = nc;
    f->s.status.members = f->mstat;
    for (size_t i = 0; i < n; i++)
        if (rnd(5))
            f->mstat[f->s.status.n_members++] =
                (plan_member_status){.name = (char *)f->members[i].name, .releasing = rnd(6) != 0};
    if (gone)
        f->mstat[f->s.status.n_members++] = (plan_member_status){.name = "x", .releasing = true};
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
        check_safety(&f->s, p);
        scales += has_kind(p, PLAN_SCALE);
        probes += has_kind(p, PLAN_PROBE);
        check_converges(&f->s, p);
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
        if (*res && reps(&(plan_member){.replicas = w->m[*res - 'a'].replicas}) == 0) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cold),
        cmocka_unit_test(test_adoption),
        cmocka_unit_test(test_sticky),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_removed),
        cmocka_unit_test(test_unprobeable),
        cmocka_unit_test(test_target),
        cmocka_unit_test(test_target_waiting),
        cmocka_unit_test(test_supersede),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_recovery),
        cmocka_unit_test(test_status_mirror),
        cmocka_unit_test(test_idempotence),
        cmocka_unit_test(test_pool_request),
        cmocka_unit_test(test_pod_port),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_fenced_until),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_sim_cold_start_default),
        cmocka_unit_test(test_sim_swap_busy_then_idle),
        cmocka_unit_test(test_sim_three_members_supersede),
        cmocka_unit_test(test_sim_supersede_while_loading),
        cmocka_unit_test(test_sim_failed_target_escape),
        cmocka_unit_test(test_sim_failed_target_go_back),
        cmocka_unit_test(test_sim_unsupported_waits_for_human),
        cmocka_unit_test(test_sim_unsupported_dropped_after_budget),
        cmocka_unit_test(test_property_random_snapshots),
        cmocka_unit_test(test_property_random_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

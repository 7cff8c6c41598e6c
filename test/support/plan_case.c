/* plan_case: the plan tests' fixtures and checks (plan_case.h): the pool language turned into a
 * snapshot, the rendering of a plan, the safety rules and convergence every case is checked for. */
#include "plan_case.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The Pods' state letters (plan_case.h) and what each stands for. */
static const struct {
    char letter;
    api_pod_phase phase;
    bool container_running, terminating;
} pod_states[] = {
    {'R', API_POD_RUNNING, true, false},  {'N', API_POD_RUNNING, false, false},
    {'P', API_POD_PENDING, false, false}, {'T', API_POD_RUNNING, true, true},
    {'t', API_POD_RUNNING, false, true},  {'S', API_POD_SUCCEEDED, false, false},
    {'F', API_POD_FAILED, false, false},
};

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
        size_t st = 0;
        while (st < sizeof pod_states / sizeof pod_states[0] && pod_states[st].letter != *c)
            st++;
        if (st == sizeof pod_states / sizeof pod_states[0])
            fail_msg("bad pod token in \"%s\"", dsl);
        c++;
        p->phase = pod_states[st].phase;
        p->container_running = pod_states[st].container_running;
        p->terminating = pod_states[st].terminating;
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

int32_t case_replicas(const plan_member *m)
{
    return m->replicas < 0 ? 1 : m->replicas;
}

void case_build(t_fix *f, const t_case *tc)
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
        f->conds[f->s.status.n_conditions++] = (api_condition){
            "Swapping", "True", (char *)tc->stage, "", NOW - tc->stage_age_s * 1000};
    if (tc->dropped)
        f->conds[f->s.status.n_conditions++] =
            (api_condition){"Swapping", "False", "RequestDropped", "", NOW - 1000};
    f->s.unload_after = tc->unload_after;
    if (tc->load_age_s)
        f->conds[f->s.status.n_conditions++] =
            (api_condition){"TargetReady", "False", "Loading", "", NOW - tc->load_age_s * 1000};
    const char *rel = tc->releasing;
    if (rel == NULL && tc->pending && tc->resident) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(f->members[i].name, tc->resident) == 0 && case_replicas(&f->members[i]) > 0)
                rel = tc->resident;
    }
    snprintf(f->rel_names, sizeof f->rel_names, "%s", rel ? rel : "");
    f->s.status.members = f->mstat;
    for (char *save = NULL, *tok = strtok_r(f->rel_names, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save))
        f->mstat[f->s.status.n_members++] = (api_member_status){.name = tok, .releasing = true};
    if (tc->deferred) {
        api_condition *c = &f->conds[f->s.status.n_conditions++];
        snprintf(f->deferred, sizeof f->deferred, "%s", tc->deferred);
        char *sl = strchr(f->deferred, '/');
        assert_non_null(sl);
        *sl = '\0';
        *c =
            (api_condition){"SwapDeferred", f->deferred, sl + 1, "from the last probe", NOW - 5000};
    }
}

/* "status event:N:SwapStarted probe:a[a-0,a-1]@8080 scale:b=1", in plan order. */
void case_render(const plan_result *p, char *buf, size_t cap)
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

const api_condition *case_cond(const api_status *st, const char *type)
{
    for (size_t i = 0; i < st->n_conditions; i++)
        if (strcmp(st->conditions[i].type, type) == 0)
            return &st->conditions[i];
    return NULL;
}

bool case_cond_is(const api_status *st, const char *type, const char *status, const char *reason)
{
    const api_condition *c = case_cond(st, type);
    return c && strcmp(c->status, status) == 0 && (!reason || strcmp(c->reason, reason) == 0);
}

const char *case_nz(const char *s)
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

bool case_pod_live(const plan_pod *p)
{
    return p->phase != API_POD_SUCCEEDED && p->phase != API_POD_FAILED;
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
           (to == 0 && strcmp(case_nz(s->status.resident_member), member) == 0);
}

/* The swap's target was started (the status says Swapping=True/Loading): the resident is gone. */
static bool loading_stage(const plan_snapshot *s)
{
    for (size_t i = 0; i < s->status.n_conditions; i++)
        if (strcmp(case_nz(s->status.conditions[i].type), "Swapping") == 0)
            return strcmp(case_nz(s->status.conditions[i].status), "True") == 0 &&
                   strcmp(case_nz(s->status.conditions[i].reason), "Loading") == 0;
    return false;
}

void case_check_safety(const plan_snapshot *s, const plan_result *p)
{
    const api_status *st = &p->status;
    bool valid = case_cond_is(st, "MembersValid", "True", NULL);
    bool activation = st->pending_member && *st->pending_member &&
                      strcmp(st->pending_member, case_nz(s->status.pending_member)) != 0;
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
            running += case_pod_live(&m->pods[k]) && m->pods[k].container_running;
        if (a->replicas >= 1 &&
            case_replicas(m) == 0) { /* rule 1: a start needs the whole slot free */
            assert_non_null(st->pending_member);
            assert_string_equal(a->member, st->pending_member);
            for (size_t j = 0; j < s->n_members; j++) {
                const plan_member *o = &s->members[j];
                if (strcmp(o->name, a->member) != 0)
                    assert_int_equal(case_replicas(o), 0);
                for (size_t k = 0; k < o->n_pods; k++)
                    assert_false(case_pod_live(&o->pods[k])); /* the target's own old Pods too */
            }
            /* and those of members the pool recorded, whatever the spec says now */
            for (size_t j = 0; j < s->n_removed; j++) {
                const plan_member *o = &s->removed[j];
                if (o->exists)
                    assert_int_equal(case_replicas(o), 0);
                for (size_t k = 0; k < o->n_pods; k++)
                    assert_false(case_pod_live(&o->pods[k]));
            }
            continue;
        }
        if (a->replicas >= 1) { /* rule 2: above one, back to exactly one */
            assert_int_equal(a->replicas, 1);
            assert_true(case_replicas(m) > 1);
        } else {
            assert_true(case_replicas(m) > 0);
        }
        if (running <= (size_t)a->replicas)
            continue; /* the Pods that go never ran */
        if (strcmp(case_nz(a->reason), "HeldBack") == 0) {
            /* #26: the swap's target, starting (not Ready) beside another member, never had the
             * slot: held back at once, after the pendingMember write */
            assert_string_equal(a->member, case_nz(st->pending_member));
            assert_string_not_equal(case_nz(m->phase), "Ready");
            /* ...and is not the resident, which may hold requests until its drain is probed */
            assert_false(strcmp(a->member, case_nz(s->status.resident_member)) == 0 &&
                         !loading_stage(s));
            assert_int_equal(a->replicas, 0);
            continue;
        }
        if (strcmp(case_nz(a->reason), "UnprobeableUnload") == 0) {
            /* the pool's opt-in: a resident whose probe cannot decide, never one found busy, and
             * only after the drain fence */
            assert_non_null(s->unload_after);
            assert_true(s->now_ms >= s->drain_after_ms);
            for (size_t k = 0; k < m->n_pods; k++)
                if (case_pod_live(&m->pods[k]) && m->pods[k].container_running)
                    assert_int_not_equal(m->pods[k].probe, PLAN_PROBE_BUSY);
            continue;
        }
        for (size_t k = 0; k < m->n_pods; k++) { /* never unload a busy member */
            const plan_pod *pod = &m->pods[k];
            if (!case_pod_live(pod) || !pod->container_running)
                continue;
            assert_int_equal(pod->probe, PLAN_PROBE_IDLE);
            assert_true(s->now_ms - pod->probed_at_ms < PLAN_PROBE_TTL_MS);
            /* in a swap, the drain fence: a member routers may have served (fenced) is
             * unloaded on an idle answer from a probe sent after the fence only */
            if (fenced(s, a->member, a->replicas))
                assert_true(pod->probe_sent_ms >= s->drain_after_ms);
        }
    }
    /* No probe sent before the drain fence; but the resident's while the swap awaits its probe
     * (#26): that answer only decides whether the drain begins (the fence starts then). */
    for (size_t i = 0; i < p->n_actions; i++)
        if (p->actions[i].kind == PLAN_PROBE &&
            fenced(s, p->actions[i].member, p->actions[i].replicas) &&
            !(api_status_awaits_probe(&s->status) &&
              strcmp(p->actions[i].member, case_nz(s->status.resident_member)) == 0))
            assert_true(s->now_ms >= s->drain_after_ms);
    if (activation) { /* rule 3: the pendingMember write comes first; the only work beside it is
                       * holding the new target back (#26), never a probe or another scale */
        assert_int_equal(p->actions[0].kind, PLAN_WRITE_STATUS);
        for (size_t i = 0; i < p->n_actions; i++) {
            const plan_action *a = &p->actions[i];
            if (a->kind != PLAN_SCALE && a->kind != PLAN_PROBE)
                continue;
            assert_int_equal(a->kind, PLAN_SCALE);
            assert_string_equal(case_nz(a->reason), "HeldBack");
            assert_string_equal(a->member, st->pending_member);
        }
        (void)n_work;
    }
    /* a removed member that still holds the GPU stays recorded, or the next plan forgets it */
    for (size_t j = 0; j < s->n_removed; j++) {
        const plan_member *o = &s->removed[j];
        bool holds = o->exists && case_replicas(o) > 0;
        for (size_t k = 0; k < o->n_pods; k++)
            holds |= case_pod_live(&o->pods[k]);
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

bool case_has_kind(const plan_result *p, plan_action_kind k)
{
    for (size_t i = 0; i < p->n_actions; i++)
        if (p->actions[i].kind == k)
            return true;
    return false;
}

/* Re-plans on the same world with each plan's status applied: the status settles within a few
 * rounds, after which no status write and no Event comes again and the rest repeats exactly. */
void case_check_converges(const plan_snapshot *s0, plan_result *first)
{
    plan_snapshot s = *s0;
    plan_result *prev = NULL, *cur = first;
    char a[2048], b[2048];
    int rounds = 0;
    while (case_has_kind(cur, PLAN_WRITE_STATUS) || case_has_kind(cur, PLAN_CLEAR_REQUEST)) {
        assert_true(++rounds <= 4);
        s.status = cur->status;
        if (case_has_kind(cur, PLAN_CLEAR_REQUEST))
            s.requested = NULL; /* the annotation is gone once the plan ran */
        plan_result *next = NULL;
        assert_int_equal(plan_build(&s, &next), 0);
        case_check_safety(&s, next);
        if (prev != first)
            plan_free(prev);
        prev = cur;
        cur = next;
    }
    assert_false(case_has_kind(cur, PLAN_EVENT));
    s.status = cur->status;
    plan_result *again = NULL;
    assert_int_equal(plan_build(&s, &again), 0);
    case_render(cur, a, sizeof a);
    case_render(again, b, sizeof b);
    assert_string_equal(a, b);
    assert_true(plan_status_equal(&cur->status, &again->status));
    plan_free(again);
    if (prev != first)
        plan_free(prev);
    if (cur != first)
        plan_free(cur);
}

void case_run(const t_case *tc)
{
    t_fix *f = case_fix_new(tc);
    plan_result *p = NULL;
    assert_int_equal(plan_build(&f->s, &p), 0);
    char got[2048];
    case_render(p, got, sizeof got);
    print_message("  %-58s -> %s: %s\n", tc->title, case_nz(p->status.phase), got);

    if (tc->phase)
        assert_string_equal(case_nz(p->status.phase), tc->phase);
    if (tc->want_resident)
        assert_string_equal(case_nz(p->status.resident_member), tc->want_resident);
    if (tc->want_pending)
        assert_string_equal(case_nz(p->status.pending_member), tc->want_pending);
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
            if (!case_cond_is(&p->status, tok, eq + 1, sl + 1))
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
    case_check_safety(&f->s, p);
    case_check_converges(&f->s, p);
    plan_free(p);
    free(f);
}

void case_run_table(const t_case *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        case_run(&t[i]);
}

t_fix *case_fix_new(const t_case *tc)
{
    t_fix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    case_build(f, tc);
    return f;
}

plan_result *case_plan(const plan_snapshot *s)
{
    plan_result *p = NULL;
    assert_int_equal(plan_build(s, &p), 0);
    case_check_safety(s, p);
    return p;
}

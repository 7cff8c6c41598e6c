/* test_routes: the router's model-name table (src/router/routes.c) over real caches of pool and
 * InferenceService records: own names, served names and aliases, ambiguity across pools, a
 * rebuild after a change, and names scoped by namespace (another tenant can neither shadow nor
 * claim a name of the home namespace). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_json.h"
#include "test_main.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "router/routes.h"

/* The caches a table is built over, and the table of home namespace "ml". */
typedef struct {
    store *pools, *isvcs;
    rt_routes *r;
} t_routes;

/* Puts the pool ns/name of the members (JSON strings, comma-separated) with resident (NULL: none)
 * into t's cache. */
static void put_pool(t_routes *t, const char *ns, const char *name, const char *members,
                     const char *resident)
{
    char refs[256] = "", json[512];
    char copy[64];
    snprintf(copy, sizeof(copy), "%s", members);
    for (char *save = NULL, *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        size_t len = strlen(refs);
        snprintf(refs + len, sizeof(refs) - len, "%s{\"inferenceServiceRef\":{\"name\":\"%s\"}}",
                 len ? "," : "", m);
    }
    char status[64] = "";
    if (resident)
        snprintf(status, sizeof(status), ",\"status\":{\"residentMember\":\"%s\"}", resident);
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"members\":[%s]}%s}",
             name, ns, refs, status);
    test_store_put(t->pools, json);
}

/* Puts the InferenceService ns/name, with its served-model and model-aliases annotations when set,
 * into t's cache. */
static void put_isvc(t_routes *t, const char *ns, const char *name, const char *served,
                     const char *aliases)
{
    char ann[256] = "", json[512];
    if (served)
        snprintf(ann, sizeof(ann), "\"modelpool-operator.dev/served-model\":\"%s\"", served);
    if (aliases) {
        size_t len = strlen(ann);
        snprintf(ann + len, sizeof(ann) - len, "%s\"modelpool-operator.dev/model-aliases\":\"%s\"",
                 len ? "," : "", aliases);
    }
    snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"%s%s%s}}",
             name, ns, *ann ? ",\"annotations\":{" : "", ann, *ann ? "}" : "");
    test_store_put(t->isvcs, json);
}

static void t_open(t_routes *t)
{
    t->pools = store_new(&api_pool_codec);
    t->isvcs = store_new(&api_isvc_codec);
    assert_non_null(t->pools);
    assert_non_null(t->isvcs);
}

/* The table over t's caches as they are now. */
static rt_routes *t_table(t_routes *t)
{
    t->r = rt_routes_new(t->pools, t->isvcs, "ml");
    assert_non_null(t->r);
    return t->r;
}

static void t_close(t_routes *t)
{
    rt_routes_free(t->r);
    store_free(t->pools);
    store_free(t->isvcs);
}

/* Lookup rows leave out the fields they do not look at. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* A field a lookup must leave NULL. */
static const char none[] = "(none)";

/* A lookup of name and what it must give: rc, then the namespace, pool, member, served name and
 * name the member is sent (rt.name) it routes to, each when set (none: NULL). */
typedef struct {
    const char *name;
    int rc;
    const char *ns, *pool, *member, *served, *as;
} t_lookup;

static void want_field(const char *name, const char *field, const char *got, const char *want)
{
    if (want == none ? got != NULL : want && (!got || strcmp(got, want) != 0))
        fail_msg("%s: %s %s, want %s", name, field, got ? got : "NULL",
                 want == none ? "NULL" : want);
}

static void lookups(rt_routes *r, const t_lookup *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rt_route rt;
        const char *other;
        int rc = rt_routes_lookup(r, l[i].name, &rt, &other);
        if (rc != l[i].rc)
            fail_msg("%s: %d, want %d", l[i].name, rc, l[i].rc);
        if (rc != 0)
            continue;
        want_field(l[i].name, "namespace", rt.ns, l[i].ns);
        want_field(l[i].name, "pool", rt.pool, l[i].pool);
        want_field(l[i].name, "member", rt.member, l[i].member);
        want_field(l[i].name, "served", rt.served, l[i].served);
        want_field(l[i].name, "name", rt.name, l[i].as);
    }
}

static void test_lookup(void **state)
{
    (void)state;
    t_routes t;
    t_open(&t);
    put_pool(&t, "ml", "p", "a,b", "a");
    put_isvc(&t, "ml", "a", "Org/A-7B", " gpt-a , a-chat,,a");
    put_isvc(&t, "ml", "b", NULL, NULL);
    rt_routes *r = t_table(&t);
    static const t_lookup l[] = {
        {"a", 0, "ml", "p", "a", "Org/A-7B"},
        {"gpt-a", 0, NULL, NULL, "a"},
        {"a-chat", 0},
        {"Org/A-7B", 0},
        {"b", 0, .served = none},
        {"c", -ENOENT},
        {"", -ENOENT},
    };
    lookups(r, l, sizeof(l) / sizeof(l[0]));

    rt_oai_model *v;
    size_t n;
    assert_int_equal(rt_routes_models(r, &v, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].id, "a") == 0) {
            assert_true(v[i].resident);
            assert_int_equal(v[i].naliases, 3); /* served name, gpt-a, a-chat */
        } else {
            assert_false(v[i].resident);
            assert_int_equal(v[i].naliases, 0);
        }
    }
    free(v);

    /* a second pool claims the alias gpt-a: ambiguous, named in the answer; after the change */
    put_pool(&t, "ml", "q", "c", NULL);
    put_isvc(&t, "ml", "c", NULL, "gpt-a");
    rt_route rt;
    const char *other;
    assert_int_equal(rt_routes_lookup(r, "c", &rt, &other), -ENOENT); /* not rebuilt yet */
    rt_routes_invalidate(r);
    assert_int_equal(rt_routes_lookup(r, "c", &rt, &other), 0);
    assert_string_equal(rt.pool, "q");
    assert_int_equal(rt_routes_lookup(r, "gpt-a", &rt, &other), -EEXIST);
    assert_non_null(other);
    assert_int_equal(rt_routes_lookup(r, "a", &rt, &other), 0);
    t_close(&t);
}

/* The router's home namespace is "ml"; "evil" is another tenant's, watched by the same router. */
static void test_tenants(void **state)
{
    (void)state;
    t_routes t;
    t_open(&t);
    put_pool(&t, "ml", "p", "a", "a");
    put_isvc(&t, "ml", "a", "Org/A-7B", "llama");
    /* The attacks: evil's member declares the home alias (to make it ambiguous), a name nobody
     * at home declares (to receive its requests), and the home served name under its own name. */
    put_pool(&t, "evil", "ep", "e,org", NULL);
    put_isvc(&t, "evil", "e", NULL, "llama,gpt-4o,a");
    put_isvc(&t, "evil", "org", NULL, "A-7B");
    rt_routes *r = t_table(&t);
    static const t_lookup l[] = {
        /* home names resolve at home only, whatever evil declares */
        {"llama", 0, "ml", NULL, "a", .as = "llama"},
        {"a", 0, "ml"},
        /* a name with a '/' that home declares is home's, though "Org" reads like a namespace */
        {"Org/A-7B", 0, "ml", .as = "Org/A-7B"},
        /* a name only evil declares is not reachable unqualified */
        {"gpt-4o", -ENOENT},
        {"e", -ENOENT},
        /* qualified: evil's names in evil (evil/gpt-4o below) */
        {"evil/llama", 0, "evil"},
        {"evil/org", 0, NULL, NULL, "org"},
        /* home's own names qualified, too; and no namespace's names under another's qualifier */
        {"ml/llama", 0, "ml", .as = "llama"},
        {"ml/Org/A-7B", 0, .as = "Org/A-7B"},
        {"ml/gpt-4o", -ENOENT},
        {"evil/Org/A-7B", -ENOENT},
        {"other/llama", -ENOENT},
        {"/llama", -ENOENT},
        {"evil/", -ENOENT},
    };
    lookups(r, l, sizeof(l) / sizeof(l[0]));
    /* qualified: evil's names in evil, with the name the member is sent */
    rt_route rt;
    const char *other;
    const char *q = "evil/gpt-4o";
    assert_int_equal(rt_routes_lookup(r, q, &rt, &other), 0);
    assert_string_equal(rt.ns, "evil");
    assert_string_equal(rt.pool, "ep");
    assert_string_equal(rt.member, "e");
    assert_ptr_equal(rt.name, q + 5);

    /* the list: plain names at home, qualified ones for evil */
    rt_oai_model *v;
    size_t n;
    assert_int_equal(rt_routes_models(r, &v, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].ns, "ml") == 0) {
            assert_string_equal(v[i].id, "a");
            assert_int_equal(v[i].naliases, 2);
            assert_string_equal(v[i].aliases[0], "Org/A-7B");
            assert_string_equal(v[i].aliases[1], "llama");
        } else if (strcmp(v[i].member, "e") == 0) {
            assert_string_equal(v[i].id, "evil/e");
            assert_int_equal(v[i].naliases, 3);
            assert_string_equal(v[i].aliases[0], "evil/llama");
            assert_string_equal(v[i].aliases[1], "evil/gpt-4o");
            assert_string_equal(v[i].aliases[2], "evil/a");
        } else {
            assert_string_equal(v[i].id, "evil/org");
        }
    }
    free(v);

    /* ambiguity stays within one namespace: a second home pool claiming llama makes it 400 */
    put_pool(&t, "ml", "q", "c", NULL);
    put_isvc(&t, "ml", "c", NULL, "llama");
    rt_routes_invalidate(r);
    assert_int_equal(rt_routes_lookup(r, "llama", &rt, &other), -EEXIST);
    assert_int_equal(rt_routes_lookup(r, "evil/llama", &rt, &other), 0);
    assert_string_equal(rt.ns, "evil");
    t_close(&t);
}

TEST_MAIN(cmocka_unit_test(test_lookup), cmocka_unit_test(test_tenants))

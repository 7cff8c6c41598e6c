/* routes: the model-name table. Rebuilt whole from the caches on the first lookup after a change
 * (names change rarely: a pool's members, a member's annotations), then every lookup is one or two
 * hash probes. Each member contributes its own name, its served name and its aliases, keyed as
 * "<namespace>/<name>": a namespace's names never meet another's, and a name that two members of
 * one namespace claim is ambiguous and refused rather than guessed. */
#include "router/routes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"
#include "util/strmap.h"

typedef struct rt_member {
    char *ns, *pool, *member, *served;
    char *id; /* the member's name as clients send it: qualified outside the home namespace */
    bool resident;
    char **aliases; /* the served name and the aliases, without the member's own name, as id */
    size_t naliases;
} rt_member;

typedef struct rt_name {
    strmap_node node;
    struct rt_name *next; /* every name, for freeing */
    size_t member;        /* index into members */
    char name[];          /* "<namespace>/<name>" */
} rt_name;

struct rt_routes {
    const store *pools, *isvcs;
    char *home;
    bool valid;
    rt_member *members;
    size_t nmembers, cap_members;
    rt_name *names;
    strmap map;
};

rt_routes *rt_routes_new(const store *pools, const store *isvcs, const char *home)
{
    rt_routes *r = calloc(1, sizeof(*r));
    if (!r || !(r->home = strdup(home)) || strmap_init(&r->map) < 0) {
        if (r)
            free(r->home);
        free(r);
        return NULL;
    }
    r->pools = pools;
    r->isvcs = isvcs;
    return r;
}

static void rt_routes_clear(rt_routes *r)
{
    while (r->names) {
        rt_name *e = r->names;
        r->names = e->next;
        strmap_remove(&r->map, &e->node);
        free(e);
    }
    for (size_t i = 0; i < r->nmembers; i++) {
        rt_member *m = &r->members[i];
        free(m->ns);
        free(m->pool);
        free(m->member);
        free(m->served);
        free(m->id);
        for (size_t k = 0; k < m->naliases; k++)
            free(m->aliases[k]);
        free(m->aliases);
    }
    r->nmembers = 0;
    r->valid = false;
}

void rt_routes_free(rt_routes *r)
{
    if (!r)
        return;
    rt_routes_clear(r);
    free(r->members);
    free(r->home);
    strmap_fini(&r->map);
    free(r);
}

void rt_routes_invalidate(rt_routes *r)
{
    r->valid = false;
}

static int rt_grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, c * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* What clients send for a key: the name alone in the home namespace, else the key. */
static const char *rt_client_name(const rt_routes *r, const char *key)
{
    size_t hl = strlen(r->home);
    return strncmp(key, r->home, hl) == 0 && key[hl] == '/' ? key + hl + 1 : key;
}

/* Adds name (len bytes, not NUL-terminated) for member m, and to its aliases unless it is the
 * member's own name. Empty names and repeats for the same member are skipped. */
static int rt_add_name(rt_routes *r, size_t m, const char *name, size_t len, bool alias)
{
    if (len == 0)
        return 0;
    rt_member *mm = &r->members[m];
    size_t nl = strlen(mm->ns);
    rt_name *e = malloc(sizeof(*e) + nl + 1 + len + 1);
    if (!e)
        return -ENOMEM;
    memcpy(e->name, mm->ns, nl);
    e->name[nl] = '/';
    memcpy(e->name + nl + 1, name, len);
    e->name[nl + 1 + len] = '\0';
    e->member = m;
    for (strmap_node *n = strmap_get(&r->map, e->name); n; n = strmap_get_next(n))
        if (STRMAP_OWNER(n, rt_name, node)->member == m) {
            free(e);
            return 0;
        }
    if (alias) {
        char **a = realloc(mm->aliases, (mm->naliases + 1) * sizeof(*a));
        if (a)
            mm->aliases = a;
        if (!a || !(a[mm->naliases] = strdup(rt_client_name(r, e->name)))) {
            free(e);
            return -ENOMEM;
        }
        mm->naliases++;
    }
    e->next = r->names;
    r->names = e;
    strmap_insert(&r->map, &e->node, e->name);
    return 0;
}

typedef struct rt_build {
    rt_routes *r;
    int rc;
} rt_build;

static int rt_add_member(rt_routes *r, const api_pool *p, const char *member)
{
    if (rt_grow((void **)&r->members, &r->cap_members, r->nmembers, sizeof(*r->members)) < 0)
        return -ENOMEM;
    char key[512];
    const char *ns = p->ns ? p->ns : "";
    int kl = snprintf(key, sizeof(key), "%s/%s", ns, member);
    const api_isvc *isvc = kl > 0 && (size_t)kl < sizeof(key) ? store_get(r->isvcs, key) : NULL;
    rt_member *m = &r->members[r->nmembers];
    *m = (rt_member){.ns = strdup(ns),
                     .pool = strdup(p->name),
                     .member = strdup(member),
                     .resident = p->status.resident_member &&
                                 strcmp(p->status.resident_member, member) == 0 &&
                                 !(p->status.pending_member && *p->status.pending_member)};
    r->nmembers++;
    if (!m->ns || !m->pool || !m->member)
        return -ENOMEM;
    if (strcmp(ns, r->home) == 0 ? !(m->id = strdup(member))
                                 : asprintf(&m->id, "%s/%s", ns, member) < 0) {
        m->id = NULL;
        return -ENOMEM;
    }
    size_t idx = r->nmembers - 1;
    int rc = rt_add_name(r, idx, member, strlen(member), false);
    if (rc == 0 && isvc && isvc->served_model && *isvc->served_model) {
        if (strcmp(isvc->served_model, member) != 0 && !(m->served = strdup(isvc->served_model)))
            return -ENOMEM;
        rc = rt_add_name(r, idx, isvc->served_model, strlen(isvc->served_model),
                         strcmp(isvc->served_model, member) != 0);
    }
    for (const char *a = isvc ? isvc->aliases : NULL; rc == 0 && a && *a;) {
        const char *end = strchr(a, ',');
        size_t len = end ? (size_t)(end - a) : strlen(a);
        const char *s = a;
        size_t l = len;
        while (l > 0 && (*s == ' ' || *s == '\t'))
            s++, l--;
        while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\t'))
            l--;
        if (!(l == strlen(member) && strncmp(s, member, l) == 0))
            rc = rt_add_name(r, idx, s, l, true);
        a = end ? end + 1 : a + len;
    }
    return rc;
}

static bool rt_build_pool(const char *key, const void *rec, void *ud)
{
    (void)key;
    rt_build *b = ud;
    const api_pool *p = rec;
    for (size_t i = 0; b->rc == 0 && i < p->n_members; i++) {
        if (!p->members[i] || !*p->members[i])
            continue;
        bool seen = false; /* a member listed twice in one pool counts once */
        for (size_t k = 0; k < i; k++)
            seen |= p->members[k] && strcmp(p->members[k], p->members[i]) == 0;
        if (!seen)
            b->rc = rt_add_member(b->r, p, p->members[i]);
    }
    return b->rc == 0;
}

static int rt_routes_build(rt_routes *r)
{
    if (r->valid)
        return 0;
    rt_routes_clear(r);
    rt_build b = {.r = r};
    store_each(r->pools, rt_build_pool, &b);
    if (b.rc < 0) {
        rt_routes_clear(r);
        return b.rc;
    }
    r->valid = true;
    return 0;
}

/* The members keyed "<namespace>/<name>"; name is what the route reports as the name asked. */
static int rt_lookup_key(rt_routes *r, const char *key, const char *name, rt_route *out,
                         const char **other)
{
    const rt_member *first = NULL;
    for (strmap_node *n = strmap_get(&r->map, key); n; n = strmap_get_next(n)) {
        const rt_member *m = &r->members[STRMAP_OWNER(n, rt_name, node)->member];
        if (!first) {
            first = m;
            *out = (rt_route){.ns = m->ns,
                              .pool = m->pool,
                              .member = m->member,
                              .served = m->served,
                              .name = name};
        } else if (first != m) {
            *other = m->pool;
            return -EEXIST;
        }
    }
    return first ? 0 : -ENOENT;
}

int rt_routes_lookup(rt_routes *r, const char *model, rt_route *out, const char **other)
{
    int rc = rt_routes_build(r);
    if (rc < 0)
        return rc;
    *other = NULL;
    /* The home namespace's names first, whole: nothing another namespace declares can shadow one
     * or make it ambiguous. Only a name the home namespace lacks is read as qualified. */
    char *key = NULL;
    if (asprintf(&key, "%s/%s", r->home, model) < 0)
        return -ENOMEM;
    rc = rt_lookup_key(r, key, model, out, other);
    free(key);
    const char *slash = strchr(model, '/');
    if (rc != -ENOENT || !slash)
        return rc;
    return rt_lookup_key(r, model, slash + 1, out, other);
}

int rt_routes_models(rt_routes *r, rt_oai_model **out, size_t *n)
{
    int rc = rt_routes_build(r);
    if (rc < 0)
        return rc;
    rt_oai_model *v = calloc(r->nmembers ? r->nmembers : 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < r->nmembers; i++) {
        const rt_member *m = &r->members[i];
        v[i] = (rt_oai_model){.id = m->id,
                              .pool = m->pool,
                              .ns = m->ns,
                              .member = m->member,
                              .resident = m->resident,
                              .aliases = (const char *const *)m->aliases,
                              .naliases = m->naliases};
    }
    *out = v;
    *n = r->nmembers;
    return 0;
}

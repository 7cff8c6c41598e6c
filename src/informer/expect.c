/* expect: a multimap from owner key to the writes of that owner still awaited; checked (and
 * pruned) only when that owner is about to be planned, so the cost follows the owner's own
 * writes. */
#include "informer/expect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

typedef struct expect_entry {
    strmap_node node; /* key: owner */
    char *owner;
    const store *cache;
    char *key;
    char *old_rv, *new_rv; /* new_rv may be NULL */
    uint64_t at_ms;
} expect_entry;

struct expects {
    strmap map;
};

expects *expects_new(void)
{
    expects *x = calloc(1, sizeof(*x));
    if (x && strmap_init(&x->map) < 0) {
        free(x);
        return NULL;
    }
    return x;
}

static void expect_free(expect_entry *e)
{
    free(e->owner);
    free(e->key);
    free(e->old_rv);
    free(e->new_rv);
    free(e);
}

static void expect_drop(expects *x, expect_entry *e)
{
    strmap_remove(&x->map, &e->node);
    expect_free(e);
}

void expects_free(expects *x)
{
    if (!x)
        return;
    for (strmap_node *n; (n = strmap_first(&x->map));)
        expect_drop(x, STRMAP_OWNER(n, expect_entry, node));
    strmap_fini(&x->map);
    free(x);
}

int expects_add(expects *x, const char *owner, const store *cache, const char *key,
                const char *old_rv, const char *new_rv, uint64_t now_ms)
{
    expect_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->cache = cache;
    e->at_ms = now_ms;
    e->owner = strdup(owner);
    e->key = strdup(key);
    e->old_rv = strdup(old_rv ? old_rv : "");
    e->new_rv = new_rv && *new_rv ? strdup(new_rv) : NULL;
    if (!e->owner || !e->key || !e->old_rv || (new_rv && *new_rv && !e->new_rv)) {
        expect_free(e);
        return -ENOMEM;
    }
    strmap_insert(&x->map, &e->node, e->owner);
    return 0;
}

/* s as an unsigned decimal without sign, blanks or overflow. */
static bool expect_rv_number(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return !errno && !*end;
}

bool expect_rv_at_least(const char *have, const char *want)
{
    unsigned long long h, w;
    return expect_rv_number(have, &h) && expect_rv_number(want, &w) && h >= w;
}

bool expect_rv_shows(const char *cache_rv, const char *old_rv, const char *new_rv)
{
    if (!cache_rv)
        return true;
    unsigned long long have, want;
    if (new_rv && expect_rv_number(cache_rv, &have) && expect_rv_number(new_rv, &want))
        return have >= want;
    if (new_rv && strcmp(cache_rv, new_rv) == 0)
        return true;
    return strcmp(cache_rv, old_rv ? old_rv : "") != 0;
}

bool expects_pending(expects *x, const char *owner, uint64_t now_ms, uint64_t ttl_ms)
{
    bool pending = false;
    strmap_node *n = strmap_get(&x->map, owner);
    while (n) {
        strmap_node *next = strmap_get_next(n);
        expect_entry *e = STRMAP_OWNER(n, expect_entry, node);
        const char *rv = store_version(e->cache, store_get(e->cache, e->key));
        /* A write whose version is a number is awaited however long the cache takes: a cache
         * that does not show the owner's own last write is older than its last action (a watch
         * cut and waiting out its backoff, say), and a plan made from it could start a member
         * beside one the owner itself started. Only a write that cannot be told apart from
         * other changes that way expires. */
        unsigned long long want;
        bool comparable = expect_rv_number(e->new_rv, &want);
        if ((!comparable && now_ms - e->at_ms >= ttl_ms) ||
            expect_rv_shows(rv, e->old_rv, e->new_rv))
            expect_drop(x, e);
        else
            pending = true;
        n = next;
    }
    return pending;
}

void expects_forget(expects *x, const char *owner)
{
    strmap_node *n = strmap_get(&x->map, owner);
    while (n) {
        strmap_node *next = strmap_get_next(n);
        expect_drop(x, STRMAP_OWNER(n, expect_entry, node));
        n = next;
    }
}

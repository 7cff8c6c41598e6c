/* expect: a multimap from pool key to the writes of that pool still awaited; checked (and pruned)
 * only when that pool is about to be planned, so the cost follows the pool's own writes. */
#include "pool/expect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

typedef struct pool_expect {
    strmap_node node; /* key: pool */
    char *pool;
    const store *cache;
    char *key;
    char *old_rv, *new_rv; /* new_rv may be NULL */
    uint64_t at_ms;
} pool_expect;

struct pool_expects {
    strmap map;
};

pool_expects *pool_expects_new(void)
{
    pool_expects *x = calloc(1, sizeof(*x));
    if (x && strmap_init(&x->map) < 0) {
        free(x);
        return NULL;
    }
    return x;
}

static void pool_expect_free(pool_expect *e)
{
    free(e->pool);
    free(e->key);
    free(e->old_rv);
    free(e->new_rv);
    free(e);
}

static void pool_expect_drop(pool_expects *x, pool_expect *e)
{
    strmap_remove(&x->map, &e->node);
    pool_expect_free(e);
}

void pool_expects_free(pool_expects *x)
{
    if (!x)
        return;
    for (strmap_node *n; (n = strmap_first(&x->map));)
        pool_expect_drop(x, STRMAP_OWNER(n, pool_expect, node));
    strmap_fini(&x->map);
    free(x);
}

int pool_expects_add(pool_expects *x, const char *pool, const store *cache, const char *key,
                     const char *old_rv, const char *new_rv, uint64_t now_ms)
{
    pool_expect *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->cache = cache;
    e->at_ms = now_ms;
    e->pool = strdup(pool);
    e->key = strdup(key);
    e->old_rv = strdup(old_rv ? old_rv : "");
    e->new_rv = new_rv && *new_rv ? strdup(new_rv) : NULL;
    if (!e->pool || !e->key || !e->old_rv || (new_rv && *new_rv && !e->new_rv)) {
        pool_expect_free(e);
        return -ENOMEM;
    }
    strmap_insert(&x->map, &e->node, e->pool);
    return 0;
}

/* s as an unsigned decimal without sign, blanks or overflow. */
static bool pool_rv_number(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return !errno && !*end;
}

bool pool_rv_shows(const char *cache_rv, const char *old_rv, const char *new_rv)
{
    if (!cache_rv)
        return true;
    unsigned long long have, want;
    if (new_rv && pool_rv_number(cache_rv, &have) && pool_rv_number(new_rv, &want))
        return have >= want;
    if (new_rv && strcmp(cache_rv, new_rv) == 0)
        return true;
    return strcmp(cache_rv, old_rv ? old_rv : "") != 0;
}

bool pool_expects_pending(pool_expects *x, const char *pool, uint64_t now_ms, uint64_t ttl_ms)
{
    bool pending = false;
    strmap_node *n = strmap_get(&x->map, pool);
    while (n) {
        strmap_node *next = strmap_get_next(n);
        pool_expect *e = STRMAP_OWNER(n, pool_expect, node);
        const char *rv = store_version(e->cache, store_get(e->cache, e->key));
        if (now_ms - e->at_ms >= ttl_ms || pool_rv_shows(rv, e->old_rv, e->new_rv))
            pool_expect_drop(x, e);
        else
            pending = true;
        n = next;
    }
    return pending;
}

void pool_expects_forget(pool_expects *x, const char *pool)
{
    strmap_node *n = strmap_get(&x->map, pool);
    while (n) {
        strmap_node *next = strmap_get_next(n);
        pool_expect_drop(x, STRMAP_OWNER(n, pool_expect, node));
        n = next;
    }
}

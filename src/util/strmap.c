/* strmap: chained buckets with doubly linked chains (removal in O(1) even when thousands of index
 * postings share one value), FNV-1a hashing, doubling when the load passes one. */
#include "util/strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { STRMAP_INITIAL = 16 };

static uint64_t strmap_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int strmap_init(strmap *m)
{
    m->buckets = calloc(STRMAP_INITIAL, sizeof(*m->buckets));
    m->nbuckets = m->buckets ? STRMAP_INITIAL : 0;
    m->count = 0;
    return m->buckets ? 0 : -ENOMEM;
}

void strmap_fini(strmap *m)
{
    free(m->buckets);
    *m = (strmap){0};
}

static void strmap_link(strmap_node **slot, strmap_node *n)
{
    n->next = *slot;
    if (n->next)
        n->next->pprev = &n->next;
    n->pprev = slot;
    *slot = n;
}

/* A failed allocation only leaves chains longer than ideal. */
static void strmap_grow(strmap *m)
{
    size_t n = m->nbuckets * 2;
    strmap_node **grown = calloc(n, sizeof(*grown));
    if (!grown)
        return;
    for (size_t i = 0; i < m->nbuckets; i++) {
        strmap_node *node = m->buckets[i];
        while (node) {
            strmap_node *next = node->next;
            strmap_link(&grown[node->hash & (n - 1)], node);
            node = next;
        }
    }
    free(m->buckets);
    m->buckets = grown;
    m->nbuckets = n;
}

void strmap_insert(strmap *m, strmap_node *n, const char *key)
{
    if (m->count >= m->nbuckets)
        strmap_grow(m);
    n->key = key;
    n->hash = strmap_hash(key);
    strmap_link(&m->buckets[n->hash & (m->nbuckets - 1)], n);
    m->count++;
}

void strmap_remove(strmap *m, strmap_node *n)
{
    *n->pprev = n->next;
    if (n->next)
        n->next->pprev = n->pprev;
    n->next = NULL;
    n->pprev = NULL;
    m->count--;
}

static strmap_node *strmap_match(strmap_node *n, uint64_t hash, const char *key)
{
    while (n && (n->hash != hash || strcmp(n->key, key) != 0))
        n = n->next;
    return n;
}

strmap_node *strmap_get(const strmap *m, const char *key)
{
    uint64_t h = strmap_hash(key);
    return strmap_match(m->buckets[h & (m->nbuckets - 1)], h, key);
}

strmap_node *strmap_get_next(const strmap_node *n)
{
    return strmap_match(n->next, n->hash, n->key);
}

static strmap_node *strmap_scan(const strmap *m, size_t from)
{
    for (size_t i = from; i < m->nbuckets; i++)
        if (m->buckets[i])
            return m->buckets[i];
    return NULL;
}

strmap_node *strmap_first(const strmap *m)
{
    return strmap_scan(m, 0);
}

strmap_node *strmap_next(const strmap *m, const strmap_node *n)
{
    return n->next ? n->next : strmap_scan(m, (n->hash & (m->nbuckets - 1)) + 1);
}

void *strmap_owner_at(strmap_node *n, size_t member_at)
{
    return n ? (char *)n - member_at : NULL;
}

void *strmap_find_or_add(strmap *m, const char *key, size_t size, size_t member_at, size_t key_at)
{
    strmap_node *n = strmap_get(m, key);
    if (n)
        return (char *)n - member_at;
    size_t kl = strlen(key) + 1;
    char *owner = calloc(1, size + kl);
    if (!owner)
        return NULL;
    memcpy(owner + key_at, key, kl);
    strmap_insert(m, (strmap_node *)(void *)(owner + member_at), owner + key_at);
    return owner;
}

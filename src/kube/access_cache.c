/* kube_access_cache: a small array scanned linearly; a few hundred entries of 48 bytes make a
 * scan cheaper than any index, and the bound is the whole memory policy. */
#include "kube/access_cache.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

typedef struct kube_access_entry {
    unsigned char key[KUBE_ACCESS_KEY_LEN];
    uint64_t expires_ms; /* 0: free slot */
    int verdict;
} kube_access_entry;

struct kube_access_cache {
    size_t cap;
    uint64_t ttl_ms;
    kube_access_entry e[];
};

kube_access_cache *kube_access_cache_new(size_t capacity, uint64_t ttl_ms)
{
    if (capacity == 0)
        return NULL;
    kube_access_cache *c = calloc(1, sizeof(*c) + capacity * sizeof(c->e[0]));
    if (!c)
        return NULL;
    c->cap = capacity;
    c->ttl_ms = ttl_ms;
    return c;
}

void kube_access_cache_free(kube_access_cache *c)
{
    free(c);
}

void kube_access_cache_key(const char *token, size_t len, unsigned char key[KUBE_ACCESS_KEY_LEN])
{
    SHA256((const unsigned char *)token, len, key);
}

static kube_access_entry *kube_access_cache_find(kube_access_cache *c,
                                                 const unsigned char key[KUBE_ACCESS_KEY_LEN])
{
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].expires_ms && CRYPTO_memcmp(c->e[i].key, key, KUBE_ACCESS_KEY_LEN) == 0)
            return &c->e[i];
    return NULL;
}

bool kube_access_cache_get(kube_access_cache *c, const unsigned char key[KUBE_ACCESS_KEY_LEN],
                           uint64_t now_ms, int *verdict)
{
    kube_access_entry *e = kube_access_cache_find(c, key);
    if (!e)
        return false;
    if (e->expires_ms <= now_ms) {
        e->expires_ms = 0;
        return false;
    }
    *verdict = e->verdict;
    return true;
}

void kube_access_cache_put(kube_access_cache *c, const unsigned char key[KUBE_ACCESS_KEY_LEN],
                           int verdict, uint64_t now_ms)
{
    kube_access_entry *e = kube_access_cache_find(c, key);
    for (size_t i = 0; !e && i < c->cap; i++)
        if (c->e[i].expires_ms <= now_ms) /* free or expired */
            e = &c->e[i];
    if (!e) { /* full of live entries: the oldest goes */
        e = &c->e[0];
        for (size_t i = 1; i < c->cap; i++)
            if (c->e[i].expires_ms < e->expires_ms)
                e = &c->e[i];
    }
    memcpy(e->key, key, KUBE_ACCESS_KEY_LEN);
    e->verdict = verdict;
    e->expires_ms = now_ms + c->ttl_ms;
    if (e->expires_ms == 0) /* 0 marks a free slot */
        e->expires_ms = 1;
}

size_t kube_access_cache_live(const kube_access_cache *c, uint64_t now_ms)
{
    size_t n = 0;
    for (size_t i = 0; i < c->cap; i++)
        n += c->e[i].expires_ms > now_ms;
    return n;
}

/* kube_access_cache: what the API server last said about a bearer token (allowed, forbidden,
 * unauthenticated), kept briefly and in bounded memory so a scraper costs at most one
 * TokenReview and one SubjectAccessReview per TTL. Keys are SHA-256 digests: no token is kept.
 * Pure: time is a parameter, so expiry and eviction are unit-tested without waiting. */
#ifndef MP_KUBE_ACCESS_CACHE_H
#define MP_KUBE_ACCESS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_ACCESS_KEY_LEN 32

typedef struct kube_access_cache kube_access_cache;

/* capacity entries (> 0), each kept ttl_ms after it was put. NULL when out of memory. */
kube_access_cache *kube_access_cache_new(size_t capacity, uint64_t ttl_ms);
void kube_access_cache_free(kube_access_cache *c);

/* The key of a token: its SHA-256 digest. */
void kube_access_cache_key(const char *token, size_t len, unsigned char key[KUBE_ACCESS_KEY_LEN]);

/* The verdict stored for key if it has not expired at now_ms: true and *verdict set. */
bool kube_access_cache_get(kube_access_cache *c, const unsigned char key[KUBE_ACCESS_KEY_LEN],
                           uint64_t now_ms, int *verdict);
/* Stores (or replaces) key's verdict from now_ms. When full, an expired entry makes room, else
 * the one that expires first (the oldest). */
void kube_access_cache_put(kube_access_cache *c, const unsigned char key[KUBE_ACCESS_KEY_LEN],
                           int verdict, uint64_t now_ms);
/* Entries not yet expired at now_ms. */
size_t kube_access_cache_live(const kube_access_cache *c, uint64_t now_ms);

#endif

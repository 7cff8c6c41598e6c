/* strmap: an intrusive hash map keyed by strings (the store's indexes, the work queue, metrics
 * series). Nodes live inside their owner's struct, so inserting never allocates and never fails;
 * the bucket array only grows opportunistically. Equal keys may coexist (the store's indexes need a
 * multimap).
 */
#ifndef MP_UTIL_STRMAP_H
#define MP_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct strmap_node {
    struct strmap_node *next, **pprev; /* pprev: the slot that points at this node */
    uint64_t hash;
    const char *key; /* borrowed from the owner, which keeps it alive while inserted */
} strmap_node;

typedef struct strmap {
    strmap_node **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
} strmap;

/* The struct that holds node as field member. */
#define STRMAP_OWNER(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

/* The owner (a type holding its node as field member) of the first node with key, or NULL. */
#define STRMAP_FIND(m, key, type, member)                                                          \
    ((type *)strmap_owner_at(strmap_get((m), (key)), offsetof(type, member)))
/* That owner, else a new zeroed one inserted with key copied into its flexible array member
 * keyfield; NULL when out of memory. */
#define STRMAP_FIND_OR_ADD(m, key, type, member, keyfield)                                         \
    ((type *)strmap_find_or_add((m), (key), sizeof(type), offsetof(type, member),                  \
                                offsetof(type, keyfield)))

/* 0 or -ENOMEM. */
int strmap_init(strmap *m);
/* Frees the buckets; the nodes belong to their owners. */
void strmap_fini(strmap *m);

void strmap_insert(strmap *m, strmap_node *n, const char *key);
void strmap_remove(strmap *m, strmap_node *n);
/* The first node with key, then the following ones with the same key; NULL when none is left. */
strmap_node *strmap_get(const strmap *m, const char *key);
strmap_node *strmap_get_next(const strmap_node *n);
/* Every node in unspecified order. The map must not change during a walk, except that the node
 * just returned may be removed once the next one has been fetched. */
strmap_node *strmap_first(const strmap *m);
strmap_node *strmap_next(const strmap *m, const strmap_node *n);

/* For the macros above: the owner member_at bytes before n (NULL for NULL); the owner of key, else
 * a new one of size bytes plus the key, its node member_at and the key key_at bytes into it. */
void *strmap_owner_at(strmap_node *n, size_t member_at);
void *strmap_find_or_add(strmap *m, const char *key, size_t size, size_t member_at, size_t key_at);

#endif

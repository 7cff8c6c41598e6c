/* store: objects in an intrusive hash map by key; each index is a multimap of postings
 * (value -> entry) that the entry owns. A put allocates everything first and then links it in,
 * which cannot fail, so an error never leaves the store half-updated. */
#include "informer/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

typedef struct store_entry store_entry;

typedef struct store_posting {
    strmap_node node; /* in the index's map, keyed by value */
    store_entry *entry;
    size_t index;
    char *value;
} store_posting;

struct store_entry {
    strmap_node node; /* in the store's map, keyed by key */
    char *key;
    cJSON *obj;
    store_posting *posts;
    size_t nposts;
};

typedef struct store_index {
    char *name;
    store_index_fn fn;
    void *ud;
    strmap map;
} store_index;

struct store {
    strmap entries;
    store_index *indexes;
    size_t nindexes;
    store_trim_fn trim;
    void *trim_ud;
};

struct store_index_out {
    char **values;
    size_t n, cap;
    int err;
};

store *store_new(store_trim_fn trim, void *trim_ud)
{
    store *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (strmap_init(&s->entries) < 0) {
        free(s);
        return NULL;
    }
    s->trim = trim;
    s->trim_ud = trim_ud;
    return s;
}

static void store_entry_free(store_entry *e)
{
    for (size_t i = 0; i < e->nposts; i++)
        free(e->posts[i].value);
    free(e->posts);
    free(e->key);
    cJSON_Delete(e->obj);
    free(e);
}

void store_free(store *s)
{
    if (!s)
        return;
    strmap_node *n = strmap_first(&s->entries);
    while (n) {
        strmap_node *next = strmap_next(&s->entries, n);
        store_entry_free(STRMAP_OWNER(n, store_entry, node));
        n = next;
    }
    strmap_fini(&s->entries);
    for (size_t i = 0; i < s->nindexes; i++) {
        free(s->indexes[i].name);
        strmap_fini(&s->indexes[i].map);
    }
    free(s->indexes);
    free(s);
}

static store_index *store_find_index(const store *s, const char *name)
{
    for (size_t i = 0; i < s->nindexes; i++)
        if (strcmp(s->indexes[i].name, name) == 0)
            return &s->indexes[i];
    return NULL;
}

int store_add_index(store *s, const char *name, store_index_fn fn, void *ud)
{
    if (store_find_index(s, name))
        return -EEXIST;
    if (s->entries.count)
        return -EBUSY;
    store_index *grown = realloc(s->indexes, (s->nindexes + 1) * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    s->indexes = grown;
    store_index *ix = &s->indexes[s->nindexes];
    *ix = (store_index){.name = strdup(name), .fn = fn, .ud = ud};
    if (!ix->name)
        return -ENOMEM;
    if (strmap_init(&ix->map) < 0) {
        free(ix->name);
        return -ENOMEM;
    }
    s->nindexes++;
    return 0;
}

int store_index_emit(store_index_out *out, const char *value)
{
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->values[i], value) == 0)
            return 0;
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 4;
        char **grown = realloc(out->values, cap * sizeof(*grown));
        if (!grown)
            return out->err = -ENOMEM;
        out->values = grown;
        out->cap = cap;
    }
    if (!(out->values[out->n] = strdup(value)))
        return out->err = -ENOMEM;
    out->n++;
    return 0;
}

static const char *store_meta_string(const cJSON *obj, const char *field)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, field));
    return v && *v ? v : NULL;
}

char *store_key_of(const cJSON *obj)
{
    const char *name = store_meta_string(obj, "name");
    const char *ns = store_meta_string(obj, "namespace");
    if (!name)
        return NULL;
    if (!ns)
        return strdup(name);
    size_t nl = strlen(ns), ml = strlen(name);
    char *key = malloc(nl + 1 + ml + 1);
    if (!key)
        return NULL;
    memcpy(key, ns, nl);
    key[nl] = '/';
    memcpy(key + nl + 1, name, ml + 1);
    return key;
}

/* Runs every index function on obj and turns the values into postings owned by e. */
static int store_make_postings(const store *s, store_entry *e)
{
    for (size_t i = 0; i < s->nindexes; i++) {
        store_index_out out = {0};
        int rc = s->indexes[i].fn(e->obj, &out, s->indexes[i].ud);
        if (rc == 0)
            rc = out.err;
        store_posting *grown = NULL;
        if (rc == 0 && out.n) {
            grown = realloc(e->posts, (e->nposts + out.n) * sizeof(*grown));
            if (!grown)
                rc = -ENOMEM;
        }
        if (rc < 0) {
            for (size_t j = 0; j < out.n; j++)
                free(out.values[j]);
            free(out.values);
            return rc;
        }
        if (grown)
            e->posts = grown;
        for (size_t j = 0; j < out.n; j++)
            e->posts[e->nposts++] = (store_posting){.entry = e, .index = i, .value = out.values[j]};
        free(out.values);
    }
    return 0;
}

static void store_unlink(store *s, store_entry *e)
{
    for (size_t i = 0; i < e->nposts; i++)
        strmap_remove(&s->indexes[e->posts[i].index].map, &e->posts[i].node);
    strmap_remove(&s->entries, &e->node);
}

static store_entry *store_find(const store *s, const char *key)
{
    strmap_node *n = strmap_get(&s->entries, key);
    return n ? STRMAP_OWNER(n, store_entry, node) : NULL;
}

/* Hands the entry's object to *old (or frees it) and frees the entry. */
static void store_release(store_entry *e, cJSON **old)
{
    if (old) {
        *old = e->obj;
        e->obj = NULL;
    }
    store_entry_free(e);
}

int store_put(store *s, cJSON *obj, cJSON **old)
{
    if (old)
        *old = NULL;
    if (s->trim)
        s->trim(obj, s->trim_ud);
    if (!store_meta_string(obj, "name"))
        return -EINVAL;
    store_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->obj = obj;
    e->key = store_key_of(obj);
    int rc = e->key ? store_make_postings(s, e) : -ENOMEM;
    if (rc < 0) {
        e->obj = NULL;
        store_entry_free(e);
        return rc;
    }
    store_entry *prev = store_find(s, e->key);
    if (prev) {
        store_unlink(s, prev);
        store_release(prev, old);
    }
    strmap_insert(&s->entries, &e->node, e->key);
    for (size_t i = 0; i < e->nposts; i++)
        strmap_insert(&s->indexes[e->posts[i].index].map, &e->posts[i].node, e->posts[i].value);
    return 0;
}

int store_delete(store *s, const char *key, cJSON **old)
{
    if (old)
        *old = NULL;
    store_entry *e = store_find(s, key);
    if (!e)
        return -ENOENT;
    store_unlink(s, e);
    store_release(e, old);
    return 0;
}

const cJSON *store_get(const store *s, const char *key)
{
    store_entry *e = store_find(s, key);
    return e ? e->obj : NULL;
}

size_t store_count(const store *s)
{
    return s->entries.count;
}

void store_each(const store *s, store_each_fn fn, void *ud)
{
    for (strmap_node *n = strmap_first(&s->entries); n; n = strmap_next(&s->entries, n)) {
        store_entry *e = STRMAP_OWNER(n, store_entry, node);
        if (!fn(e->key, e->obj, ud))
            return;
    }
}

int store_index_each(const store *s, const char *index, const char *value, store_each_fn fn,
                     void *ud)
{
    store_index *ix = store_find_index(s, index);
    if (!ix)
        return -ENOENT;
    for (strmap_node *n = strmap_get(&ix->map, value); n; n = strmap_get_next(n)) {
        store_entry *e = STRMAP_OWNER(n, store_posting, node)->entry;
        if (!fn(e->key, e->obj, ud))
            break;
    }
    return 0;
}

size_t store_index_count(const store *s, const char *index, const char *value)
{
    store_index *ix = store_find_index(s, index);
    size_t n = 0;
    for (strmap_node *p = ix ? strmap_get(&ix->map, value) : NULL; p; p = strmap_get_next(p))
        n++;
    return n;
}

void store_trim(const store *s, cJSON *obj)
{
    if (s->trim)
        s->trim(obj, s->trim_ud);
}

void store_keep(cJSON *obj, const char *const *keep, size_t n)
{
    if (!cJSON_IsObject(obj))
        return;
    cJSON *c = obj->child;
    while (c) {
        cJSON *next = c->next;
        size_t i = 0;
        while (i < n && (!c->string || strcmp(c->string, keep[i]) != 0))
            i++;
        if (i == n) {
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, c));
        } else if (!(c->type & cJSON_StringIsConst)) {
            /* The caller's name lives as long as the program: the member's own copy is freed,
             * which is one allocation less for every member of every cached object. */
            cJSON_free(c->string);
            c->string = (char *)keep[i];
            c->type |= cJSON_StringIsConst;
        }
        c = next;
    }
}

void store_trim_default(cJSON *obj, void *ud)
{
    (void)ud;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
                                            "kubectl.kubernetes.io/last-applied-configuration");
}

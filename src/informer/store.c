/* store: records in an intrusive hash map by key; each index is a multimap of postings
 * (value -> entry) that the entry owns. An entry is one allocation with its key, and its postings
 * another with their values (tens of thousands of objects: every malloc'd piece costs its own
 * header and rounding). A put allocates everything first and then links it in, which cannot fail,
 * so an error never leaves the store half-updated. */
#include "informer/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

typedef struct store_entry store_entry;

typedef struct store_posting {
    strmap_node node; /* in the index's map, keyed by value (in the same block) */
    store_entry *entry;
    size_t index;
} store_posting;

struct store_entry {
    strmap_node node; /* in the store's map, keyed by key */
    void *rec;
    store_posting *posts; /* nposts of them, then their values */
    size_t nposts;
    char key[];
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
    store_codec codec;
};

struct store_index_out {
    char **values;
    size_t n, cap;
    int err;
};

/* Drops what no controller reads: metadata.managedFields and the last-applied annotation. */
static void store_trim_json(cJSON *obj)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
                                            "kubectl.kubernetes.io/last-applied-configuration");
}

static void *store_json_take(cJSON **obj, void *ud, int *err)
{
    (void)err;
    cJSON *o = *obj;
    if (ud)
        store_trim_json(o);
    *obj = NULL;
    return o;
}

static void store_json_free(void *rec)
{
    cJSON_Delete(rec);
}

static const char *store_json_version(const void *rec)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(rec, "metadata");
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion"));
}

const store_codec store_codec_json = {store_json_take, store_json_free, store_json_version, NULL,
                                      false};
const store_codec store_codec_json_trimmed = {store_json_take, store_json_free, store_json_version,
                                              (void *)&store_codec_json, false};

store *store_new(const store_codec *codec)
{
    store *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (strmap_init(&s->entries) < 0) {
        free(s);
        return NULL;
    }
    s->codec = codec ? *codec : store_codec_json;
    return s;
}

static void store_entry_free(const store *s, store_entry *e)
{
    free(e->posts);
    if (e->rec)
        s->codec.free(e->rec);
    free(e);
}

void store_free(store *s)
{
    if (!s)
        return;
    strmap_node *n = strmap_first(&s->entries);
    while (n) {
        strmap_node *next = strmap_next(&s->entries, n);
        store_entry_free(s, STRMAP_OWNER(n, store_entry, node));
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

static void store_outs_free(store_index_out *outs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < outs[i].n; j++)
            free(outs[i].values[j]);
        free(outs[i].values);
    }
    free(outs);
}

/* Runs every index function on e's record and turns the values into postings owned by e, in one
 * block: the postings, then their values. */
static int store_make_postings(const store *s, store_entry *e)
{
    if (!s->nindexes)
        return 0;
    store_index_out *outs = calloc(s->nindexes, sizeof(*outs));
    if (!outs)
        return -ENOMEM;
    size_t n = 0, bytes = 0;
    int rc = 0;
    for (size_t i = 0; i < s->nindexes && rc == 0; i++) {
        rc = s->indexes[i].fn(e->rec, &outs[i], s->indexes[i].ud);
        if (rc == 0)
            rc = outs[i].err;
        for (size_t j = 0; rc == 0 && j < outs[i].n; j++)
            bytes += strlen(outs[i].values[j]) + 1;
        n += outs[i].n;
    }
    if (rc == 0 && n && !(e->posts = malloc(n * sizeof(store_posting) + bytes)))
        rc = -ENOMEM;
    if (rc == 0 && n) {
        char *at = (char *)(e->posts + n);
        for (size_t i = 0; i < s->nindexes; i++) {
            for (size_t j = 0; j < outs[i].n; j++) {
                size_t len = strlen(outs[i].values[j]) + 1;
                e->posts[e->nposts] = (store_posting){.entry = e, .index = i};
                e->posts[e->nposts++].node.key = memcpy(at, outs[i].values[j], len);
                at += len;
            }
        }
    }
    store_outs_free(outs, s->nindexes);
    return rc;
}

static void store_unlink(store *s, store_entry *e)
{
    for (size_t i = 0; i < e->nposts; i++)
        strmap_remove(&s->indexes[e->posts[i].index].map, &e->posts[i].node);
    strmap_remove(&s->entries, &e->node);
}

static store_entry *store_find(const store *s, const char *key)
{
    return STRMAP_FIND(&s->entries, key, store_entry, node);
}

/* Hands the entry's record to *old (or frees it) and frees the entry. */
static void store_hand_back(const store *s, store_entry *e, void **old)
{
    if (old) {
        *old = e->rec;
        e->rec = NULL;
    }
    store_entry_free(s, e);
}

int store_decode(const store *s, cJSON *obj, store_item *out)
{
    *out = (store_item){0};
    if (!store_meta_string(obj, "name")) {
        cJSON_Delete(obj);
        return -EINVAL;
    }
    int rc = 0;
    if (!(out->key = store_key_of(obj))) {
        cJSON_Delete(obj);
        return -ENOMEM;
    }
    out->rec = s->codec.decode(&obj, s->codec.ud, &rc);
    cJSON_Delete(obj);
    if (!out->rec) {
        free(out->key);
        out->key = NULL;
        return rc < 0 ? rc : -EINVAL;
    }
    return 0;
}

void store_item_release(const store *s, store_item *it)
{
    if (it->rec)
        s->codec.free(it->rec);
    free(it->key);
    *it = (store_item){0};
}

const char *store_version(const store *s, const void *rec)
{
    return rec ? s->codec.version(rec) : NULL;
}

void store_release(const store *s, void *rec)
{
    if (rec)
        s->codec.free(rec);
}

int store_put_item(store *s, store_item *it, void **old)
{
    if (old)
        *old = NULL;
    size_t kl = strlen(it->key) + 1;
    store_entry *e = calloc(1, sizeof(*e) + kl);
    if (!e)
        return -ENOMEM;
    memcpy(e->key, it->key, kl);
    e->rec = it->rec;
    int rc = store_make_postings(s, e);
    if (rc < 0) {
        e->rec = NULL;
        store_entry_free(s, e);
        return rc;
    }
    free(it->key);
    *it = (store_item){0};
    store_entry *prev = store_find(s, e->key);
    if (prev) {
        store_unlink(s, prev);
        store_hand_back(s, prev, old);
    }
    strmap_insert(&s->entries, &e->node, e->key);
    for (size_t i = 0; i < e->nposts; i++)
        strmap_insert(&s->indexes[e->posts[i].index].map, &e->posts[i].node, e->posts[i].node.key);
    return 0;
}

int store_put(store *s, cJSON *obj, void **old)
{
    if (old)
        *old = NULL;
    store_item it;
    int rc = store_decode(s, obj, &it);
    if (rc == 0 && (rc = store_put_item(s, &it, old)) < 0)
        store_item_release(s, &it);
    return rc;
}

int store_delete(store *s, const char *key, void **old)
{
    if (old)
        *old = NULL;
    store_entry *e = store_find(s, key);
    if (!e)
        return -ENOENT;
    store_unlink(s, e);
    store_hand_back(s, e, old);
    return 0;
}

const void *store_get(const store *s, const char *key)
{
    store_entry *e = store_find(s, key);
    return e ? e->rec : NULL;
}

size_t store_count(const store *s)
{
    return s->entries.count;
}

void store_each(const store *s, store_each_fn fn, void *ud)
{
    for (strmap_node *n = strmap_first(&s->entries); n; n = strmap_next(&s->entries, n)) {
        store_entry *e = STRMAP_OWNER(n, store_entry, node);
        if (!fn(e->key, e->rec, ud))
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
        if (!fn(e->key, e->rec, ud))
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

/* store: the informer's cache of Kubernetes objects as the caller's records, keyed
 * "namespace/name" ("name" when cluster-scoped), with secondary indexes (e.g. Pods by label value)
 * kept up to date on every change. It knows nothing of any resource kind: the codec (decode, free,
 * version) and the index functions are the caller's. */
#ifndef MP_INFORMER_STORE_H
#define MP_INFORMER_STORE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct store store;
typedef struct store_index_out store_index_out;

/* How a cache turns each listed or watched API object into its record, decoded once at the
 * informer boundary (memory follows what is cached: a record keeps only what its readers use).
 * decode borrows obj and returns the record, or NULL with *err set (-ENOMEM, or -EINVAL for an
 * object it cannot take); it may take obj itself (a record that is the object) by setting *obj to
 * NULL. free frees a record; version returns its metadata.resourceVersion (NULL if none), which a
 * relist compares. The name and namespace of an object are read by the store itself (its key). */
typedef struct store_codec {
    void *(*decode)(cJSON **obj, void *ud, int *err);
    void (*free)(void *rec);
    const char *(*version)(const void *rec);
    void *ud;
    /* decode copies what it keeps and never takes obj or any part of it: the informer may then
     * parse a list page in scratch memory (util/scratch.h) that is gone once its items are
     * decoded. */
    bool copies;
} store_codec;

/* The pass-through codecs: the record is the cJSON object itself, whole (store_codec_json) or
 * without metadata.managedFields and the last-applied-configuration annotation
 * (store_codec_json_trimmed). For tools and tests that read objects as JSON. */
extern const store_codec store_codec_json;
extern const store_codec store_codec_json_trimmed;

/* Emits the index values of rec with store_index_emit (zero, one or several; duplicates are
 * ignored). It must be deterministic: the store recomputes it on the old record. Returns 0, or a
 * negative errno that fails the put (for instance the one store_index_emit returned). */
typedef int (*store_index_fn)(const void *rec, store_index_out *out, void *ud);

/* Visits one record; return false to stop. key and rec are borrowed from the store, which must
 * not be changed during the visit. */
typedef bool (*store_each_fn)(const char *key, const void *rec, void *ud);

/* One decoded object on its way into a store (the items of a list before they are applied). */
typedef struct store_item {
    char *key;
    void *rec;
} store_item;

/* codec is copied; NULL means store_codec_json. Returns NULL when out of memory. */
store *store_new(const store_codec *codec);
/* Frees the store and every record in it. */
void store_free(store *s);

/* Registers an index called name (copied) while the store is still empty.
 * 0, -EEXIST (the name is taken), -EBUSY (the store holds records) or -ENOMEM. */
int store_add_index(store *s, const char *name, store_index_fn fn, void *ud);
/* Adds one value (copied) for the record being indexed. 0 or -ENOMEM. */
int store_index_emit(store_index_out *out, const char *value);

/* The store key of obj ("namespace/name", or "name" without a namespace), malloc'd; NULL when obj
 * has no metadata.name or memory ran out. */
char *store_key_of(const cJSON *obj);

/* Decodes obj (always consumed) into *out with the store's codec. 0, -EINVAL (no metadata.name,
 * or the codec refused it), -ENOMEM. */
int store_decode(const store *s, cJSON *obj, store_item *out);
/* Frees an item that was not put. */
void store_item_release(const store *s, store_item *it);
/* The record's resourceVersion by the store's codec (NULL if none). */
const char *store_version(const store *s, const void *rec);
/* Frees a record handed out through an old pointer. */
void store_release(const store *s, void *rec);

/* Stores it under its key, replacing any record there. On success the store owns the item (it is
 * zeroed) and the replaced record goes to *old (the caller frees it with store_release; NULL if
 * there was none), or is freed when old is NULL. On failure the caller keeps the item and the
 * store is unchanged: -ENOMEM, or the error of an index function. */
int store_put_item(store *s, store_item *it, void **old);
/* store_decode then store_put_item; obj is consumed whatever the result. */
int store_put(store *s, cJSON *obj, void **old);
/* Removes key. The record goes to *old (the caller frees it with store_release) or is freed when
 * old is NULL. 0 or -ENOENT. */
int store_delete(store *s, const char *key, void **old);

/* The record under key, borrowed until the next change of that key; NULL if absent. */
const void *store_get(const store *s, const char *key);
size_t store_count(const store *s);
/* Visits every record, in no particular order. */
void store_each(const store *s, store_each_fn fn, void *ud);

/* Visits the records whose index function emitted value. 0, or -ENOENT for an unknown index. */
int store_index_each(const store *s, const char *index, const char *value, store_each_fn fn,
                     void *ud);
/* How many records have that index value (0 for an unknown index). */
size_t store_index_count(const store *s, const char *index, const char *value);

#endif

/* store: the informer's cache of Kubernetes objects, keyed "namespace/name" ("name" when
 * cluster-scoped), with secondary indexes (e.g. Pods by label value) kept up to date on every
 * change. It knows nothing of any resource kind: index and trim functions are the caller's. */
#ifndef MP_INFORMER_STORE_H
#define MP_INFORMER_STORE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct store store;
typedef struct store_index_out store_index_out;

/* Edits an object before it is stored, to drop what the caller never reads (memory follows what is
 * cached). It must leave metadata.name and metadata.namespace alone. */
typedef void (*store_trim_fn)(cJSON *obj, void *ud);

/* Emits the index values of obj with store_index_emit (zero, one or several; duplicates are
 * ignored). It must be deterministic: the store recomputes it on the old object. Returns 0, or a
 * negative errno that fails the put (for instance the one store_index_emit returned). */
typedef int (*store_index_fn)(const cJSON *obj, store_index_out *out, void *ud);

/* Visits one object; return false to stop. key and obj are borrowed from the store, which must
 * not be changed during the visit. */
typedef bool (*store_each_fn)(const char *key, const cJSON *obj, void *ud);

/* trim may be NULL (nothing is trimmed). Returns NULL when out of memory. */
store *store_new(store_trim_fn trim, void *trim_ud);
/* Frees the store and every object in it. */
void store_free(store *s);

/* Registers an index called name (copied) while the store is still empty.
 * 0, -EEXIST (the name is taken), -EBUSY (the store holds objects) or -ENOMEM. */
int store_add_index(store *s, const char *name, store_index_fn fn, void *ud);
/* Adds one value (copied) for the object being indexed. 0 or -ENOMEM. */
int store_index_emit(store_index_out *out, const char *value);

/* The store key of obj ("namespace/name", or "name" without a namespace), malloc'd; NULL when obj
 * has no metadata.name or memory ran out. */
char *store_key_of(const cJSON *obj);

/* Trims obj, then stores it under its key, replacing any object there. On success the store owns
 * obj and the replaced object goes to *old (the caller frees it; NULL if there was none), or is
 * freed when old is NULL. On failure the caller keeps obj and the store is unchanged:
 * -EINVAL (no metadata.name), -ENOMEM, or the error of an index function. */
int store_put(store *s, cJSON *obj, cJSON **old);
/* Removes key. The object goes to *old (the caller frees it) or is freed when old is NULL.
 * 0 or -ENOENT. */
int store_delete(store *s, const char *key, cJSON **old);

/* The object under key, borrowed until the next change of that key; NULL if absent. */
const cJSON *store_get(const store *s, const char *key);
size_t store_count(const store *s);
/* Visits every object, in no particular order. */
void store_each(const store *s, store_each_fn fn, void *ud);

/* Visits the objects whose index function emitted value. 0, or -ENOENT for an unknown index. */
int store_index_each(const store *s, const char *index, const char *value, store_each_fn fn,
                     void *ud);
/* How many objects have that index value (0 for an unknown index). */
size_t store_index_count(const store *s, const char *index, const char *value);

/* Applies the store's trim function to obj (nothing when it has none), for a caller that holds
 * objects before they are put, such as the pages of a list. */
void store_trim(const store *s, cJSON *obj);

/* For trim functions: deletes every member of the object obj whose name is not one of the n names
 * in keep (nothing when obj is not an object). The names must live as long as the program (string
 * literals): a member kept points at them from then on instead of at its own copy. */
void store_keep(cJSON *obj, const char *const *keep, size_t n);

/* A trim function that drops metadata.managedFields and the
 * kubectl.kubernetes.io/last-applied-configuration annotation, which no controller reads. */
void store_trim_default(cJSON *obj, void *ud);

#endif

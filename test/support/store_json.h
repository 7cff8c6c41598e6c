/* store_json: the unit tests' stores filled from JSON texts (records as the caches hold them).
 * Part of the test-support library (test/support); a text that is not JSON, or a put or index the
 * store refuses, fails the test (cmocka). */
#ifndef MP_TEST_STORE_JSON_H
#define MP_TEST_STORE_JSON_H

#include <stddef.h>

#include "informer/store.h"

/* Puts the object json into s (replacing one of the same key). */
void test_store_put(store *s, const char *json);

/* A new store of codec's records (NULL: raw objects), with the index by fn when index is set,
 * holding the n objects of json. */
store *test_store_fill(const store_codec *codec, const char *index, store_index_fn fn,
                       const char *const *json, size_t n);

#endif

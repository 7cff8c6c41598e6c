/* store_json: stores filled from JSON texts (store_json.h). */
#include "store_json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

void test_store_put(store *s, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    assert_int_equal(store_put(s, o, NULL), 0);
}

store *test_store_fill(const store_codec *codec, const char *index, store_index_fn fn,
                       const char *const *json, size_t n)
{
    store *s = store_new(codec);
    assert_non_null(s);
    if (index)
        assert_int_equal(store_add_index(s, index, fn, NULL), 0);
    for (size_t i = 0; i < n; i++)
        test_store_put(s, json[i]);
    return s;
}

/* Tests of the scratch regions behind cJSON: a tree parsed while a region is in use lives in it,
 * frees of its nodes are no-ops, allocations outside it (before, after, once it is full) come from
 * the heap and are freed there, and a tree that mixes both is deleted cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "test_main.h"

#include "util/scratch.h"

static const char list_page[] =
    "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":["
    "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},\"status\":{\"phase\":\"Running\"}},"
    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":[{\"ports\":[{\"containerPort\":80}]}]"
    "}}"
    "]}";

static void test_parse_in_region(void **state)
{
    (void)state;
    scratch_install();
    scratch_install(); /* idempotent */
    scratch *s = scratch_new(sizeof(list_page) * 4);
    assert_non_null(s);
    scratch_use(s);
    cJSON *page = cJSON_Parse(list_page);
    scratch_use(NULL);
    assert_non_null(page);
    assert_true(scratch_owns(page));
    assert_true(scratch_used(s) > 0);
    cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items");
    cJSON *item = cJSON_DetachItemFromArray(items, 0);
    assert_true(scratch_owns(item));
    /* Added after the parse, as the informer adds apiVersion: a heap node in a region tree. */
    cJSON *api = cJSON_AddStringToObject(item, "apiVersion", "v1");
    assert_non_null(api);
    assert_false(scratch_owns(api));
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(item, "metadata"), "name")
            ->valuestring,
        "a");
    size_t used = scratch_used(s);
    cJSON_Delete(item); /* region nodes ignored, the heap node freed (LSan/valgrind check it) */
    cJSON_Delete(page);
    assert_int_equal(scratch_used(s), used); /* a free gives nothing back: the region is a bump */
    scratch_free(s);
    assert_false(scratch_owns(page));

    /* Without a region in use, cJSON is back on the heap. */
    cJSON *heap = cJSON_Parse(list_page);
    assert_non_null(heap);
    assert_false(scratch_owns(heap));
    char *text = cJSON_PrintUnformatted(heap);
    assert_non_null(text);
    free(text); /* printed text is plain heap memory, freed with free() as the code does */
    cJSON_Delete(heap);
}

static void test_full_region_falls_back(void **state)
{
    (void)state;
    scratch_install();
    scratch *s = scratch_new(1); /* rounded up to the minimum */
    assert_non_null(s);
    scratch_use(s);
    /* Far more than the region: the first pieces in it, the rest in the heap. */
    static void *ptrs[40000];
    size_t in_region = 0;
    for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++) {
        ptrs[i] = scratch_malloc(24);
        assert_non_null(ptrs[i]);
        assert_int_equal((uintptr_t)ptrs[i] % 16, 0);
        memset(ptrs[i], 0xab, 24);
        in_region += scratch_owns(ptrs[i]);
    }
    scratch_use(NULL);
    assert_true(in_region > 0);
    assert_true(in_region < sizeof(ptrs) / sizeof(ptrs[0]));
    for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        scratch_free_ptr(ptrs[i]);
    /* Freeing the region in use also stops its use. */
    scratch_use(s);
    scratch_free(s);
    void *p = scratch_malloc(8);
    assert_false(scratch_owns(p));
    scratch_free_ptr(p);
    scratch_free(NULL);
    scratch_free_ptr(NULL);
}

static void test_two_regions(void **state)
{
    (void)state;
    scratch *a = scratch_new(4096), *b = scratch_new(4096);
    assert_non_null(a);
    assert_non_null(b);
    scratch_use(a);
    void *pa = scratch_malloc(100);
    scratch_use(b);
    void *pb = scratch_malloc(100);
    scratch_use(NULL);
    assert_true(scratch_owns(pa));
    assert_true(scratch_owns(pb));
    scratch_free(a);
    assert_false(scratch_owns(pa));
    assert_true(scratch_owns(pb));
    scratch_free(b);
    assert_false(scratch_owns(pb));
}

static void test_reset(void **state)
{
    (void)state;
    scratch *s = scratch_new(1 << 20);
    assert_non_null(s);
    scratch_use(s);
    char *a = scratch_malloc(200000);
    memset(a, 1, 200000);
    scratch_use(NULL);
    assert_true(scratch_used(s) >= 200000);
    /* Emptied: the next piece is where the first was, and the region still takes pieces. */
    scratch_reset(s, 4096);
    assert_int_equal(scratch_used(s), 0);
    scratch_use(s);
    char *b = scratch_malloc(16);
    scratch_use(NULL);
    assert_ptr_equal(a, b);
    assert_true(scratch_owns(b));
    /* The pages given back read as zero again (they were written with ones). */
    assert_int_equal(a[100000], 0);
    scratch_reset(NULL, 0);
    scratch_free(s);
}

TEST_MAIN(cmocka_unit_test(test_parse_in_region), cmocka_unit_test(test_full_region_falls_back),
          cmocka_unit_test(test_two_regions), cmocka_unit_test(test_reset))

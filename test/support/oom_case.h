/* oom_case: the out-of-memory tests' harness (test_oom_*.c), as SQLite's: a scenario runs once to
 * learn its answer, then again with the 1st, 2nd, ... Nth allocation failing (once, then from the
 * Nth on; oom_alloc.h), until a run completes without a failure injected. Each run must either
 * give the same answer or report an error (a negative errno, NULL, a kube_error): never crash,
 * never leak (ASan/LSan and valgrind check the leaks at exit), never succeed with a wrong answer.
 * OOM_SHOW=1 in the environment prints each scenario's answer. Part of the test-support library
 * (test/support); only for binaries linked with oom_alloc's --wrap options. */
#ifndef MP_TEST_OOM_CASE_H
#define MP_TEST_OOM_CASE_H

#include <stddef.h>

#include "informer/store.h"
#include "oom_alloc.h"

/* A scenario: 0 with its answer in *out (text, from oom_answer), or < 0 for an error it reported.
 */
typedef int (*oom_scenario)(char **out);

/* Runs sc as above; name is for the messages. */
void oom_run(const char *name, oom_scenario sc);

/* The answer's text (malloc'd), written with injection paused (the test's own bookkeeping). */
char *oom_answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A store of codec's records (NULL: raw objects) put from n JSON texts, with the index by fn when
 * index is set: 0 with it in *out, or -ENOMEM. */
int oom_store_fill(store **out, const store_codec *codec, const char *index, store_index_fn fn,
                   const char *const *json, size_t n);

/* test_NAME, the cmocka test that runs the scenario sc_NAME. */
#define OOM_TEST(name)                                                                             \
    static void test_##name(void **state)                                                          \
    {                                                                                              \
        (void)state;                                                                               \
        oom_run(#name, sc_##name);                                                                 \
    }

/* main(): cJSON allocates through the failing allocator, then the tests (cmocka_unit_test(...),
 * ...) run as one group. Include after cmocka.h. */
#define OOM_MAIN(...)                                                                              \
    int main(void)                                                                                 \
    {                                                                                              \
        oom_install();                                                                             \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif

/* oom_case: the out-of-memory tests' harness (oom_case.h). The answer of a scenario is text so
 * that runs compare with strcmp and a wrong one prints whole; the harness's own allocations are
 * made with injection paused. */
#include "oom_case.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

char *oom_answer(const char *fmt, ...)
{
    oom_pause(true);
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    assert_true(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    oom_pause(false);
    return s;
}

void oom_run(const char *name, oom_scenario sc)
{
    char *want = NULL;
    oom_arm(0, false);
    assert_int_equal(sc(&want), 0);
    assert_non_null(want);
    if (getenv("OOM_SHOW"))
        printf("%s\n", want);
    unsigned long runs = 0;
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (unsigned long n = 1;; n++) {
            char *got = NULL;
            oom_arm(n, persistent);
            int rc = sc(&got);
            bool injected = oom_injected();
            oom_arm(0, false);
            runs++;
            if (rc == 0) {
                if (!got || strcmp(got, want) != 0)
                    fail_msg("%s: failing allocation %lu%s: success with a wrong answer:\n%s\n"
                             "instead of\n%s",
                             name, n, persistent ? " on" : "", got ? got : "(none)", want);
            } else if (!injected) {
                fail_msg("%s: run %lu failed (%d) with no failure injected", name, n, rc);
            }
            free(got);
            if (!injected)
                break;
        }
    }
    free(want);
    printf("%s: %lu runs\n", name, runs);
}

int oom_store_fill(store **out, const store_codec *codec, const char *index, store_index_fn fn,
                   const char *const *json, size_t n)
{
    store *s = store_new(codec);
    if (!s)
        return -ENOMEM;
    int rc = index ? store_add_index(s, index, fn, NULL) : 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        cJSON *o = cJSON_Parse(json[i]);
        rc = o ? store_put(s, o, NULL) : -ENOMEM; /* good JSON: NULL is out of memory */
    }
    if (rc < 0) {
        store_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

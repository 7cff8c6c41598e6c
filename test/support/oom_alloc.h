/* oom_alloc: a test allocator that fails the Nth allocation from the time it is armed, as SQLite's
 * out-of-memory tests do. The test binary is linked with -Wl,--wrap for malloc, calloc, realloc,
 * strdup, strndup, asprintf, vasprintf, open_memstream and realpath (so the library's own calls
 * come here), and oom_install routes cJSON's allocations here too (cJSON_InitHooks). Part of the
 * test-support library (test/support), but only a binary linked with those --wrap options may use
 * it (CMakeLists.txt gives them to every test_oom_*.c); the others never pull it in. */
#ifndef MP_TEST_OOM_ALLOC_H
#define MP_TEST_OOM_ALLOC_H

#include <stdbool.h>

/* cJSON allocates through the failing allocator from now on. */
void oom_install(void);
/* The nth allocation from now fails (n >= 1), and with persistent every one after it; 0 disarms. */
void oom_arm(unsigned long n, bool persistent);
/* Whether an allocation was failed since oom_arm. */
bool oom_injected(void);
/* Stops counting and failing (true) or goes on (false): for a test's own bookkeeping. */
void oom_pause(bool paused);

#endif

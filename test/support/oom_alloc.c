/* oom_alloc: the --wrap'd allocation calls, each failing as armed and otherwise passing to the real
 * one; a failure returns what the real call returns out of memory (NULL or -1, errno ENOMEM). */
#include "oom_alloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

char *__real_realpath(const char *path, char *resolved);
char *__wrap_realpath(const char *path, char *resolved);
int __wrap_asprintf(char **out, const char *fmt, ...);

static unsigned long oom_at, oom_seen;
static bool oom_persistent, oom_hit, oom_paused;

void oom_arm(unsigned long n, bool persistent)
{
    oom_at = n;
    oom_seen = 0;
    oom_persistent = persistent;
    oom_hit = false;
}

bool oom_injected(void)
{
    return oom_hit;
}

void oom_pause(bool paused)
{
    oom_paused = paused;
}

/* Whether this allocation fails. */
static bool oom_fail(void)
{
    if (!oom_at || oom_paused)
        return false;
    oom_seen++;
    if (oom_seen == oom_at || (oom_persistent && oom_seen > oom_at)) {
        oom_hit = true;
        errno = ENOMEM;
        return true;
    }
    return false;
}

/* __wrap_name, failing with fail or else passing its arguments to __real_name. */
#define OOM_WRAP(type, name, params, args, fail)                                                   \
    type __real_##name params;                                                                     \
    type __wrap_##name params;                                                                     \
    type __wrap_##name params                                                                      \
    {                                                                                              \
        return oom_fail() ? fail : __real_##name args;                                             \
    }

OOM_WRAP(void *, malloc, (size_t size), (size), NULL)
OOM_WRAP(void *, calloc, (size_t n, size_t size), (n, size), NULL)
OOM_WRAP(void *, realloc, (void *p, size_t size), (p, size), NULL)
OOM_WRAP(char *, strdup, (const char *s), (s), NULL)
OOM_WRAP(char *, strndup, (const char *s, size_t n), (s, n), NULL)
OOM_WRAP(int, vasprintf, (char **out, const char *fmt, va_list ap), (out, fmt, ap), -1)
OOM_WRAP(FILE *, open_memstream, (char **buf, size_t *len), (buf, len), NULL)

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __wrap_vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

char *__wrap_realpath(const char *path, char *resolved)
{
    return !resolved && oom_fail() ? NULL
                                   : __real_realpath(path, resolved); /* allocates when NULL */
}

void oom_install(void)
{
    cJSON_Hooks h = {.malloc_fn = __wrap_malloc, .free_fn = free};
    cJSON_InitHooks(&h);
}

/* oom_alloc: the --wrap'd allocation calls, each failing as armed and otherwise passing to the real
 * one; a failure returns what the real call returns out of memory (NULL or -1, errno ENOMEM). */
#include "oom_alloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **out, const char *fmt, va_list ap);
FILE *__real_open_memstream(char **buf, size_t *len);
char *__real_realpath(const char *path, char *resolved);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_vasprintf(char **out, const char *fmt, va_list ap);
int __wrap_asprintf(char **out, const char *fmt, ...);
FILE *__wrap_open_memstream(char **buf, size_t *len);
char *__wrap_realpath(const char *path, char *resolved);

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

void *__wrap_malloc(size_t size)
{
    return oom_fail() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return oom_fail() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return oom_fail() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
    return oom_fail() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return oom_fail() ? NULL : __real_strndup(s, n);
}

int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
    return oom_fail() ? -1 : __real_vasprintf(out, fmt, ap);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __wrap_vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

FILE *__wrap_open_memstream(char **buf, size_t *len)
{
    return oom_fail() ? NULL : __real_open_memstream(buf, len);
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

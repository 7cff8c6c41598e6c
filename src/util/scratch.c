/* scratch: each region is one anonymous mapping with MAP_NORESERVE, so its size is only address
 * space; live regions are kept in a short list (one, in practice) that the free hook checks by
 * address range. */
#include "util/scratch.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

struct scratch {
    scratch *next; /* in scratch_live */
    char *base;
    size_t size, used;
};

#define SCRATCH_ALIGN 16u
#define SCRATCH_MIN (256u << 10)

static scratch *scratch_live;
static scratch *scratch_current;

void scratch_install(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    cJSON_Hooks hooks = {.malloc_fn = scratch_malloc, .free_fn = scratch_free_ptr};
    cJSON_InitHooks(&hooks);
}

scratch *scratch_new(size_t size)
{
    if (size < SCRATCH_MIN)
        size = SCRATCH_MIN;
    size = (size + 4095u) & ~(size_t)4095u;
    scratch *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        free(s);
        return NULL;
    }
    s->base = base;
    s->size = size;
    s->next = scratch_live;
    scratch_live = s;
    return s;
}

void scratch_reset(scratch *s, size_t keep_bytes)
{
    if (!s)
        return;
    size_t keep = (keep_bytes + 4095u) & ~(size_t)4095u;
    if (s->used > keep && keep < s->size)
        madvise(s->base + keep, s->size - keep, MADV_DONTNEED);
    s->used = 0;
}

void scratch_use(scratch *s)
{
    scratch_current = s;
}

void scratch_free(scratch *s)
{
    if (!s)
        return;
    for (scratch **pp = &scratch_live; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    if (scratch_current == s)
        scratch_current = NULL;
    munmap(s->base, s->size);
    free(s);
}

void *scratch_malloc(size_t size)
{
    scratch *s = scratch_current;
    size_t need = (size + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
    if (s && need >= size && need <= s->size - s->used) {
        void *p = s->base + s->used;
        s->used += need;
        return p;
    }
    return malloc(size);
}

bool scratch_owns(const void *p)
{
    for (const scratch *s = scratch_live; s; s = s->next)
        if ((uintptr_t)p >= (uintptr_t)s->base && (uintptr_t)p < (uintptr_t)s->base + s->size)
            return true;
    return false;
}

void scratch_free_ptr(void *p)
{
    if (p && !scratch_owns(p))
        free(p);
}

size_t scratch_used(const scratch *s)
{
    return s ? s->used : 0;
}

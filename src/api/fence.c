/* fence: the entries of a router Lease's fenced annotation (api/fence.h), read without copying. */
#include "api/fence.h"

#include <string.h>

void api_fenced_each(const char *fenced, api_fenced_fn fn, void *ud)
{
    const char *s = fenced ? fenced : "";
    while (*s) {
        size_t len = strcspn(s, " ");
        const char *slash = memchr(s, '/', len), *eq = memchr(s, '=', len);
        if (slash && eq && slash > s && eq > slash + 1 && eq + 1 < s + len &&
            !memchr(slash + 1, '/', (size_t)(eq - slash - 1)) &&
            !memchr(eq + 1, '=', (size_t)(s + len - eq - 1)) &&
            !fn(ud, s, (size_t)(slash - s), slash + 1, (size_t)(eq - slash - 1), eq + 1,
                (size_t)(s + len - eq - 1)))
            return;
        s += len;
        s += strspn(s, " ");
    }
}

typedef struct api_fenced_find {
    const char *ns, *pool, *member;
    bool found;
} api_fenced_find;

static bool api_fenced_eq(const char *a, size_t alen, const char *b)
{
    return b && strlen(b) == alen && memcmp(a, b, alen) == 0;
}

static bool api_fenced_match(void *ud, const char *ns, size_t ns_len, const char *pool,
                             size_t pool_len, const char *member, size_t member_len)
{
    api_fenced_find *f = ud;
    f->found = api_fenced_eq(ns, ns_len, f->ns) && api_fenced_eq(pool, pool_len, f->pool) &&
               api_fenced_eq(member, member_len, f->member);
    return !f->found;
}

bool api_fenced_has(const char *fenced, const char *ns, const char *pool, const char *member)
{
    api_fenced_find f = {ns, pool, member, false};
    api_fenced_each(fenced, api_fenced_match, &f);
    return f.found;
}

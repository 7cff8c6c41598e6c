/* kube_buf: growable NUL-terminated byte strings (see buf.h). Growth doubles so that appending a
 * response chunk by chunk stays linear. */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kube_buf_reserve(kube_buf *b, size_t extra)
{
    if (extra > (size_t)-1 / 2 - b->len)
        return -ENOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int kube_buf_add(kube_buf *b, const void *data, size_t len)
{
    if (kube_buf_reserve(b, len) < 0)
        return -ENOMEM;
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return 0;
}

int kube_buf_adds(kube_buf *b, const char *s)
{
    return kube_buf_add(b, s, strlen(s));
}

int kube_buf_addf(kube_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if (kube_buf_reserve(b, (size_t)n) < 0)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int kube_buf_add_escaped(kube_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    if (n > (size_t)-1 / 4 || kube_buf_reserve(b, 3 * n) < 0)
        return -ENOMEM;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~') {
            b->p[b->len++] = (char)*c;
        } else {
            b->p[b->len++] = '%';
            b->p[b->len++] = hex[*c >> 4];
            b->p[b->len++] = hex[*c & 15];
        }
    }
    b->p[b->len] = '\0';
    return 0;
}

char *kube_buf_take(kube_buf *b)
{
    if (!b->p && kube_buf_add(b, "", 0) < 0)
        return NULL;
    char *p = b->p;
    *b = (kube_buf){0};
    return p;
}

void kube_buf_free(kube_buf *b)
{
    free(b->p);
    *b = (kube_buf){0};
}

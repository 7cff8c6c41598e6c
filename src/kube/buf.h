/* kube_buf: a growable byte string shared by the kube sources (URLs, response bodies, the watch
 * stream). Internal to src/kube; callers outside see only the finished strings. The bytes are
 * always NUL-terminated so a finished buffer can be handed out as a C string. */
#ifndef MP_KUBE_BUF_H
#define MP_KUBE_BUF_H

#include <stddef.h>

typedef struct kube_buf {
    char *p; /* NULL until the first append */
    size_t len, cap;
} kube_buf;

/* Each returns 0, or -ENOMEM (kube_buf_addf also -EINVAL for a format it cannot print); the
 * buffer is then unchanged. */
int kube_buf_add(kube_buf *b, const void *data, size_t len);
int kube_buf_adds(kube_buf *b, const char *s);
int kube_buf_addf(kube_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s percent-encoded: everything but RFC 3986 unreserved characters is escaped, so the
 * result is safe as a path segment and as a query key or value. */
int kube_buf_add_escaped(kube_buf *b, const char *s);
/* Hands the string to the caller (never NULL on success: "" for an empty buffer) and resets b. */
char *kube_buf_take(kube_buf *b);
void kube_buf_free(kube_buf *b);

#endif

/* kube_wdec: newline framing plus a check of each event's shape (see watchdec.h). The buffer
 * holds at most one partial event plus one received chunk, so memory stays bounded by
 * max_event however the server or a proxy in between behaves. */
#include "kube/watchdec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const kube_wdec_types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

void kube_wdec_init(kube_wdec *d, size_t max_event)
{
    *d = (kube_wdec){.max_event = max_event ? max_event : KUBE_WDEC_MAX_EVENT_DEFAULT};
}

void kube_wdec_free(kube_wdec *d)
{
    free(d->buf);
    kube_wdec_init(d, d->max_event);
}

static int kube_wdec_fail(kube_wdec *d, kube_error *err, kube_errkind kind, const char *what)
{
    d->failed = 1;
    if (kind == KUBE_ERR_NOMEM)
        return kube_error_set(err, kind, "watch stream: out of memory");
    return kube_error_set(err, kind, "watch stream: %s", what);
}

static int kube_wdec_too_big(kube_wdec *d, kube_error *err)
{
    d->failed = 1;
    return kube_error_set(err, KUBE_ERR_DECODE, "watch stream: event larger than %zu bytes",
                          d->max_event);
}

int kube_wdec_feed(kube_wdec *d, const void *data, size_t len, kube_error *err)
{
    if (d->failed)
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "decoder already failed");
    if (d->pos) {
        memmove(d->buf, d->buf + d->pos, d->len - d->pos);
        d->len -= d->pos;
        d->pos = 0;
    }
    if (len > d->cap - d->len) {
        if (len > (size_t)-1 / 2 - d->len)
            return kube_wdec_fail(d, err, KUBE_ERR_NOMEM, NULL);
        size_t cap = d->cap ? d->cap : 4096;
        while (cap < d->len + len)
            cap *= 2;
        char *p = realloc(d->buf, cap);
        if (!p)
            return kube_wdec_fail(d, err, KUBE_ERR_NOMEM, NULL);
        d->buf = p;
        d->cap = cap;
    }
    if (len)
        memcpy(d->buf + d->len, data, len);
    d->len += len;
    /* Only the unterminated tail can still grow; a long complete line is caught by next(). */
    const char *nl = len ? memrchr(data, '\n', len) : NULL;
    d->tail = nl ? len - (size_t)(nl - (const char *)data) - 1 : d->tail + len;
    if (d->tail > d->max_event)
        return kube_wdec_too_big(d, err);
    return 0;
}

static bool kube_wdec_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

/* Checks one line's shape and takes the object out of its envelope. */
static int kube_wdec_event_of(kube_wdec *d, const char *line, size_t n, kube_wdec_event *ev,
                              kube_error *err)
{
    const char *end = NULL;
    cJSON *env = cJSON_ParseWithLengthOpts(line, n, &end, false);
    if (!env)
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "a line is not JSON");
    if (!kube_wdec_blank(end, n - (size_t)(end - line))) {
        cJSON_Delete(env);
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "text after an event on its line");
    }
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "type"));
    const char *known = NULL;
    for (size_t i = 0; type && i < sizeof(kube_wdec_types) / sizeof(*kube_wdec_types); i++)
        if (strcmp(type, kube_wdec_types[i]) == 0)
            known = kube_wdec_types[i];
    cJSON *obj = cJSON_DetachItemFromObjectCaseSensitive(env, "object");
    cJSON_Delete(env);
    if (!known || !cJSON_IsObject(obj)) {
        const char *why = !known ? "an event of unknown type" : "an event without an object";
        cJSON_Delete(obj);
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, why);
    }
    ev->type = known;
    ev->object = obj;
    return 1;
}

int kube_wdec_next(kube_wdec *d, kube_wdec_event *ev, kube_error *err)
{
    *ev = (kube_wdec_event){0};
    if (d->failed)
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "decoder already failed");
    while (d->pos < d->len) {
        const char *start = d->buf + d->pos;
        const char *nl = memchr(start, '\n', d->len - d->pos);
        if (!nl)
            return 0;
        size_t n = (size_t)(nl - start);
        d->pos += n + 1;
        if (n > d->max_event)
            return kube_wdec_too_big(d, err);
        if (!kube_wdec_blank(start, n))
            return kube_wdec_event_of(d, start, n, ev, err);
    }
    return 0;
}

int kube_wdec_finish(kube_wdec *d, kube_error *err)
{
    if (d->failed)
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "decoder already failed");
    if (d->pos < d->len && !kube_wdec_blank(d->buf + d->pos, d->len - d->pos))
        return kube_wdec_fail(d, err, KUBE_ERR_DECODE, "the stream ended inside an event");
    return 0;
}

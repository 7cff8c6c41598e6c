/* libFuzzer entry point for the watch stream decoder: the input is cut into chunks at places
 * chosen by its first bytes, with a small event limit so the oversize paths are reached too. The
 * cuts must not matter: the chunked stream gives the events the whole stream gives, in order, and
 * fails where it fails (a stream whose unfinished last line is already too big fails at once when
 * fed whole, so on a failure one list of events only has to be a prefix of the other). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/watchdec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_events {
    char **v; /* "TYPE object-json" per event */
    size_t n, cap;
} fuzz_events;

static void fuzz_events_free(fuzz_events *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
}

/* Takes ev.object; returns -1 when out of memory (the run is then not compared). */
static int fuzz_events_add(fuzz_events *e, const kube_wdec_event *ev)
{
    char *json = cJSON_PrintUnformatted(ev->object);
    cJSON_Delete(ev->object);
    if (!json)
        return -1;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        char **v = realloc(e->v, cap * sizeof(*v));
        if (!v) {
            free(json);
            return -1;
        }
        e->v = v, e->cap = cap;
    }
    size_t tl = strlen(ev->type), jl = strlen(json);
    char *s = malloc(tl + 1 + jl + 1);
    if (!s) {
        free(json);
        return -1;
    }
    memcpy(s, ev->type, tl);
    s[tl] = ' ';
    memcpy(s + tl + 1, json, jl + 1);
    free(json);
    e->v[e->n++] = s;
    return 0;
}

/* 0: the stream decoded and ended between events; 1: the decoder failed; -1: out of memory. */
static int fuzz_decode(const uint8_t *data, size_t size, size_t step, size_t max, fuzz_events *e)
{
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    kube_wdec_init(&d, max);
    int rc = 0, res = 0;
    for (size_t at = 0; at < size && rc >= 0 && res == 0; at += step) {
        size_t n = size - at < step ? size - at : step;
        rc = kube_wdec_feed(&d, data + at, n, &err);
        while (rc >= 0 && res == 0 && (rc = kube_wdec_next(&d, &ev, &err)) == 1)
            if (fuzz_events_add(e, &ev) != 0)
                res = -1;
    }
    if (res == 0 && rc >= 0)
        rc = kube_wdec_finish(&d, &err);
    if (res == 0 && rc < 0)
        res = err.kind == KUBE_ERR_NOMEM ? -1 : 1;
    if (res == 1 && err.kind != KUBE_ERR_DECODE)
        abort();
    kube_error_clear(&err);
    kube_wdec_free(&d);
    return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t step = (size_t)data[0] + 1; /* chunk size */
    size_t max = (size_t)data[1] * 8 + 1;
    data += 2;
    size -= 2;
    fuzz_events cut = {0}, whole = {0};
    int rc_cut = fuzz_decode(data, size, step, max, &cut);
    int rc_whole = size ? fuzz_decode(data, size, size, max, &whole) : 0;
    if (rc_cut >= 0 && rc_whole >= 0) {
        if (rc_cut != rc_whole)
            abort();
        size_t n = cut.n < whole.n ? cut.n : whole.n;
        if (rc_cut == 0 && cut.n != whole.n)
            abort();
        for (size_t i = 0; i < n; i++)
            if (strcmp(cut.v[i], whole.v[i]) != 0)
                abort();
    }
    fuzz_events_free(&cut);
    fuzz_events_free(&whole);
    return 0;
}

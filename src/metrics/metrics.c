/* metrics: each family keeps its series in a hash map keyed by the series' rendered label block
 * (`a="x",b="y"`), so a lookup is one string build and one hash probe, and rendering copies the key
 * as is. A series is one allocation: the struct, a histogram's bucket counts, then the key. */
#include "metrics/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"

typedef struct metrics_series {
    strmap_node node; /* key: labels */
    double value;     /* counter, gauge; a histogram's sum */
    uint64_t count;   /* histogram observations */
    const char *labels;
    uint64_t buckets[]; /* histogram: observations per bucket (not cumulative) */
} metrics_series;

struct metrics_family {
    metrics_family *next;
    metrics_kind kind;
    char *name, *help;
    char **labels;
    size_t n_labels;
    double *buckets;
    size_t n_buckets;
    strmap series;
    metrics_list_fn list; /* a listed family: its series are the caller's */
    void *list_ud;
};

struct metrics_emitter {
    FILE *out;
    const metrics_family *f;
    bool failed; /* a series could not be written: the render fails */
};

typedef struct metrics_collector {
    struct metrics_collector *next;
    void (*fn)(void *ud);
    void *ud;
} metrics_collector;

struct metrics {
    metrics_family *families, **tail;
    metrics_collector *collectors;
};

metrics *metrics_new(void)
{
    metrics *m = calloc(1, sizeof(*m));
    if (m)
        m->tail = &m->families;
    return m;
}

static void metrics_family_free(metrics_family *f)
{
    strmap_node *n = strmap_first(&f->series);
    while (n) {
        strmap_node *next = strmap_next(&f->series, n);
        strmap_remove(&f->series, n);
        free(STRMAP_OWNER(n, metrics_series, node));
        n = next;
    }
    strmap_fini(&f->series);
    for (size_t i = 0; i < f->n_labels; i++)
        free(f->labels[i]);
    free(f->labels);
    free(f->buckets);
    free(f->name);
    free(f->help);
    free(f);
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    while (m->families) {
        metrics_family *f = m->families;
        m->families = f->next;
        metrics_family_free(f);
    }
    while (m->collectors) {
        metrics_collector *c = m->collectors;
        m->collectors = c->next;
        free(c);
    }
    free(m);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no colon). */
static bool metrics_ident(const char *s, bool colon)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (colon && c == ':')))
            return false;
    }
    return true;
}

metrics_family *metrics_family_new(metrics *m, metrics_kind kind, const char *name,
                                   const char *help, const char *const *labels,
                                   const double *buckets, size_t n_buckets)
{
    if (!m || !metrics_ident(name, true) || (kind == METRICS_HISTOGRAM && !n_buckets))
        return NULL;
    for (size_t i = 1; i < n_buckets; i++)
        if (!(buckets[i] > buckets[i - 1]))
            return NULL;
    metrics_family *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->kind = kind;
    bool ok = strmap_init(&f->series) == 0 && (f->name = strdup(name)) &&
              (f->help = strdup(help ? help : ""));
    size_t n_labels = 0;
    while (ok && labels && labels[n_labels])
        n_labels++;
    if (ok && n_labels) /* counted once allocated: metrics_family_free walks them */
        ok = (f->labels = calloc(n_labels, sizeof(*f->labels))) != NULL;
    if (ok)
        f->n_labels = n_labels;
    for (size_t i = 0; ok && i < f->n_labels; i++)
        ok = metrics_ident(labels[i], false) && (f->labels[i] = strdup(labels[i]));
    if (ok && kind == METRICS_HISTOGRAM) {
        ok = (f->buckets = malloc(n_buckets * sizeof(*f->buckets))) != NULL;
        if (ok) {
            memcpy(f->buckets, buckets, n_buckets * sizeof(*buckets));
            f->n_buckets = n_buckets;
        }
    }
    if (!ok) {
        metrics_family_free(f);
        return NULL;
    }
    *m->tail = f;
    m->tail = &f->next;
    return f;
}

/* Appends s to out (when out is not NULL) escaped for a label value (or, with help, for HELP text:
 * no quote escaping). Returns the escaped length. */
static size_t metrics_escape(char *out, const char *s, bool help)
{
    size_t n = 0;
    for (; *s; s++) {
        const char *e = NULL;
        if (*s == '\\')
            e = "\\\\";
        else if (*s == '\n')
            e = "\\n";
        else if (*s == '"' && !help)
            e = "\\\"";
        if (e) {
            if (out)
                memcpy(out + n, e, 2);
            n += 2;
        } else {
            if (out)
                out[n] = *s;
            n++;
        }
    }
    return n;
}

/* `a="x",b="y"` for the first n labels of f; malloc'd. */
static char *metrics_label_block(const char *const *names, const char *const *values, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 4 + metrics_escape(NULL, values[i] ? values[i] : "", false);
    char *s = malloc(len);
    if (!s)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            s[at++] = ',';
        size_t nl = strlen(names[i]);
        memcpy(s + at, names[i], nl);
        at += nl;
        s[at++] = '=';
        s[at++] = '"';
        at += metrics_escape(s + at, values[i] ? values[i] : "", false);
        s[at++] = '"';
    }
    s[at] = 0;
    return s;
}

static metrics_series *metrics_find(const metrics_family *f, const char *key)
{
    return STRMAP_FIND(&f->series, key, metrics_series, node);
}

/* The series for values, created (zeroed) if absent; NULL when out of memory. */
static metrics_series *metrics_series_get(metrics_family *f, const char *const *values)
{
    char *key = metrics_label_block((const char *const *)f->labels, values, f->n_labels);
    if (!key)
        return NULL;
    metrics_series *s = metrics_find(f, key);
    if (!s) {
        size_t nb = f->kind == METRICS_HISTOGRAM ? f->n_buckets : 0;
        size_t kl = strlen(key) + 1;
        s = calloc(1, sizeof(*s) + nb * sizeof(uint64_t) + kl);
        if (s) {
            char *labels = (char *)s + sizeof(*s) + nb * sizeof(uint64_t);
            memcpy(labels, key, kl);
            s->labels = labels;
            strmap_insert(&f->series, &s->node, s->labels);
        }
    }
    free(key);
    return s;
}

metrics_family *metrics_family_listed(metrics *m, metrics_kind kind, const char *name,
                                      const char *help, const char *const *labels,
                                      metrics_list_fn list, void *ud)
{
    if (!list || kind == METRICS_HISTOGRAM)
        return NULL;
    metrics_family *f = metrics_family_new(m, kind, name, help, labels, NULL, 0);
    if (f) {
        f->list = list;
        f->list_ud = ud;
    }
    return f;
}

int metrics_declare(metrics *m, const metrics_def *defs, size_t n, void *base)
{
    for (size_t i = 0; i < n; i++) {
        const metrics_def *d = &defs[i];
        metrics_family *f =
            d->list ? metrics_family_listed(m, d->kind, d->name, d->help, d->labels, d->list, base)
                    : metrics_family_new(m, d->kind, d->name, d->help, d->labels, d->buckets,
                                         d->n_buckets);
        if (!f)
            return -ENOMEM;
        *(metrics_family **)(void *)((char *)base + d->at) = f;
    }
    return 0;
}

int metrics_add(metrics_family *f, const char *const *values, double delta)
{
    if (!f || f->list || f->kind == METRICS_HISTOGRAM || (f->kind == METRICS_COUNTER && delta < 0))
        return -EINVAL;
    metrics_series *s = metrics_series_get(f, values);
    if (!s)
        return -ENOMEM;
    s->value += delta;
    return 0;
}

int metrics_set(metrics_family *f, const char *const *values, double v)
{
    if (!f || f->list || f->kind == METRICS_HISTOGRAM)
        return -EINVAL;
    metrics_series *s = metrics_series_get(f, values);
    if (!s)
        return -ENOMEM;
    s->value = v;
    return 0;
}

int metrics_observe(metrics_family *f, const char *const *values, double v)
{
    if (!f || f->kind != METRICS_HISTOGRAM)
        return -EINVAL;
    metrics_series *s = metrics_series_get(f, values);
    if (!s)
        return -ENOMEM;
    size_t i = 0;
    while (i < f->n_buckets && v > f->buckets[i])
        i++;
    if (i < f->n_buckets)
        s->buckets[i]++;
    s->count++;
    s->value += v;
    return 0;
}

double metrics_value(const metrics_family *f, const char *const *values)
{
    if (!f)
        return 0;
    char *key = metrics_label_block((const char *const *)f->labels, values, f->n_labels);
    const metrics_series *s = key ? metrics_find(f, key) : NULL;
    free(key);
    if (!s)
        return 0;
    return f->kind == METRICS_HISTOGRAM ? (double)s->count : s->value;
}

size_t metrics_series_count(const metrics_family *f)
{
    return f ? f->series.count : 0;
}

/* Removes f's series whose label block starts with prefix (pl bytes) and a separator. */
static void metrics_remove_prefix(metrics_family *f, const char *prefix, size_t pl)
{
    strmap_node *node = strmap_first(&f->series);
    while (node) {
        strmap_node *next = strmap_next(&f->series, node);
        metrics_series *s = STRMAP_OWNER(node, metrics_series, node);
        if (strncmp(s->labels, prefix, pl) == 0 && (s->labels[pl] == 0 || s->labels[pl] == ',')) {
            strmap_remove(&f->series, node);
            free(s);
        }
        node = next;
    }
}

int metrics_remove(metrics *m, const char *const *names, const char *const *values, size_t n)
{
    char *prefix = metrics_label_block(names, values, n);
    if (!prefix)
        return -ENOMEM;
    for (metrics_family *f = m->families; f; f = f->next) {
        bool match = !f->list && f->n_labels >= n;
        for (size_t i = 0; match && i < n; i++)
            match = strcmp(f->labels[i], names[i]) == 0;
        if (match)
            metrics_remove_prefix(f, prefix, strlen(prefix));
    }
    free(prefix);
    return 0;
}

int metrics_delete(metrics_family *f, const char *const *values)
{
    if (!f)
        return 0;
    char *key = metrics_label_block((const char *const *)f->labels, values, f->n_labels);
    if (!key)
        return -ENOMEM;
    metrics_series *s = metrics_find(f, key);
    free(key);
    if (s) {
        strmap_remove(&f->series, &s->node);
        free(s);
    }
    return 0;
}

int metrics_on_collect(metrics *m, void (*fn)(void *ud), void *ud)
{
    metrics_collector *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    *c = (metrics_collector){.next = m->collectors, .fn = fn, .ud = ud};
    m->collectors = c;
    return 0;
}

/* Integers print exactly; other values with enough digits to read back the same double. */
static const char *metrics_fmt(char buf[32], double v)
{
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    if (isnan(v))
        return "NaN";
    if (v == (double)(long long)v && fabs(v) < 1e15)
        snprintf(buf, 32, "%lld", (long long)v);
    else if (snprintf(buf, 32, "%.15g", v) > 0 && strtod(buf, NULL) != v)
        snprintf(buf, 32, "%.17g", v); /* the shortest of the two that reads back the same */
    return buf;
}

/* name{labels[,extra]} */
static void metrics_name(FILE *out, const metrics_family *f, const char *suffix,
                         const metrics_series *s, const char *extra)
{
    fprintf(out, "%s%s", f->name, suffix);
    bool has = s->labels[0] != 0;
    if (has || extra)
        fprintf(out, "{%s%s%s}", s->labels, has && extra ? "," : "", extra ? extra : "");
    fputc(' ', out);
}

static void metrics_render_series(FILE *out, const metrics_family *f, const metrics_series *s)
{
    char num[32];
    if (f->kind != METRICS_HISTOGRAM) {
        metrics_name(out, f, "", s, NULL);
        fprintf(out, "%s\n", metrics_fmt(num, s->value));
        return;
    }
    uint64_t cum = 0;
    for (size_t i = 0; i < f->n_buckets; i++) {
        char le[48];
        cum += s->buckets[i];
        snprintf(le, sizeof(le), "le=\"%s\"", metrics_fmt(num, f->buckets[i]));
        metrics_name(out, f, "_bucket", s, le);
        fprintf(out, "%llu\n", (unsigned long long)cum);
    }
    metrics_name(out, f, "_bucket", s, "le=\"+Inf\"");
    fprintf(out, "%llu\n", (unsigned long long)s->count);
    metrics_name(out, f, "_sum", s, NULL);
    fprintf(out, "%s\n", metrics_fmt(num, s->value));
    metrics_name(out, f, "_count", s, NULL);
    fprintf(out, "%llu\n", (unsigned long long)s->count);
}

void metrics_emit(metrics_emitter *e, const char *const *values, double v)
{
    char num[32];
    char *labels = metrics_label_block((const char *const *)e->f->labels, values, e->f->n_labels);
    if (!labels) {
        e->failed = true; /* out of memory: no scrape rather than one without the series */
        return;
    }
    fprintf(e->out, "%s%s%s%s %s\n", e->f->name, *labels ? "{" : "", labels, *labels ? "}" : "",
            metrics_fmt(num, v));
    free(labels);
}

char *metrics_render(metrics *m, size_t *len)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    for (metrics_collector *c = m->collectors; c; c = c->next)
        c->fn(c->ud);
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    if (!out)
        return NULL;
    bool failed = false;
    for (const metrics_family *f = m->families; f && !failed; f = f->next) {
        char *help = malloc(metrics_escape(NULL, f->help, true) + 1);
        if (!help) {
            failed = true;
            break;
        }
        help[metrics_escape(help, f->help, true)] = 0;
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, help, f->name, kinds[f->kind]);
        free(help);
        if (f->list) {
            metrics_emitter e = {.out = out, .f = f};
            f->list(f->list_ud, &e);
            failed = e.failed;
        }
        for (strmap_node *node = strmap_first(&f->series); node;
             node = strmap_next(&f->series, node))
            metrics_render_series(out, f, STRMAP_OWNER(node, metrics_series, node));
    }
    failed = failed || ferror(out);
    if (fclose(out) != 0 || failed || !text) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}

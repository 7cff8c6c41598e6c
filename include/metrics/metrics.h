/* metrics: a small Prometheus registry (counters, gauges, histograms with labels) rendered in the
 * text exposition format 0.0.4. No I/O and no clock: callers record values, the HTTP server asks
 * for the text. Series are created on first use and can be removed by label (a deleted pool's). */
#ifndef MP_METRICS_METRICS_H
#define MP_METRICS_METRICS_H

#include <stddef.h>

typedef struct metrics metrics;
typedef struct metrics_family metrics_family;

typedef enum { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM } metrics_kind;

/* NULL when out of memory. */
metrics *metrics_new(void);
/* Frees the registry, its families and series. NULL is a no-op. */
void metrics_free(metrics *m);

/* Declares a family. labels is a NULL-terminated list of label names (NULL: none), fixed for the
 * family; buckets (histograms only) are the upper bounds in increasing order, +Inf implied. The
 * strings are copied. Returns NULL when out of memory or for a bad declaration (a name or label
 * that is not a Prometheus identifier, unsorted buckets). */
metrics_family *metrics_family_new(metrics *m, metrics_kind kind, const char *name,
                                   const char *help, const char *const *labels,
                                   const double *buckets, size_t n_buckets);

/* A family whose series the caller keeps in its own form (one compact record for many series, say):
 * at each render, list(ud, out) calls metrics_emit once per series. Counters and gauges only; the
 * recording calls below refuse it (-EINVAL) and metrics_remove leaves it alone. NULL as for
 * metrics_family_new. */
typedef struct metrics_emitter metrics_emitter;
typedef void (*metrics_list_fn)(void *ud, metrics_emitter *out);
metrics_family *metrics_family_listed(metrics *m, metrics_kind kind, const char *name,
                                      const char *help, const char *const *labels,
                                      metrics_list_fn list, void *ud);
/* One series of a listed family: its label values (as for metrics_add) and value. */
void metrics_emit(metrics_emitter *out, const char *const *values, double v);

/* One family of a program's table of them (its name, help, labels and buckets in one place): what
 * metrics_declare declares, and the offset of the metrics_family * field of the caller's struct
 * that gets its handle. With list set, a listed family whose list_ud is that struct. */
typedef struct metrics_def {
    size_t at;
    metrics_kind kind;
    const char *name, *help;
    const char *const *labels;
    const double *buckets;
    size_t n_buckets;
    metrics_list_fn list;
} metrics_def;

/* A row of such a table for the field of type; a histogram's buckets an array. */
#define METRICS_DEF(type, field, KIND, NAME, HELP, LABELS)                                         \
    {                                                                                              \
        .at = offsetof(type, field), .kind = (KIND), .name = (NAME), .help = (HELP),               \
        .labels = (LABELS)                                                                         \
    }
#define METRICS_DEF_HISTOGRAM(type, field, NAME, HELP, LABELS, BUCKETS)                            \
    {                                                                                              \
        .at = offsetof(type, field), .kind = METRICS_HISTOGRAM, .name = (NAME), .help = (HELP),    \
        .labels = (LABELS), .buckets = (BUCKETS),                                                  \
        .n_buckets = sizeof(BUCKETS) / sizeof((BUCKETS)[0])                                        \
    }

/* Declares defs[0..n) in order, each handle stored into base. 0, or -ENOMEM at the first that
 * could not be declared (those before stay in the registry, which frees them). */
int metrics_declare(metrics *m, const metrics_def *defs, size_t n, void *base);

/* values: one label value per label name of the family, in order (NULL for a family without
 * labels). 0, -EINVAL (wrong kind, a negative counter increment) or -ENOMEM. */
int metrics_add(metrics_family *f, const char *const *values, double delta); /* counter, gauge */
int metrics_set(metrics_family *f, const char *const *values, double v);     /* gauge, counter */
int metrics_observe(metrics_family *f, const char *const *values, double v); /* histogram */

/* The value of a counter or gauge series, or a histogram's count; 0 when the series does not
 * exist. For tests and collectors. */
double metrics_value(const metrics_family *f, const char *const *values);
size_t metrics_series_count(const metrics_family *f);

/* Removes, in every family whose first n label names are names[0..n), the series whose first n
 * label values are values[0..n) (e.g. {"namespace","pool"}: everything about one pool). It scans
 * every series of those families. 0 or -ENOMEM (nothing removed). */
int metrics_remove(metrics *m, const char *const *names, const char *const *values, size_t n);

/* Removes the one series of f with exactly these label values (a no-op when there is none):
 * a hash lookup, for callers that know their series. 0 or -ENOMEM (nothing removed). */
int metrics_delete(metrics_family *f, const char *const *values);

/* Runs fn before every render, so values kept elsewhere (queue depth, process RSS) are fresh.
 * 0 or -ENOMEM. */
int metrics_on_collect(metrics *m, void (*fn)(void *ud), void *ud);

/* The exposition text of every family (families in declaration order, a family without series
 * shows only its HELP and TYPE). malloc'd, *len set; NULL when out of memory. */
char *metrics_render(metrics *m, size_t *len);

#endif

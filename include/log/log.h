/* log: structured logs, one line per record, as JSON objects or as "key=value" text.
 * Each record has a level, a message and key/value pairs; swap lines carry pool, member, reason. */
#ifndef MP_LOG_LOG_H
#define MP_LOG_LOG_H

#include <stdio.h>

typedef enum { LOG_ERROR = 0, LOG_INFO = 1, LOG_DEBUG = 2, LOG_TRACE = 3 } log_level;
typedef enum { LOG_TEXT = 0, LOG_JSON = 1 } log_format;

/* The process's one logger; set once from flags at start (the only process-wide setting here). */
void log_setup(FILE *out, log_level max_level, log_format format);
int log_enabled(log_level level);
/* Writes one record: msg, then pairs of (const char *key, const char *value), ending with NULL.
 * A NULL value prints as empty. */
void log_kv(log_level level, const char *msg, ...) __attribute__((sentinel));

#endif

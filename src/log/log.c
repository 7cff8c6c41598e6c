/* log: formats one record into a memory stream and writes it with a single fwrite, so a line is
 * never interleaved with another writer's. JSON strings are escaped per RFC 8259. */
#include "log/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

static struct {
    FILE *out;
    log_level max;
    log_format format;
} log_cfg = {NULL, LOG_INFO, LOG_TEXT};

void log_setup(FILE *out, log_level max_level, log_format format)
{
    log_cfg.out = out;
    log_cfg.max = max_level;
    log_cfg.format = format;
}

int log_enabled(log_level level)
{
    return level <= log_cfg.max;
}

static void log_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Text values are quoted when they hold spaces, quotes or '=' so lines stay machine-splittable. */
static void log_text_val(FILE *f, const char *s)
{
    s = s ? s : "";
    int quote = !*s;
    for (const char *p = s; *p && !quote; p++)
        quote = *p == ' ' || *p == '"' || *p == '=' || *p == '\n';
    if (quote)
        log_json_str(f, s);
    else
        fputs(s, f);
}

void log_kv(log_level level, const char *msg, ...)
{
    static const char *names[] = {"error", "info", "debug", "trace"};
    if (!log_enabled(level))
        return;
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32], stamp[24];
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when, sizeof(when), "%s.%03dZ", stamp, (int)(ts.tv_nsec / 1000000));
    va_list ap;
    va_start(ap, msg);
    if (log_cfg.format == LOG_JSON) {
        fprintf(f, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", when, names[level]);
        log_json_str(f, msg);
        for (const char *k; (k = va_arg(ap, const char *));) {
            fputc(',', f);
            log_json_str(f, k);
            fputc(':', f);
            log_json_str(f, va_arg(ap, const char *));
        }
        fputs("}\n", f);
    } else {
        fprintf(f, "%s %-5s ", when, names[level]);
        log_text_val(f, msg);
        for (const char *k; (k = va_arg(ap, const char *));) {
            fprintf(f, " %s=", k);
            log_text_val(f, va_arg(ap, const char *));
        }
        fputc('\n', f);
    }
    va_end(ap);
    fclose(f);
    FILE *out = log_cfg.out ? log_cfg.out : stderr;
    fwrite(line, 1, len, out);
    fflush(out);
    free(line);
}

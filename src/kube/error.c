/* kube_error: API errors as values. Turns the server's answers (metav1.Status bodies, or whatever
 * a proxy in between sent) into a kind, a code, a reason and a message people can act on. */
#include "kube/error.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest piece of a non-Status body quoted in a message: enough to recognise an HTML error page
 * from a proxy, short enough for a log line. */
#define KUBE_ERROR_BODY_PREFIX 200

/* The message of KUBE_ERR_NOMEM: static, so that running out of memory still leaves one. */
static char kube_error_oom[] = "out of memory";

void kube_error_clear(kube_error *err)
{
    free(err->reason);
    if (err->message != kube_error_oom)
        free(err->message);
    *err = (kube_error){0};
}

/* Leaves err as KUBE_ERR_NOMEM. */
static void kube_error_nomem(kube_error *err)
{
    kube_error_clear(err);
    err->kind = KUBE_ERR_NOMEM;
    err->message = kube_error_oom;
}

int kube_error_set(kube_error *err, kube_errkind kind, const char *fmt, ...)
{
    kube_error_clear(err);
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&err->message, fmt, ap);
    va_end(ap);
    if (n < 0) {
        err->message = NULL;
        kube_error_nomem(err);
        return -1;
    }
    err->kind = kind;
    return -1;
}

bool kube_error_is(const kube_error *err, const char *reason)
{
    return err->kind == KUBE_ERR_HTTP && err->reason && strcmp(err->reason, reason) == 0;
}

int kube_error_copy(kube_error *dst, const kube_error *src)
{
    kube_error_clear(dst);
    dst->kind = src->kind;
    dst->http_code = src->http_code;
    dst->retry_after_s = src->retry_after_s;
    if ((src->reason && !(dst->reason = strdup(src->reason))) ||
        (src->message && !(dst->message = strdup(src->message)))) {
        kube_error_nomem(dst);
        return -1;
    }
    return 0;
}

/* The reasons client-go assumes when a server answers without a Status (k8s.io/apimachinery
 * errors.reasonForCode), so kube_error_is() works the same on either kind of answer. */
static const char *kube_error_reason_for(long code)
{
    switch (code) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 405:
        return "MethodNotAllowed";
    case 406:
        return "NotAcceptable";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "RequestEntityTooLarge";
    case 415:
        return "UnsupportedMediaType";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 500:
        return "InternalError";
    case 503:
        return "ServiceUnavailable";
    case 504:
        return "Timeout";
    default:
        return NULL;
    }
}

static const char *kube_error_str(const cJSON *obj, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, key));
    return s && *s ? s : NULL;
}

static bool kube_error_is_status(const cJSON *obj)
{
    const char *kind = kube_error_str(obj, "kind");
    return cJSON_IsObject(obj) && kind && strcmp(kind, "Status") == 0;
}

void kube_error_from_status(kube_error *err, const cJSON *status, long http_code)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
    if (cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 1000)
        http_code = (long)code->valuedouble;
    const char *reason = kube_error_str(status, "reason");
    const char *message = kube_error_str(status, "message");
    if (!reason)
        reason = kube_error_reason_for(http_code);
    if (message)
        kube_error_set(err, KUBE_ERR_HTTP, "%s", message);
    else
        kube_error_set(err, KUBE_ERR_HTTP, "HTTP %ld %s", http_code, reason ? reason : "error");
    if (err->kind != KUBE_ERR_HTTP)
        return;
    err->http_code = http_code;
    if (reason && !(err->reason = strdup(reason)))
        kube_error_nomem(err);
}

/* Quotes the start of a body on one line: control bytes become spaces so a multi-line HTML page
 * does not break log lines. */
static void kube_error_from_text(kube_error *err, long http_code, const char *body, size_t len)
{
    bool cut = len > KUBE_ERROR_BODY_PREFIX;
    size_t n = cut ? KUBE_ERROR_BODY_PREFIX : len;
    while (n && isspace((unsigned char)body[n - 1]))
        n--;
    size_t start = 0;
    while (start < n && isspace((unsigned char)body[start]))
        start++;
    char *text = malloc(n - start + 1);
    if (!text) {
        kube_error_nomem(err);
        return;
    }
    for (size_t i = start; i < n; i++)
        text[i - start] = iscntrl((unsigned char)body[i]) ? ' ' : body[i];
    text[n - start] = '\0';
    const char *reason = kube_error_reason_for(http_code);
    if (n == start)
        kube_error_set(err, KUBE_ERR_HTTP, "HTTP %ld%s%s (empty body)", http_code,
                       reason ? " " : "", reason ? reason : "");
    else
        kube_error_set(err, KUBE_ERR_HTTP, "HTTP %ld: %s%s", http_code, text, cut ? "..." : "");
    free(text);
    if (err->kind != KUBE_ERR_HTTP)
        return;
    err->http_code = http_code;
    if (reason && !(err->reason = strdup(reason)))
        kube_error_nomem(err);
}

void kube_error_from_http(kube_error *err, long http_code, const char *body, size_t len)
{
    cJSON *json = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    if (kube_error_is_status(json))
        kube_error_from_status(err, json, http_code);
    else
        kube_error_from_text(err, http_code, body ? body : "", body ? len : 0);
    cJSON_Delete(json);
}

bool kube_error_retryable(const kube_error *err)
{
    if (err->kind == KUBE_ERR_TRANSPORT)
        return true;
    return err->kind == KUBE_ERR_HTTP && (err->http_code == 429 || err->http_code >= 500);
}

long kube_retry_after_parse(const char *value)
{
    if (!value)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    if (!isdigit((unsigned char)*value))
        return -1;
    errno = 0;
    char *end;
    long s = strtol(value, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (errno || *end)
        return -1;
    return s;
}

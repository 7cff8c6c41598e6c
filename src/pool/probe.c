/* probe: the idle check over the runtime table (api/runtime.h), with two answer readers:
 * llama.cpp's /slots JSON array, and the sum of one Prometheus metric over all its series for
 * vLLM, TGI and SGLang. Everything unreadable is an error, never idle. */
#include "pool/probe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool probe_supported(const char *runtime, const char *idle_endpoint)
{
    const api_runtime *r = api_runtime_find(runtime);
    return r && (r->path || (r->generic && idle_endpoint && *idle_endpoint));
}

int probe_path(const char *runtime, const char *idle_endpoint, const char **path)
{
    const api_runtime *r = api_runtime_find(runtime);
    if (!r)
        return -ENOENT;
    if (r->generic) {
        if (idle_endpoint && idle_endpoint[0] == '/') {
            *path = idle_endpoint;
            return 0;
        }
        return idle_endpoint ? -EINVAL : -ENODATA;
    }
    if (!r->path)
        return -EOPNOTSUPP;
    *path = r->path;
    return 0;
}

const char *probe_path_error(int rc)
{
    switch (rc) {
    case -ENOENT:
        return "unknown runtime has no idle check";
    case -EINVAL:
        return "idle-endpoint annotation must be a path starting with '/'";
    case -ENODATA:
        return "generic runtime without the inference.llmkube.dev/idle-endpoint annotation has no "
               "idle check";
    default:
        return "runtime has no idle check";
    }
}

static probe_verdict probe_slots(const char *body, size_t len, char *msg, size_t msglen)
{
    cJSON *doc = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsArray(doc)) {
        cJSON_Delete(doc);
        snprintf(msg, msglen, "/slots answer is not a JSON array");
        return PROBE_ERROR;
    }
    int busy = 0, n = 0;
    const cJSON *slot;
    cJSON_ArrayForEach(slot, doc)
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(slot, "is_processing");
        /* Fail closed on a slot that does not say (older llama.cpp builds report a numeric
         * "state" instead): read as idle, a busy server would be unloaded. */
        if (!cJSON_IsBool(p)) {
            cJSON_Delete(doc);
            snprintf(msg, msglen, "/slots: slot %d has no boolean is_processing", n);
            return PROBE_ERROR;
        }
        n++;
        busy += cJSON_IsTrue(p);
    }
    cJSON_Delete(doc);
    snprintf(msg, msglen, "%d of %d slots processing", busy, n);
    return busy ? PROBE_BUSY : PROBE_IDLE;
}

/* Sums every sample of metric in Prometheus text format: "name{labels} value [timestamp]". */
static probe_verdict probe_metric(const char *metric, const char *body, size_t len, char *msg,
                                  size_t msglen)
{
    size_t mlen = strlen(metric);
    double sum = 0;
    int samples = 0;
    const char *p = body, *end = body + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if ((size_t)(eol - p) > mlen && memcmp(p, metric, mlen) == 0 &&
            (p[mlen] == '{' || p[mlen] == ' ')) {
            const char *v = p + mlen;
            if (*v == '{') {
                v = memchr(v, '}', (size_t)(eol - v));
                if (!v)
                    goto bad;
                v++;
            }
            char num[64];
            size_t n = (size_t)(eol - v) < sizeof(num) - 1 ? (size_t)(eol - v) : sizeof(num) - 1;
            memcpy(num, v, n);
            num[n] = 0;
            char *stop;
            errno = 0;
            double x = strtod(num, &stop);
            if (stop == num || errno || !isfinite(x))
                goto bad;
            sum += x;
            samples++;
        }
        p = eol + 1;
    }
    if (!samples) {
        snprintf(msg, msglen, "metric %s not found in /metrics", metric);
        return PROBE_ERROR;
    }
    snprintf(msg, msglen, "%s = %g", metric, sum);
    return sum > 0 ? PROBE_BUSY : PROBE_IDLE;
bad:
    snprintf(msg, msglen, "metric %s has an unreadable sample", metric);
    return PROBE_ERROR;
}

probe_verdict probe_judge(const char *runtime, long http_code, const char *body, size_t len,
                          char *msg, size_t msglen)
{
    const api_runtime *r = api_runtime_find(runtime);
    if (!r || (!r->path && !r->generic)) {
        snprintf(msg, msglen, "runtime %s has no idle check", runtime ? runtime : "");
        return PROBE_UNSUPPORTED;
    }
    if (http_code == 0) {
        snprintf(msg, msglen, "no answer: %.*s", (int)(len > 200 ? 200 : len), body ? body : "");
        return PROBE_ERROR;
    }
    if (r->generic) {
        snprintf(msg, msglen, "idle endpoint answered HTTP %ld", http_code);
        return http_code >= 200 && http_code < 300 ? PROBE_IDLE : PROBE_BUSY;
    }
    if (http_code != 200) {
        snprintf(msg, msglen, "%s answered HTTP %ld", r->path, http_code);
        return PROBE_ERROR;
    }
    if (!r->metric)
        return probe_slots(body, len, msg, msglen);
    return probe_metric(r->metric, body, len, msg, msglen);
}

const char *probe_verdict_name(probe_verdict v)
{
    switch (v) {
    case PROBE_IDLE:
        return "Idle";
    case PROBE_BUSY:
        return "Busy";
    case PROBE_ERROR:
        return "Error";
    case PROBE_UNSUPPORTED:
        return "Unsupported";
    }
    return "Unknown";
}

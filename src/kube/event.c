/* event: builds a core/v1 Event (series fields left out: the callers emit on transitions only,
 * so there is nothing to aggregate) and posts it in the object's namespace. */
#include "kube/event.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void kube_event_time(int64_t ms, char out[40])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *kube_event_json(const kube_object_ref *about, const kube_event *ev, int64_t now_ms,
                      uint64_t now_ns)
{
    char name[320], when[40];
    snprintf(name, sizeof(name), "%s.%llx", about->name, (unsigned long long)now_ns);
    kube_event_time(now_ms, when);
    /* Every field or none: out of memory gives NULL, never an Event missing a field. */
    cJSON *o = cJSON_CreateObject(), *meta, *inv, *src;
    bool ok =
        cJSON_AddStringToObject(o, "apiVersion", "v1") &&
        cJSON_AddStringToObject(o, "kind", "Event") &&
        (meta = cJSON_AddObjectToObject(o, "metadata")) &&
        cJSON_AddStringToObject(meta, "name", name) &&
        cJSON_AddStringToObject(meta, "namespace",
                                about->namespace_ ? about->namespace_ : "default") &&
        (inv = cJSON_AddObjectToObject(o, "involvedObject")) &&
        cJSON_AddStringToObject(inv, "apiVersion", about->api_version) &&
        cJSON_AddStringToObject(inv, "kind", about->kind) &&
        (!about->namespace_ || cJSON_AddStringToObject(inv, "namespace", about->namespace_)) &&
        cJSON_AddStringToObject(inv, "name", about->name) &&
        (!about->uid || cJSON_AddStringToObject(inv, "uid", about->uid)) &&
        cJSON_AddStringToObject(o, "type", ev->warning ? "Warning" : "Normal") &&
        cJSON_AddStringToObject(o, "reason", ev->reason) &&
        cJSON_AddStringToObject(o, "message", ev->message ? ev->message : "") &&
        (src = cJSON_AddObjectToObject(o, "source")) &&
        cJSON_AddStringToObject(src, "component", ev->component) &&
        cJSON_AddStringToObject(o, "reportingComponent", ev->component) &&
        cJSON_AddStringToObject(o, "reportingInstance",
                                ev->instance ? ev->instance : ev->component) &&
        cJSON_AddStringToObject(o, "firstTimestamp", when) &&
        cJSON_AddStringToObject(o, "lastTimestamp", when) && cJSON_AddNumberToObject(o, "count", 1);
    char *out = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return out;
}

kube_call *kube_event_post(kube_client *c, const kube_object_ref *about, const kube_event *ev,
                           kube_done_fn done, void *ud, kube_error *err)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    /* The name must be unique per object: nanoseconds of wall time, as client-go does. */
    uint64_t ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    char *body = kube_event_json(about, ev, (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000, ns);
    char *path = kube_path("", "v1", about->namespace_ ? about->namespace_ : "default", "events",
                           NULL, NULL);
    kube_call *call = NULL;
    if (!body || !path) {
        kube_error_set(err, KUBE_ERR_NOMEM, "event: out of memory");
    } else {
        kube_request req = {.method = KUBE_POST, .path = path, .body = body, .max_retries = 2};
        call = kube_call_start(c, &req, done, ud, err);
    }
    free(body);
    free(path);
    return call;
}

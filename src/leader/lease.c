/* lease: the rules of taking, keeping and releasing a Lease, kept pure (see lease.h). */
#include "leader/lease.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const cJSON *lease_get(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const char *lease_str(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = lease_get(obj, a, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t lease_int(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = lease_get(obj, a, b);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

int lease_record_read(const cJSON *lease, lease_record *out)
{
    *out = (lease_record){0};
    if (!cJSON_IsObject(lease))
        return -EINVAL;
    out->resource_version = lease_str(lease, "metadata", "resourceVersion");
    if (!out->resource_version || !*out->resource_version)
        return -EINVAL;
    out->holder = lease_str(lease, "spec", "holderIdentity");
    out->duration_s = lease_int(lease, "spec", "leaseDurationSeconds");
    out->transitions = lease_int(lease, "spec", "leaseTransitions");
    out->acquire_time = lease_str(lease, "spec", "acquireTime");
    return 0;
}

lease_step lease_decide(const lease_record *rec, const char *me, int64_t observed_ms,
                        int64_t now_ms)
{
    if (!rec)
        return LEASE_CREATE;
    if (!rec->holder || !*rec->holder)
        return LEASE_TAKE;
    if (strcmp(rec->holder, me) == 0)
        return LEASE_RENEW;
    /* As client-go: another holder is trusted for leaseDurationSeconds after we last saw it move.
     */
    if (now_ms - observed_ms < rec->duration_s * 1000)
        return LEASE_WAIT;
    return LEASE_TAKE;
}

char *lease_body(const char *ns, const char *name, const char *rv, const lease_spec *spec)
{
    cJSON *o = cJSON_CreateObject(), *md = NULL, *sp = NULL;
    bool ok =
        cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") &&
        cJSON_AddStringToObject(o, "kind", "Lease") &&
        (md = cJSON_AddObjectToObject(o, "metadata")) &&
        (sp = cJSON_AddObjectToObject(o, "spec")) && cJSON_AddStringToObject(md, "name", name) &&
        cJSON_AddStringToObject(md, "namespace", ns) &&
        (!rv || cJSON_AddStringToObject(md, "resourceVersion", rv)) &&
        cJSON_AddStringToObject(sp, "holderIdentity", spec->holder) &&
        cJSON_AddNumberToObject(sp, "leaseDurationSeconds", (double)spec->duration_s) &&
        cJSON_AddNumberToObject(sp, "leaseTransitions", (double)spec->transitions) &&
        (!spec->acquire_time || cJSON_AddStringToObject(sp, "acquireTime", spec->acquire_time)) &&
        (!spec->renew_time || cJSON_AddStringToObject(sp, "renewTime", spec->renew_time));
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

void lease_time_format(int64_t wall_us, char out[32])
{
    time_t t = (time_t)(wall_us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06dZ", (int)(wall_us % 1000000));
}

/* scale: spec.replicas is an int32 in the member's schema; a cached value that is not a whole
 * number in range is not trusted as a test value, and the resourceVersion guards instead. */
#include "pool/scale.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Appends {"op": op, "path": path, "value": value} to ops (taking value). false when out of
 * memory (or ops or value is NULL). */
static bool scale_op(cJSON *ops, const char *op, const char *path, cJSON *value)
{
    cJSON *o = ops && value ? cJSON_CreateObject() : NULL;
    if (!o || !cJSON_AddItemToArray(ops, o)) {
        cJSON_Delete(o);
        cJSON_Delete(value);
        return false;
    }
    if (!cJSON_AddStringToObject(o, "op", op) || !cJSON_AddStringToObject(o, "path", path) ||
        !cJSON_AddItemToObject(o, "value", value)) {
        cJSON_Delete(value);
        return false;
    }
    return true;
}

char *pool_scale_patch(const cJSON *isvc, int32_t replicas, bool *json_patch)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(isvc, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(isvc, "spec"), "replicas");
    char *body = NULL;
    if (cJSON_IsString(uid) && *uid->valuestring && cJSON_IsNumber(cur) &&
        cur->valuedouble == floor(cur->valuedouble) && cur->valuedouble >= 0 &&
        cur->valuedouble <= INT32_MAX) {
        /* The uid test: the same object, not one deleted and created again under its name. */
        *json_patch = true;
        cJSON *ops = cJSON_CreateArray();
        bool ok = scale_op(ops, "test", "/metadata/uid", cJSON_CreateString(uid->valuestring)) &&
                  scale_op(ops, "test", "/spec/replicas", cJSON_CreateNumber(cur->valuedouble)) &&
                  scale_op(ops, "replace", "/spec/replicas", cJSON_CreateNumber(replicas));
        if (ok)
            body = cJSON_PrintUnformatted(ops);
        cJSON_Delete(ops);
        return body;
    }
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    if (!cJSON_IsString(rv) || !*rv->valuestring)
        return NULL;
    *json_patch = false;
    /* Built with cJSON: the resourceVersion is opaque and is escaped like any string. */
    cJSON *patch = cJSON_CreateObject();
    cJSON *pm = cJSON_AddObjectToObject(patch, "metadata");
    cJSON *sp = cJSON_AddObjectToObject(patch, "spec");
    if (pm && sp && cJSON_AddStringToObject(pm, "resourceVersion", rv->valuestring) &&
        cJSON_AddNumberToObject(sp, "replicas", replicas))
        body = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return body;
}

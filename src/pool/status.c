/* status: the one place that knows the ModelPool status's JSON field names. The patch always
 * carries every field (null when empty) so that a merge patch replaces the status as a whole. */
#include "pool/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *pool_json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int pool_time_parse(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    if (!s)
        return -1;
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return -1;
    if (*rest == '.')
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            ;
    if (strcmp(rest, "Z") != 0)
        return -1;
    *ms = (int64_t)timegm(&tm) * 1000;
    return 0;
}

void pool_time_format(int64_t ms, char out[32])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int pool_status_read(const cJSON *obj, plan_status *out)
{
    *out = (plan_status){0};
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
    if (!cJSON_IsObject(st))
        return 0;
    out->phase = pool_json_str(st, "phase");
    out->resident_member = pool_json_str(st, "residentMember");
    out->pending_member = pool_json_str(st, "pendingMember");
    const cJSON *og = cJSON_GetObjectItemCaseSensitive(st, "observedGeneration");
    if (cJSON_IsNumber(og))
        out->observed_generation = (int64_t)og->valuedouble;

    const cJSON *members = cJSON_GetObjectItemCaseSensitive(st, "members");
    int n = cJSON_IsArray(members) ? cJSON_GetArraySize(members) : 0;
    if (n > 0 && !(out->members = calloc((size_t)n, sizeof(*out->members))))
        return -ENOMEM;
    const cJSON *m;
    cJSON_ArrayForEach(m, (n > 0 ? members : NULL))
    {
        char *name = pool_json_str(m, "name");
        if (!name)
            continue;
        plan_member_status *ms = &out->members[out->n_members++];
        ms->name = name;
        ms->phase = pool_json_str(m, "phase");
        ms->resident = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "resident"));
        ms->releasing = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "releasing"));
    }

    const cJSON *conds = cJSON_GetObjectItemCaseSensitive(st, "conditions");
    n = cJSON_IsArray(conds) ? cJSON_GetArraySize(conds) : 0;
    if (n > 0 && !(out->conditions = calloc((size_t)n, sizeof(*out->conditions)))) {
        pool_status_release(out);
        return -ENOMEM;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, (n > 0 ? conds : NULL))
    {
        char *type = pool_json_str(c, "type");
        if (!type)
            continue;
        plan_condition *pc = &out->conditions[out->n_conditions++];
        pc->type = type;
        pc->status = pool_json_str(c, "status");
        pc->reason = pool_json_str(c, "reason");
        pc->message = pool_json_str(c, "message");
        if (pool_time_parse(pool_json_str(c, "lastTransitionTime"), &pc->last_transition_ms) < 0)
            pc->last_transition_ms = 0;
    }
    return 0;
}

void pool_status_release(plan_status *s)
{
    free(s->members);
    free(s->conditions);
    *s = (plan_status){0};
}

static cJSON *pool_str_or_null(const char *s)
{
    return s && *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *pool_status_json(const plan_status *s)
{
    cJSON *st = cJSON_CreateObject();
    cJSON_AddItemToObject(st, "phase", pool_str_or_null(s->phase));
    cJSON_AddItemToObject(st, "residentMember", pool_str_or_null(s->resident_member));
    cJSON_AddItemToObject(st, "pendingMember", pool_str_or_null(s->pending_member));
    cJSON_AddNumberToObject(st, "observedGeneration", (double)s->observed_generation);
    cJSON *members = cJSON_AddArrayToObject(st, "members");
    for (size_t i = 0; members && i < s->n_members; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "name", s->members[i].name);
        if (s->members[i].phase && *s->members[i].phase)
            cJSON_AddStringToObject(m, "phase", s->members[i].phase);
        cJSON_AddBoolToObject(m, "resident", s->members[i].resident);
        if (s->members[i].releasing) /* absent means false: the seed schema's members read on */
            cJSON_AddBoolToObject(m, "releasing", true);
        cJSON_AddItemToArray(members, m);
    }
    cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
    for (size_t i = 0; conds && i < s->n_conditions; i++) {
        const plan_condition *pc = &s->conditions[i];
        char when[32];
        pool_time_format(pc->last_transition_ms, when);
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "type", pc->type);
        cJSON_AddStringToObject(c, "status", pc->status ? pc->status : "Unknown");
        cJSON_AddStringToObject(c, "reason", pc->reason ? pc->reason : "Unknown");
        cJSON_AddStringToObject(c, "message", pc->message ? pc->message : "");
        cJSON_AddStringToObject(c, "lastTransitionTime", when);
        cJSON_AddNumberToObject(c, "observedGeneration", (double)s->observed_generation);
        cJSON_AddItemToArray(conds, c);
    }
    return st;
}

char *pool_status_patch(const plan_status *s, const char *resource_version)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    if (meta && resource_version)
        cJSON_AddStringToObject(meta, "resourceVersion", resource_version);
    cJSON_AddItemToObject(root, "status", pool_status_json(s));
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

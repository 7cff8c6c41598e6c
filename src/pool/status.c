/* status: the ModelPool status patch the operator writes (pool/records.c reads the status with
 * the same field names). The patch always carries every field (null when empty) so that a merge
 * patch replaces the status as a whole. */
#include "pool/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

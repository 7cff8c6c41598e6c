/* records: each decoder runs twice over the object, first measuring (pack.base NULL) and then
 * copying into one block sized by that first pass, so a record costs one malloc and no cJSON
 * node survives the informer boundary. */
#include "api/records.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

typedef struct rec_pack {
    char *base; /* NULL while measuring */
    size_t used;
} rec_pack;

static const cJSON *rec_get(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const char *rec_str(const cJSON *v)
{
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A copy of s in the block (NULL stays NULL; NULL too while measuring). */
static char *rec_pack_str(rec_pack *p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = p->base ? p->base + p->used : NULL;
    if (d)
        memcpy(d, s, n);
    p->used += n;
    return d;
}

/* Room for n elements of size bytes, aligned for pointers and int64 (NULL when measuring or n 0).
 */
static void *rec_pack_array(rec_pack *p, size_t n, size_t size)
{
    p->used = (p->used + 7) & ~(size_t)7;
    void *d = p->base && n ? p->base + p->used : NULL;
    p->used += n * size;
    return d;
}

/* Values from a small vocabulary (phases, condition types, statuses and reasons, runtimes, swap
 * policies): a record points at the static copy here instead of holding its own, some 250 bytes a
 * pool. Anything else is copied as usual. */
static const char *const rec_words[] = {"Adopted",
                                        "ContainerCreating",
                                        "Creating",
                                        "CrashLoopBackOff",
                                        "DefaultNotMember",
                                        "Degraded",
                                        "Draining",
                                        "DuplicateMember",
                                        "EmptyMemberName",
                                        "ErrImagePull",
                                        "Failed",
                                        "False",
                                        "Idle",
                                        "IdleCheckFailed",
                                        "IdleCheckUnsupported",
                                        "ImagePullBackOff",
                                        "InvalidSwapBudget",
                                        "Loading",
                                        "MemberInMultiplePools",
                                        "MembersValid",
                                        "MissingMembers",
                                        "NoMembers",
                                        "NoResident",
                                        "NoRunningPod",
                                        "NotDeferred",
                                        "NotSwapping",
                                        "Pending",
                                        "PendingNotMember",
                                        "PodsBusy",
                                        "Progressing",
                                        "Ready",
                                        "RequestDropped",
                                        "RequestIgnored",
                                        "RequestSuperseded",
                                        "Resident",
                                        "ResidentNotMember",
                                        "SlotAllocated",
                                        "SlotFree",
                                        "Stopped",
                                        "Suspended",
                                        "SwapCancelled",
                                        "SwapCompleted",
                                        "SwapDeferred",
                                        "SwapInProgress",
                                        "SwapStarted",
                                        "Swapping",
                                        "TargetFailed",
                                        "TargetNotReady",
                                        "TargetReady",
                                        "TargetSuspended",
                                        "TargetWaitingForGPU",
                                        "TooManyReplicas",
                                        "True",
                                        "Unknown",
                                        "Unschedulable",
                                        "UnsupportedSwapPolicy",
                                        "Valid",
                                        "WaitingForGPU",
                                        "WriteRefused",
                                        "generic",
                                        "llamacpp",
                                        "llamacpp-router",
                                        "personaplex",
                                        "sglang",
                                        "sticky",
                                        "tgi",
                                        "vllm"};

/* The static copy of s, or (when it is no known word) a copy in the block; NULL for NULL. The
 * plan's structs say char * because a plan owns its own result; a record's strings, static or
 * not, are only ever read and go with the record's block. */
static char *rec_pack_word(rec_pack *p, const char *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < sizeof(rec_words) / sizeof(rec_words[0]); i++)
        if (rec_words[i][0] == s[0] && strcmp(rec_words[i], s) == 0)
            return (char *)rec_words[i];
    return rec_pack_str(p, s);
}

/* Runs fill twice: measure, then copy into a block of head bytes (the struct) plus what it
 * measured. The struct is filled only on the second pass. */
static void *rec_build(const cJSON *obj, size_t head,
                       void (*fill)(const cJSON *, void *, rec_pack *), int *err)
{
    if (!rec_str(rec_get(obj, "metadata", "name"))) {
        *err = -EINVAL;
        return NULL;
    }
    char scratch[256];
    rec_pack p = {0};
    fill(obj, scratch, &p);
    size_t at = (head + 7) & ~(size_t)7;
    char *block = calloc(1, at + p.used);
    if (!block) {
        *err = -ENOMEM;
        return NULL;
    }
    p = (rec_pack){.base = block + at};
    fill(obj, block, &p);
    return block;
}

/* The measuring pass writes its struct into scratch and never reads it back; it must fit. */
_Static_assert(sizeof(api_pod) <= 256 && sizeof(api_isvc) <= 256 && sizeof(api_pool) <= 256 &&
                   sizeof(api_router_lease) <= 256,
               "a record's struct fits the measuring scratch");

static int32_t rec_int(const cJSON *v, int32_t absent)
{
    if (!cJSON_IsNumber(v) || isnan(v->valuedouble))
        return absent;
    if (v->valuedouble >= INT32_MAX)
        return INT32_MAX;
    if (v->valuedouble <= INT32_MIN)
        return INT32_MIN;
    return (int32_t)v->valuedouble;
}

static void rec_meta(const cJSON *obj, rec_pack *p, const char **name, const char **ns,
                     const char **uid, const char **rv)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    *name = rec_pack_str(p, rec_str(rec_get(meta, "name", NULL)));
    *ns = rec_pack_str(p, rec_str(rec_get(meta, "namespace", NULL)));
    *uid = rec_pack_str(p, rec_str(rec_get(meta, "uid", NULL)));
    *rv = rec_pack_str(p, rec_str(rec_get(meta, "resourceVersion", NULL)));
}

/* ---- times ---- */

int api_time_parse(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    if (!s)
        return -EINVAL;
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return -EINVAL;
    if (*rest == '.')
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            ;
    if (strcmp(rest, "Z") != 0)
        return -EINVAL;
    *ms = (int64_t)timegm(&tm) * 1000;
    return 0;
}

void api_time_format(int64_t ms, char out[32])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- Pod ---- */

static api_pod_phase rec_pod_phase(const char *p)
{
    if (!p || strcmp(p, "Pending") == 0)
        return API_POD_PENDING;
    if (strcmp(p, "Running") == 0)
        return API_POD_RUNNING;
    if (strcmp(p, "Succeeded") == 0)
        return API_POD_SUCCEEDED;
    if (strcmp(p, "Failed") == 0)
        return API_POD_FAILED;
    return API_POD_UNKNOWN;
}

/* Where the server listens, as the Pod spec says: the port named http, else the first port the
 * first container with ports declares; 0 when the spec names none. */
static int32_t rec_pod_port(const cJSON *pod)
{
    const cJSON *c, *port;
    int32_t first = 0;
    cJSON_ArrayForEach(c, rec_get(pod, "spec", "containers"))
    {
        cJSON_ArrayForEach(port, cJSON_GetObjectItemCaseSensitive(c, "ports"))
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(port, "containerPort");
            if (!cJSON_IsNumber(n) || !(n->valuedouble >= 1 && n->valuedouble <= 65535))
                continue;
            const char *name = rec_str(cJSON_GetObjectItemCaseSensitive(port, "name"));
            if (name && strcmp(name, "http") == 0)
                return (int32_t)n->valuedouble;
            if (first == 0)
                first = (int32_t)n->valuedouble;
        }
    }
    return first;
}

static void rec_pod_fill(const cJSON *o, void *out, rec_pack *p)
{
    api_pod *r = out;
    rec_meta(o, p, &r->name, &r->ns, &r->uid, &r->rv);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    r->member = rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(
                                    rec_get(meta, "labels", NULL), API_SERVICE_LABEL)));
    r->ip = rec_pack_str(p, rec_str(rec_get(o, "status", "podIP")));
    r->port = rec_pod_port(o);
    r->phase = rec_pod_phase(rec_str(rec_get(o, "status", "phase")));
    const cJSON *del = rec_get(meta, "deletionTimestamp", NULL);
    r->terminating = del && !cJSON_IsNull(del);
    r->running = false;
    const char *waiting = NULL;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, rec_get(o, "status", "containerStatuses"))
    {
        if (cJSON_IsObject(rec_get(cs, "state", "running")))
            r->running = true;
        if (!waiting)
            waiting = rec_str(rec_get(rec_get(cs, "state", "waiting"), "reason", NULL));
    }
    r->ready = false;
    cJSON_ArrayForEach(cs, rec_get(o, "status", "conditions"))
    {
        const char *type = rec_str(rec_get(cs, "type", NULL));
        const char *status = rec_str(rec_get(cs, "status", NULL));
        if (type && status && strcmp(type, "Ready") == 0)
            r->ready = strcmp(status, "True") == 0;
        else if (!waiting && type && status && strcmp(type, "PodScheduled") == 0 &&
                 strcmp(status, "False") == 0)
            waiting = rec_str(rec_get(cs, "reason", NULL));
    }
    r->waiting = rec_pack_word(p, waiting);
}

api_pod *api_pod_decode(const cJSON *obj, int *err)
{
    return rec_build(obj, sizeof(api_pod), rec_pod_fill, err);
}

/* ---- InferenceService ---- */

static void rec_isvc_fill(const cJSON *o, void *out, rec_pack *p)
{
    api_isvc *r = out;
    rec_meta(o, p, &r->name, &r->ns, &r->uid, &r->rv);
    r->phase = rec_pack_word(p, rec_str(rec_get(o, "status", "phase")));
    r->runtime = rec_pack_word(p, rec_str(rec_get(o, "spec", "runtime")));
    const cJSON *ann = rec_get(o, "metadata", "annotations");
    r->idle_endpoint =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_IDLE_ANNOTATION)));
    r->served_model =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_SERVED_ANNOTATION)));
    r->aliases =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_ALIASES_ANNOTATION)));
    const cJSON *rep = rec_get(o, "spec", "replicas");
    r->replicas = rec_int(rep, API_REPLICAS_UNSET);
    r->replicas_exact = cJSON_IsNumber(rep) && rep->valuedouble == floor(rep->valuedouble) &&
                        rep->valuedouble >= 0 && rep->valuedouble <= INT32_MAX;
    r->endpoint_port = rec_int(rec_get(rec_get(o, "spec", "endpoint"), "port", NULL), 0);
    r->container_port = rec_int(rec_get(o, "spec", "containerPort"), 0);
}

api_isvc *api_isvc_decode(const cJSON *obj, int *err)
{
    return rec_build(obj, sizeof(api_isvc), rec_isvc_fill, err);
}

int32_t api_isvc_replicas(const api_isvc *isvc)
{
    return isvc->replicas == API_REPLICAS_UNSET ? 1 : isvc->replicas;
}

/* ---- ModelPool ---- */

static size_t rec_count_named(const cJSON *arr, const char *field)
{
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, (cJSON_IsArray(arr) ? arr : NULL))
    {
        n += rec_str(rec_get(e, field, NULL)) != NULL;
    }
    return n;
}

static void rec_status_fill(const cJSON *st, api_status *s, rec_pack *p)
{
    *s = (api_status){0};
    if (!cJSON_IsObject(st))
        return;
    s->phase = rec_pack_word(p, rec_str(rec_get(st, "phase", NULL)));
    s->resident_member = rec_pack_str(p, rec_str(rec_get(st, "residentMember", NULL)));
    s->pending_member = rec_pack_str(p, rec_str(rec_get(st, "pendingMember", NULL)));
    const cJSON *og = rec_get(st, "observedGeneration", NULL);
    if (cJSON_IsNumber(og) && og->valuedouble >= (double)INT64_MIN &&
        og->valuedouble < (double)INT64_MAX)
        s->observed_generation = (int64_t)og->valuedouble;

    const cJSON *members = rec_get(st, "members", NULL), *m;
    size_t n = rec_count_named(members, "name");
    s->members = rec_pack_array(p, n, sizeof(*s->members));
    cJSON_ArrayForEach(m, (n ? members : NULL))
    {
        const char *name = rec_str(rec_get(m, "name", NULL));
        if (!name)
            continue;
        api_member_status ms = {
            .name = rec_pack_str(p, name),
            .phase = rec_pack_word(p, rec_str(rec_get(m, "phase", NULL))),
            .resident = cJSON_IsTrue(rec_get(m, "resident", NULL)),
            .releasing = cJSON_IsTrue(rec_get(m, "releasing", NULL)),
        };
        if (s->members)
            s->members[s->n_members] = ms;
        s->n_members++;
    }

    const cJSON *conds = rec_get(st, "conditions", NULL), *c;
    n = rec_count_named(conds, "type");
    s->conditions = rec_pack_array(p, n, sizeof(*s->conditions));
    cJSON_ArrayForEach(c, (n ? conds : NULL))
    {
        const char *type = rec_str(rec_get(c, "type", NULL));
        if (!type)
            continue;
        api_condition pc = {
            .type = rec_pack_word(p, type),
            .status = rec_pack_word(p, rec_str(rec_get(c, "status", NULL))),
            .reason = rec_pack_word(p, rec_str(rec_get(c, "reason", NULL))),
            .message = rec_pack_str(p, rec_str(rec_get(c, "message", NULL))),
        };
        if (api_time_parse(rec_str(rec_get(c, "lastTransitionTime", NULL)),
                           &pc.last_transition_ms) < 0)
            pc.last_transition_ms = 0;
        if (s->conditions)
            s->conditions[s->n_conditions] = pc;
        s->n_conditions++;
    }
}

static void rec_pool_fill(const cJSON *o, void *out, rec_pack *p)
{
    api_pool *r = out;
    rec_meta(o, p, &r->name, &r->ns, &r->uid, &r->rv);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *gen = rec_get(meta, "generation", NULL);
    r->generation = cJSON_IsNumber(gen) && gen->valuedouble >= (double)INT64_MIN &&
                            gen->valuedouble < (double)INT64_MAX
                        ? (int64_t)gen->valuedouble
                        : 0;
    const cJSON *ann = rec_get(meta, "annotations", NULL);
    r->requested =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_REQUEST_ANNOTATION)));
    r->withdrawn =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_WITHDRAW_ANNOTATION)));
    r->waiting =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_WAITING_ANNOTATION)));
    r->unload_after = rec_pack_str(
        p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_UNLOAD_AFTER_ANNOTATION)));
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    r->default_member = rec_pack_str(p, rec_str(rec_get(spec, "default", NULL)));
    r->swap_budget = rec_pack_str(p, rec_str(rec_get(spec, "swapBudget", NULL)));
    r->swap_policy = rec_pack_word(p, rec_str(rec_get(spec, "swapPolicy", NULL)));
    const cJSON *members = rec_get(spec, "members", NULL), *m;
    size_t n = cJSON_IsArray(members) ? (size_t)cJSON_GetArraySize(members) : 0;
    const char **names = rec_pack_array(p, n, sizeof(*names));
    r->members = names;
    r->n_members = 0;
    cJSON_ArrayForEach(m, (n ? members : NULL))
    {
        const char *name = rec_pack_str(p, rec_str(rec_get(m, "inferenceServiceRef", "name")));
        if (names)
            names[r->n_members] = name;
        r->n_members++;
    }
    rec_status_fill(cJSON_GetObjectItemCaseSensitive(o, "status"), &r->status, p);
}

api_pool *api_pool_decode(const cJSON *obj, int *err)
{
    return rec_build(obj, sizeof(api_pool), rec_pool_fill, err);
}

/* ---- a router's Lease ---- */

static void rec_router_lease_fill(const cJSON *o, void *out, rec_pack *p)
{
    api_router_lease *r = out;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    r->name = rec_pack_str(p, rec_str(rec_get(meta, "name", NULL)));
    r->ns = rec_pack_str(p, rec_str(rec_get(meta, "namespace", NULL)));
    r->rv = rec_pack_str(p, rec_str(rec_get(meta, "resourceVersion", NULL)));
    int32_t d = rec_int(rec_get(o, "spec", "leaseDurationSeconds"), 0);
    r->duration_s = d > 0 ? d : 0;
    const cJSON *ann = rec_get(meta, "annotations", NULL);
    r->fenced =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_FENCED_ANNOTATION)));
    r->fronts =
        rec_pack_str(p, rec_str(cJSON_GetObjectItemCaseSensitive(ann, API_FRONTS_ANNOTATION)));
}

api_router_lease *api_router_lease_decode(const cJSON *obj, int *err)
{
    return rec_build(obj, sizeof(api_router_lease), rec_router_lease_fill, err);
}

/* ---- codecs ---- */

static void *rec_pod_codec_decode(cJSON **obj, void *ud, int *err)
{
    (void)ud;
    return api_pod_decode(*obj, err);
}

static void *rec_isvc_codec_decode(cJSON **obj, void *ud, int *err)
{
    (void)ud;
    return api_isvc_decode(*obj, err);
}

static void *rec_pool_codec_decode(cJSON **obj, void *ud, int *err)
{
    (void)ud;
    return api_pool_decode(*obj, err);
}

static void *rec_router_lease_codec_decode(cJSON **obj, void *ud, int *err)
{
    (void)ud;
    return api_router_lease_decode(*obj, err);
}

static const char *rec_pod_version(const void *rec)
{
    return ((const api_pod *)rec)->rv;
}

static const char *rec_isvc_version(const void *rec)
{
    return ((const api_isvc *)rec)->rv;
}

static const char *rec_pool_version(const void *rec)
{
    return ((const api_pool *)rec)->rv;
}

static const char *rec_router_lease_version(const void *rec)
{
    return ((const api_router_lease *)rec)->rv;
}

const store_codec api_pod_codec = {rec_pod_codec_decode, free, rec_pod_version, NULL, true};
const store_codec api_isvc_codec = {rec_isvc_codec_decode, free, rec_isvc_version, NULL, true};
const store_codec api_pool_codec = {rec_pool_codec_decode, free, rec_pool_version, NULL, true};
const store_codec api_router_lease_codec = {rec_router_lease_codec_decode, free,
                                            rec_router_lease_version, NULL, true};

/* ---- indexes ---- */

static int rec_emit_ns(store_index_out *out, const char *ns, const char *name)
{
    char *v = NULL;
    if (asprintf(&v, "%s/%s", ns ? ns : "", name) < 0)
        return -ENOMEM;
    int rc = store_index_emit(out, v);
    free(v);
    return rc;
}

int api_index_pod_service(const void *rec, store_index_out *out, void *ud)
{
    (void)ud;
    const api_pod *pod = rec;
    return pod->member ? rec_emit_ns(out, pod->ns, pod->member) : 0;
}

int api_index_pool_members(const void *rec, store_index_out *out, void *ud)
{
    (void)ud;
    const api_pool *pool = rec;
    for (size_t i = 0; i < pool->n_members; i++) {
        const char *name = pool->members[i];
        if (name && *name) {
            int rc = rec_emit_ns(out, pool->ns, name);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static bool rec_listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0)
            return true;
    return false;
}

size_t api_removed_names(const api_pool *pool, const char **names)
{
    const api_status *st = &pool->status;
    size_t n = 0;
    for (size_t i = 0; i < st->n_members + 2; i++) {
        const char *name = i < st->n_members    ? st->members[i].name
                           : i == st->n_members ? st->resident_member
                                                : st->pending_member;
        if (name && *name && !rec_listed(pool->members, pool->n_members, name) &&
            !rec_listed(names, n, name))
            names[n++] = name;
    }
    return n;
}

int api_index_pool_removed(const void *rec, store_index_out *out, void *ud)
{
    (void)ud;
    const api_pool *pool = rec;
    if (pool->status.n_members == 0 && !pool->status.resident_member &&
        !pool->status.pending_member)
        return 0;
    const char **names = calloc(API_REMOVED_MAX(pool), sizeof(*names));
    if (!names)
        return -ENOMEM;
    size_t n = api_removed_names(pool, names);
    int rc = 0;
    for (size_t i = 0; rc >= 0 && i < n; i++)
        rc = rec_emit_ns(out, pool->ns, names[i]);
    free(names);
    return rc < 0 ? rc : 0;
}

/* ---- patches ---- */

const char *api_answer_version(const cJSON *body)
{
    return rec_str(rec_get(rec_get(body, "metadata", NULL), "resourceVersion", NULL));
}

/* Appends {"op": op, "path": path, "value": value} to ops (taking value; none when NULL). false
 * when out of memory (or ops is NULL). */
static bool rec_op(cJSON *ops, const char *op, const char *path, cJSON *value, bool has_value)
{
    cJSON *o = ops && (value || !has_value) ? cJSON_CreateObject() : NULL;
    if (!o || !cJSON_AddItemToArray(ops, o)) {
        cJSON_Delete(o);
        cJSON_Delete(value);
        return false;
    }
    if (!cJSON_AddStringToObject(o, "op", op) || !cJSON_AddStringToObject(o, "path", path) ||
        (has_value && !cJSON_AddItemToObject(o, "value", value))) {
        cJSON_Delete(value);
        return false;
    }
    return true;
}

char *api_scale_patch(const api_isvc *isvc, int32_t replicas, bool *json_patch)
{
    char *body = NULL;
    if (isvc->uid && *isvc->uid && isvc->replicas_exact) {
        /* The uid test: the same object, not one deleted and created again under its name. */
        *json_patch = true;
        cJSON *ops = cJSON_CreateArray();
        bool ok = rec_op(ops, "test", "/metadata/uid", cJSON_CreateString(isvc->uid), true) &&
                  rec_op(ops, "test", "/spec/replicas", cJSON_CreateNumber(isvc->replicas), true) &&
                  rec_op(ops, "replace", "/spec/replicas", cJSON_CreateNumber(replicas), true);
        if (ok)
            body = cJSON_PrintUnformatted(ops);
        cJSON_Delete(ops);
        return body;
    }
    if (!isvc->rv || !*isvc->rv)
        return NULL;
    *json_patch = false;
    /* Built with cJSON: the resourceVersion is opaque and is escaped like any string. */
    cJSON *patch = cJSON_CreateObject();
    cJSON *pm = cJSON_AddObjectToObject(patch, "metadata");
    cJSON *sp = cJSON_AddObjectToObject(patch, "spec");
    if (pm && sp && cJSON_AddStringToObject(pm, "resourceVersion", isvc->rv) &&
        cJSON_AddNumberToObject(sp, "replicas", replicas))
        body = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return body;
}

static char *api_annotation_clear_patch(const char *path, const char *member)
{
    cJSON *ops = cJSON_CreateArray();
    char *body = NULL;
    if (rec_op(ops, "test", path, cJSON_CreateString(member), true) &&
        rec_op(ops, "remove", path, NULL, false))
        body = cJSON_PrintUnformatted(ops);
    cJSON_Delete(ops);
    return body;
}

/* The annotations' names as JSON pointer tokens ('/' is "~1"). */
char *api_request_clear_patch(const char *member)
{
    return api_annotation_clear_patch("/metadata/annotations/modelpool-operator.dev~1request",
                                      member);
}

char *api_withdraw_clear_patch(const char *member)
{
    return api_annotation_clear_patch("/metadata/annotations/modelpool-operator.dev~1withdraw",
                                      member);
}

/* The merge patch that sets the pool's annotation name to value (NULL: removes it), with
 * resource_version (if not NULL) as the precondition. NULL when out of memory. */
static char *api_annotation_patch(const char *name, const char *value, const char *resource_version)
{
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(patch, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    char *body = NULL;
    if (ann &&
        (value ? cJSON_AddStringToObject(ann, name, value) != NULL
               : cJSON_AddNullToObject(ann, name) != NULL) &&
        (!resource_version || cJSON_AddStringToObject(meta, "resourceVersion", resource_version)))
        body = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return body;
}

char *api_withdraw_patch(const char *member, bool untaken, const char *resource_version)
{
    return untaken ? api_annotation_patch(API_REQUEST_ANNOTATION, NULL, resource_version)
                   : api_annotation_patch(API_WITHDRAW_ANNOTATION, member, resource_version);
}

char *api_request_set_patch(const char *member, const char *resource_version)
{
    return api_annotation_patch(API_REQUEST_ANNOTATION, member, resource_version);
}

char *api_waiting_patch(const char *value, const char *resource_version)
{
    return resource_version ? api_annotation_patch(API_WAITING_ANNOTATION, value, resource_version)
                            : NULL;
}

/* ---- the status patch: every field (null when empty), so that a merge patch replaces the status
 * as a whole ---- */

static cJSON *api_str_or_null(const char *s)
{
    return s && *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* Adds item under key; false, with item freed, when either is missing or the key's copy fails. */
static bool api_add(cJSON *obj, const char *key, cJSON *item)
{
    if (obj && item && cJSON_AddItemToObject(obj, key, item))
        return true;
    cJSON_Delete(item);
    return false;
}

/* The status as JSON; NULL when out of memory (never a status missing a field). */
static cJSON *api_status_json(const api_status *s)
{
    cJSON *st = cJSON_CreateObject();
    bool ok = api_add(st, "phase", api_str_or_null(s->phase)) &&
              api_add(st, "residentMember", api_str_or_null(s->resident_member)) &&
              api_add(st, "pendingMember", api_str_or_null(s->pending_member)) &&
              cJSON_AddNumberToObject(st, "observedGeneration", (double)s->observed_generation);
    cJSON *members = ok ? cJSON_AddArrayToObject(st, "members") : NULL;
    ok = members != NULL;
    for (size_t i = 0; ok && i < s->n_members; i++) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddItemToArray(members, m) &&
             cJSON_AddStringToObject(m, "name", s->members[i].name) &&
             (!s->members[i].phase || !*s->members[i].phase ||
              cJSON_AddStringToObject(m, "phase", s->members[i].phase)) &&
             cJSON_AddBoolToObject(m, "resident", s->members[i].resident) &&
             /* absent means false: the seed schema's members read on */
             (!s->members[i].releasing || cJSON_AddBoolToObject(m, "releasing", true));
    }
    cJSON *conds = ok ? cJSON_AddArrayToObject(st, "conditions") : NULL;
    ok = conds != NULL;
    for (size_t i = 0; ok && i < s->n_conditions; i++) {
        const api_condition *pc = &s->conditions[i];
        char when[32];
        api_time_format(pc->last_transition_ms, when);
        cJSON *c = cJSON_CreateObject();
        ok = c && cJSON_AddItemToArray(conds, c) && cJSON_AddStringToObject(c, "type", pc->type) &&
             cJSON_AddStringToObject(c, "status", pc->status ? pc->status : "Unknown") &&
             cJSON_AddStringToObject(c, "reason", pc->reason ? pc->reason : "Unknown") &&
             cJSON_AddStringToObject(c, "message", pc->message ? pc->message : "") &&
             cJSON_AddStringToObject(c, "lastTransitionTime", when) &&
             cJSON_AddNumberToObject(c, "observedGeneration", (double)s->observed_generation);
    }
    if (!ok) {
        cJSON_Delete(st);
        return NULL;
    }
    return st;
}

char *api_status_patch(const api_status *s, const char *resource_version)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    char *out = NULL;
    if (meta &&
        (!resource_version || cJSON_AddStringToObject(meta, "resourceVersion", resource_version)) &&
        api_add(root, "status", api_status_json(s)))
        out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

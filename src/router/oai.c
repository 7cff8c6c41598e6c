/* rt_oai: OpenAI-format error bodies and the model list, built with cJSON so every string the
 * router did not write itself (model names, a pool condition's message) is escaped properly. */
#include "router/oai.h"

#include <errno.h>
#include <cjson/cJSON.h>

static const struct {
    unsigned status;
    const char *type, *code;
} rt_oai_errs[] = {
    [RT_OAI_BAD_REQUEST] = {400, "invalid_request_error", NULL},
    [RT_OAI_MODEL_NOT_FOUND] = {404, "invalid_request_error", "model_not_found"},
    [RT_OAI_NOT_FOUND] = {404, "invalid_request_error", NULL},
    [RT_OAI_METHOD_NOT_ALLOWED] = {405, "invalid_request_error", "method_not_allowed"},
    [RT_OAI_TOO_LARGE] = {413, "invalid_request_error", "request_too_large"},
    [RT_OAI_BAD_GATEWAY] = {502, "server_error", "upstream_error"},
    [RT_OAI_MODEL_LOADING] = {503, "server_error", "model_loading"},
    [RT_OAI_POOL_UNAVAILABLE] = {503, "server_error", "pool_unavailable"},
    [RT_OAI_OVERLOADED] = {503, "server_error", "overloaded"},
    [RT_OAI_TIMEOUT] = {408, "invalid_request_error", "request_timeout"},
};

static int rt_oai_known(rt_oai_err err)
{
    return (unsigned)err < sizeof(rt_oai_errs) / sizeof(rt_oai_errs[0]);
}

unsigned rt_oai_status(rt_oai_err err)
{
    return rt_oai_known(err) ? rt_oai_errs[err].status : 400;
}

/* Prints and frees root; NULL if root is NULL (an allocation failed while building it). */
static char *rt_oai_print(cJSON *root)
{
    char *out = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* A string member, or a JSON null for NULL; 0 or -ENOMEM. */
static int rt_oai_add_str(cJSON *obj, const char *name, const char *value)
{
    cJSON *v = value ? cJSON_CreateString(value) : cJSON_CreateNull();
    if (!v)
        return -ENOMEM;
    if (!cJSON_AddItemToObject(obj, name, v)) {
        cJSON_Delete(v);
        return -ENOMEM;
    }
    return 0;
}

char *rt_oai_error_custom(const char *type, const char *code, const char *message)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *e = root ? cJSON_AddObjectToObject(root, "error") : NULL;
    if (!e || rt_oai_add_str(e, "message", message ? message : "") ||
        rt_oai_add_str(e, "type", type) || rt_oai_add_str(e, "param", NULL) ||
        rt_oai_add_str(e, "code", code)) {
        cJSON_Delete(root);
        return NULL;
    }
    return rt_oai_print(root);
}

char *rt_oai_error(rt_oai_err err, const char *message)
{
    if (!rt_oai_known(err))
        err = RT_OAI_BAD_REQUEST;
    return rt_oai_error_custom(rt_oai_errs[err].type, rt_oai_errs[err].code, message);
}

/* One element of "data"; alias_of NULL for the member's own entry (which lists its aliases). */
static int rt_oai_add_model(cJSON *data, const rt_oai_model *m, const char *id,
                            const char *alias_of)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -ENOMEM;
    if (!cJSON_AddItemToArray(data, o)) {
        cJSON_Delete(o);
        return -ENOMEM;
    }
    cJSON *mp;
    if (rt_oai_add_str(o, "id", id) || rt_oai_add_str(o, "object", "model") ||
        !cJSON_AddNumberToObject(o, "created", 0) || rt_oai_add_str(o, "owned_by", m->pool) ||
        !(mp = cJSON_AddObjectToObject(o, "modelpool")))
        return -ENOMEM;
    if (m->ns && rt_oai_add_str(mp, "namespace", m->ns))
        return -ENOMEM;
    if (rt_oai_add_str(mp, "pool", m->pool) || rt_oai_add_str(mp, "member", m->member) ||
        !cJSON_AddBoolToObject(mp, "resident", m->resident))
        return -ENOMEM;
    if (alias_of)
        return rt_oai_add_str(mp, "alias_of", alias_of);
    cJSON *al = cJSON_AddArrayToObject(mp, "aliases");
    if (!al)
        return -ENOMEM;
    for (size_t i = 0; i < m->naliases; i++) {
        cJSON *s = cJSON_CreateString(m->aliases[i]);
        if (!s)
            return -ENOMEM;
        if (!cJSON_AddItemToArray(al, s)) {
            cJSON_Delete(s);
            return -ENOMEM;
        }
    }
    return 0;
}

char *rt_oai_models(const rt_oai_model *models, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *data = NULL;
    if (!root || rt_oai_add_str(root, "object", "list") ||
        !(data = cJSON_AddArrayToObject(root, "data")))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const rt_oai_model *m = &models[i];
        if (rt_oai_add_model(data, m, m->id, NULL))
            goto fail;
        for (size_t k = 0; k < m->naliases; k++)
            if (rt_oai_add_model(data, m, m->aliases[k], m->id))
                goto fail;
    }
    return rt_oai_print(root);
fail:
    cJSON_Delete(root);
    return NULL;
}

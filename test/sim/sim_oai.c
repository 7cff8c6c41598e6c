/* sim_oai: the OpenAI wire format as the simulator writes it. A completion's text is "tok0 tok1
 * ...", one word per token, so a test can count the tokens it received and see their order; the
 * usage block counts the same tokens. */
#include "sim_oai.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *path;
    sim_oai_kind kind;
} sim_oai_paths[] = {
    {"/v1/chat/completions", SIM_OAI_CHAT},
    {"/v1/completions", SIM_OAI_COMPLETIONS},
    {"/v1/embeddings", SIM_OAI_EMBEDDINGS},
};

int sim_oai_kind_of(const char *path, sim_oai_kind *kind)
{
    for (size_t i = 0; i < sizeof(sim_oai_paths) / sizeof(sim_oai_paths[0]); i++)
        if (strcmp(path, sim_oai_paths[i].path) == 0) {
            *kind = sim_oai_paths[i].kind;
            return 0;
        }
    return -1;
}

static char *sim_oai_print(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return text;
}

char *sim_oai_error(const char *message, const char *type, int code)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNumberToObject(e, "code", code);
    return sim_oai_print(root);
}

char *sim_oai_model_not_found(const char *model)
{
    /* vLLM's OpenAI server: a flat ErrorResponse, not wrapped in "error". */
    char msg[512];
    snprintf(msg, sizeof(msg), "The model `%s` does not exist.", model);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "error");
    cJSON_AddStringToObject(root, "message", msg);
    cJSON_AddStringToObject(root, "type", "NotFoundError");
    cJSON_AddNullToObject(root, "param");
    cJSON_AddNumberToObject(root, "code", 404);
    return sim_oai_print(root);
}

static int sim_oai_bad(char **err, const char *message)
{
    *err = sim_oai_error(message, "invalid_request_error", 400);
    return -1;
}

int sim_oai_parse(sim_oai_kind kind, const char *body, size_t len, sim_oai_req *out, char **err)
{
    *out = (sim_oai_req){.kind = kind, .tokens = SIM_OAI_TOKENS_DEFAULT};
    *err = NULL;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sim_oai_bad(err, "the body is not a JSON object");
    }
    int rc = 0;
    const char *model = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model"));
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if (!max || cJSON_IsNull(max))
        max = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens");
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (!model || !*model) {
        rc = sim_oai_bad(err, "the body names no model");
    } else if (max && !cJSON_IsNull(max) &&
               (!cJSON_IsNumber(max) || max->valuedouble < 1 ||
                max->valuedouble > SIM_OAI_TOKENS_MAX ||
                max->valuedouble != (int)max->valuedouble)) {
        rc = sim_oai_bad(err, "max_tokens must be a whole number from 1 to 100000");
    } else if (!(out->model = strdup(model))) {
        rc = -1; /* *err stays NULL: out of memory */
    } else {
        if (max && cJSON_IsNumber(max))
            out->tokens = (int)max->valuedouble;
        out->stream = cJSON_IsTrue(stream) && kind != SIM_OAI_EMBEDDINGS;
        if (kind == SIM_OAI_EMBEDDINGS) {
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
            out->tokens = 1;
            out->inputs = cJSON_IsArray(input) ? cJSON_GetArraySize(input) : 1;
            if (out->inputs < 1)
                out->inputs = 1;
        }
    }
    cJSON_Delete(root);
    return rc;
}

void sim_oai_req_clear(sim_oai_req *r)
{
    free(r->model);
    r->model = NULL;
}

static void sim_oai_usage(cJSON *obj, int prompt, int completion)
{
    cJSON *u = cJSON_AddObjectToObject(obj, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    if (completion >= 0)
        cJSON_AddNumberToObject(u, "completion_tokens", completion);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + (completion > 0 ? completion : 0));
}

/* The common head of every answer object. */
static cJSON *sim_oai_head(const sim_oai_req *r, const char *id, long created, const char *object)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)created);
    cJSON_AddStringToObject(root, "model", r->model);
    return root;
}

/* The head of an answer to r, its object chat_object for a chat request and object for the
 * others, with its one choice (index 0) in "choices", returned in *choice for the caller to fill.
 */
static cJSON *sim_oai_answer(const sim_oai_req *r, const char *id, long created,
                             const char *chat_object, const char *object, cJSON **choice)
{
    cJSON *root = sim_oai_head(r, id, created, r->kind == SIM_OAI_CHAT ? chat_object : object);
    *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", 0);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), *choice);
    return root;
}

static char *sim_oai_text(int from, int to)
{
    size_t cap = (size_t)(to - from) * 12 + 1, len = 0;
    char *text = malloc(cap);
    if (!text)
        return NULL;
    text[0] = 0;
    for (int i = from; i < to; i++)
        len += (size_t)snprintf(text + len, cap - len, "tok%d ", i);
    return text;
}

char *sim_oai_response(const sim_oai_req *r, const char *id, long created)
{
    if (r->kind == SIM_OAI_EMBEDDINGS) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "object", "list");
        cJSON *data = cJSON_AddArrayToObject(root, "data");
        for (int i = 0; i < r->inputs; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "object", "embedding");
            cJSON_AddNumberToObject(e, "index", i);
            const float v[4] = {0.25f, -0.5f, 0.125f, (float)i};
            cJSON_AddItemToObject(e, "embedding", cJSON_CreateFloatArray(v, 4));
            cJSON_AddItemToArray(data, e);
        }
        cJSON_AddStringToObject(root, "model", r->model);
        sim_oai_usage(root, r->inputs, -1);
        return sim_oai_print(root);
    }
    char *text = sim_oai_text(0, r->tokens);
    if (!text)
        return NULL;
    cJSON *choice;
    cJSON *root = sim_oai_answer(r, id, created, "chat.completion", "text_completion", &choice);
    if (r->kind == SIM_OAI_CHAT) {
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", text);
    } else {
        cJSON_AddStringToObject(choice, "text", text);
    }
    cJSON_AddStringToObject(choice, "finish_reason", "length");
    sim_oai_usage(root, 1, r->tokens);
    free(text);
    return sim_oai_print(root);
}

/* One SSE event: a chunk whose choice carries text (NULL: the last, empty, with its reason). */
static char *sim_oai_event(const sim_oai_req *r, const char *id, long created, const char *text,
                           bool first)
{
    cJSON *choice;
    cJSON *root =
        sim_oai_answer(r, id, created, "chat.completion.chunk", "text_completion", &choice);
    if (r->kind == SIM_OAI_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        if (first)
            cJSON_AddStringToObject(delta, "role", "assistant");
        if (text)
            cJSON_AddStringToObject(delta, "content", text);
    } else {
        cJSON_AddStringToObject(choice, "text", text ? text : "");
    }
    if (text)
        cJSON_AddNullToObject(choice, "finish_reason");
    else
        cJSON_AddStringToObject(choice, "finish_reason", "length");
    char *json = sim_oai_print(root);
    char *event = NULL;
    if (json && asprintf(&event, "data: %s\n\n", json) < 0)
        event = NULL;
    free(json);
    return event;
}

char *sim_oai_chunk(const sim_oai_req *r, const char *id, long created, int i)
{
    char *text = sim_oai_text(i, i + 1);
    char *event = text ? sim_oai_event(r, id, created, text, i == 0) : NULL;
    free(text);
    return event;
}

char *sim_oai_chunk_last(const sim_oai_req *r, const char *id, long created)
{
    return sim_oai_event(r, id, created, NULL, false);
}

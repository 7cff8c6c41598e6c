/* kube_yaml: libyaml's event parser folded into a cJSON tree (see yamldoc.h). Recursive over the
 * document's nesting, which is bounded, so a hostile file cannot exhaust the stack. */
#include "yamldoc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define KUBE_YAML_MAX_DEPTH 64

typedef struct {
    yaml_parser_t parser;
    char *errmsg;
} kube_yaml_ctx;

static void kube_yaml_fail(kube_yaml_ctx *y, const yaml_mark_t *mark, const char *what)
{
    if (y->errmsg)
        return;
    if (!mark ||
        asprintf(&y->errmsg, "line %zu column %zu: %s", mark->line + 1, mark->column + 1, what) < 0)
        y->errmsg = strdup(what);
}

static bool kube_yaml_next(kube_yaml_ctx *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->parser, ev))
        return true;
    const char *problem = y->parser.problem ? y->parser.problem : "invalid YAML";
    if (y->parser.error == YAML_MEMORY_ERROR)
        problem = "out of memory";
    kube_yaml_fail(y, &y->parser.problem_mark, problem);
    return false;
}

static cJSON *kube_yaml_node(kube_yaml_ctx *y, yaml_event_t *ev, int depth);

static cJSON *kube_yaml_scalar(kube_yaml_ctx *y, const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    if (memchr(v, '\0', n)) {
        kube_yaml_fail(y, &ev->start_mark, "NUL character in a value");
        return NULL;
    }
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (plain && (n == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
                  strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0))
        return cJSON_CreateNull();
    return cJSON_CreateString(v);
}

static cJSON *kube_yaml_sequence(kube_yaml_ctx *y, int depth)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    for (;;) {
        yaml_event_t ev;
        if (!kube_yaml_next(y, &ev))
            break;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return arr;
        }
        cJSON *item = kube_yaml_node(y, &ev, depth + 1);
        if (!item)
            break;
        cJSON_AddItemToArray(arr, item);
    }
    cJSON_Delete(arr);
    return NULL;
}

static cJSON *kube_yaml_mapping(kube_yaml_ctx *y, int depth)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    for (;;) {
        yaml_event_t ev;
        if (!kube_yaml_next(y, &ev))
            break;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return obj;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            kube_yaml_fail(y, &ev.start_mark, "a mapping key must be a plain value");
            yaml_event_delete(&ev);
            break;
        }
        const char *key = (const char *)ev.data.scalar.value;
        if (memchr(key, '\0', ev.data.scalar.length) ||
            cJSON_GetObjectItemCaseSensitive(obj, key)) {
            kube_yaml_fail(y, &ev.start_mark, "duplicate or invalid mapping key");
            yaml_event_delete(&ev);
            break;
        }
        char *k = strdup(key);
        yaml_event_delete(&ev);
        if (!k)
            break;
        yaml_event_t vev;
        cJSON *value = kube_yaml_next(y, &vev) ? kube_yaml_node(y, &vev, depth + 1) : NULL;
        if (!value) {
            free(k);
            break;
        }
        bool added = cJSON_AddItemToObject(obj, k, value);
        free(k);
        if (!added) { /* the key's copy failed: out of memory */
            cJSON_Delete(value);
            break;
        }
    }
    cJSON_Delete(obj);
    return NULL;
}

/* Builds the node that starts with ev (consumed here). NULL on error (y->errmsg set, or left
 * NULL for an allocation failure, which the caller reports). */
static cJSON *kube_yaml_node(kube_yaml_ctx *y, yaml_event_t *ev, int depth)
{
    cJSON *node = NULL;
    if (depth > KUBE_YAML_MAX_DEPTH) {
        kube_yaml_fail(y, &ev->start_mark, "nesting too deep");
    } else if (ev->type == YAML_SCALAR_EVENT) {
        node = kube_yaml_scalar(y, ev);
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        node = kube_yaml_sequence(y, depth);
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        node = kube_yaml_mapping(y, depth);
    } else if (ev->type == YAML_ALIAS_EVENT) {
        kube_yaml_fail(y, &ev->start_mark, "YAML aliases are not supported");
    } else {
        kube_yaml_fail(y, &ev->start_mark, "unexpected YAML structure");
    }
    yaml_event_delete(ev);
    return node;
}

static cJSON *kube_yaml_document(kube_yaml_ctx *y)
{
    yaml_event_t ev;
    if (!kube_yaml_next(y, &ev))
        return NULL;
    yaml_event_delete(&ev); /* STREAM-START */
    if (!kube_yaml_next(y, &ev))
        return NULL;
    if (ev.type != YAML_DOCUMENT_START_EVENT) {
        kube_yaml_fail(y, NULL, "empty document");
        yaml_event_delete(&ev);
        return NULL;
    }
    yaml_event_delete(&ev);
    if (!kube_yaml_next(y, &ev))
        return NULL;
    cJSON *doc = kube_yaml_node(y, &ev, 0);
    if (!doc)
        return NULL;
    if (!kube_yaml_next(y, &ev)) /* DOCUMENT-END */
        goto fail;
    yaml_event_delete(&ev);
    if (!kube_yaml_next(y, &ev))
        goto fail;
    bool more = ev.type != YAML_STREAM_END_EVENT;
    if (more)
        kube_yaml_fail(y, &ev.start_mark, "more than one YAML document");
    yaml_event_delete(&ev);
    if (more)
        goto fail;
    return doc;
fail:
    cJSON_Delete(doc);
    return NULL;
}

cJSON *kube_yaml_parse(const char *text, size_t len, char **errmsg)
{
    kube_yaml_ctx y = {0};
    *errmsg = NULL;
    if (!yaml_parser_initialize(&y.parser)) {
        *errmsg = strdup("out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
    cJSON *doc = kube_yaml_document(&y);
    yaml_parser_delete(&y.parser);
    if (!doc)
        *errmsg = y.errmsg ? y.errmsg : strdup("out of memory");
    return doc;
}

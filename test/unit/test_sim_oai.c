/* Tests of the member simulator's OpenAI format (test/sim/sim_oai.c): which bodies it accepts and
 * what it reads from them, and the JSON and SSE events it answers with, parsed back with cJSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"
#include <cjson/cJSON.h>

#include "sim_oai.h"

static sim_oai_req parse_ok(sim_oai_kind kind, const char *body)
{
    sim_oai_req r;
    char *err = NULL;
    assert_int_equal(sim_oai_parse(kind, body, strlen(body), &r, &err), 0);
    assert_null(err);
    return r;
}

static void parse_bad(const char *body, const char *why)
{
    sim_oai_req r;
    char *err = NULL;
    assert_int_equal(sim_oai_parse(SIM_OAI_CHAT, body, strlen(body), &r, &err), -1);
    assert_non_null(err);
    cJSON *e = cJSON_Parse(err);
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(e, "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(inner, "type")),
                        "invalid_request_error");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(inner, "code")->valueint, 400);
    assert_non_null(
        strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(inner, "message")), why));
    cJSON_Delete(e);
    free(err);
    assert_null(r.model);
}

static void test_parse(void **state)
{
    (void)state;
    sim_oai_kind k;
    assert_int_equal(sim_oai_kind_of("/v1/chat/completions", &k), 0);
    assert_int_equal(k, SIM_OAI_CHAT);
    assert_int_equal(sim_oai_kind_of("/v1/embeddings", &k), 0);
    assert_int_equal(k, SIM_OAI_EMBEDDINGS);
    assert_int_equal(sim_oai_kind_of("/v1/models", &k), -1);

    sim_oai_req r = parse_ok(SIM_OAI_CHAT, "{\"model\":\"a\",\"messages\":[]}");
    assert_string_equal(r.model, "a");
    assert_int_equal(r.tokens, SIM_OAI_TOKENS_DEFAULT);
    assert_false(r.stream);
    sim_oai_req_clear(&r);
    r = parse_ok(SIM_OAI_CHAT, "{\"model\":\"a\",\"max_tokens\":3,\"stream\":true}");
    assert_int_equal(r.tokens, 3);
    assert_true(r.stream);
    sim_oai_req_clear(&r);
    r = parse_ok(SIM_OAI_CHAT, "{\"model\":\"a\",\"max_tokens\":null,\"max_completion_tokens\":5}");
    assert_int_equal(r.tokens, 5);
    sim_oai_req_clear(&r);
    /* Embeddings never stream; their inputs are counted. */
    r = parse_ok(SIM_OAI_EMBEDDINGS,
                 "{\"model\":\"e\",\"input\":[\"x\",\"y\",\"z\"],\"stream\":true}");
    assert_false(r.stream);
    assert_int_equal(r.inputs, 3);
    sim_oai_req_clear(&r);

    parse_bad("not json", "not a JSON object");
    parse_bad("[1]", "not a JSON object");
    parse_bad("{\"messages\":[]}", "no model");
    parse_bad("{\"model\":\"\"}", "no model");
    parse_bad("{\"model\":\"a\",\"max_tokens\":0}", "max_tokens");
    parse_bad("{\"model\":\"a\",\"max_tokens\":2.5}", "max_tokens");
    parse_bad("{\"model\":\"a\",\"max_tokens\":\"8\"}", "max_tokens");
    parse_bad("{\"model\":\"a\",\"max_tokens\":1000000}", "max_tokens");
}

static cJSON *parse_json(char *text)
{
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    free(text);
    return j;
}

static const char *str_at(const cJSON *j, const char *path)
{
    /* "a.0.b": objects by key, arrays by index */
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const cJSON *v = j;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, atoi(tok))
                             : cJSON_GetObjectItemCaseSensitive(v, tok);
    return cJSON_IsString(v) ? v->valuestring : cJSON_IsNull(v) ? "null" : NULL;
}

/* The whole answer to body, a request of kind: named id, created at Unix time 1. */
static cJSON *answer_of(sim_oai_kind kind, const char *body, const char *id)
{
    sim_oai_req r = parse_ok(kind, body);
    cJSON *j = parse_json(sim_oai_response(&r, id, 1));
    sim_oai_req_clear(&r);
    return j;
}

/* The JSON of the SSE event ev ("data: {...}\n\n", freed). */
static cJSON *event_json(char *ev)
{
    assert_non_null(ev);
    ev[strlen(ev) - 2] = 0;
    cJSON *j = cJSON_Parse(ev + 6);
    free(ev);
    assert_non_null(j);
    return j;
}

static void test_answers(void **state)
{
    (void)state;
    sim_oai_req r = parse_ok(SIM_OAI_CHAT, "{\"model\":\"org/m\",\"max_tokens\":3}");
    cJSON *j = parse_json(sim_oai_response(&r, "id1", 42));
    assert_string_equal(str_at(j, "object"), "chat.completion");
    assert_string_equal(str_at(j, "model"), "org/m");
    assert_string_equal(str_at(j, "id"), "id1");
    assert_string_equal(str_at(j, "choices.0.message.role"), "assistant");
    assert_string_equal(str_at(j, "choices.0.message.content"), "tok0 tok1 tok2 ");
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "length");
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")->valueint, 3);
    cJSON_Delete(j);

    /* The stream: the first event names the role, each carries one token, the last its reason. */
    for (int i = 0; i < 3; i++) {
        char *ev = sim_oai_chunk(&r, "id1", 42, i);
        assert_non_null(ev);
        assert_memory_equal(ev, "data: {", 7);
        assert_string_equal(ev + strlen(ev) - 2, "\n\n");
        j = event_json(ev);
        assert_string_equal(str_at(j, "object"), "chat.completion.chunk");
        char want[16];
        snprintf(want, sizeof(want), "tok%d ", i);
        assert_string_equal(str_at(j, "choices.0.delta.content"), want);
        assert_string_equal(str_at(j, "choices.0.finish_reason"), "null");
        if (i == 0)
            assert_string_equal(str_at(j, "choices.0.delta.role"), "assistant");
        else
            assert_null(str_at(j, "choices.0.delta.role"));
        cJSON_Delete(j);
    }
    j = event_json(sim_oai_chunk_last(&r, "id1", 42));
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "length");
    assert_null(str_at(j, "choices.0.delta.content"));
    cJSON_Delete(j);
    sim_oai_req_clear(&r);

    j = answer_of(SIM_OAI_COMPLETIONS, "{\"model\":\"c\",\"max_tokens\":2}", "id2");
    assert_string_equal(str_at(j, "object"), "text_completion");
    assert_string_equal(str_at(j, "choices.0.text"), "tok0 tok1 ");
    cJSON_Delete(j);

    j = answer_of(SIM_OAI_EMBEDDINGS, "{\"model\":\"e\",\"input\":\"x\"}", "id3");
    assert_string_equal(str_at(j, "object"), "list");
    assert_string_equal(str_at(j, "data.0.object"), "embedding");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 1);
    cJSON_Delete(j);

    /* vLLM's 404 is flat, not wrapped in "error". */
    j = parse_json(sim_oai_model_not_found("x"));
    assert_string_equal(str_at(j, "object"), "error");
    assert_string_equal(str_at(j, "type"), "NotFoundError");
    assert_string_equal(str_at(j, "message"), "The model `x` does not exist.");
    assert_int_equal(cJSON_GetObjectItem(j, "code")->valueint, 404);
    cJSON_Delete(j);
}

TEST_MAIN(cmocka_unit_test(test_parse), cmocka_unit_test(test_answers))

/* Tests of the request body's model scanner: a table of bodies, each fed whole, a byte at a time
 * and cut at every point, which must all agree; then the token offsets against a rewrite, names
 * that need escaping, names at and past the cap, nesting at and past the cap, and
 * rt_model_utf8_valid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include <cjson/cJSON.h>
#include <errno.h>

#include "router/model.h"

typedef struct {
    const char *body;
    size_t len; /* 0: strlen(body) */
    rt_model_status want;
    const char *name; /* FOUND: the decoded name; NONE and BAD: a substring of the reason */
    size_t name_len;  /* 0: strlen(name) (for names with a NUL-free length that strlen gets) */
} test_case;

#define FOUND(b, n)                                                                                \
    {                                                                                              \
        b, 0, RT_MODEL_FOUND, n, 0                                                                 \
    }
#define NONE(b, r)                                                                                 \
    {                                                                                              \
        b, 0, RT_MODEL_NONE, r, 0                                                                  \
    }
#define BAD(b, r)                                                                                  \
    {                                                                                              \
        b, 0, RT_MODEL_BAD, r, 0                                                                   \
    }

static const test_case test_cases[] = {
    FOUND("{\"model\":\"llama\"}", "llama"),
    FOUND("{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "qwen"),
    FOUND(
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
        "\"temperature\":-0.5e+3,\"n\":0,\"x\":null,\"y\":false,\"z\":1.25E-2,\"model\":\"last\"}",
        "last"),
    /* "model" keys below the top level do not count. */
    FOUND("{\"a\":{\"model\":\"inner\"},\"b\":[{\"model\":\"arr\"},\"model\"],\"model\":\"outer\"}",
          "outer"),
    NONE("{\"a\":{\"model\":\"inner\"},\"b\":[\"model\",{\"model\":\"x\"}]}", "no \"model\""),
    /* A value that is the string "model" is not a key. */
    NONE("{\"x\":\"model\",\"y\":[\"model\"]}", "no \"model\""),
    /* Whitespace everywhere JSON allows it. */
    FOUND(" \t\r\n{ \n\"a\" : [ 1 , { } , [ ] ] ,\r\n \"model\"\t:\n \"m\" \n} \n", "m"),
    FOUND("{\"a\":{},\"b\":[],\"c\":[[]],\"model\":\"m\"}", "m"),
    /* Escapes in the name and in the key. */
    FOUND("{\"model\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\te\"}", "a\"b\\c/d\b\f\n\r\te"),
    FOUND("{\"mod\\u0065l\":\"k\"}", "k"),
    FOUND("{\"model\":\"caf\\u00e9 \\u20AC\"}", "caf\xc3\xa9 \xe2\x82\xac"),
    FOUND("{\"model\":\"\\ud83d\\ude00!\"}", "\xf0\x9f\x98\x80!"),
    FOUND("{\"model\":\"raw \xc3\xa9\xf0\x9f\x98\x80\"}", "raw \xc3\xa9\xf0\x9f\x98\x80"),
    FOUND("{\"model\":\"\"}", ""),
    /* Keys close to "model" are other keys. */
    FOUND("{\"Model\":\"a\",\"models\":\"b\",\"mode\":\"c\",\"\":\"d\",\"model\":\"e\"}", "e"),
    /* A second top-level "model" key is refused (parsers differ on which one counts), however
     * spelt; one below the top level is another key. Invalid JSON after the model is refused. */
    BAD("{\"model\":\"first\",\"model\":\"second\"}", "duplicate \"model\" key"),
    BAD("{\"model\":\"A\",\"messages\":[],\"mod\\u0065l\":\"B\"}", "duplicate"),
    BAD("{\"model\":\"A\",\"model\":null}", "duplicate"),
    FOUND("{\"model\":\"A\",\"x\":{\"model\":\"B\"},\"y\":[{\"model\":\"C\"}]}", "A"),
    BAD("{\"model\":\"first\" garbage", "expected ',' or '}'"),
    BAD("{\"model\":\"first\",\"t\":NaN}", "expected a value"),
    BAD("{\"model\":\"first\"} x", "data after"),
    BAD("{\"model\":\"first\",\"a\":[1", "truncated"),
    NONE("{\"model\":null,\"model\":\"second\"}", "not a string"),
    NONE("{\"model\":42}", "not a string"),
    NONE("{\"model\":-1}", "not a string"),
    NONE("{\"model\":true}", "not a string"),
    NONE("{\"model\":{\"name\":\"x\"}}", "not a string"),
    NONE("{\"model\":[\"x\"]}", "not a string"),
    NONE("{}", "no \"model\""),
    NONE("{ } \n", "no \"model\""),
    NONE("{\"a\":1}", "no \"model\""),
    /* Not an object. */
    BAD("", "empty"),
    BAD("  \n", "empty"),
    BAD("[{\"model\":\"x\"}]", "not a JSON object"),
    BAD("\"model\"", "not a JSON object"),
    BAD("42", "not a JSON object"),
    BAD("null", "not a JSON object"),
    BAD("\xef\xbb\xbf{\"model\":\"x\"}", "not a JSON object"),
    BAD("model=x", "not a JSON object"),
    /* Truncated. */
    BAD("{", "truncated"),
    BAD("{\"model\"", "truncated"),
    BAD("{\"model\":", "truncated"),
    BAD("{\"model\":\"abc", "truncated"),
    BAD("{\"model\":\"abc\\", "truncated"),
    BAD("{\"model\":\"\\ud83d", "truncated"),
    BAD("{\"a\":[1,2", "truncated"),
    BAD("{\"a\":1", "truncated"),
    BAD("{\"a\":tru", "truncated"),
    /* Invalid JSON before the model. */
    BAD("{model:\"x\"}", "expected a string key"),
    BAD("{\"a\" 1}", "expected ':'"),
    BAD("{\"a\":}", "expected a value"),
    BAD("{\"a\":1,}", "expected a string key"),
    BAD("{\"a\":[1,]}", "expected a value"),
    BAD("{\"a\":[1}", "expected ',' or ']'"),
    BAD("{\"a\":{\"b\":1]}", "expected ',' or '}'"),
    BAD("{\"a\":1 \"model\":\"x\"}", "expected ',' or '}'"),
    BAD("{\"a\":01}", "expected ',' or '}'"),
    BAD("{\"a\":-}", "invalid number"),
    BAD("{\"a\":1.}", "invalid number"),
    BAD("{\"a\":1e}", "invalid number"),
    BAD("{\"a\":1e+}", "invalid number"),
    BAD("{\"a\":+1}", "expected a value"),
    BAD("{\"a\":.5}", "expected a value"),
    BAD("{\"a\":nul}", "invalid literal"),
    BAD("{\"a\":True}", "expected a value"),
    BAD("{\"a\":truex}", "expected ',' or '}'"),
    BAD("{\"a\":\"tab\there\"}", "control character"),
    BAD("{\"model\":\"x\ny\"}", "control character"),
    BAD("{\"a\":\"\\x\"}", "invalid escape"),
    BAD("{\"model\":\"\\a\"}", "invalid escape"),
    BAD("{\"model\":\"\\u12G4\"}", "invalid \\u escape"),
    BAD("{\"model\":\"\\ude00\"}", "unpaired"),
    BAD("{\"model\":\"\\ud83dx\"}", "unpaired"),
    BAD("{\"model\":\"\\ud83d\\n\"}", "unpaired"),
    BAD("{\"model\":\"\\ud83d\\u0041\"}", "unpaired"),
    BAD("{\"model\":\"\\ud83d\\ud83d\"}", "unpaired"),
    BAD("{\"a\":\"\\ude00\"}", "unpaired"),
    BAD("{\"model\":\"a\\u0000b\"}", "NUL"),
    BAD("{\"model\":\"\xc3\"}", "UTF-8"),
    BAD("{\"model\":\"\xc0\xaf\"}", "UTF-8"),
    BAD("{\"model\":\"\xed\xa0\x80\"}", "UTF-8"),
    BAD("{\"model\":\"\xf4\x90\x80\x80\"}", "UTF-8"),
    BAD("{\"a\":1} x", "data after"),
    BAD("{\"a\":1}{}", "data after"),
    /* Bytes a C string cannot hold: a NUL outside any string, and one inside the name. */
    {"{\"a\":1}\0", 8, RT_MODEL_BAD, "data after", 0},
    {"{\"model\":\"a\0\"}", 14, RT_MODEL_BAD, "control character", 0},
    {"\0{}", 3, RT_MODEL_BAD, "not a JSON object", 0},
};

/* Feeds body cut at the given points (sorted, inside the body), then finishes. */
static rt_model_status test_scan_cut(const char *body, size_t len, const size_t *cuts, size_t ncuts,
                                     rt_model_scan *s)
{
    rt_model_init(s);
    size_t at = 0;
    rt_model_status st = RT_MODEL_MORE;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        st = rt_model_feed(s, body + at, to - at);
        at = to;
    }
    /* A final status stays final: more bytes change nothing (FOUND reads on until the end). */
    if (st == RT_MODEL_NONE || st == RT_MODEL_BAD)
        assert_int_equal(rt_model_feed(s, "{\"model\":\"z\"}", 13), st);
    st = rt_model_finish(s);
    assert_int_equal(rt_model_feed(s, "{\"model\":\"z\"}", 13), st);
    return st;
}

static void test_same(const rt_model_scan *a, const rt_model_scan *b)
{
    assert_int_equal(a->status, b->status);
    if (a->status == RT_MODEL_FOUND) {
        assert_int_equal(a->name_len, b->name_len);
        assert_memory_equal(a->name, b->name, a->name_len + 1);
        assert_int_equal(a->tok_start, b->tok_start);
        assert_int_equal(a->tok_end, b->tok_end);
        assert_int_equal(a->pos, b->pos);
    } else {
        assert_string_equal(a->reason, b->reason);
    }
}

static void test_one(const test_case *tc)
{
    size_t len = tc->len ? tc->len : strlen(tc->body);
    rt_model_scan whole;
    rt_model_status st = test_scan_cut(tc->body, len, NULL, 0, &whole);
    if (st != tc->want)
        fail_msg("body %s: status %d, want %d (%s)", tc->body, st, tc->want,
                 whole.reason ? whole.reason : "");
    if (st == RT_MODEL_FOUND) {
        size_t nl = tc->name_len ? tc->name_len : strlen(tc->name);
        assert_int_equal(whole.name_len, nl);
        assert_memory_equal(whole.name, tc->name, nl);
        assert_int_equal(whole.name[nl], '\0');
        /* The token is the value with its quotes, and the scan read the whole body. */
        assert_true(whole.tok_start < whole.tok_end && whole.tok_end <= len);
        assert_int_equal(tc->body[whole.tok_start], '"');
        assert_int_equal(tc->body[whole.tok_end - 1], '"');
        assert_int_equal(whole.pos, len);
        assert_null(whole.reason);
    } else {
        assert_non_null(whole.reason);
        if (!strstr(whole.reason, tc->name))
            fail_msg("body %s: reason \"%s\" lacks \"%s\"", tc->body, whole.reason, tc->name);
    }

    /* A byte at a time. */
    size_t cuts[512];
    assert_true(len < 512);
    for (size_t i = 1; i < len; i++)
        cuts[i - 1] = i;
    rt_model_scan bytes;
    test_scan_cut(tc->body, len, cuts, len ? len - 1 : 0, &bytes);
    test_same(&whole, &bytes);

    /* Every single cut, and every pair of cuts. */
    for (size_t i = 0; i <= len; i++) {
        for (size_t j = i; j <= len; j++) {
            size_t two[2] = {i, j};
            rt_model_scan cut;
            test_scan_cut(tc->body, len, two, 2, &cut);
            test_same(&whole, &cut);
        }
    }
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(test_cases) / sizeof(test_cases[0]); i++)
        test_one(&test_cases[i]);
}

/* Where cJSON accepts a FOUND body, it finds the same first top-level "model". */
static void test_agrees_with_cjson(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(test_cases) / sizeof(test_cases[0]); i++) {
        const test_case *tc = &test_cases[i];
        if (tc->want != RT_MODEL_FOUND)
            continue;
        cJSON *root = cJSON_Parse(tc->body);
        if (!root)
            continue; /* the bodies whose tail is garbage */
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model"));
        assert_non_null(m);
        assert_string_equal(m, tc->name);
        cJSON_Delete(root);
    }
}

/* Feeds body whole and expects FOUND. */
static void test_found(const char *body, rt_model_scan *s)
{
    rt_model_init(s);
    assert_int_equal(rt_model_feed(s, body, strlen(body)), RT_MODEL_FOUND);
}

static void test_rewrite(void **state)
{
    (void)state;
    static const char body[] = "{\"stream\":true, \"model\" : \"small\" ,\"messages\":[]}";
    rt_model_scan s;
    test_found(body, &s);
    assert_string_equal(s.name, "small");

    /* The prefix the router buffered: up to and including the token, or a little more. */
    static const char *const names[] = {"Qwen/Qwen2.5-7B-Instruct", "a\"b\\c", "tab\there\x01",
                                        "caf\xc3\xa9", ""};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        for (size_t plen = (size_t)s.tok_end; plen <= strlen(body); plen += 7) {
            char *out = NULL;
            size_t out_len = 0;
            assert_int_equal(rt_model_rewrite(body, plen, s.tok_start, s.tok_end, names[k],
                                              strlen(names[k]), &out, &out_len),
                             0);
            assert_int_equal(strlen(out), out_len);
            /* The rest of the body appended gives a body whose model is the new name. */
            size_t total = out_len + strlen(body) - plen;
            char *full = malloc(total + 1);
            assert_non_null(full);
            memcpy(full, out, out_len);
            memcpy(full + out_len, body + plen, strlen(body) - plen + 1);
            cJSON *root = cJSON_Parse(full);
            assert_non_null(root);
            assert_string_equal(
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model")), names[k]);
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream")));
            assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "messages")));
            cJSON_Delete(root);
            /* And the scanner finds it again. */
            rt_model_scan again;
            test_found(full, &again);
            assert_string_equal(again.name, names[k]);
            assert_int_equal(again.tok_start, s.tok_start);
            free(full);
            free(out);
        }
    }
}

static void test_rewrite_escapes_exactly(void **state)
{
    (void)state;
    static const char body[] = "{\"model\":\"x\"}";
    rt_model_scan s;
    test_found(body, &s);
    char *out = NULL;
    size_t out_len = 0;
    assert_int_equal(rt_model_rewrite(body, strlen(body), s.tok_start, s.tok_end, "q\"\\\n\x1f/", 6,
                                      &out, &out_len),
                     0);
    assert_string_equal(out, "{\"model\":\"q\\\"\\\\\\u000a\\u001f/\"}");
    free(out);
}

static void test_rewrite_refuses(void **state)
{
    (void)state;
    static const char body[] = "{\"model\":\"x\"}";
    char *out = (char *)"untouched";
    size_t out_len = 7;
    /* Offsets outside the prefix or not on the token's quotes, a bad name. */
    assert_int_equal(rt_model_rewrite(body, 11, 9, 12, "y", 1, &out, &out_len), -EINVAL);
    assert_int_equal(rt_model_rewrite(body, 13, 9, 9, "y", 1, &out, &out_len), -EINVAL);
    assert_int_equal(rt_model_rewrite(body, 13, 8, 12, "y", 1, &out, &out_len), -EINVAL);
    assert_int_equal(rt_model_rewrite(body, 13, 9, 11, "y", 1, &out, &out_len), -EINVAL);
    assert_int_equal(rt_model_rewrite(body, 13, 9, 12, "a\0b", 3, &out, &out_len), -EINVAL);
    assert_int_equal(rt_model_rewrite(body, 13, 9, 12, "\xff", 1, &out, &out_len), -EINVAL);
    assert_string_equal(out, "untouched");
    assert_int_equal(out_len, 7);
}

/* Builds {"model":"<n bytes of c>"} in a malloc'd buffer. */
static char *test_long_name_body(size_t n, const char *unit)
{
    size_t ul = strlen(unit);
    char *b = malloc(n * ul + 16);
    assert_non_null(b);
    size_t at = (size_t)sprintf(b, "{\"model\":\"");
    for (size_t i = 0; i < n; i++, at += ul)
        memcpy(b + at, unit, ul);
    strcpy(b + at, "\"}");
    return b;
}

static void test_name_cap(void **state)
{
    (void)state;
    rt_model_scan s;
    char *b = test_long_name_body(RT_MODEL_NAME_MAX, "a");
    test_found(b, &s);
    assert_int_equal(s.name_len, RT_MODEL_NAME_MAX);
    free(b);

    b = test_long_name_body(RT_MODEL_NAME_MAX + 1, "a");
    rt_model_init(&s);
    assert_int_equal(rt_model_feed(&s, b, strlen(b)), RT_MODEL_BAD);
    assert_string_equal(s.reason, "model name too long");
    free(b);

    /* The cap counts decoded bytes: 128 escapes of a 2-byte character fill it exactly. */
    b = test_long_name_body(RT_MODEL_NAME_MAX / 2, "\\u00e9");
    test_found(b, &s);
    assert_int_equal(s.name_len, RT_MODEL_NAME_MAX);
    free(b);
    b = test_long_name_body(RT_MODEL_NAME_MAX / 2 + 1, "\\u00e9");
    rt_model_init(&s);
    assert_int_equal(rt_model_feed(&s, b, strlen(b)), RT_MODEL_BAD);
    free(b);

    /* A huge name is refused early: the scan stops at the cap, it does not read the rest. */
    b = test_long_name_body(1 << 20, "x");
    rt_model_init(&s);
    assert_int_equal(rt_model_feed(&s, b, strlen(b)), RT_MODEL_BAD);
    assert_true(s.pos < 2 * RT_MODEL_NAME_MAX);
    free(b);

    /* Other strings have no cap: a megabyte of prompt before the model. */
    b = malloc((1 << 20) + 64);
    assert_non_null(b);
    size_t at = (size_t)sprintf(b, "{\"prompt\":\"");
    memset(b + at, 'p', 1 << 20);
    strcpy(b + at + (1 << 20), "\",\"model\":\"m\"}");
    test_found(b, &s);
    assert_string_equal(s.name, "m");
    free(b);
}

/* {"a":[[[...]]],"model":"m"} with the top-level object and depth-1 arrays: depth levels in all. */
static char *test_deep_body(int depth, char open, char close)
{
    char *b = malloc((size_t)depth * 6 + 32);
    assert_non_null(b);
    size_t at = (size_t)sprintf(b, "{\"a\":");
    for (int i = 1; i < depth; i++)
        at += (size_t)sprintf(b + at, open == '{' ? "{\"k\":" : "[");
    at += (size_t)sprintf(b + at, "0");
    for (int i = 1; i < depth; i++)
        b[at++] = close;
    strcpy(b + at, ",\"model\":\"m\"}");
    return b;
}

static void test_depth_cap(void **state)
{
    (void)state;
    const char pairs[2][2] = {{'[', ']'}, {'{', '}'}};
    for (int k = 0; k < 2; k++) {
        rt_model_scan s;
        char *b = test_deep_body(RT_MODEL_DEPTH_MAX, pairs[k][0], pairs[k][1]);
        test_found(b, &s);
        assert_string_equal(s.name, "m");
        free(b);
        b = test_deep_body(RT_MODEL_DEPTH_MAX + 1, pairs[k][0], pairs[k][1]);
        rt_model_init(&s);
        assert_int_equal(rt_model_feed(&s, b, strlen(b)), RT_MODEL_BAD);
        assert_non_null(strstr(s.reason, "deeper"));
        free(b);
    }
    /* Once the model is known the rest is still read (for a second "model" key): the cap holds
     * there too, and the name found stays readable. */
    rt_model_scan s;
    char *b = test_deep_body(10000, '[', ']');
    char *pre = malloc(strlen(b) + 16);
    assert_non_null(pre);
    sprintf(pre, "{\"model\":\"m\",%s", b + 1);
    rt_model_init(&s);
    assert_int_equal(rt_model_feed(&s, pre, strlen(pre)), RT_MODEL_BAD);
    assert_non_null(strstr(s.reason, "deeper"));
    assert_string_equal(s.name, "m");
    free(pre);
    free(b);
}

/* After BAD, pos points at the byte refused, or at the end of a body that ended early. */
static void test_bad_offset(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        uint64_t pos;
    } cases[] = {
        {"{\"a\":1,}", 7},           {"  [", 2},       {"{\"a\":1} x", 8},
        {"{\"model\":\"\\q\"}", 11}, {"{\"a\":[1", 7}, {"", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rt_model_scan s;
        rt_model_init(&s);
        rt_model_feed(&s, cases[i].body, strlen(cases[i].body));
        assert_int_equal(rt_model_finish(&s), RT_MODEL_BAD);
        assert_int_equal(s.pos, cases[i].pos);
    }
}

static void test_utf8_valid(void **state)
{
    (void)state;
    assert_true(rt_model_utf8_valid("", 0));
    assert_true(rt_model_utf8_valid("ascii", 5));
    assert_true(rt_model_utf8_valid("\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 10));
    assert_true(rt_model_utf8_valid("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 8));
    assert_false(rt_model_utf8_valid("\x80", 1));
    assert_false(rt_model_utf8_valid("\xc1\xbf", 2));         /* overlong */
    assert_false(rt_model_utf8_valid("\xe0\x9f\xbf", 3));     /* overlong */
    assert_false(rt_model_utf8_valid("\xed\xbf\xbf", 3));     /* surrogate */
    assert_false(rt_model_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    assert_false(rt_model_utf8_valid("\xf8\x88\x80\x80\x80", 5));
    assert_false(rt_model_utf8_valid("\xe2\x82", 2)); /* cut short */
    assert_false(rt_model_utf8_valid("\xe2\x28\xa1", 3));
}

/* The body buffer: a small body with a Content-Length in one exact allocation; none, or a large
 * one, from 4 KiB doubling; never less than what must fit. */
static void test_buf_cap(void **state)
{
    (void)state;
    assert_int_equal(rt_model_buf_cap(0, 250, 100), 250);
    assert_int_equal(rt_model_buf_cap(0, 250, 250), 250);
    assert_int_equal(rt_model_buf_cap(0, RT_MODEL_BODY_EXACT_MAX, 10), RT_MODEL_BODY_EXACT_MAX);
    assert_int_equal(rt_model_buf_cap(0, -1, 100), 4096);
    assert_int_equal(rt_model_buf_cap(0, 0, 100), 4096);
    assert_int_equal(rt_model_buf_cap(0, RT_MODEL_BODY_EXACT_MAX + 1, 100), 4096);
    assert_int_equal(rt_model_buf_cap(0, 250, 300), 4096); /* more than it announced */
    assert_int_equal(rt_model_buf_cap(0, -1, 10000), 16384);
    assert_int_equal(rt_model_buf_cap(250, 250, 250), 250); /* fits: unchanged */
    assert_int_equal(rt_model_buf_cap(250, 250, 251), 500);
    assert_int_equal(rt_model_buf_cap(4096, -1, 5000), 8192);
    /* Doubling stops at the length announced (what the body budget reserved). */
    assert_int_equal(rt_model_buf_cap(65536, 100000, 70000), 100000);
    assert_int_equal(rt_model_buf_cap(65536, 100000, 100001), 131072);
}

TEST_MAIN(cmocka_unit_test(test_table), cmocka_unit_test(test_agrees_with_cjson),
          cmocka_unit_test(test_rewrite), cmocka_unit_test(test_rewrite_escapes_exactly),
          cmocka_unit_test(test_rewrite_refuses), cmocka_unit_test(test_name_cap),
          cmocka_unit_test(test_depth_cap), cmocka_unit_test(test_bad_offset),
          cmocka_unit_test(test_utf8_valid), cmocka_unit_test(test_buf_cap))

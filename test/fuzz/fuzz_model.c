/* libFuzzer entry point for the request body's model scanner. The first byte chooses how the rest
 * (the body) is cut into chunks; every cut must give what the whole body gives, a FOUND token must
 * sit on the body's quotes and survive a rewrite, and where cJSON parses the body its first
 * top-level "model" must agree (FOUND: the same string, and no second one; NONE: not a string). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "router/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rt_model_status fuzz_scan(const uint8_t *body, size_t len, uint8_t ctl, rt_model_scan *s)
{
    rt_model_init(s);
    if (ctl == 0xff) { /* whole */
        rt_model_feed(s, body, len);
        return rt_model_finish(s);
    }
    /* Chunk sizes from a small generator seeded by ctl: 1 to ctl % 32 + 1 bytes, so ctl % 32 == 0
     * is a byte at a time. Empty feeds are mixed in: they must change nothing. */
    uint32_t x = (uint32_t)ctl * 2654435761u + 1;
    size_t at = 0;
    while (at < len) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        size_t n = 1 + x % ((size_t)(ctl % 32) + 1);
        if (n > len - at)
            n = len - at;
        rt_model_feed(s, body + at, n);
        if (x & 0x100)
            rt_model_feed(s, body + at + n, 0);
        at += n;
    }
    return rt_model_finish(s);
}

/* cJSON decodes "\u0000" inside a key or string and then compares as a C string, so "model\u0000x"
 * is "model" to it; the scanner (rightly) disagrees. Bodies with that escape skip the comparison.
 */
static int fuzz_has_nul_escape(const uint8_t *body, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++)
        if (memcmp(body + i, "\\u0000", 6) == 0)
            return 1;
    return 0;
}

static void fuzz_check_found(const uint8_t *body, size_t len, const rt_model_scan *s)
{
    if (s->name_len > RT_MODEL_NAME_MAX || s->name[s->name_len] != '\0' ||
        memchr(s->name, '\0', s->name_len) || !rt_model_utf8_valid(s->name, s->name_len))
        abort();
    if (s->tok_start >= s->tok_end || s->tok_end > len || s->pos != len ||
        body[s->tok_start] != '"' || body[s->tok_end - 1] != '"')
        abort();
    /* Writing the same name back gives a prefix in which the scanner finds it again. */
    char *out = NULL;
    size_t out_len = 0;
    if (rt_model_rewrite((const char *)body, (size_t)s->tok_end, s->tok_start, s->tok_end, s->name,
                         s->name_len, &out, &out_len) != 0)
        abort();
    rt_model_scan again;
    rt_model_init(&again);
    if (rt_model_feed(&again, out, out_len) != RT_MODEL_FOUND || again.name_len != s->name_len ||
        memcmp(again.name, s->name, s->name_len) != 0 || again.tok_start != s->tok_start ||
        again.tok_end != out_len)
        abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const uint8_t *body = data + 1;
    size_t len = size - 1;

    rt_model_scan whole, cut;
    rt_model_status st = fuzz_scan(body, len, 0xff, &whole);
    if (fuzz_scan(body, len, ctl, &cut) != st)
        abort();
    if (st == RT_MODEL_FOUND) {
        if (cut.name_len != whole.name_len || memcmp(cut.name, whole.name, whole.name_len) != 0 ||
            cut.tok_start != whole.tok_start || cut.tok_end != whole.tok_end)
            abort();
        fuzz_check_found(body, len, &whole);
    } else if (st == RT_MODEL_MORE || !whole.reason || !cut.reason ||
               strcmp(whole.reason, cut.reason) != 0 || cut.pos != whole.pos) {
        abort(); /* after finish, never MORE; a refusal always has the same reason */
    }

    if (fuzz_has_nul_escape(body, len))
        return 0;
    cJSON *root = cJSON_ParseWithLength((const char *)body, len);
    if (root && cJSON_IsObject(root)) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
        if (st == RT_MODEL_FOUND &&
            (!cJSON_IsString(m) || strcmp(cJSON_GetStringValue(m), whole.name) != 0))
            abort();
        if (st == RT_MODEL_NONE && cJSON_IsString(m))
            abort();
        int keys = 0;
        for (const cJSON *c = root->child; c; c = c->next)
            keys += c->string && strcmp(c->string, "model") == 0;
        if (st == RT_MODEL_FOUND && keys != 1)
            abort();
    }
    cJSON_Delete(root);
    return 0;
}

/* rt_model: a byte-at-a-time JSON state machine that validates the whole body, decodes the
 * top-level "model" value and the top-level keys (so "mod\u0065l" is "model" too, and a second
 * "model" key is seen). Nested values are validated and skipped; nothing is kept but the name. */
#include "router/model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"

enum {
    ST_START,        /* before the top-level value */
    ST_KEY_OR_END,   /* after '{' */
    ST_KEY,          /* after ',' in an object */
    ST_COLON,        /* after a key */
    ST_VALUE,        /* after ':' or ',' in an array */
    ST_VALUE_OR_END, /* after '[' */
    ST_AFTER,        /* after a value inside a container */
    ST_TRAILER,      /* after the top-level object: whitespace only */
    ST_STR,          /* inside a string */
    ST_ESC,          /* after a backslash */
    ST_HEX,          /* inside \uXXXX */
    ST_LOW_BSL,      /* after a high surrogate: its low half's backslash */
    ST_LOW_U,        /* its 'u' */
    ST_NUM_MINUS,    /* number states, in the order of RFC 8259's grammar */
    ST_NUM_ZERO,
    ST_NUM_INT,
    ST_NUM_DOT,
    ST_NUM_FRAC,
    ST_NUM_E,
    ST_NUM_ESIGN,
    ST_NUM_EXP,
    ST_LIT, /* inside true, false or null */
};

enum { SK_OTHER, SK_KEY, SK_MODEL };

static const char rt_model_key[] = "model";

void rt_model_init(rt_model_scan *s)
{
    memset(s, 0, sizeof(*s));
    s->status = RT_MODEL_MORE;
    s->state = ST_START;
}

static rt_model_status rt_model_fail(rt_model_scan *s, rt_model_status st, const char *reason)
{
    s->status = st;
    s->reason = reason;
    return st;
}

static int rt_model_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int rt_model_utf8_valid(const char *str, size_t len)
{
    const unsigned char *p = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (len - i - 1 < n)
            return 0;
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += n + 1;
    }
    return 1;
}

/* One decoded byte of a string: matched against "model" for a top-level key, kept for the model. */
static rt_model_status rt_model_byte(rt_model_scan *s, unsigned char b)
{
    if (s->str_kind == SK_KEY) {
        if (s->key_match >= 0 && s->key_match < (int)sizeof(rt_model_key) - 1 &&
            b == (unsigned char)rt_model_key[s->key_match])
            s->key_match++;
        else
            s->key_match = -1;
    } else if (s->str_kind == SK_MODEL) {
        if (s->name_len == RT_MODEL_NAME_MAX)
            return rt_model_fail(s, RT_MODEL_BAD, "model name too long");
        s->name[s->name_len++] = (char)b;
    }
    return RT_MODEL_MORE;
}

/* A decoded \u escape (surrogates already paired), as UTF-8. */
static rt_model_status rt_model_codepoint(rt_model_scan *s, uint32_t cp)
{
    unsigned char u[4];
    int n;
    if (cp == 0 && s->str_kind == SK_MODEL)
        return rt_model_fail(s, RT_MODEL_BAD, "model name contains a NUL character");
    if (cp < 0x80) {
        u[0] = (unsigned char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | (cp >> 6)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | (cp >> 12)), n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | (cp >> 18)), n = 4;
    }
    for (int k = 1; k < n; k++)
        u[k] = (unsigned char)(0x80 | ((cp >> (6 * (n - 1 - k))) & 0x3f));
    for (int k = 0; k < n; k++)
        if (rt_model_byte(s, u[k]) != RT_MODEL_MORE)
            return s->status;
    return RT_MODEL_MORE;
}

static rt_model_status rt_model_push(rt_model_scan *s, unsigned char kind)
{
    if (s->depth == RT_MODEL_DEPTH_MAX)
        return rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: nested deeper than 64 levels");
    s->stack[s->depth++] = kind;
    s->state = kind == 'o' ? ST_KEY_OR_END : ST_VALUE_OR_END;
    return RT_MODEL_MORE;
}

static void rt_model_pop(rt_model_scan *s)
{
    s->depth--;
    s->state = s->depth == 0 ? ST_TRAILER : ST_AFTER;
}

static void rt_model_string(rt_model_scan *s, int kind, int then)
{
    s->str_kind = kind;
    s->str_then = then;
    s->state = ST_STR;
}

/* The first byte of a value (not whitespace). */
static rt_model_status rt_model_value(rt_model_scan *s, unsigned char c)
{
    int model = s->depth == 1 && s->key_is_model;
    if (c == '"') {
        if (model)
            s->tok_start = s->pos;
        rt_model_string(s, model ? SK_MODEL : SK_OTHER, ST_AFTER);
        return RT_MODEL_MORE;
    }
    int st;
    if (c == '{' || c == '[')
        st = ST_KEY_OR_END; /* rt_model_push() sets the state itself */
    else if (c == '-')
        st = ST_NUM_MINUS;
    else if (c == '0')
        st = ST_NUM_ZERO;
    else if (c >= '1' && c <= '9')
        st = ST_NUM_INT;
    else if (c == 't' || c == 'f' || c == 'n')
        st = ST_LIT;
    else
        return rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: expected a value");
    if (model) /* the first top-level "model" decides, and it is not a string */
        return rt_model_fail(s, RT_MODEL_NONE, "\"model\" is not a string");
    if (c == '{' || c == '[')
        return rt_model_push(s, c == '{' ? 'o' : 'a');
    if (st == ST_LIT) {
        s->lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
        s->lit_at = 1;
    }
    s->state = st;
    return RT_MODEL_MORE;
}

/* Between tokens: the object and array structure, keys and the start of values. */
static int rt_model_in_structure(rt_model_scan *s, unsigned char c)
{
    switch (s->state) {
    case ST_START:
        if (rt_model_ws(c))
            return 1;
        if (c != '{')
            rt_model_fail(s, RT_MODEL_BAD, "request body is not a JSON object");
        else
            rt_model_push(s, 'o');
        return 1;
    case ST_KEY_OR_END:
    case ST_KEY:
        if (rt_model_ws(c))
            return 1;
        if (c == '}' && s->state == ST_KEY_OR_END) {
            rt_model_pop(s);
        } else if (c == '"') {
            s->key_match = 0;
            rt_model_string(s, s->depth == 1 ? SK_KEY : SK_OTHER, ST_COLON);
        } else {
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: expected a string key");
        }
        return 1;
    case ST_COLON:
        if (rt_model_ws(c))
            return 1;
        if (c == ':')
            s->state = ST_VALUE;
        else
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: expected ':' after a key");
        return 1;
    case ST_VALUE_OR_END:
        if (c == ']') {
            rt_model_pop(s);
            return 1;
        }
        /* fall through */
    case ST_VALUE:
        if (!rt_model_ws(c))
            rt_model_value(s, c);
        return 1;
    case ST_AFTER: {
        if (rt_model_ws(c))
            return 1;
        unsigned char top = s->stack[s->depth - 1];
        if (c == ',')
            s->state = top == 'o' ? ST_KEY : ST_VALUE;
        else if ((c == '}' && top == 'o') || (c == ']' && top == 'a'))
            rt_model_pop(s);
        else
            rt_model_fail(s, RT_MODEL_BAD,
                          top == 'o' ? "invalid JSON: expected ',' or '}' in an object"
                                     : "invalid JSON: expected ',' or ']' in an array");
        return 1;
    }
    default: /* ST_TRAILER */
        if (!rt_model_ws(c))
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: data after the top-level object");
        return 1;
    }
}

/* A digit of a \uXXXX escape; the fourth decodes it (pairing surrogates). Always consumes c. */
static int rt_model_hex(rt_model_scan *s, unsigned char c)
{
    int h = util_hex_digit(c);
    if (h < 0) {
        rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid \\u escape");
        return 1;
    }
    s->cp = (s->cp << 4) | (uint32_t)h;
    if (--s->hex_left > 0)
        return 1;
    uint32_t cp = s->cp;
    if (s->high) {
        if (cp < 0xdc00 || cp > 0xdfff) {
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: unpaired UTF-16 surrogate");
            return 1;
        }
        cp = 0x10000 + ((s->high - 0xd800) << 10) + (cp - 0xdc00);
        s->high = 0;
    } else if (cp >= 0xd800 && cp <= 0xdbff) {
        s->high = cp;
        s->state = ST_LOW_BSL;
        return 1;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: unpaired UTF-16 surrogate");
        return 1;
    }
    s->state = ST_STR;
    rt_model_codepoint(s, cp);
    return 1;
}

/* Inside a string: its bytes, escapes and \u escapes. */
static int rt_model_in_string(rt_model_scan *s, unsigned char c)
{
    switch (s->state) {
    case ST_STR:
        if (c == '"') {
            if (s->str_kind == SK_KEY)
                s->key_is_model = s->key_match == (int)sizeof(rt_model_key) - 1;
            if (s->str_kind == SK_KEY && s->key_is_model && s->status == RT_MODEL_FOUND) {
                rt_model_fail(s, RT_MODEL_BAD, "duplicate \"model\" key");
                return 1;
            }
            s->state = s->str_then;
        } else if (c == '\\') {
            s->state = ST_ESC;
        } else if (c < 0x20) {
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: control character in a string");
        } else {
            rt_model_byte(s, c);
        }
        return 1;
    case ST_ESC: {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *at = c ? strchr(from, c) : NULL;
        if (c == 'u') {
            s->state = ST_HEX;
            s->hex_left = 4;
            s->cp = 0;
        } else if (at) {
            s->state = ST_STR;
            rt_model_byte(s, (unsigned char)to[at - from]);
        } else {
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid escape in a string");
        }
        return 1;
    }
    case ST_HEX:
        return rt_model_hex(s, c);
    default: /* ST_LOW_BSL, ST_LOW_U */
        if (c != (s->state == ST_LOW_BSL ? '\\' : 'u'))
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: unpaired UTF-16 surrogate");
        else if (s->state == ST_LOW_BSL)
            s->state = ST_LOW_U;
        else
            s->state = ST_HEX, s->hex_left = 4, s->cp = 0;
        return 1;
    }
}

/* Inside a number or a literal (true, false, null). */
static int rt_model_in_scalar(rt_model_scan *s, unsigned char c)
{
    int d = c >= '0' && c <= '9';
    switch (s->state) {
    case ST_NUM_MINUS:
        if (c == '0')
            s->state = ST_NUM_ZERO;
        else if (d)
            s->state = ST_NUM_INT;
        else
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid number");
        return 1;
    case ST_NUM_DOT:
    case ST_NUM_ESIGN:
        if (d)
            s->state = s->state == ST_NUM_DOT ? ST_NUM_FRAC : ST_NUM_EXP;
        else
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid number");
        return 1;
    case ST_NUM_E:
        if (d || c == '+' || c == '-')
            s->state = d ? ST_NUM_EXP : ST_NUM_ESIGN;
        else
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid number");
        return 1;
    case ST_NUM_ZERO:
    case ST_NUM_INT:
    case ST_NUM_FRAC:
    case ST_NUM_EXP:
        if (d && s->state != ST_NUM_ZERO)
            return 1;
        if (c == '.' && (s->state == ST_NUM_ZERO || s->state == ST_NUM_INT)) {
            s->state = ST_NUM_DOT;
            return 1;
        }
        if ((c == 'e' || c == 'E') && s->state != ST_NUM_EXP) {
            s->state = ST_NUM_E;
            return 1;
        }
        s->state = ST_AFTER; /* the number ended: c belongs to what follows it */
        return 0;
    default: /* ST_LIT */
        if (c != (unsigned char)s->lit[s->lit_at])
            rt_model_fail(s, RT_MODEL_BAD, "invalid JSON: invalid literal");
        else if (s->lit[++s->lit_at] == '\0')
            s->state = ST_AFTER;
        return 1;
    }
}

/* One byte; returns 1 when the byte was consumed, 0 when it must be read again in the new state
 * (the byte that ends a number). */
static int rt_model_step(rt_model_scan *s, unsigned char c)
{
    /* The state enum lists the structure's states, then a string's, then a scalar's. */
    if (s->state >= ST_STR && s->state <= ST_LOW_U)
        return rt_model_in_string(s, c);
    if (s->state >= ST_NUM_MINUS)
        return rt_model_in_scalar(s, c);
    return rt_model_in_structure(s, c);
}

rt_model_status rt_model_feed(rt_model_scan *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t i = 0;
    while (i < len && !s->finished && (s->status == RT_MODEL_MORE || s->status == RT_MODEL_FOUND)) {
        int was_model = s->state == ST_STR && s->str_kind == SK_MODEL;
        rt_model_status before = s->status;
        int used = rt_model_step(s, p[i]);
        if (s->status != before)
            break;
        if (used) {
            i++;
            s->pos++;
        }
        if (was_model && s->state == ST_AFTER) {
            s->tok_end = s->pos;
            s->name[s->name_len] = '\0';
            if (!rt_model_utf8_valid(s->name, s->name_len))
                return rt_model_fail(s, RT_MODEL_BAD, "model name is not valid UTF-8");
            s->status = RT_MODEL_FOUND;
        }
    }
    return s->status;
}

rt_model_status rt_model_finish(rt_model_scan *s)
{
    if (s->finished || (s->status != RT_MODEL_MORE && s->status != RT_MODEL_FOUND))
        return s->status;
    s->finished = 1;
    if (s->status == RT_MODEL_FOUND)
        return s->state == ST_TRAILER
                   ? s->status
                   : rt_model_fail(s, RT_MODEL_BAD, "request body is truncated JSON");
    if (s->state == ST_TRAILER)
        return rt_model_fail(s, RT_MODEL_NONE, "request body has no \"model\" field");
    if (s->state == ST_START)
        return rt_model_fail(s, RT_MODEL_BAD, "request body is empty");
    return rt_model_fail(s, RT_MODEL_BAD, "request body is truncated JSON");
}

int rt_model_rewrite(const char *prefix, size_t prefix_len, uint64_t tok_start, uint64_t tok_end,
                     const char *name, size_t name_len, char **out, size_t *out_len)
{
    if (tok_start >= tok_end || tok_end > prefix_len || prefix[tok_start] != '"' ||
        prefix[tok_end - 1] != '"' || memchr(name, '\0', name_len) ||
        !rt_model_utf8_valid(name, name_len))
        return -EINVAL;
    /* Worst case every byte becomes \u00XX (6 bytes), plus the quotes and the NUL. */
    size_t tail = prefix_len - (size_t)tok_end;
    if (name_len > (SIZE_MAX - prefix_len - 3) / 6)
        return -ENOMEM;
    char *buf = malloc((size_t)tok_start + 6 * name_len + 3 + tail);
    if (!buf)
        return -ENOMEM;
    size_t n = (size_t)tok_start;
    memcpy(buf, prefix, n);
    buf[n++] = '"';
    for (size_t i = 0; i < name_len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)c;
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(buf + n, "\\u00", 4);
            buf[n + 4] = hex[c >> 4];
            buf[n + 5] = hex[c & 15];
            n += 6;
        } else {
            buf[n++] = (char)c;
        }
    }
    buf[n++] = '"';
    memcpy(buf + n, prefix + tok_end, tail);
    n += tail;
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}

size_t rt_model_buf_cap(size_t cap, int64_t content_length, size_t need)
{
    if (cap >= need)
        return cap;
    if (!cap && content_length > 0 && content_length <= RT_MODEL_BODY_EXACT_MAX &&
        (size_t)content_length >= need)
        return (size_t)content_length;
    size_t c = cap ? cap : 4096;
    while (c < need)
        c *= 2;
    /* Never past the length announced: that is what the body budget reserved for it. */
    if (content_length > 0 && (uint64_t)content_length >= need && c > (uint64_t)content_length)
        c = (size_t)content_length;
    return c;
}

/* rt_model: finds the model a request asks for in its JSON body without holding the body whole.
 * Pure (no I/O, no allocation): the body goes in with rt_model_feed() in chunks cut anywhere (one
 * byte at a time works). The status is known as soon as the top-level object's "model" is, so the
 * router can decide (forward, hold, reject) and stream the rest; the rest is still fed through,
 * chunk by chunk before it goes on, so a second "model" key (which llama.cpp and vLLM would take
 * instead of the first) or invalid JSON after the model refuses the request before the member
 * has the whole body. */
#ifndef MP_ROUTER_MODEL_H
#define MP_ROUTER_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Longest model name accepted, in decoded UTF-8 bytes; a longer one is BAD ("model name too
 * long"): no member or alias can be that long (a Kubernetes name is at most 253). */
#define RT_MODEL_NAME_MAX 256
/* Deepest nesting of objects and arrays scanned before the model is known (the top-level object
 * is depth 1); deeper is BAD. Request bodies nest a few levels (messages, content parts, tools). */
#define RT_MODEL_DEPTH_MAX 64

typedef enum rt_model_status {
    RT_MODEL_MORE,  /* the bytes so far decide nothing: feed more, or call rt_model_finish() */
    RT_MODEL_FOUND, /* name, tok_start and tok_end are set */
    RT_MODEL_NONE,  /* the top-level object has no "model", or its first "model" is not a string */
    RT_MODEL_BAD,   /* not a JSON object, invalid JSON, an unusable name, or "model" twice */
} rt_model_status;

/* The scanner's state; all fields are private except the results named below. */
typedef struct rt_model_scan {
    /* Results. FOUND: name (NUL-terminated, valid UTF-8, no NUL inside) and name_len; tok_start
     * and tok_end, the half-open byte range of the value's token in the body, quotes included,
     * for rt_model_rewrite(). NONE and BAD: reason, a static sentence fit for a 400 message. */
    char name[RT_MODEL_NAME_MAX + 1];
    size_t name_len;
    uint64_t tok_start, tok_end;
    const char *reason;
    /* Bytes of the body scanned: while FOUND, every byte fed; after BAD it is the offset of the
     * byte refused (the body's length when it ended early). */
    uint64_t pos;

    /* Private. */
    rt_model_status status;
    int state;    /* where in the grammar the next byte falls */
    int str_kind; /* what the string being read is: a top-level key, the model, or other */
    int str_then; /* state after the string ends */
    int depth;    /* open objects and arrays */
    unsigned char stack[RT_MODEL_DEPTH_MAX]; /* 'o' or 'a' per open container */
    int key_match;    /* decoded bytes of the current top-level key that match "model" */
    int key_is_model; /* the member being read at top level is named "model" */
    const char *lit;  /* the literal being read (true, false, null) and how far */
    int lit_at;
    int hex_left;  /* \uXXXX digits still to read */
    uint32_t cp;   /* the code point being read */
    uint32_t high; /* a high surrogate waiting for its low half, or 0 */
    int finished;  /* rt_model_finish ran: nothing more is read */
} rt_model_scan;

void rt_model_init(rt_model_scan *s);

/* Scans len more bytes of the body. Returns MORE until the model is decided. NONE and BAD are
 * final: later calls return the same status and read nothing. FOUND reads on: the rest of the body
 * must be fed too (each chunk before it is sent on), and FOUND turns BAD on invalid JSON or on a
 * second top-level "model" key ("duplicate \"model\" key"): parsers disagree on which of two keys
 * counts (cJSON the first, llama.cpp's and Python's the last), so such a body is refused rather
 * than routed by one name and served by another. */
rt_model_status rt_model_feed(rt_model_scan *s, const void *data, size_t len);

/* The body ended; nothing more is read afterwards. NONE and BAD stay; FOUND stays if the object
 * closed (whitespace may follow), else BAD (truncated); MORE becomes NONE if the body was a whole
 * object with no model, BAD if it was empty, truncated or not an object. */
rt_model_status rt_model_finish(rt_model_scan *s);

/* Builds the body prefix with the model's token replaced by name, JSON-encoded (quotes, backslash
 * and control bytes escaped). prefix holds the body's first prefix_len bytes, which must include
 * the token [tok_start, tok_end) (bytes after it are copied too). name must be valid UTF-8 without
 * NUL. On success returns 0 with *out (malloc'd, NUL-terminated, the caller frees it) and *out_len;
 * the caller fixes Content-Length. -EINVAL on offsets outside the prefix or a bad name, -ENOMEM. */
int rt_model_rewrite(const char *prefix, size_t prefix_len, uint64_t tok_start, uint64_t tok_end,
                     const char *name, size_t name_len, char **out, size_t *out_len);

/* Bodies whose Content-Length is at most this are buffered in one allocation of exactly their size
 * until their model is known (and, held, until they are forwarded). */
#define RT_MODEL_BODY_EXACT_MAX 65536

/* The capacity of the buffer that keeps a request body until it is forwarded, growing from cap to
 * hold need bytes: first exactly the body when its content_length (-1: none sent) is known and at
 * most RT_MODEL_BODY_EXACT_MAX, else 4 KiB; then doubling, but never past a content_length that
 * holds need (the body budget reserved that much). Sized to the body, a held request costs
 * the bytes it sent, not a mostly empty page that the allocator still touches. */
size_t rt_model_buf_cap(size_t cap, int64_t content_length, size_t need);

/* 1 if s[0..len) is valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF), else 0. */
int rt_model_utf8_valid(const char *s, size_t len);

#endif

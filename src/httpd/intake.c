/* httpd_intake: the checks of a request's head that httpd makes before its owner sees it (framing
 * fields, the path's encoding and dot segments). Pure: strings in, a reason out. */
#include "httpd/intake.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "util/hex.h"

void httpd_framing_add(httpd_framing *f, const char *name, const char *value)
{
    if (strcasecmp(name, "Content-Length") == 0) {
        uint64_t v = 0;
        const char *p = value;
        for (; *p >= '0' && *p <= '9' && v <= (UINT64_MAX - 9) / 10; p++)
            v = v * 10 + (uint64_t)(*p - '0');
        if ((*p || p == value) && !f->why)
            f->why = "invalid Content-Length";
        else if (f->lengths && v != f->length && !f->why)
            f->why = "conflicting Content-Length headers";
        if (!f->lengths++)
            f->length = v;
    } else if (strcasecmp(name, "Transfer-Encoding") == 0) {
        if (f->encodings++ && !f->why)
            f->why = "more than one Transfer-Encoding header";
        else if (strcasecmp(value, "chunked") != 0 && !f->why)
            f->why = "unsupported Transfer-Encoding (only chunked)";
    }
}

const char *httpd_framing_check(const httpd_framing *f)
{
    if (f->why)
        return f->why;
    if (f->lengths && f->encodings)
        return "both Content-Length and Transfer-Encoding";
    return NULL;
}

const char *httpd_intake_raw_path(const char *target)
{
    for (const char *p = target; *p && *p != '?'; p++) {
        if (*p == '\\')
            return "a backslash in the path";
        if (*p != '%')
            continue;
        int hi = util_hex_digit(p[1]), lo = hi < 0 ? -1 : util_hex_digit(p[2]);
        if (lo < 0)
            return "a '%' in the path not followed by two hex digits";
        unsigned char c = (unsigned char)(hi << 4 | lo);
        if (c < 0x20 || c == 0x7f || c == '\\')
            return "a percent-encoded control character or backslash in the path";
        if (strchr(":/?#[]@!$&'()*+,;=", c))
            return "a percent-encoded reserved character (like %2F) in the path";
        p += 2;
    }
    return NULL;
}

const char *httpd_intake_path(const char *path)
{
    /* Segment by segment; a path from MHD starts with '/', but "" and "*" (OPTIONS *) do not. */
    for (const char *seg = path; seg;) {
        if (*seg == '/')
            seg++;
        size_t n = strcspn(seg, "/");
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return "a \".\" or \"..\" segment in the path";
        seg = seg[n] ? seg + n : NULL;
    }
    return NULL;
}

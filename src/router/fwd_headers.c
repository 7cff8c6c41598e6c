/* fwd_headers: the forwarder's header rules (contract in router/fwd_headers.h). Pure functions of
 * their arguments: the character classes of RFC 9110 (tokens, values that cannot end their line),
 * the hop-by-hop rule a proxy applies both ways (the fixed list, Proxy-*, and what the Connection
 * headers name), and the request's header list for curl. Only curl_slist_append is called, no
 * other curl state: the rules are tested as tables without a transfer. */
#include "router/fwd_headers.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool fwd_is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

bool fwd_is_token(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!fwd_is_tchar((unsigned char)*s))
            return false;
    return true;
}

/* A header value must not end the line it is on. */
bool fwd_is_value(const char *s)
{
    if (!s)
        return false;
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return false;
    return true;
}

/* Is name among the comma-separated tokens of list? */
bool fwd_in_list(const char *list, const char *name, size_t namelen)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',')
            p++;
        const char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - s) == namelen && strncasecmp(s, name, namelen) == 0)
            return true;
    }
    return false;
}

/* RFC 9110 7.6.1: these describe one connection, not the message, and a proxy drops them, and
 * every header the Connection header names. */
bool fwd_hop_by_hop(const char *name, const char *const *conn_values, size_t nconn)
{
    static const char *const hop[] = {"connection", "keep-alive",        "te",      "trailer",
                                      "trailers",   "transfer-encoding", "upgrade", NULL};
    for (const char *const *h = hop; *h; h++)
        if (strcasecmp(name, *h) == 0)
            return true;
    if (strncasecmp(name, "proxy-", 6) == 0)
        return true;
    for (size_t i = 0; i < nconn; i++)
        if (fwd_in_list(conn_values[i], name, strlen(name)))
            return true;
    return false;
}

int fwd_add_header(struct curl_slist **l, const char *name, const char *value)
{
    /* "Name;" is curl's way to send a header with an empty value ("Name:" would remove it). */
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line)
        return -ENOMEM;
    if (*value)
        snprintf(line, n, "%s: %s", name, value);
    else
        snprintf(line, n, "%s;", name);
    struct curl_slist *nl = curl_slist_append(*l, line);
    free(line);
    if (!nl)
        return -ENOMEM;
    *l = nl;
    return 0;
}

/* Connection headers past FWD_MAX_CONNECTION_HEADERS are not looked at: fwd_request_invalid
 * refuses such a request before it comes here. */
int fwd_build_headers(struct curl_slist **out, const fwd_request *req)
{
    const char *conn[FWD_MAX_CONNECTION_HEADERS];
    size_t nconn = 0;
    size_t xff_len = 0;
    bool accept = false;
    for (size_t i = 0; i < req->nheaders; i++) {
        const fwd_header *h = &req->headers[i];
        if (strcasecmp(h->name, "connection") == 0 && nconn < FWD_MAX_CONNECTION_HEADERS)
            conn[nconn++] = h->value;
        if (strcasecmp(h->name, "x-forwarded-for") == 0)
            xff_len += strlen(h->value) + 2;
        if (strcasecmp(h->name, "accept") == 0)
            accept = true;
    }
    for (size_t i = 0; i < req->nheaders; i++) {
        const fwd_header *h = &req->headers[i];
        if (fwd_hop_by_hop(h->name, conn, nconn) || strcasecmp(h->name, "host") == 0 ||
            strcasecmp(h->name, "content-length") == 0 || strcasecmp(h->name, "expect") == 0 ||
            strcasecmp(h->name, "x-forwarded-for") == 0)
            continue;
        if (fwd_add_header(out, h->name, h->value) < 0)
            return -ENOMEM;
    }
    if (xff_len || req->client_addr) {
        size_t cap = xff_len + (req->client_addr ? strlen(req->client_addr) : 0) + 1;
        char *xff = malloc(cap);
        if (!xff)
            return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < req->nheaders; i++) {
            const fwd_header *h = &req->headers[i];
            if (strcasecmp(h->name, "x-forwarded-for") != 0 || !*h->value)
                continue;
            n += (size_t)snprintf(xff + n, cap - n, "%s%s", n ? ", " : "", h->value);
        }
        if (req->client_addr && *req->client_addr)
            n += (size_t)snprintf(xff + n, cap - n, "%s%s", n ? ", " : "", req->client_addr);
        int rc = n ? fwd_add_header(out, "X-Forwarded-For", xff) : 0;
        free(xff);
        if (rc < 0)
            return -ENOMEM;
    }
    struct curl_slist *l = curl_slist_append(*out, "Expect:");
    if (l)
        *out = l;
    if (l && !accept && (l = curl_slist_append(*out, "Accept:")))
        *out = l;
    return l ? 0 : -ENOMEM;
}

bool fwd_path_ok(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    for (; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
            return false;
    return true;
}

/* test_fwd_headers: the forwarder's pure header rules (src/router/fwd_headers.c) as tables, one row
 * an input and what the rule says of it: tokens and values that may be sent, the paths a request
 * may carry, the comma-separated lists of a Connection header, hop-by-hop headers both ways, and
 * the header list sent to a member (what is dropped, X-Forwarded-For, curl's defaults switched
 * off). No transfer: test_forward_relay.c runs the same rules against an upstream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include <curl/curl.h>

#include "router/fwd_headers.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct {
    const char *s;
    bool want;
} str_case;

static void test_is_token(void **state)
{
    (void)state;
    static const str_case rows[] = {
        {"GET", true},    {"X-Custom_1.~!#$%&'*+^`|", true},
        {"a", true},      {"0", true},
        {"", false},      {NULL, false},
        {"GE T", false},  {"a:b", false},
        {"a\"b", false},  {"(x)", false},
        {"a,b", false},   {"a\tb", false},
        {"x\r\n", false}, {"caf\xc3\xa9", false}, /* not ASCII */
        {"a\x7f", false},
    };
    for (size_t i = 0; i < N(rows); i++) {
        if (fwd_is_token(rows[i].s) != rows[i].want)
            fail_msg("row %zu: fwd_is_token(\"%s\") != %d", i, rows[i].s ? rows[i].s : "(null)",
                     rows[i].want);
    }
    assert_true(fwd_is_tchar('z'));
    assert_false(fwd_is_tchar('\0'));
    assert_false(fwd_is_tchar(' '));
}

static void test_is_value(void **state)
{
    (void)state;
    static const str_case rows[] = {
        {"", true},
        {"abc def", true},
        {"tab\tinside", true},
        {"caf\xc3\xa9", true},
        {"a\r\nX-Injected: 1", false},
        {"a\n", false},
        {"\r", false},
        {NULL, false},
    };
    for (size_t i = 0; i < N(rows); i++) {
        if (fwd_is_value(rows[i].s) != rows[i].want)
            fail_msg("row %zu: fwd_is_value(\"%s\") != %d", i, rows[i].s ? rows[i].s : "(null)",
                     rows[i].want);
    }
}

static void test_path_ok(void **state)
{
    (void)state;
    static const str_case rows[] = {
        {"/", true},
        {"/v1/chat/completions?stream=true&x=%20", true},
        {"/caf\xc3\xa9", true}, /* bytes past ASCII go as they are */
        {"//double/./../as-is", true},
        {"", false},
        {NULL, false},
        {"v1/models", false},
        {"http://host/", false},
        {"/a b", false},
        {"/a#fragment", false},
        {"/a\x7f", false},
        {"/a\tb", false},
        {"/a\r\nHost: x", false},
    };
    for (size_t i = 0; i < N(rows); i++) {
        if (fwd_path_ok(rows[i].s) != rows[i].want)
            fail_msg("row %zu: fwd_path_ok(\"%s\") != %d", i, rows[i].s ? rows[i].s : "(null)",
                     rows[i].want);
    }
}

static void test_in_list(void **state)
{
    (void)state;
    static const struct {
        const char *list, *name;
        bool want;
    } rows[] = {
        {"close, Foo", "foo", true}, {"x, Foo ,y", "FOO", true},
        {"close,foo ", "foo", true}, {"  ,, foo\t,bar", "bar", true},
        {"\tfoo\t", "foo", true},    {"foobar", "foo", false},
        {"foo-bar", "foo", false},   {"fo", "foo", false},
        {"f oo", "foo", false},      {"", "foo", false},
        {",,,", "foo", false},
    };
    for (size_t i = 0; i < N(rows); i++) {
        if (fwd_in_list(rows[i].list, rows[i].name, strlen(rows[i].name)) != rows[i].want)
            fail_msg("row %zu: fwd_in_list(\"%s\", \"%s\") != %d", i, rows[i].list, rows[i].name,
                     rows[i].want);
    }
}

static void test_hop_by_hop(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *conn[3]; /* the Connection headers' values, NULL-ended */
        bool want;
    } rows[] = {
        {"Connection", {NULL}, true},
        {"keep-alive", {NULL}, true},
        {"TE", {NULL}, true},
        {"Trailer", {NULL}, true},
        {"Trailers", {NULL}, true},
        {"Transfer-Encoding", {NULL}, true},
        {"UPGRADE", {NULL}, true},
        {"Proxy-Authorization", {NULL}, true},
        {"proxy-connection", {NULL}, true},
        {"Proxy", {NULL}, false},
        {"TEx", {NULL}, false},
        {"Content-Type", {NULL}, false},
        {"Content-Length", {NULL}, false}, /* end to end; fwd_build_headers drops it for curl */
        {"Host", {NULL}, false},
        {"Authorization", {NULL}, false},
        {"X-Foo", {"x-foo, bar", NULL}, true},
        {"X-Bar", {"a", "close, X-Bar", NULL}, true},
        {"X-Foo", {"x-foobar", "close", NULL}, false},
        {"Authorization", {"close", NULL}, false},
    };
    for (size_t i = 0; i < N(rows); i++) {
        size_t n = 0;
        while (rows[i].conn[n])
            n++;
        if (fwd_hop_by_hop(rows[i].name, rows[i].conn, n) != rows[i].want)
            fail_msg("row %zu: fwd_hop_by_hop(\"%s\") != %d", i, rows[i].name, rows[i].want);
    }
}

/* The list as one string, lines joined by '|'. */
static void slist_join(const struct curl_slist *l, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (; l; l = l->next)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "|" : "", l->data);
    assert_true(n < cap);
}

static void test_add_header(void **state)
{
    (void)state;
    struct curl_slist *l = NULL;
    assert_int_equal(fwd_add_header(&l, "X-A", "1"), 0);
    assert_int_equal(fwd_add_header(&l, "X-Empty", ""), 0); /* "X-Empty:" would remove it */
    assert_int_equal(fwd_add_header(&l, "X-B", "two words"), 0);
    char got[256];
    slist_join(l, got, sizeof(got));
    assert_string_equal(got, "X-A: 1|X-Empty;|X-B: two words");
    curl_slist_free_all(l);
}

#define MAXH 10

static void test_build_headers(void **state)
{
    (void)state;
    static const struct {
        const char *title;
        fwd_header h[MAXH]; /* ends at the first NULL name */
        const char *client;
        const char *want; /* the lines sent, joined by '|' */
    } rows[] = {
        {"end-to-end headers go as they are, curl's defaults off",
         {{"Content-Type", "application/json"}, {"Authorization", "Bearer x"}},
         NULL,
         "Content-Type: application/json|Authorization: Bearer x|Expect:|Accept:"},
        {"hop-by-hop dropped, and what Connection names",
         {{"Connection", "close, X-Drop"},
          {"Keep-Alive", "5"},
          {"TE", "trailers"},
          {"X-Drop", "1"},
          {"X-Keep", "2"},
          {"Transfer-Encoding", "chunked"},
          {"Upgrade", "h2c"},
          {"Proxy-Authorization", "x"},
          {"Trailer", "X-T"}},
         NULL,
         "X-Keep: 2|Expect:|Accept:"},
        {"every Connection header counts",
         {{"Connection", "a"}, {"A", "1"}, {"connection", "B"}, {"B", "2"}, {"C", "3"}},
         NULL,
         "C: 3|Expect:|Accept:"},
        {"what curl writes itself is dropped; the client's Accept stays",
         {{"Host", "a"},
          {"Content-Length", "5"},
          {"Expect", "100-continue"},
          {"Accept", "text/event-stream"}},
         NULL,
         "Accept: text/event-stream|Expect:"},
        {"X-Forwarded-For: the client's ones joined, the client appended, sent last",
         {{"X-Forwarded-For", "1.1.1.1"}, {"X-A", "a"}, {"x-forwarded-for", "2.2.2.2"}},
         "10.0.0.1",
         "X-A: a|X-Forwarded-For: 1.1.1.1, 2.2.2.2, 10.0.0.1|Expect:|Accept:"},
        {"X-Forwarded-For from the client's address alone",
         {{NULL, NULL}},
         "10.0.0.1",
         "X-Forwarded-For: 10.0.0.1|Expect:|Accept:"},
        {"empty X-Forwarded-For values are skipped",
         {{"X-Forwarded-For", ""}, {"X-Forwarded-For", "3.3.3.3"}, {"X-Forwarded-For", ""}},
         "::1",
         "X-Forwarded-For: 3.3.3.3, ::1|Expect:|Accept:"},
        {"nothing to forward for: no X-Forwarded-For",
         {{"X-Forwarded-For", ""}},
         "",
         "Expect:|Accept:"},
        {"an empty value is sent empty", {{"X-Empty", ""}}, NULL, "X-Empty;|Expect:|Accept:"},
        {"no headers at all", {{NULL, NULL}}, NULL, "Expect:|Accept:"},
    };
    for (size_t i = 0; i < N(rows); i++) {
        size_t n = 0;
        while (n < MAXH && rows[i].h[n].name)
            n++;
        fwd_request req = {.method = "POST",
                           .path = "/",
                           .headers = rows[i].h,
                           .nheaders = n,
                           .client_addr = rows[i].client};
        struct curl_slist *l = NULL;
        int rc = fwd_build_headers(&l, &req);
        char got[1024];
        slist_join(l, got, sizeof(got));
        curl_slist_free_all(l);
        if (rc != 0 || strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu (%s): rc %d, got \"%s\", want \"%s\"", i, rows[i].title, rc, got,
                     rows[i].want);
    }
}

TEST_MAIN(cmocka_unit_test(test_is_token), cmocka_unit_test(test_is_value),
          cmocka_unit_test(test_path_ok), cmocka_unit_test(test_in_list),
          cmocka_unit_test(test_hop_by_hop), cmocka_unit_test(test_add_header),
          cmocka_unit_test(test_build_headers))

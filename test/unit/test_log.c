/* Tests of the logger: level filtering and that both formats escape what they must. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "log/log.h"

static char *test_capture(log_format fmt, log_level max, log_level at)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    log_setup(f, max, fmt);
    log_kv(at, "swap \"started\"", "pool", "ns/p", "member", "a b", "reason", NULL, NULL);
    fclose(f);
    log_setup(NULL, LOG_INFO, LOG_TEXT);
    return buf;
}

static void test_json(void **state)
{
    (void)state;
    char *s = test_capture(LOG_JSON, LOG_INFO, LOG_INFO);
    assert_non_null(strstr(s, "\"level\":\"info\""));
    assert_non_null(strstr(s, "\"msg\":\"swap \\\"started\\\"\""));
    assert_non_null(strstr(s, "\"pool\":\"ns/p\",\"member\":\"a b\",\"reason\":\"\"}\n"));
    free(s);
}

static void test_text(void **state)
{
    (void)state;
    char *s = test_capture(LOG_TEXT, LOG_DEBUG, LOG_DEBUG);
    assert_non_null(strstr(s, " debug "));
    assert_non_null(strstr(s, " pool=ns/p member=\"a b\" reason=\"\"\n"));
    free(s);
}

static void test_filtered(void **state)
{
    (void)state;
    char *s = test_capture(LOG_TEXT, LOG_INFO, LOG_DEBUG);
    assert_string_equal(s, "");
    free(s);
}

TEST_MAIN(cmocka_unit_test(test_json), cmocka_unit_test(test_text), cmocka_unit_test(test_filtered))

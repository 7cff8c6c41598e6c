/* Tests of app_identity, the name each program holds its Leases by: the operator's leader
 * identity and the router's registration Lease (a DNS subdomain, so its name part is lowered,
 * cut, and has no separator when nothing is left of it); each call draws a new random suffix. */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "app/boot.h"

static void assert_matches(const char *s, const char *pattern)
{
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    int rc = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    if (rc != 0)
        fail_msg("\"%s\" does not match %s", s, pattern);
}

static void test_operator_identity(void **state)
{
    (void)state;
    assert_int_equal(setenv("POD_NAME", "Op_Pod.7", 1), 0);
    char *a = app_identity("", "_", 8, false);
    char *b = app_identity("", "_", 8, false);
    assert_non_null(a);
    assert_non_null(b);
    assert_matches(a, "^Op_Pod\\.7_[0-9a-f]{16}$"); /* the Pod's name as it is */
    assert_string_not_equal(a, b);
    free(a);
    free(b);
}

static void test_router_lease_name(void **state)
{
    (void)state;
    assert_int_equal(setenv("POD_NAME", "Router_Pod.7", 1), 0);
    char *a = app_identity("modelpool-router-", "-", 4, true);
    assert_non_null(a);
    assert_matches(a, "^modelpool-router-router-pod-7-[0-9a-f]{8}$");
    free(a);

    char longname[400];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(setenv("POD_NAME", longname, 1), 0);
    a = app_identity("modelpool-router-", "-", 4, true);
    assert_non_null(a);
    /* 17 + 199 + 1 + 8: within a Lease name's 253 */
    assert_int_equal(strlen(a), 225);
    assert_matches(a, "^modelpool-router-x{199}-[0-9a-f]{8}$");
    free(a);
}

static void test_host_name_when_no_pod(void **state)
{
    (void)state;
    assert_int_equal(unsetenv("POD_NAME"), 0);
    char *a = app_identity("modelpool-router-", "-", 4, true);
    assert_non_null(a);
    assert_matches(a, "^modelpool-router-([a-z0-9-]+-)?[0-9a-f]{8}$");
    free(a);
    assert_null(app_identity("", "_", 17, false)); /* more randomness than it draws */
}

TEST_MAIN(cmocka_unit_test(test_operator_identity), cmocka_unit_test(test_router_lease_name),
          cmocka_unit_test(test_host_name_when_no_pod))

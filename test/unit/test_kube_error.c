/* Tests of kube_error: Status bodies to reasons and messages, answers that are not a Status
 * (proxy pages, empty bodies), which errors are worth a retry, and Retry-After parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "kube/error.h"

static void test_from_http(kube_error *err, long code, const char *body)
{
    kube_error_from_http(err, code, body, body ? strlen(body) : 0);
}

static void test_status_bodies(void **state)
{
    (void)state;
    kube_error err = {0};
    test_from_http(&err, 404,
                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                   "\"Failure\",\"message\":\"modelpools.inference.llmkube.dev \\\"p\\\" not "
                   "found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"p\"},\"code\":404}");
    assert_int_equal(err.kind, KUBE_ERR_HTTP);
    assert_int_equal(err.http_code, 404);
    assert_string_equal(err.reason, "NotFound");
    assert_string_equal(err.message, "modelpools.inference.llmkube.dev \"p\" not found");
    assert_true(kube_error_is(&err, "NotFound"));
    assert_false(kube_error_is(&err, "Conflict"));

    test_from_http(
        &err, 409,
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Operation cannot be "
        "fulfilled: the object has been modified\",\"reason\":\"Conflict\",\"code\":409}");
    assert_true(kube_error_is(&err, "Conflict"));
    assert_int_equal(err.http_code, 409);

    /* A Status without a reason gets the usual one for its code; without a message, a summary. */
    test_from_http(&err, 422, "{\"kind\":\"Status\",\"code\":422}");
    assert_string_equal(err.reason, "Invalid");
    assert_string_equal(err.message, "HTTP 422 Invalid");

    /* The Status code wins over the transport's (the API server keeps them equal anyway). */
    test_from_http(&err, 500, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    assert_int_equal(err.http_code, 410);
    assert_string_equal(err.reason, "Expired");
    kube_error_clear(&err);
    assert_int_equal(err.kind, KUBE_OK);
    assert_null(err.message);
}

static void test_non_status_bodies(void **state)
{
    (void)state;
    kube_error err = {0};
    test_from_http(&err, 502,
                   "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>"
                   "</html>\r\n");
    assert_int_equal(err.kind, KUBE_ERR_HTTP);
    assert_int_equal(err.http_code, 502);
    assert_null(err.reason);
    assert_string_equal(err.message, "HTTP 502: <html>  <head><title>502 Bad Gateway</title>"
                                     "</head>  <body>nginx</body></html>");

    /* JSON that is not a Status is quoted like any text. */
    test_from_http(&err, 403, "{\"error\":\"denied\"}");
    assert_string_equal(err.message, "HTTP 403: {\"error\":\"denied\"}");
    assert_string_equal(err.reason, "Forbidden");

    test_from_http(&err, 503, "");
    assert_string_equal(err.message, "HTTP 503 ServiceUnavailable (empty body)");
    test_from_http(&err, 599, NULL);
    assert_string_equal(err.message, "HTTP 599 (empty body)");
    assert_null(err.reason);

    /* A long body is cut, and the cut is visible. */
    char big[1000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    test_from_http(&err, 500, big);
    assert_true(strlen(err.message) < 260);
    assert_non_null(strstr(err.message, "aaa..."));
    kube_error_clear(&err);
}

static void test_set_copy_clear(void **state)
{
    (void)state;
    kube_error a = {0}, b = {0};
    kube_error_clear(&a); /* a zeroed error clears fine */
    assert_int_equal(kube_error_set(&a, KUBE_ERR_CONFIG, "kubeconfig %s: %d", "/x", 7), -1);
    assert_int_equal(a.kind, KUBE_ERR_CONFIG);
    assert_string_equal(a.message, "kubeconfig /x: 7");
    assert_false(kube_error_is(&a, "NotFound"));
    test_from_http(&a, 409, "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"m\"}");
    assert_int_equal(kube_error_copy(&b, &a), 0);
    kube_error_clear(&a);
    assert_true(kube_error_is(&b, "Conflict"));
    assert_string_equal(b.message, "m");
    assert_int_equal(b.http_code, 409);
    kube_error_clear(&b);
    kube_error_clear(&b);
}

static void test_retryable(void **state)
{
    (void)state;
    static const struct {
        long code;
        bool retry;
    } cases[] = {{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {410, false},
                 {422, false}, {429, true},  {500, true},  {502, true},  {503, true},  {504, true}};
    kube_error err = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        test_from_http(&err, cases[i].code, "");
        assert_int_equal(kube_error_retryable(&err), cases[i].retry);
    }
    kube_error_set(&err, KUBE_ERR_TRANSPORT, "connection reset");
    assert_true(kube_error_retryable(&err));
    kube_error_set(&err, KUBE_ERR_CONFIG, "bad");
    assert_false(kube_error_retryable(&err));
    kube_error_set(&err, KUBE_ERR_DECODE, "bad");
    assert_false(kube_error_retryable(&err));
    kube_error_clear(&err);
    assert_false(kube_error_retryable(&err));
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_int_equal(kube_retry_after_parse("1"), 1);
    assert_int_equal(kube_retry_after_parse(" 120\r\n"), 120);
    assert_int_equal(kube_retry_after_parse("0"), 0);
    assert_int_equal(kube_retry_after_parse(NULL), -1);
    assert_int_equal(kube_retry_after_parse(""), -1);
    assert_int_equal(kube_retry_after_parse("-1"), -1);
    assert_int_equal(kube_retry_after_parse("1.5"), -1);
    assert_int_equal(kube_retry_after_parse("soon"), -1);
    assert_int_equal(kube_retry_after_parse("Wed, 21 Oct 2015 07:28:00 GMT"), -1);
    assert_int_equal(kube_retry_after_parse("99999999999999999999999"), -1);
}

TEST_MAIN(cmocka_unit_test(test_status_bodies), cmocka_unit_test(test_non_status_bodies),
          cmocka_unit_test(test_set_copy_clear), cmocka_unit_test(test_retryable),
          cmocka_unit_test(test_retry_after))

/* Tests of the idle probe's pure parts: paths and ports per runtime, and every way an answer can
 * be idle, busy or unreadable (which must never count as idle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool/probe.h"

static probe_verdict judge(const char *runtime, long code, const char *body, char *msg)
{
    return probe_judge(runtime, code, body, strlen(body), msg, 256);
}

static void test_paths(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_string_equal(probe_path(NULL, NULL, &why), "/slots");
    assert_string_equal(probe_path("llamacpp", NULL, &why), "/slots");
    assert_string_equal(probe_path("llamacpp-router", NULL, &why), "/slots");
    assert_string_equal(probe_path("vllm", NULL, &why), "/metrics");
    assert_string_equal(probe_path("tgi", NULL, &why), "/metrics");
    assert_string_equal(probe_path("sglang", NULL, &why), "/metrics");
    assert_string_equal(probe_path("generic", "/idle", &why), "/idle");
    assert_null(probe_path("generic", NULL, &why));
    assert_non_null(strstr(why, "idle-endpoint"));
    assert_null(probe_path("generic", "idle", &why));
    assert_non_null(strstr(why, "starting with '/'"));
    assert_null(probe_path("personaplex", NULL, &why));
    assert_null(probe_path("mystery", NULL, &why));
    assert_non_null(strstr(why, "unknown runtime"));
}

static void test_ports(void **state)
{
    (void)state;
    /* spec.containerPort first: where the member controller makes the server listen. */
    assert_int_equal(probe_port("vllm", 9000, 7000), 7000);
    assert_int_equal(probe_port("vllm", 9000, 0), 9000);
    assert_int_equal(probe_port("vllm", 0, 7000), 7000);
    assert_int_equal(probe_port("vllm", 0, 0), 8000);
    assert_int_equal(probe_port("tgi", 0, 0), 80);
    assert_int_equal(probe_port("sglang", 0, 0), 30000);
    assert_int_equal(probe_port(NULL, 0, 0), 8080);
    assert_int_equal(probe_port("llamacpp", 0, 0), 8080);
}

/* The one runtime table: what can be probed. */
static void test_runtimes(void **state)
{
    (void)state;
    assert_string_equal(probe_runtime_find(NULL)->name, "llamacpp");
    assert_string_equal(probe_runtime_find("")->name, "llamacpp");
    assert_null(probe_runtime_find("nope"));
    assert_true(probe_supported(NULL, NULL));
    assert_true(probe_supported("llamacpp-router", NULL));
    assert_true(probe_supported("sglang", NULL));
    assert_false(probe_supported("personaplex", "/idle"));
    assert_false(probe_supported("nope", "/idle"));
    assert_false(probe_supported("generic", NULL));
    assert_false(probe_supported("generic", ""));
    assert_true(probe_supported("generic", "/idle"));
}

static void test_slots(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(judge("llamacpp", 200, "[]", msg), PROBE_IDLE);
    assert_int_equal(judge("llamacpp", 200, "[{\"id\":0,\"is_processing\":false}]", msg),
                     PROBE_IDLE);
    assert_int_equal(
        judge("llamacpp", 200, "[{\"is_processing\":false},{\"is_processing\":true}]", msg),
        PROBE_BUSY);
    assert_string_equal(msg, "1 of 2 slots processing");
    assert_int_equal(judge("llamacpp", 200, "{\"slots\":[]}", msg), PROBE_ERROR);
    assert_int_equal(judge("llamacpp", 200, "not json", msg), PROBE_ERROR);
    assert_int_equal(judge("llamacpp", 501, "[]", msg), PROBE_ERROR);
    assert_non_null(strstr(msg, "HTTP 501"));
    assert_int_equal(judge("llamacpp", 0, "Connection refused", msg), PROBE_ERROR);
    assert_non_null(strstr(msg, "Connection refused"));
}

static void test_metrics(void **state)
{
    (void)state;
    char msg[256];
    const char *idle = "# HELP vllm:num_requests_running x\n"
                       "# TYPE vllm:num_requests_running gauge\n"
                       "vllm:num_requests_running{model_name=\"a\"} 0.0\n"
                       "vllm:num_requests_running_total_other 5\n";
    assert_int_equal(judge("vllm", 200, idle, msg), PROBE_IDLE);
    const char *busy = "vllm:num_requests_running{model_name=\"a\"} 0.0\n"
                       "vllm:num_requests_running{model_name=\"b\"} 2.0 1700000000\n";
    assert_int_equal(judge("vllm", 200, busy, msg), PROBE_BUSY);
    assert_int_equal(judge("tgi", 200, "tgi_batch_current_size 0\n", msg), PROBE_IDLE);
    assert_int_equal(judge("tgi", 200, "tgi_batch_current_size 3", msg), PROBE_BUSY);
    assert_int_equal(judge("sglang", 200, "sglang:num_running_reqs{a=\"}\"} 0\n", msg),
                     PROBE_ERROR);
    assert_int_equal(judge("sglang", 200, "sglang:num_running_reqs{a=\"b\"} 0\n", msg), PROBE_IDLE);
    assert_int_equal(judge("vllm", 200, "other_metric 0\n", msg), PROBE_ERROR);
    assert_non_null(strstr(msg, "not found"));
    assert_int_equal(judge("vllm", 200, "vllm:num_requests_running NaN\n", msg), PROBE_ERROR);
    assert_int_equal(judge("vllm", 200, "vllm:num_requests_running{x=\"y\" 0\n", msg), PROBE_ERROR);
}

static void test_generic_and_unsupported(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(judge("generic", 204, "", msg), PROBE_IDLE);
    assert_int_equal(judge("generic", 503, "", msg), PROBE_BUSY);
    assert_int_equal(judge("generic", 0, "timeout", msg), PROBE_ERROR);
    assert_int_equal(judge("personaplex", 200, "[]", msg), PROBE_UNSUPPORTED);
    assert_int_equal(judge("mystery", 200, "[]", msg), PROBE_UNSUPPORTED);
    assert_string_equal(probe_verdict_name(PROBE_BUSY), "Busy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),    cmocka_unit_test(test_ports),
        cmocka_unit_test(test_runtimes), cmocka_unit_test(test_slots),
        cmocka_unit_test(test_metrics),  cmocka_unit_test(test_generic_and_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

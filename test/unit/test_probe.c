/* Tests of the idle probe's pure parts: paths and ports per runtime, and every way an answer can
 * be idle, busy or unreadable (which must never count as idle). */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "loop/ev.h"
#include "pool/probe.h"
#include "pool/prober.h"

static probe_verdict judge(const char *runtime, long code, const char *body, char *msg)
{
    return probe_judge(runtime, code, body, strlen(body), msg, 256);
}

static void test_paths(void **state)
{
    (void)state;
    static const struct {
        const char *runtime, *annotation, *path;
    } ok[] = {{NULL, NULL, "/slots"},
              {"llamacpp", NULL, "/slots"},
              {"llamacpp-router", NULL, "/slots"},
              {"vllm", NULL, "/metrics"},
              {"tgi", NULL, "/metrics"},
              {"sglang", NULL, "/metrics"},
              {"generic", "/idle", "/idle"}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *path = NULL;
        assert_int_equal(probe_path(ok[i].runtime, ok[i].annotation, &path), 0);
        assert_string_equal(path, ok[i].path);
    }
    const char *path = NULL;
    int rc = probe_path("generic", NULL, &path);
    assert_int_equal(rc, -ENODATA);
    assert_non_null(strstr(probe_path_error(rc), "idle-endpoint"));
    rc = probe_path("generic", "idle", &path);
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(probe_path_error(rc), "starting with '/'"));
    assert_int_equal(probe_path("personaplex", NULL, &path), -EOPNOTSUPP);
    rc = probe_path("mystery", NULL, &path);
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(probe_path_error(rc), "unknown runtime"));
}

static void test_ports(void **state)
{
    (void)state;
    /* spec.containerPort first: where the member controller makes the server listen. */
    assert_int_equal(api_runtime_port("vllm", 9000, 7000), 7000);
    assert_int_equal(api_runtime_port("vllm", 9000, 0), 9000);
    assert_int_equal(api_runtime_port("vllm", 0, 7000), 7000);
    assert_int_equal(api_runtime_port("vllm", 0, 0), 8000);
    assert_int_equal(api_runtime_port("tgi", 0, 0), 80);
    assert_int_equal(api_runtime_port("sglang", 0, 0), 30000);
    assert_int_equal(api_runtime_port(NULL, 0, 0), 8080);
    assert_int_equal(api_runtime_port("llamacpp", 0, 0), 8080);
}

/* Pods "ns/p<i>" with uid "u<i>" are alive for even i. */
static bool test_alive(void *ud, const char *pod_key, const char *uid)
{
    (*(int *)ud)++;
    return atoi(uid + 1) % 2 == 0 && strcmp(pod_key + 4, uid + 1) == 0;
}

/* The prober's memory of its verdicts: by Pod UID, replaced, forgotten, and swept of the Pods
 * the cache no longer has once there are 64. */
static void test_memo(void **state)
{
    (void)state;
    ev_loop *loop = ev_new();
    prober *p = prober_new(loop, 1000);
    assert_non_null(p);
    int asked = 0;
    prober_memo_alive(p, test_alive, &asked);
    char uid[16], key[24];
    for (int i = 0; i < 63; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        snprintf(key, sizeof(key), "ns/p%d", i);
        assert_int_equal(prober_memo_set(p, uid, key, PROBE_BUSY, "busy", 90 + i, 100 + i), 0);
    }
    assert_int_equal(asked, 0);
    assert_int_equal(prober_memo_count(p), 63);
    assert_int_equal(prober_memo_set(p, "u2", "ns/p2", PROBE_IDLE, "idle", 450, 500), 0);
    const prober_memo *m = prober_memo_get(p, "u2");
    assert_int_equal(m->verdict, PROBE_IDLE);
    assert_int_equal(m->at_mono_ms, 500);
    assert_int_equal(m->sent_mono_ms, 450);
    assert_string_equal(m->message, "idle");
    prober_memo_forget(p, "u4");
    assert_null(prober_memo_get(p, "u4"));
    assert_int_equal(prober_memo_set(p, "u63", "ns/p63", PROBE_ERROR, NULL, 8, 9), 0);
    assert_int_equal(prober_memo_set(p, "u64", "ns/p64", PROBE_ERROR, NULL, 8, 9), 0);
    /* The 64th swept: the odd ones are gone, the even ones stay. */
    assert_int_equal(asked, 64);
    assert_int_equal(prober_memo_count(p), 32);
    assert_null(prober_memo_get(p, "u1"));
    assert_string_equal(prober_memo_get(p, "u64")->message, "");
    prober_free(p);
    ev_free(loop);
}

/* The one runtime table: what can be probed. */
static void test_runtimes(void **state)
{
    (void)state;
    assert_string_equal(api_runtime_find(NULL)->name, "llamacpp");
    assert_string_equal(api_runtime_find("")->name, "llamacpp");
    assert_null(api_runtime_find("nope"));
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
    /* A slot that does not say whether it processes (an older build's numeric "state"): not idle.
     */
    assert_int_equal(judge("llamacpp", 200, "[{\"id\":0,\"state\":1}]", msg), PROBE_ERROR);
    assert_string_equal(msg, "/slots: slot 0 has no boolean is_processing");
    assert_int_equal(
        judge("llamacpp", 200, "[{\"is_processing\":false},{\"is_processing\":\"true\"}]", msg),
        PROBE_ERROR);
    assert_int_equal(judge("llamacpp", 200, "[{\"is_processing\":false},3]", msg), PROBE_ERROR);
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

TEST_MAIN(cmocka_unit_test(test_paths), cmocka_unit_test(test_ports),
          cmocka_unit_test(test_runtimes), cmocka_unit_test(test_memo),
          cmocka_unit_test(test_slots), cmocka_unit_test(test_metrics),
          cmocka_unit_test(test_generic_and_unsupported))

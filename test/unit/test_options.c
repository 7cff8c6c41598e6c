/* Tests of the command-line parser: every flag, the environment fallbacks, and that each bad
 * input yields a message naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "app/options.h"

static const char *test_env_kv[8];

static const char *test_getenv(const char *name)
{
    for (int i = 0; test_env_kv[i]; i += 2)
        if (strcmp(test_env_kv[i], name) == 0)
            return test_env_kv[i + 1];
    return NULL;
}

static int parse_v(app_program program, app_options *o, char *err, size_t n, int argc, va_list ap)
{
    char *argv[16] = {program == APP_ROUTER ? "modelpool-router" : "modelpool-operator"};
    for (int i = 1; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    return app_options_parse_for(program, o, argc, argv, test_getenv, err, n);
}

static int parse(app_options *o, char *err, size_t n, int argc, ...)
{
    va_list ap;
    va_start(ap, argc);
    int rc = parse_v(APP_OPERATOR, o, err, n, argc, ap);
    va_end(ap);
    return rc;
}

static int parse_router(app_options *o, char *err, size_t n, int argc, ...)
{
    va_list ap;
    va_start(ap, argc);
    int rc = parse_v(APP_ROUTER, o, err, n, argc, ap);
    va_end(ap);
    return rc;
}

/* program's parse must refuse the arguments, with a message in err containing why (NULL: any). */
static void refused(app_program program, app_options *o, char *err, size_t n, const char *why,
                    int argc, ...)
{
    va_list ap;
    va_start(ap, argc);
    int rc = parse_v(program, o, err, n, argc, ap);
    va_end(ap);
    if (rc != -1)
        fail_msg("%s: %d, want -1", why ? why : "refusal", rc);
    if (why && !strstr(err, why))
        fail_msg("\"%s\" does not say %s", err, why);
}

/* program's --help contains want. */
static void assert_usage_has(app_program program, const char *want)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    app_options_usage(program, f);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(text, want));
    free(text);
}

static void test_defaults(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[128];
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_null(o.kubeconfig);
    assert_null(o.namespace_);
    assert_int_equal(o.log_level, 0);
    assert_false(o.help);
    assert_false(o.version);
}

static void test_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[128];
    assert_int_equal(parse(&o, err, sizeof(err), 9, "--kubeconfig", "/k", "--context=c",
                           "--namespace", "ns", "-v", "3", "--version"),
                     0);
    assert_string_equal(o.kubeconfig, "/k");
    assert_string_equal(o.context, "c");
    assert_string_equal(o.namespace_, "ns");
    assert_int_equal(o.log_level, 3);
    assert_true(o.version);
    assert_false(o.log_json);
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--log-format", "json"), 0);
    assert_true(o.log_json);
    assert_int_equal(parse(&o, err, sizeof(err), 2, "-h"), 0);
    assert_true(o.help);
}

static void test_env_and_precedence(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    test_env_kv[0] = "KUBECONFIG";
    test_env_kv[1] = "/env/k";
    test_env_kv[2] = "WATCH_NAMESPACE";
    test_env_kv[3] = "envns";
    test_env_kv[4] = "LOG_LEVEL";
    test_env_kv[5] = "2";
    app_options o;
    char err[128];
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_string_equal(o.kubeconfig, "/env/k");
    assert_string_equal(o.namespace_, "envns");
    assert_int_equal(o.log_level, 2);
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--kubeconfig", "/flag/k"), 0);
    assert_string_equal(o.kubeconfig, "/flag/k");
    test_env_kv[5] = "loud";
    refused(APP_OPERATOR, &o, err, sizeof(err), "LOG_LEVEL=loud", 1);
}

static void test_leader_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[128];
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_false(o.leader_elect);
    assert_string_equal(o.leader_election_id, "modelpool-operator");
    assert_null(o.leader_election_ns);
    assert_int_equal(parse(&o, err, sizeof(err), 5, "--leader-elect", "--leader-election-id", "x",
                           "--leader-election-namespace=sys"),
                     0);
    assert_true(o.leader_elect);
    assert_string_equal(o.leader_election_id, "x");
    assert_string_equal(o.leader_election_ns, "sys");
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--leader-elect=true"), 0);
    assert_true(o.leader_elect);
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--leader-elect=false"), 0);
    assert_false(o.leader_elect);
    test_env_kv[0] = "POD_NAMESPACE";
    test_env_kv[1] = "podns";
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_string_equal(o.leader_election_ns, "podns");
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--leader-election-namespace", "flagns"), 0);
    assert_string_equal(o.leader_election_ns, "flagns");
    assert_true(o.fence_acks);
    assert_null(o.router_lease_ns);
    assert_int_equal(
        parse(&o, err, sizeof(err), 3, "--fence-acks=false", "--router-lease-namespace=rl"), 0);
    assert_false(o.fence_acks);
    assert_string_equal(o.router_lease_ns, "rl");
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--router-lease-namespace="), 0);
    assert_null(o.router_lease_ns);
    refused(APP_OPERATOR, &o, err, sizeof(err), "--leader-elect=yes", 2, "--leader-elect=yes");
    refused(APP_OPERATOR, &o, err, sizeof(err), "--leader-election-id", 2, "--leader-election-id=");
}

static void test_server_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[200];
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_string_equal(o.metrics_addr, ":8443");
    assert_string_equal(o.health_addr, ":8081");
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--metrics-bind-address=127.0.0.1:9090",
                           "--health-probe-bind-address=[::1]:0"),
                     0);
    assert_string_equal(o.metrics_addr, "127.0.0.1:9090");
    assert_string_equal(o.health_addr, "[::1]:0");
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--metrics-bind-address", "0"), 0);
    assert_string_equal(o.metrics_addr, "0");
    /* Both off is fine; both on one address is not. */
    assert_int_equal(
        parse(&o, err, sizeof(err), 3, "--metrics-bind-address=0", "--health-probe-bind-address=0"),
        0);
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--metrics-bind-address=127.0.0.1:0",
                           "--health-probe-bind-address=127.0.0.1:0"),
                     0);
    refused(APP_OPERATOR, &o, err, sizeof(err), "different ports", 2,
            "--metrics-bind-address=:8081");
    refused(APP_OPERATOR, &o, err, sizeof(err),
            "--metrics-bind-address: bind address 8080 has no port", 2,
            "--metrics-bind-address=8080");
    refused(APP_OPERATOR, &o, err, sizeof(err),
            "--health-probe-bind-address: bind address :99999: bad port", 2,
            "--health-probe-bind-address=:99999");
    refused(APP_OPERATOR, &o, err, sizeof(err), "not an IPv4 address", 2,
            "--metrics-bind-address=localhost:80");
}

static void test_metrics_security_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[200];
    /* Secure by default, with kubebuilder's port and file names. */
    assert_int_equal(parse(&o, err, sizeof(err), 1), 0);
    assert_true(o.metrics_secure);
    assert_null(o.metrics_cert_path);
    assert_string_equal(o.metrics_cert_name, "tls.crt");
    assert_string_equal(o.metrics_cert_key, "tls.key");
    /* Plain HTTP keeps the old default port; an explicit address wins either way. */
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--metrics-secure=false"), 0);
    assert_false(o.metrics_secure);
    assert_string_equal(o.metrics_addr, ":8080");
    assert_int_equal(
        parse(&o, err, sizeof(err), 3, "--metrics-secure=false", "--metrics-bind-address=:9000"),
        0);
    assert_string_equal(o.metrics_addr, ":9000");
    /* The last occurrence wins, as with Go flags; bare means true. */
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--metrics-secure=false", "--metrics-secure"),
                     0);
    assert_true(o.metrics_secure);
    assert_string_equal(o.metrics_addr, ":8443");
    assert_int_equal(parse(&o, err, sizeof(err), 5, "--metrics-cert-path", "/certs",
                           "--metrics-cert-name=c.pem", "--metrics-cert-key=k.pem"),
                     0);
    assert_string_equal(o.metrics_cert_path, "/certs");
    assert_string_equal(o.metrics_cert_name, "c.pem");
    assert_string_equal(o.metrics_cert_key, "k.pem");
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--metrics-cert-path="), 0);
    assert_null(o.metrics_cert_path);

    refused(APP_OPERATOR, &o, err, sizeof(err), "--metrics-secure=yes: want true or false", 2,
            "--metrics-secure=yes");
    refused(APP_OPERATOR, &o, err, sizeof(err), "must not be empty", 2, "--metrics-cert-key=");
    refused(APP_OPERATOR, &o, err, sizeof(err), "--metrics-cert-path needs --metrics-secure", 3,
            "--metrics-secure=false", "--metrics-cert-path=/c");
    /* The secure default port still must not clash with the health port. */
    refused(APP_OPERATOR, &o, err, sizeof(err), "different ports", 2,
            "--health-probe-bind-address=:8443");
}

static void test_reconcile_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[160];
    assert_int_equal(parse(&o, err, sizeof(err), 4, "--max-concurrent-reconciles", "16",
                           "--probe-timeout=1m30s"),
                     0);
    assert_int_equal(o.max_concurrent_reconciles, 16);
    assert_int_equal(o.probe_timeout_ms, 90000);
    assert_int_equal(parse(&o, err, sizeof(err), 2, "--probe-timeout=250ms"), 0);
    assert_int_equal(o.probe_timeout_ms, 250);
    assert_int_equal(o.drain_fence_ms, 2000);
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--drain-fence", "500ms"), 0);
    assert_int_equal(o.drain_fence_ms, 500);
    assert_int_equal(parse(&o, err, sizeof(err), 3, "--drain-fence", "100ms"), 0);
    refused(APP_OPERATOR, &o, err, sizeof(err), "from 100ms", 3, "--drain-fence", "99ms");

    const char *bad_n[] = {"0", "-1", "x", "4x", "1001", ""};
    for (size_t i = 0; i < sizeof(bad_n) / sizeof(*bad_n); i++) {
        refused(APP_OPERATOR, &o, err, sizeof(err), "--max-concurrent-reconciles", 3,
                "--max-concurrent-reconciles", bad_n[i]);
        assert_non_null(strstr(err, "want a number from 1 to 1000"));
    }
    /* A bare number is not a Go duration; 0 would never wait at all. */
    const char *bad_d[] = {"2", "0s", "-1s", "soon", "25h", "0.1ms"};
    for (size_t i = 0; i < sizeof(bad_d) / sizeof(*bad_d); i++) {
        refused(APP_OPERATOR, &o, err, sizeof(err), "--probe-timeout", 3, "--probe-timeout",
                bad_d[i]);
        assert_non_null(strstr(err, bad_d[i]));
        refused(APP_OPERATOR, &o, err, sizeof(err), "--drain-fence", 3, "--drain-fence", bad_d[i]);
        assert_non_null(strstr(err, bad_d[i]));
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[128];
    refused(APP_OPERATOR, &o, err, sizeof(err), "--bogus", 2, "--bogus");
    refused(APP_OPERATOR, &o, err, sizeof(err), "--kubeconfig needs a value", 2, "--kubeconfig");
    refused(APP_OPERATOR, &o, err, sizeof(err), "--log-level 9", 3, "-v", "9");
    refused(APP_OPERATOR, &o, err, sizeof(err), "--log-format yaml", 3, "--log-format", "yaml");
    refused(APP_OPERATOR, &o, err, sizeof(err), "stray", 2, "stray");
}

/* The router's flags: its own, the shared ones, and the operator's refused. */
static void test_router_flags(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[160];
    assert_int_equal(parse_router(&o, err, sizeof(err), 1), 0);
    assert_int_equal(o.program, APP_ROUTER);
    assert_string_equal(o.bind_addr, ":8080");
    assert_string_equal(o.metrics_addr, ":8443");
    assert_null(o.label_selector);
    assert_int_equal(o.max_body_bytes, 32LL << 20);
    assert_int_equal(o.resident_grace_ms, 10000);
    assert_int_equal(o.upstream_timeout_ms, 600000);
    assert_int_equal(o.drain_fence_ms, 2000); /* shared with the operator, same default */
    assert_int_equal(o.body_budget_bytes, 128LL << 20);
    assert_int_equal(o.body_idle_ms, 30000);
    assert_int_equal(
        parse_router(&o, err, sizeof(err), 3, "--body-buffer-budget=2Mi", "--body-idle-timeout=1s"),
        0);
    assert_int_equal(o.body_budget_bytes, 2LL << 20);
    assert_int_equal(o.body_idle_ms, 1000);
    refused(APP_ROUTER, &o, err, sizeof(err), "--body-buffer-budget 64Ki", 2,
            "--body-buffer-budget=64Ki");
    refused(APP_ROUTER, &o, err, sizeof(err), "--body-idle-timeout never", 2,
            "--body-idle-timeout=never");
    refused(APP_OPERATOR, &o, err, sizeof(err), NULL, 2, "--body-idle-timeout=1s");
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--drain-fence=5s"), 0);
    assert_int_equal(o.drain_fence_ms, 5000);
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--upstream-timeout=90s"), 0);
    assert_int_equal(o.upstream_timeout_ms, 90000);
    refused(APP_ROUTER, &o, err, sizeof(err), "--upstream-timeout 0s", 2, "--upstream-timeout=0s");
    /* Connection limits: defaults, values, bad values, and the operator refuses them. */
    assert_int_equal(o.max_connections, 0); /* derived from the open-files limit */
    assert_int_equal(o.max_per_client, 256);
    assert_int_equal(o.header_timeout_ms, 10000);
    assert_int_equal(parse_router(&o, err, sizeof(err), 4, "--max-connections=500",
                                  "--max-connections-per-client=0", "--header-timeout=3s"),
                     0);
    assert_int_equal(o.max_connections, 500);
    assert_int_equal(o.max_per_client, 0);
    assert_int_equal(o.header_timeout_ms, 3000);
    const char *bad_conn[] = {"--max-connections=-1",      "--max-connections=x",
                              "--max-connections=1000001", "--max-connections-per-client=-1",
                              "--header-timeout=0s",       "--header-timeout=10"};
    for (size_t i = 0; i < sizeof(bad_conn) / sizeof(*bad_conn); i++) {
        refused(APP_ROUTER, &o, err, sizeof(err), "--", 2, bad_conn[i]);
    }
    refused(APP_OPERATOR, &o, err, sizeof(err), "unknown flag", 2, "--max-connections=5");
    /* The cap for an open-files limit: half of what is left after the reserve, up to 16384. */
    unsigned cap = 0;
    assert_int_equal(parse_router(&o, err, sizeof(err), 1), 0);
    assert_int_equal(app_router_connections(&o, 1024, &cap, err, sizeof(err)), 0);
    assert_int_equal(cap, (1024 - 256) / 2);
    assert_int_equal(app_router_connections(&o, 1048576, &cap, err, sizeof(err)), 0);
    assert_int_equal(cap, 16384);
    assert_int_equal(app_router_connections(&o, 100, &cap, err, sizeof(err)), 0);
    assert_int_equal(cap, 25);
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--max-connections=400"), 0);
    assert_int_equal(app_router_connections(&o, 1024, &cap, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "at most 384"));
    assert_int_equal(app_router_connections(&o, 1048576, &cap, err, sizeof(err)), 0);
    assert_int_equal(cap, 400);
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--metrics-secure=false"), 0);
    assert_string_equal(o.metrics_addr, ":9090");
    assert_int_equal(parse_router(&o, err, sizeof(err), 7, "--bind-address=127.0.0.1:0",
                                  "--label-selector", "team=a", "--max-body-size=1Ki",
                                  "--resident-grace=250ms", "--namespace=ml"),
                     0);
    assert_string_equal(o.bind_addr, "127.0.0.1:0");
    assert_string_equal(o.label_selector, "team=a");
    assert_int_equal(o.max_body_bytes, 1024);
    assert_int_equal(o.resident_grace_ms, 250);
    assert_string_equal(o.namespace_, "ml");
    refused(APP_ROUTER, &o, err, sizeof(err), "--max-body-size 2Ti", 2, "--max-body-size=2Ti");
    refused(APP_ROUTER, &o, err, sizeof(err), NULL, 2, "--max-body-size=0");
    refused(APP_ROUTER, &o, err, sizeof(err), "--resident-grace soon", 2, "--resident-grace=soon");
    refused(APP_ROUTER, &o, err, sizeof(err), "--bind-address", 2, "--bind-address=0");
    refused(APP_ROUTER, &o, err, sizeof(err), "need different ports", 2, "--bind-address=:8081");
    /* the operator's flags are not the router's, and the other way round */
    refused(APP_ROUTER, &o, err, sizeof(err), "unknown flag --leader-elect", 2, "--leader-elect");
    refused(APP_OPERATOR, &o, err, sizeof(err), "unknown flag --bind-address", 2,
            "--bind-address=:9000");
    assert_usage_has(APP_ROUTER, "--resident-grace DURATION");
}

/* The router's home namespace: the flag, else --namespace, else $POD_NAMESPACE, else none. */
static void test_home_namespace(void **state)
{
    (void)state;
    memset(test_env_kv, 0, sizeof(test_env_kv));
    app_options o;
    char err[160];
    assert_int_equal(parse_router(&o, err, sizeof(err), 1), 0);
    assert_null(o.home_namespace);
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--namespace=ml"), 0);
    assert_string_equal(o.home_namespace, "ml");
    test_env_kv[0] = "POD_NAMESPACE";
    test_env_kv[1] = "modelpool-system";
    assert_int_equal(parse_router(&o, err, sizeof(err), 1), 0);
    assert_string_equal(o.home_namespace, "modelpool-system");
    assert_int_equal(parse_router(&o, err, sizeof(err), 2, "--namespace=ml"), 0);
    assert_string_equal(o.home_namespace, "ml");
    assert_int_equal(parse_router(&o, err, sizeof(err), 3, "--home-namespace", "team-a"), 0);
    assert_string_equal(o.home_namespace, "team-a");
    assert_int_equal(parse_router(&o, err, sizeof(err), 3, "--home-namespace=ml", "--namespace=ml"),
                     0);
    assert_string_equal(o.home_namespace, "ml");
    /* a home the router does not watch, or an empty one: refused, named */
    refused(APP_ROUTER, &o, err, sizeof(err), NULL, 3, "--home-namespace=a", "--namespace=ml");
    assert_string_equal(err,
                        "--home-namespace a: the router watches only namespace ml (--namespace)");
    refused(APP_ROUTER, &o, err, sizeof(err), NULL, 2, "--home-namespace=");
    assert_string_equal(err, "--home-namespace must not be empty");
    /* the operator has no such flag */
    refused(APP_OPERATOR, &o, err, sizeof(err), "unknown flag --home-namespace", 2,
            "--home-namespace=ml");
    assert_usage_has(APP_ROUTER, "--home-namespace NS");
    memset(test_env_kv, 0, sizeof(test_env_kv));
}

/* Each table: names unique, every flag helped, a default shown as it is read ("0: ..." starts
 * with 0), and --help within 79 columns naming every flag. */
static void test_tables(void **state)
{
    (void)state;
    for (int p = APP_OPERATOR; p <= APP_ROUTER; p++) {
        size_t n;
        const app_flag *t = app_flags((app_program)p, &n);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        app_options_usage((app_program)p, f);
        assert_int_equal(fclose(f), 0);
        for (size_t i = 0; i < n; i++) {
            char spelled[64];
            snprintf(spelled, sizeof(spelled), "--%s", t[i].name);
            assert_non_null(strstr(text, spelled));
            assert_non_null(t[i].help);
            for (size_t j = i + 1; j < n; j++)
                assert_string_not_equal(t[i].name, t[j].name);
            if (t[i].value && t[i].shown)
                assert_memory_equal(t[i].shown, t[i].value, strlen(t[i].value));
        }
        for (const char *line = text; *line; line += strcspn(line, "\n") + 1)
            assert_true(strcspn(line, "\n") <= 79);
        free(text);
    }
}

TEST_MAIN(cmocka_unit_test(test_defaults), cmocka_unit_test(test_flags),
          cmocka_unit_test(test_env_and_precedence), cmocka_unit_test(test_leader_flags),
          cmocka_unit_test(test_server_flags), cmocka_unit_test(test_bad_input),
          cmocka_unit_test(test_metrics_security_flags), cmocka_unit_test(test_reconcile_flags),
          cmocka_unit_test(test_router_flags), cmocka_unit_test(test_home_namespace),
          cmocka_unit_test(test_tables))

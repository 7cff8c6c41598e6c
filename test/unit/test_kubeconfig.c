/* Tests of kube_config: each way a kubeconfig authenticates, CA forms, insecure, contexts, the
 * errors users meet (missing fields, unknown names, exec plugins, bad YAML, bad base64, missing
 * files), the in-cluster service account in a fake folder, token re-reads and the lookup order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_main.h"

#include "kube/config.h"

#define FIXTURES MP_SOURCE_DIR "/test/unit/fixtures/kube"
#define KUBECONFIG FIXTURES "/kubeconfig.yaml"

/* Loads a context of the shared fixture and expects success. */
static void test_load(kube_config *cfg, const char *context)
{
    kube_error err = {0};
    int rc = kube_config_load_file(cfg, KUBECONFIG, context, &err);
    if (rc != 0)
        fail_msg("%s", err.message);
    assert_int_equal(err.kind, KUBE_OK);
}

/* Expects loading to fail with a KUBE_ERR_CONFIG whose message contains want. */
static void test_fails(const char *path, const char *context, const char *want)
{
    kube_config cfg = {0};
    kube_error err = {0};
    assert_int_equal(kube_config_load_file(&cfg, path, context, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_CONFIG);
    if (!strstr(err.message, want))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, want);
    assert_null(cfg.server); /* nothing half-loaded is left behind */
    kube_error_clear(&err);
}

/* Parses a kubeconfig held in a string, as if it were a file in the fixtures folder. */
static int test_parse(kube_config *cfg, const char *yaml, const char *context, kube_error *err)
{
    return kube_config_parse(cfg, yaml, strlen(yaml), FIXTURES "/inline.yaml", context, err);
}

static void test_parse_fails(const char *yaml, const char *want)
{
    kube_config cfg = {0};
    kube_error err = {0};
    assert_int_equal(test_parse(&cfg, yaml, NULL, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_CONFIG);
    if (!strstr(err.message, want))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, want);
    assert_non_null(strstr(err.message, "inline.yaml"));
    kube_error_clear(&err);
}

/* got is the fixtures' folder (made absolute) followed by "/" and rel. */
static void assert_fixture_path(const char *got, const char *rel)
{
    char *dir = realpath(FIXTURES, NULL);
    assert_non_null(dir);
    char want[4096];
    snprintf(want, sizeof(want), "%s/%s", dir, rel);
    free(dir);
    assert_string_equal(got, want);
}

static void test_token_and_ca_data(void **state)
{
    (void)state;
    kube_config cfg = {0};
    test_load(&cfg, NULL); /* current-context: token */
    assert_string_equal(cfg.server, "https://127.0.0.1:6443");
    assert_string_equal(cfg.context, "token");
    assert_string_equal(cfg.namespace_, "team-a");
    assert_string_equal(cfg.origin, KUBECONFIG);
    assert_string_equal(cfg.token, "abc.def");
    assert_null(cfg.token_file);
    assert_int_equal(cfg.ca_data_len, 12);
    assert_memory_equal(cfg.ca_data, "CA-PEM-BYTES", 12);
    assert_null(cfg.ca_file);
    assert_false(cfg.insecure);
    const char *tok;
    kube_error err = {0};
    assert_int_equal(kube_config_token(&cfg, 0, &tok, &err), 0);
    assert_string_equal(tok, "abc.def");
    kube_config_clear(&cfg);
}

static void test_token_file_and_ca_file(void **state)
{
    (void)state;
    kube_config cfg = {0};
    test_load(&cfg, "token-file");
    assert_string_equal(cfg.server, "https://[::1]:6443");
    assert_string_equal(cfg.namespace_, "default");
    /* Relative paths are anchored at the kubeconfig's folder and made absolute. */
    assert_fixture_path(cfg.ca_file, "ca.crt");
    assert_fixture_path(cfg.token_file, "token");
    assert_string_equal(cfg.token, "fixture-token");
    kube_config_clear(&cfg);
}

static void test_cert_files(void **state)
{
    (void)state;
    kube_config cfg = {0};
    test_load(&cfg, "cert-files");
    assert_fixture_path(cfg.cert_file, "client.crt");
    assert_fixture_path(cfg.key_file, "./client.key");
    assert_null(cfg.token);
    assert_null(cfg.cert_data);
    kube_config_clear(&cfg);
}

static void test_cert_data(void **state)
{
    (void)state;
    kube_config cfg = {0};
    test_load(&cfg, "cert-data");
    assert_int_equal(cfg.cert_data_len, 8);
    assert_memory_equal(cfg.cert_data, "CERT-PEM", 8);
    /* Base64 split over lines (a YAML block scalar) decodes as one. */
    assert_int_equal(cfg.key_data_len, 8);
    assert_memory_equal(cfg.key_data, "KEY-PEM\n", 8);
    assert_null(cfg.cert_file);
    kube_config_clear(&cfg);
}

static void test_insecure_and_proxy(void **state)
{
    (void)state;
    kube_config cfg = {0};
    test_load(&cfg, "insecure");
    assert_true(cfg.insecure);
    assert_string_equal(cfg.server, "https://10.0.0.1");
    kube_config_clear(&cfg);
    test_load(&cfg, "proxied");
    assert_false(cfg.insecure);
    assert_string_equal(cfg.proxy_url, "http://proxy.example.test:3128");
    assert_null(cfg.token); /* a context without a user is anonymous */
    kube_config_clear(&cfg);
}

static void test_config_errors(void **state)
{
    (void)state;
    test_fails(KUBECONFIG, "no-server", "cluster \"no-server\": server is missing");
    test_fails(KUBECONFIG, "nope", "context \"nope\": not found");
    test_fails(KUBECONFIG, "ghost-user", "user \"ghost\": not found");
    test_fails(KUBECONFIG, "ghost-cluster", "cluster \"ghost\": not found");
    test_fails(KUBECONFIG, "aws", "exec credential plugin \"aws\" is not supported");
    test_fails(FIXTURES "/bad.yaml", NULL, "bad YAML: line ");
    test_fails(FIXTURES "/bad.yaml", NULL, FIXTURES "/bad.yaml");
    test_fails(FIXTURES "/does-not-exist.yaml", NULL, "No such file");
    test_fails(FIXTURES, NULL, "Is a directory");
}

/* A kubeconfig whose only user has the given fields (indented four spaces). */
static const char *test_with_user(char *buf, size_t n, const char *user)
{
    snprintf(buf, n,
             "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
             "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
             "users:\n- name: u\n  user:\n%s",
             user);
    return buf;
}

static void test_inline_errors(void **state)
{
    (void)state;
    char buf[2048];
#define WITH_USER(user) test_with_user(buf, sizeof(buf), user)
    test_parse_fails(WITH_USER("    auth-provider: {name: gcp}\n"),
                     "auth-provider \"gcp\" is not supported");
    test_parse_fails(WITH_USER("    username: admin\n    password: secret\n"),
                     "basic authentication (username/password) is not supported");
    test_parse_fails(WITH_USER("    as: someone-else\n    token: t\n"), "impersonation (as)");
    test_parse_fails(WITH_USER("    client-certificate-data: '!!!!'\n    client-key-data: a2V5\n"),
                     "user \"u\": client-certificate-data is not valid base64");
    test_parse_fails(WITH_USER("    client-certificate-data: Q0VSVC1QRU0\n"
                               "    client-key-data: a2V5\n"),
                     "client-certificate-data is not valid base64"); /* no padding */
    test_parse_fails(WITH_USER("    client-certificate: client.crt\n"),
                     "client-certificate and client-key must be given together");
    test_parse_fails(WITH_USER("    client-certificate: client.crt\n"
                               "    client-certificate-data: Q0VSVC1QRU0=\n"
                               "    client-key: client.key\n"),
                     "client-certificate and client-certificate-data are both set");
    test_parse_fails(WITH_USER("    client-certificate: missing.crt\n    client-key: client.key\n"),
                     "/missing.crt: No such file or directory");
    test_parse_fails(WITH_USER("    tokenFile: /nonexistent/token\n"),
                     "tokenFile /nonexistent/token: No such file or directory");
    test_parse_fails(WITH_USER("    token: [a, b]\n"), "user \"u\": token must be a string");
#undef WITH_USER
    test_parse_fails("contexts: []\n", "no current-context set and no context given");
    test_parse_fails("just a string\n", "top level is not a mapping");
    test_parse_fails("", "bad YAML: empty document");
    test_parse_fails("a: 1\n---\nb: 2\n", "more than one YAML document");
    test_parse_fails("a: &x [1]\nb: *x\n", "aliases are not supported");
    test_parse_fails("a: 1\na: 2\n", "duplicate or invalid mapping key");
    test_parse_fails("current-context: x\ncontexts: {x: y}\n", "contexts must be a list");
    test_parse_fails("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                     "clusters:\n- name: c\n  cluster: {server: 'ftp://h'}\n",
                     "server must start with https:// or http://");
    /* A server without a host was taken and failed on every request later (fuzz_kubeconfig). */
    static const char *const hostless[] = {"https://", "http://", "https:///api", "https://:6443",
                                           "http://?x"};
    for (size_t i = 0; i < sizeof(hostless) / sizeof(*hostless); i++) {
        char yaml[256];
        snprintf(yaml, sizeof(yaml),
                 "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                 "clusters:\n- name: c\n  cluster: {server: '%s'}\n",
                 hostless[i]);
        test_parse_fails(yaml, "cluster \"c\": server has no host");
    }
    test_parse_fails("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                     "clusters:\n- name: c\n  cluster: {server: 'https://h', "
                     "insecure-skip-tls-verify: maybe}\n",
                     "insecure-skip-tls-verify must be true or false");
    test_parse_fails("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                     "clusters:\n- name: c\n  cluster: {server: 'https://h', "
                     "insecure-skip-tls-verify: true, certificate-authority: ca.crt}\n",
                     "contradict");
    test_parse_fails("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                     "clusters:\n- name: c\n  cluster: {server: 'https://h', "
                     "tls-server-name: other}\n",
                     "tls-server-name is not supported");
    test_parse_fails("current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n",
                     "context \"x\": cluster is missing");
}

static char *test_tmpdir(void)
{
    char tmpl[] = "/tmp/kubecfg-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void test_write(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_rmtree(char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static void test_incluster(void **state)
{
    (void)state;
    char *root = test_tmpdir();
    test_write(root, "token", "sa-token-1\n");
    test_write(root, "ca.crt", "-----BEGIN CERTIFICATE-----\n");
    test_write(root, "namespace", "operators\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    kube_config cfg = {0};
    kube_error err = {0};
    assert_int_equal(kube_config_load_incluster(&cfg, root, &err), 0);
    assert_string_equal(cfg.server, "https://10.96.0.1:443");
    assert_string_equal(cfg.token, "sa-token-1");
    assert_string_equal(cfg.namespace_, "operators");
    assert_string_equal(cfg.origin, "in-cluster");
    assert_non_null(strstr(cfg.ca_file, "/ca.crt"));
    assert_non_null(cfg.token_file);
    kube_config_clear(&cfg);

    /* IPv6 service address; no namespace file. */
    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    char nsfile[4096];
    snprintf(nsfile, sizeof(nsfile), "%s/namespace", root);
    unlink(nsfile);
    assert_int_equal(kube_config_load_incluster(&cfg, root, &err), 0);
    assert_string_equal(cfg.server, "https://[fd00:10:96::1]:443");
    assert_string_equal(cfg.namespace_, "default");
    kube_config_clear(&cfg);

    /* No token: a clear error naming the file. */
    char tokfile[4096];
    snprintf(tokfile, sizeof(tokfile), "%s/token", root);
    unlink(tokfile);
    assert_int_equal(kube_config_load_incluster(&cfg, root, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_CONFIG);
    assert_non_null(strstr(err.message, tokfile));
    assert_null(cfg.server);
    kube_error_clear(&err);

    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(kube_config_load_incluster(&cfg, root, &err), -1);
    assert_non_null(strstr(err.message, "KUBERNETES_SERVICE_PORT"));
    kube_error_clear(&err);
    unsetenv("KUBERNETES_SERVICE_HOST");
    test_rmtree(root);
}

static void test_token_reread(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    test_write(dir, "tok", "first\n");
    char yaml[8192];
    snprintf(yaml, sizeof(yaml),
             "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
             "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
             "users:\n- name: u\n  user: {token: static, tokenFile: %s/tok}\n",
             dir);
    kube_config cfg = {0};
    kube_error err = {0};
    assert_int_equal(test_parse(&cfg, yaml, NULL, &err), 0);
    assert_string_equal(cfg.token, "first"); /* the file wins over the fixed token */
    uint64_t t0 = cfg.token_read_ms;
    const char *tok;

    test_write(dir, "tok", "second\n");
    assert_int_equal(kube_config_token(&cfg, t0 + 1000, &tok, &err), 0);
    assert_string_equal(tok, "first"); /* read less than a minute ago */
    assert_int_equal(kube_config_token(&cfg, t0 + 61000, &tok, &err), 0);
    assert_string_equal(tok, "second");

    /* The file vanishes mid-rotation: the last token is kept. */
    char path[4096];
    snprintf(path, sizeof(path), "%s/tok", dir);
    unlink(path);
    assert_int_equal(kube_config_token(&cfg, t0 + 200000, &tok, &err), 0);
    assert_string_equal(tok, "second");
    test_write(dir, "tok", "third");
    assert_int_equal(kube_config_token(&cfg, t0 + 200001, &tok, &err), 0);
    assert_string_equal(tok, "third");

    /* A copy (what the client keeps) re-reads on its own. */
    kube_config copy = {0};
    assert_int_equal(kube_config_copy(&copy, &cfg, &err), 0);
    test_write(dir, "tok", "fourth");
    assert_int_equal(kube_config_token(&copy, t0 + 300000, &tok, &err), 0);
    assert_string_equal(tok, "fourth");
    assert_string_equal(cfg.token, "third");
    kube_config_clear(&copy);
    kube_config_clear(&cfg);
    test_rmtree(dir);
}

static void test_copy(void **state)
{
    (void)state;
    kube_config cfg = {0}, copy = {0};
    kube_error err = {0};
    test_load(&cfg, "cert-data");
    cfg.user_agent = strdup("agent/1");
    assert_int_equal(kube_config_copy(&copy, &cfg, &err), 0);
    kube_config_clear(&cfg);
    assert_string_equal(copy.server, "https://127.0.0.1:6443");
    assert_memory_equal(copy.ca_data, "CA-PEM-BYTES", copy.ca_data_len);
    assert_memory_equal(copy.cert_data, "CERT-PEM", copy.cert_data_len);
    assert_memory_equal(copy.key_data, "KEY-PEM\n", copy.key_data_len);
    assert_string_equal(copy.user_agent, "agent/1");
    kube_config_clear(&copy);
}

static void test_resolve_order(void **state)
{
    (void)state;
    char *home = test_tmpdir();
    char *root = test_tmpdir();
    test_write(root, "token", "sa\n");
    test_write(root, "ca.crt", "x\n");
    setenv("HOME", home, 1);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    kube_config cfg = {0};
    kube_error err = {0};
    kube_config_opts opts = {.incluster_root = root};

    /* Nothing at all: the error says what was tried. */
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_CONFIG);
    assert_non_null(strstr(err.message, "no --kubeconfig"));
    assert_non_null(strstr(err.message, "KUBECONFIG not set"));
    assert_non_null(strstr(err.message, "KUBERNETES_SERVICE_HOST is not set"));
    assert_non_null(strstr(err.message, "/.kube/config not found"));
    kube_error_clear(&err);

    /* ~/.kube/config. */
    char kdir[4096];
    snprintf(kdir, sizeof(kdir), "%s/.kube", home);
    assert_int_equal(mkdir(kdir, 0700), 0);
    test_write(kdir, "config",
               "current-context: h\ncontexts:\n- name: h\n  context: {cluster: c}\n"
               "clusters:\n- name: c\n  cluster: {server: 'https://home'}\n");
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), 0);
    assert_string_equal(cfg.server, "https://home");
    kube_config_clear(&cfg);

    /* In-cluster beats the home file. */
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), 0);
    assert_string_equal(cfg.origin, "in-cluster");
    kube_config_clear(&cfg);

    /* KUBECONFIG beats in-cluster; empty entries are ignored, a list of files is refused. */
    setenv("KUBECONFIG", ":" KUBECONFIG ":/nonexistent", 1);
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), -1);
    assert_int_equal(err.kind, KUBE_ERR_CONFIG);
    assert_non_null(strstr(err.message, "lists several files"));
    assert_non_null(strstr(err.message, "/nonexistent"));
    kube_error_clear(&err);
    setenv("KUBECONFIG", ":" KUBECONFIG "::", 1);
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), 0);
    assert_string_equal(cfg.origin, KUBECONFIG);
    assert_string_equal(cfg.context, "token");
    kube_config_clear(&cfg);

    /* --kubeconfig and --context beat everything. */
    char explicit[4200];
    snprintf(explicit, sizeof(explicit), "%s/config", kdir);
    opts.kubeconfig = KUBECONFIG;
    opts.context = "insecure";
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), 0);
    assert_true(cfg.insecure);
    kube_config_clear(&cfg);
    opts.kubeconfig = explicit;
    opts.context = NULL;
    assert_int_equal(kube_config_resolve(&cfg, &opts, &err), 0);
    assert_string_equal(cfg.server, "https://home");
    kube_config_clear(&cfg);

    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    test_rmtree(home);
    test_rmtree(root);
}

TEST_MAIN(cmocka_unit_test(test_token_and_ca_data), cmocka_unit_test(test_token_file_and_ca_file),
          cmocka_unit_test(test_cert_files), cmocka_unit_test(test_cert_data),
          cmocka_unit_test(test_insecure_and_proxy), cmocka_unit_test(test_config_errors),
          cmocka_unit_test(test_inline_errors), cmocka_unit_test(test_incluster),
          cmocka_unit_test(test_token_reread), cmocka_unit_test(test_copy),
          cmocka_unit_test(test_resolve_order))

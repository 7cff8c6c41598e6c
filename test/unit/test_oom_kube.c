/* The out-of-memory test (test/support/oom_case.h) over the API client's pure parts: a kubeconfig
 * parsed from YAML and copied, one read from its file for each way of authenticating and the
 * in-cluster files; the client's error values, Events and Leases, and the router's JSON bodies and
 * model rewrite beside them. A failure must say out of memory in the kube_error it reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/config.h"
#include "kube/error.h"
#include "kube/event.h"
#include "leader/lease.h"
#include "router/model.h"
#include "router/oai.h"

#include "oom_case.h"

/* A kubeconfig parsed from YAML (client certificate and key inline), then copied. */
static int sc_kubeconfig(char **out)
{
    static const char text[] = "apiVersion: v1\n"
                               "kind: Config\n"
                               "current-context: dev\n"
                               "clusters:\n"
                               "- name: c\n"
                               "  cluster:\n"
                               "    server: https://127.0.0.1:6443\n"
                               "    insecure-skip-tls-verify: true\n"
                               "users:\n"
                               "- name: u\n"
                               "  user:\n"
                               "    token: abc\n"
                               "contexts:\n"
                               "- name: dev\n"
                               "  context:\n"
                               "    cluster: c\n"
                               "    user: u\n"
                               "    namespace: team\n";
    kube_config cfg = {0}, copy = {0};
    kube_error err = {0};
    int rc = kube_config_parse(&cfg, text, sizeof(text) - 1, "/tmp/kubeconfig", NULL, &err);
    if (rc == 0)
        rc = kube_config_copy(&copy, &cfg, &err);
    if (rc == 0) {
        const char *token = NULL;
        rc = kube_config_token(&copy, 0, &token, &err);
        if (rc == 0)
            *out = oom_answer("%s %s %s", copy.server, copy.namespace_ ? copy.namespace_ : "-",
                              token ? token : "-");
    }
    if (rc < 0 && (err.kind == KUBE_OK || !err.message || !strstr(err.message, "out of memory")))
        fail_msg("kubeconfig: failed but did not say out of memory: %s", err.message);
    kube_error_clear(&err);
    kube_config_clear(&cfg);
    kube_config_clear(&copy);
    return rc < 0 ? -ENOMEM : 0;
}

/* A kubeconfig read from its file, one context per way of authenticating (files relative to it,
 * inline data, a token file), then the service account's in-cluster files. */
static char *kcfg_text(const kube_config *c)
{
    return oom_answer("%s %s %s %s %s %s %s %zu %zu %s %d", c->origin, c->server, c->namespace_,
                      c->context ? c->context : "-", c->ca_file ? "ca-file" : "-",
                      c->cert_file ? "cert-file" : "-", c->key_file ? "key-file" : "-",
                      c->cert_data_len, c->key_data_len, c->token_file ? "token-file" : "-",
                      c->insecure);
}

static int sc_kubeconfig_file(char **out)
{
    static const char *const contexts[] = {"token-file", "cert-files", "cert-data", "insecure"};
    char *text = oom_answer("%s", "");
    int rc = 0;
    kube_error err = {0};
    for (size_t i = 0; rc == 0 && i < sizeof(contexts) / sizeof(contexts[0]); i++) {
        kube_config cfg = {0};
        rc = kube_config_load_file(&cfg, MP_SOURCE_DIR "/test/unit/fixtures/kube/kubeconfig.yaml",
                                   contexts[i], &err);
        const char *token = NULL;
        if (rc == 0)
            rc = kube_config_token(&cfg, 1, &token, &err);
        if (rc == 0) {
            char *one = kcfg_text(&cfg);
            char *more = oom_answer("%s\n%s %s", text, one, token ? token : "-");
            free(one);
            free(text);
            text = more;
        }
        kube_config_clear(&cfg);
    }
    if (rc == 0) {
        char root[] = "/tmp/test_oom_kube.XXXXXX";
        oom_pause(true);
        assert_non_null(mkdtemp(root));
        static const char *const files[][2] = {{"token", "sa-token-1\n"},
                                               {"ca.crt", "-----BEGIN CERTIFICATE-----\n"},
                                               {"namespace", "ops\n"}};
        for (size_t i = 0; i < 3; i++) {
            char path[64];
            snprintf(path, sizeof(path), "%s/%s", root, files[i][0]);
            FILE *f = fopen(path, "w");
            assert_non_null(f);
            fputs(files[i][1], f);
            fclose(f);
        }
        setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        oom_pause(false);
        kube_config cfg = {0};
        rc = kube_config_load_incluster(&cfg, root, &err);
        if (rc == 0) {
            char *one = kcfg_text(&cfg);
            char *more = oom_answer("%s\n%s %s", text, one, cfg.token);
            free(one);
            free(text);
            text = more;
        }
        kube_config_clear(&cfg);
        oom_pause(true);
        for (size_t i = 0; i < 3; i++) {
            char path[64];
            snprintf(path, sizeof(path), "%s/%s", root, files[i][0]);
            unlink(path);
        }
        rmdir(root);
        oom_pause(false);
    }
    if (rc < 0 &&
        (err.kind == KUBE_OK || !err.message ||
         !(strstr(err.message, "out of memory") || strstr(err.message, strerror(ENOMEM)))))
        fail_msg("kubeconfig file: failed but did not say out of memory: %s", err.message);
    kube_error_clear(&err);
    if (rc == 0)
        *out = text;
    else
        free(text);
    return rc < 0 ? -ENOMEM : 0;
}

/* The API client's error values, events, leases, the router's JSON bodies and model rewrite. */
static int sc_bodies(char **out)
{
    kube_error e = {0}, copy = {0};
    static const char status[] =
        "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\",\"message\":\"changed\"}";
    /* Out of memory, the Status body cannot be parsed: the message then quotes the body, but the
     * reason is still the code's, which is what callers branch on. */
    kube_error_from_http(&e, 409, status, sizeof(status) - 1);
    int rc = kube_error_copy(&copy, &e);
    kube_object_ref about = {
        .api_version = "v1", .kind = "ModelPool", .namespace_ = "ns", .name = "p", .uid = "u"};
    kube_event ev = {.reason = "Swapped", .message = "a to b", .component = "mp", .instance = "i"};
    char *event = kube_event_json(&about, &ev, 1764763200000LL, 42);
    lease_spec ls = {.holder = "me", .duration_s = 15, .acquire_time = "t0", .renew_time = "t1"};
    char *lease = lease_body("ns", "l", "9", &ls);
    lease_record rec;
    cJSON *lj = lease ? cJSON_Parse(lease) : NULL;
    int lrc = lj ? lease_record_read(lj, &rec) : -1;
    char *oerr = rt_oai_error(RT_OAI_MODEL_LOADING, "loading \"b\"");
    static const char *const aliases[] = {"x"};
    rt_oai_model models[] = {{"a", "p", "ns", "a", true, aliases, 1},
                             {"b", "p", NULL, "b", false, NULL, 0}};
    char *list = rt_oai_models(models, 2);
    static const char body[] = "{\"model\":\"x\",\"stream\":true}";
    char *rew = NULL;
    size_t rew_len = 0;
    int rwrc = rt_model_rewrite(body, sizeof(body) - 1, 9, 12, "a-long-name", 11, &rew, &rew_len);
    if (e.kind == KUBE_ERR_NOMEM || rc < 0 || !event || !lease || !lj || lrc < 0 || !oerr ||
        !list || rwrc < 0)
        rc = -ENOMEM;
    else
        *out = oom_answer("%s %ld|%s|%s %s|%s|%s|%.*s", copy.reason, copy.http_code, event,
                          rec.holder, rec.resource_version, oerr, list, (int)rew_len, rew);
    cJSON_Delete(lj);
    kube_error_clear(&e);
    kube_error_clear(&copy);
    free(event);
    free(lease);
    free(oerr);
    free(list);
    free(rew);
    return rc;
}

OOM_TEST(kubeconfig)
OOM_TEST(kubeconfig_file)
OOM_TEST(bodies)

OOM_MAIN(cmocka_unit_test(test_kubeconfig), cmocka_unit_test(test_kubeconfig_file),
         cmocka_unit_test(test_bodies))

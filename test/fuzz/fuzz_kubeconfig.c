/* libFuzzer entry point for kubeconfig parsing (YAML to cJSON, the walk over contexts, clusters
 * and users, base64). Relative paths point into a folder that does not exist, so the fuzzer
 * exercises the checks without reading files. A config taken keeps config.h's promises (a server
 * with a host and no trailing '/', files as absolute paths, a certificate only with its key, never
 * insecure with a CA) and its copy is equal to it; a config refused says why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int fuzz_bytes_eq(const char *a, const char *b, size_t len)
{
    return (!a && !b) || (a && b && memcmp(a, b, len) == 0 && b[len] == '\0');
}

static void fuzz_check(const kube_config *c)
{
    const char *s = c->server;
    if (!s || !c->origin || !c->context || !c->namespace_ || !*c->namespace_)
        abort();
    size_t scheme = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
    if (!scheme || strcspn(s + scheme, "/?#:") == 0 || s[strlen(s) - 1] == '/')
        abort();
    const char *files[] = {c->ca_file, c->cert_file, c->key_file, c->token_file};
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
        if (files[i] && files[i][0] != '/')
            abort();
    if ((c->cert_file && c->cert_data) || (c->key_file && c->key_data) ||
        !(c->cert_file || c->cert_data) != !(c->key_file || c->key_data) ||
        (c->insecure && (c->ca_file || c->ca_data)))
        abort();
}

static void fuzz_check_copy(const kube_config *a, const kube_config *b)
{
    if (!fuzz_str_eq(a->origin, b->origin) || !fuzz_str_eq(a->server, b->server) ||
        !fuzz_str_eq(a->namespace_, b->namespace_) || !fuzz_str_eq(a->context, b->context) ||
        !fuzz_str_eq(a->ca_file, b->ca_file) || !fuzz_str_eq(a->proxy_url, b->proxy_url) ||
        !fuzz_str_eq(a->cert_file, b->cert_file) || !fuzz_str_eq(a->key_file, b->key_file) ||
        !fuzz_str_eq(a->token, b->token) || !fuzz_str_eq(a->token_file, b->token_file) ||
        a->insecure != b->insecure || a->ca_data_len != b->ca_data_len ||
        a->cert_data_len != b->cert_data_len || a->key_data_len != b->key_data_len ||
        !fuzz_bytes_eq(a->ca_data, b->ca_data, a->ca_data_len) ||
        !fuzz_bytes_eq(a->cert_data, b->cert_data, a->cert_data_len) ||
        !fuzz_bytes_eq(a->key_data, b->key_data, a->key_data_len))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kube_config cfg = {0};
    kube_error err = {0};
    if (kube_config_parse(&cfg, (const char *)data, size, "/nonexistent/fuzz/kubeconfig", NULL,
                          &err) == 0) {
        fuzz_check(&cfg);
        kube_config copy = {0};
        if (kube_config_copy(&copy, &cfg, &err) == 0) {
            fuzz_check_copy(&cfg, &copy);
            kube_config_clear(&copy);
        }
    } else if (!err.message || (err.kind != KUBE_ERR_CONFIG && err.kind != KUBE_ERR_NOMEM)) {
        abort();
    }
    kube_config_clear(&cfg);
    kube_error_clear(&err);
    return 0;
}

/* kube_config: where the API server is and how to prove who we are, read from a kubeconfig file
 * or from the in-cluster service account. Only what the HTTP client needs is kept; features we do
 * not implement (exec plugins, auth providers, basic auth, impersonation) are refused by name
 * rather than silently ignored, so a config never means less than it says. */
#ifndef MP_KUBE_CONFIG_H
#define MP_KUBE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/error.h"

/* Every pointer is owned (malloc'd) and may be NULL unless said otherwise. Byte strings from
 * *-data fields are NUL-terminated too, for convenience, but their length is what counts. */
typedef struct kube_config {
    char *origin;     /* where this came from, for messages: the kubeconfig path or "in-cluster" */
    char *server;     /* "https://host:port" without a trailing '/'; never NULL once loaded */
    char *namespace_; /* the context's namespace, the service account's, else "default" */
    char *context;    /* context name used (NULL in-cluster) */

    /* TLS. Verified unless insecure, which is only ever set by an explicit
     * insecure-skip-tls-verify: true. Without a CA, the system trust store applies. */
    char *ca_file;
    char *ca_data;
    size_t ca_data_len;
    bool insecure;
    char *proxy_url;

    /* Client certificate: files (absolute paths) or PEM bytes. */
    char *cert_file, *key_file;
    char *cert_data, *key_data;
    size_t cert_data_len, key_data_len;

    /* Bearer token: fixed, or read from token_file and re-read about once a minute (projected
     * service account tokens rotate). Read it through kube_config_token(). */
    char *token;
    char *token_file;
    uint64_t token_read_ms; /* ev_now_ms() of the last read of token_file */

    char *user_agent; /* set by the program if it wants one sent */
} kube_config;

/* Where to look, for kube_config_resolve(). Every field may be NULL. */
typedef struct kube_config_opts {
    const char *kubeconfig;     /* --kubeconfig PATH */
    const char *context;        /* --context NAME; NULL means the file's current-context */
    const char *incluster_root; /* NULL: /var/run/secrets/kubernetes.io/serviceaccount */
} kube_config_opts;

/* Picks the configuration the way kubectl users expect: opts->kubeconfig, else the first file
 * of $KUBECONFIG (the others of a list are not merged), else in-cluster when
 * KUBERNETES_SERVICE_HOST is set, else ~/.kube/config. When nothing applies the error lists what
 * was tried. cfg must be zeroed or cleared; it is left cleared on failure. 0 or -1 (err set). */
int kube_config_resolve(kube_config *cfg, const kube_config_opts *opts, kube_error *err);

/* Reads the kubeconfig at path with the given context (NULL: current-context). */
int kube_config_load_file(kube_config *cfg, const char *path, const char *context, kube_error *err);
/* Same from memory; path names the file in messages and its folder anchors relative paths. */
int kube_config_parse(kube_config *cfg, const char *text, size_t len, const char *path,
                      const char *context, kube_error *err);
/* The pod's service account: KUBERNETES_SERVICE_HOST/PORT and root/{token,ca.crt,namespace}
 * (root NULL means the standard folder). */
int kube_config_load_incluster(kube_config *cfg, const char *root, kube_error *err);

/* Deep copy into a zeroed or cleared dst. 0, or -1 with err set (dst then cleared). */
int kube_config_copy(kube_config *dst, const kube_config *src, kube_error *err);
/* Frees everything and zeroes cfg. */
void kube_config_clear(kube_config *cfg);

/* The bearer token to send now (NULL: none configured). With a token file, re-reads it when
 * the last read is a minute old at now_ms; a failed re-read keeps the previous token, since a
 * rotation may be under way and the server will say 401 if it is really stale. Returns 0, or -1
 * (err set) only when a token file was configured and no token could ever be read from it. */
int kube_config_token(kube_config *cfg, uint64_t now_ms, const char **token, kube_error *err);

#endif

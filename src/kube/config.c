/* kube_config: kubeconfig files (through yamldoc.c), the in-cluster service account, and the
 * order between them. Every error names the file and the entry at fault, because a user reading
 * "no server" with no file name has to guess which of their configs we read. */
#include "kube/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "loop/ev.h"
#include "yamldoc.h"

#define KUBE_CONFIG_DEFAULT_ROOT "/var/run/secrets/kubernetes.io/serviceaccount"
/* A kubeconfig with inline certificates is a few KiB; anything this big is a wrong path. */
#define KUBE_CONFIG_MAX_FILE (4u << 20)
#define KUBE_CONFIG_MAX_TOKEN (64u << 10)
/* client-go re-reads token files every minute too; projected tokens live an hour or more. */
#define KUBE_CONFIG_TOKEN_TTL_MS 60000u

/* Reads a whole regular file. O_NONBLOCK and the S_ISREG check keep a path that names a FIFO or
 * a device from blocking the loop or streaming forever. */
static int kube_config_slurp(const char *path, size_t max, char **out, size_t *outlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int e = fstat(fd, &st) < 0     ? errno
            : S_ISDIR(st.st_mode)  ? EISDIR
            : !S_ISREG(st.st_mode) ? EINVAL
                                   : 0;
    if (e) {
        close(fd);
        return -e;
    }
    kube_buf b = {0};
    char chunk[4096];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || b.len + (size_t)n > max || kube_buf_add(&b, chunk, (size_t)n) < 0) {
            e = n < 0 ? errno : (b.len + (size_t)n > max ? EFBIG : ENOMEM);
            close(fd);
            kube_buf_free(&b);
            return -e;
        }
        if (n == 0)
            break;
    }
    close(fd);
    *outlen = b.len;
    *out = kube_buf_take(&b);
    return *out ? 0 : -ENOMEM;
}

/* Reads a token file: surrounding whitespace (the trailing newline editors add) is not part of
 * the token. */
static int kube_config_read_token(const char *path, char **token, kube_error *err,
                                  const char *origin)
{
    char *text;
    size_t len;
    int rc = kube_config_slurp(path, KUBE_CONFIG_MAX_TOKEN, &text, &len);
    if (rc < 0)
        return kube_error_set(err, KUBE_ERR_CONFIG, "%s: token file %s: %s", origin, path,
                              strerror(-rc));
    size_t start = 0;
    while (start < len && strchr(" \t\r\n", text[start]))
        start++;
    while (len > start && strchr(" \t\r\n", text[len - 1]))
        len--;
    if (len == start || memchr(text + start, '\0', len - start)) {
        free(text);
        return kube_error_set(err, KUBE_ERR_CONFIG, "%s: token file %s is empty or not text",
                              origin, path);
    }
    memmove(text, text + start, len - start);
    text[len - start] = '\0';
    *token = text;
    return 0;
}

/* Standard base64 with padding, as kubectl writes it; line breaks and blanks are skipped. */
static int kube_config_base64(const char *in, char **out, size_t *outlen)
{
    size_t n = strlen(in);
    char *res = malloc(n / 4 * 3 + 4);
    if (!res)
        return -ENOMEM;
    size_t len = 0;
    unsigned acc = 0;
    int nq = 0, pad = 0;
    for (const char *c = in; *c; c++) {
        int v;
        if (strchr(" \t\r\n", *c))
            continue;
        if (*c >= 'A' && *c <= 'Z')
            v = *c - 'A';
        else if (*c >= 'a' && *c <= 'z')
            v = *c - 'a' + 26;
        else if (*c >= '0' && *c <= '9')
            v = *c - '0' + 52;
        else if (*c == '+')
            v = 62;
        else if (*c == '/')
            v = 63;
        else if (*c == '=' && nq >= 2)
            v = -1;
        else
            goto bad;
        if (v >= 0 && pad)
            goto bad; /* data after padding */
        if (v < 0)
            pad++;
        acc = acc << 6 | (unsigned)(v < 0 ? 0 : v);
        if (++nq == 4) {
            res[len++] = (char)(acc >> 16);
            if (pad < 2)
                res[len++] = (char)(acc >> 8);
            if (pad < 1)
                res[len++] = (char)acc;
            acc = 0;
            nq = 0;
            if (pad)
                pad = 3; /* only blanks may follow a padded group */
        }
    }
    if (nq != 0 || len == 0)
        goto bad;
    res[len] = '\0';
    *out = res;
    *outlen = len;
    return 0;
bad:
    free(res);
    return -EINVAL;
}

/* The state of one parse: the file's name for messages and its folder for relative paths. */
typedef struct {
    const char *path;
    char *dir;
    kube_error *err;
} kube_config_src;

static int kube_config_fail(kube_config_src *s, const char *what, const char *name, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

/* Every message starts with the file, then the entry ("user \"alice\": ") when there is one. */
static int kube_config_fail(kube_config_src *s, const char *what, const char *name, const char *fmt,
                            ...)
{
    char *detail;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&detail, fmt, ap);
    va_end(ap);
    if (n < 0)
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    if (what)
        kube_error_set(s->err, KUBE_ERR_CONFIG, "kubeconfig %s: %s \"%s\": %s", s->path, what, name,
                       detail);
    else
        kube_error_set(s->err, KUBE_ERR_CONFIG, "kubeconfig %s: %s", s->path, detail);
    free(detail);
    return -1;
}

/* A string field: *out is NULL when absent or null. -1 when present but not a string. */
static int kube_config_str(kube_config_src *s, const cJSON *obj, const char *key, const char *what,
                           const char *name, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return kube_config_fail(s, what, name, "%s must be a string", key);
    *out = v->valuestring;
    return 0;
}

static char *kube_config_join(const char *dir, const char *p)
{
    char *res;
    if (p[0] == '/')
        return strdup(p);
    return asprintf(&res, "%s/%s", dir, p) < 0 ? NULL : res;
}

/* A file named by the kubeconfig: made absolute against the kubeconfig's folder and checked now,
 * so a typo is reported at startup with the file name instead of as a TLS error later. */
static int kube_config_file(kube_config_src *s, const char *what, const char *name, const char *key,
                            const char *value, char **out)
{
    *out = kube_config_join(s->dir, value);
    if (!*out)
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    struct stat st;
    int e = stat(*out, &st) < 0 ? errno : (!S_ISREG(st.st_mode) ? EINVAL : 0);
    if (!e && access(*out, R_OK) < 0)
        e = errno;
    if (!e)
        return 0;
    int rc = kube_config_fail(s, what, name, "%s %s: %s", key, *out,
                              e == EINVAL ? "not a regular file" : strerror(e));
    free(*out);
    *out = NULL;
    return rc;
}

static int kube_config_data(kube_config_src *s, const char *what, const char *name, const char *key,
                            const char *value, char **out, size_t *outlen)
{
    int rc = kube_config_base64(value, out, outlen);
    if (rc == -ENOMEM)
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    if (rc < 0)
        return kube_config_fail(s, what, name, "%s is not valid base64", key);
    return 0;
}

/* The entry called name in a list of {name: ..., <inner>: {...}}; returns its inner object. */
static int kube_config_entry(kube_config_src *s, const cJSON *doc, const char *list,
                             const char *inner, const char *what, const char *name,
                             const cJSON **out)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, list);
    *out = NULL;
    if (arr && !cJSON_IsNull(arr) && !cJSON_IsArray(arr))
        return kube_config_fail(s, NULL, NULL, "%s must be a list", list);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        if (!n || strcmp(n, name) != 0)
            continue;
        const cJSON *body = cJSON_GetObjectItemCaseSensitive(e, inner);
        if (!cJSON_IsObject(body))
            return kube_config_fail(s, what, name, "entry has no %s", inner);
        *out = body;
        return 0;
    }
    return kube_config_fail(s, what, name, "not found");
}

static int kube_config_bool(kube_config_src *s, const cJSON *obj, const char *key, const char *what,
                            const char *name, bool *out)
{
    const char *v;
    if (kube_config_str(s, obj, key, what, name, &v) < 0)
        return -1;
    *out = false;
    if (!v || !strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
        return 0;
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE")) {
        *out = true;
        return 0;
    }
    return kube_config_fail(s, what, name, "%s must be true or false", key);
}

static int kube_config_cluster(kube_config_src *s, const cJSON *cl, const char *name,
                               kube_config *cfg)
{
    const char *server, *ca, *ca_data, *proxy, *sni;
    if (kube_config_str(s, cl, "server", "cluster", name, &server) < 0 ||
        kube_config_str(s, cl, "certificate-authority", "cluster", name, &ca) < 0 ||
        kube_config_str(s, cl, "certificate-authority-data", "cluster", name, &ca_data) < 0 ||
        kube_config_str(s, cl, "proxy-url", "cluster", name, &proxy) < 0 ||
        kube_config_str(s, cl, "tls-server-name", "cluster", name, &sni) < 0 ||
        kube_config_bool(s, cl, "insecure-skip-tls-verify", "cluster", name, &cfg->insecure) < 0)
        return -1;
    if (!server || !*server)
        return kube_config_fail(s, "cluster", name, "server is missing");
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return kube_config_fail(s, "cluster", name, "server must start with https:// or http://");
    /* "https://" alone (or with only a path or port) would be taken and fail on every request. */
    if (strcspn(server + (server[4] == 's' ? 8 : 7), "/?#:") == 0)
        return kube_config_fail(s, "cluster", name, "server has no host");
    if (sni)
        return kube_config_fail(s, "cluster", name, "tls-server-name is not supported");
    if (cfg->insecure && (ca || ca_data))
        return kube_config_fail(s, "cluster", name,
                                "insecure-skip-tls-verify and a certificate authority "
                                "contradict each other");
    cfg->server = strdup(server);
    if (!cfg->server || (proxy && !(cfg->proxy_url = strdup(proxy))))
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    size_t n = strlen(cfg->server);
    while (n > 8 && cfg->server[n - 1] == '/')
        cfg->server[--n] = '\0';
    if (ca_data)
        return kube_config_data(s, "cluster", name, "certificate-authority-data", ca_data,
                                &cfg->ca_data, &cfg->ca_data_len);
    if (ca)
        return kube_config_file(s, "cluster", name, "certificate-authority", ca, &cfg->ca_file);
    return 0;
}

/* Fields of a user entry that ask for something we do not do; refusing them beats connecting
 * as somebody else (or as nobody) without a word. */
static const struct {
    const char *key, *what;
} kube_config_unsupported[] = {
    {"exec", "exec credential plugin"},
    {"auth-provider", "auth-provider"},
    {"username", "basic authentication (username/password)"},
    {"password", "basic authentication (username/password)"},
    {"as", "impersonation (as)"},
    {"as-uid", "impersonation (as-uid)"},
    {"as-groups", "impersonation (as-groups)"},
    {"as-user-extra", "impersonation (as-user-extra)"},
};

static int kube_config_refuse(kube_config_src *s, const cJSON *u, const char *name)
{
    for (size_t i = 0; i < sizeof(kube_config_unsupported) / sizeof(*kube_config_unsupported);
         i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(u, kube_config_unsupported[i].key);
        if (!v || cJSON_IsNull(v))
            continue;
        const char *detail = NULL;
        if (i == 0)
            detail = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "command"));
        else if (i == 1)
            detail = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name"));
        return kube_config_fail(s, "user", name,
                                "%s%s%s%s is not supported; use a token, tokenFile or client "
                                "certificate",
                                kube_config_unsupported[i].what, detail ? " \"" : "",
                                detail ? detail : "", detail ? "\"" : "");
    }
    return 0;
}

/* One credential from either a file key or a -data key, never both. */
static int kube_config_cred(kube_config_src *s, const cJSON *u, const char *name, const char *key,
                            const char *datakey, char **file, char **data, size_t *datalen)
{
    const char *f, *d;
    if (kube_config_str(s, u, key, "user", name, &f) < 0 ||
        kube_config_str(s, u, datakey, "user", name, &d) < 0)
        return -1;
    if (f && d)
        return kube_config_fail(s, "user", name, "%s and %s are both set", key, datakey);
    if (d)
        return kube_config_data(s, "user", name, datakey, d, data, datalen);
    if (f)
        return kube_config_file(s, "user", name, key, f, file);
    return 0;
}

static int kube_config_user(kube_config_src *s, const cJSON *u, const char *name, kube_config *cfg)
{
    const char *token, *token_file;
    if (kube_config_refuse(s, u, name) < 0 ||
        kube_config_str(s, u, "token", "user", name, &token) < 0 ||
        kube_config_str(s, u, "tokenFile", "user", name, &token_file) < 0 ||
        kube_config_cred(s, u, name, "client-certificate", "client-certificate-data",
                         &cfg->cert_file, &cfg->cert_data, &cfg->cert_data_len) < 0 ||
        kube_config_cred(s, u, name, "client-key", "client-key-data", &cfg->key_file,
                         &cfg->key_data, &cfg->key_data_len) < 0)
        return -1;
    bool has_cert = cfg->cert_file || cfg->cert_data, has_key = cfg->key_file || cfg->key_data;
    if (has_cert != has_key)
        return kube_config_fail(s, "user", name,
                                "client-certificate and client-key must be given together");
    if (token_file) {
        /* As in client-go, a token file wins over a token: it is the one kept fresh. */
        if (kube_config_file(s, "user", name, "tokenFile", token_file, &cfg->token_file) < 0)
            return -1;
        if (kube_config_read_token(cfg->token_file, &cfg->token, s->err, s->path) < 0)
            return -1;
        cfg->token_read_ms = ev_now_ms();
    } else if (token && *token && !(cfg->token = strdup(token))) {
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    }
    return 0;
}

static int kube_config_from_doc(kube_config_src *s, const cJSON *doc, const char *context,
                                kube_config *cfg)
{
    if (!cJSON_IsObject(doc))
        return kube_config_fail(s, NULL, NULL, "not a kubeconfig (the top level is not a mapping)");
    const char *current, *cluster, *user, *ns;
    if (kube_config_str(s, doc, "current-context", NULL, NULL, &current) < 0)
        return -1;
    if (!context)
        context = current && *current ? current : NULL;
    if (!context)
        return kube_config_fail(s, NULL, NULL, "no current-context set and no context given");
    const cJSON *ctx, *cl, *u = NULL;
    if (kube_config_entry(s, doc, "contexts", "context", "context", context, &ctx) < 0 ||
        kube_config_str(s, ctx, "cluster", "context", context, &cluster) < 0 ||
        kube_config_str(s, ctx, "user", "context", context, &user) < 0 ||
        kube_config_str(s, ctx, "namespace", "context", context, &ns) < 0)
        return -1;
    if (!cluster || !*cluster)
        return kube_config_fail(s, "context", context, "cluster is missing");
    if (kube_config_entry(s, doc, "clusters", "cluster", "cluster", cluster, &cl) < 0 ||
        (user && *user && kube_config_entry(s, doc, "users", "user", "user", user, &u) < 0))
        return -1;
    if (!(cfg->context = strdup(context)) || !(cfg->origin = strdup(s->path)) ||
        !(cfg->namespace_ = strdup(ns && *ns ? ns : "default")))
        return kube_error_set(s->err, KUBE_ERR_NOMEM, "out of memory");
    if (kube_config_cluster(s, cl, cluster, cfg) < 0)
        return -1;
    return u ? kube_config_user(s, u, user, cfg) : 0;
}

/* The kubeconfig's folder, absolute when it exists so relative paths survive a chdir. */
static char *kube_config_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return NULL;
    char *abs = realpath(dir, NULL);
    if (abs) {
        free(dir);
        return abs;
    }
    return dir;
}

int kube_config_parse(kube_config *cfg, const char *text, size_t len, const char *path,
                      const char *context, kube_error *err)
{
    kube_config_src s = {.path = path, .dir = kube_config_dir(path), .err = err};
    if (!s.dir)
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    char *yerr = NULL;
    cJSON *doc = kube_yaml_parse(text, len, &yerr);
    int rc;
    if (!doc) {
        rc = kube_error_set(err, KUBE_ERR_CONFIG, "kubeconfig %s: bad YAML: %s", path,
                            yerr ? yerr : "out of memory");
        free(yerr);
    } else {
        rc = kube_config_from_doc(&s, doc, context, cfg);
        cJSON_Delete(doc);
    }
    free(s.dir);
    if (rc < 0)
        kube_config_clear(cfg);
    return rc;
}

int kube_config_load_file(kube_config *cfg, const char *path, const char *context, kube_error *err)
{
    char *text;
    size_t len;
    int rc = kube_config_slurp(path, KUBE_CONFIG_MAX_FILE, &text, &len);
    if (rc < 0)
        return kube_error_set(err, KUBE_ERR_CONFIG, "kubeconfig %s: %s", path, strerror(-rc));
    rc = kube_config_parse(cfg, text, len, path, context, err);
    free(text);
    return rc;
}

int kube_config_load_incluster(kube_config *cfg, const char *root, kube_error *err)
{
    if (!root)
        root = KUBE_CONFIG_DEFAULT_ROOT;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return kube_error_set(err, KUBE_ERR_CONFIG,
                              "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                              "must both be set");
    char *ns = NULL, *nsfile = kube_config_join(root, "namespace");
    size_t nslen;
    /* An IPv6 service address needs brackets in a URL. */
    if (asprintf(&cfg->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port) < 0)
        cfg->server = NULL;
    cfg->token_file = kube_config_join(root, "token");
    cfg->ca_file = kube_config_join(root, "ca.crt");
    cfg->origin = strdup("in-cluster");
    if (!cfg->server || !cfg->token_file || !cfg->ca_file || !cfg->origin || !nsfile) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (kube_config_read_token(cfg->token_file, &cfg->token, err, "in-cluster") < 0)
        goto fail;
    cfg->token_read_ms = ev_now_ms();
    if (access(cfg->ca_file, R_OK) < 0) {
        kube_error_set(err, KUBE_ERR_CONFIG, "in-cluster: CA file %s: %s", cfg->ca_file,
                       strerror(errno));
        goto fail;
    }
    /* The namespace file is a convenience; without it we fall back to "default" (but not when
     * memory ran out reading it: that would be another namespace than the Pod's). */
    int nsrc = kube_config_slurp(nsfile, 4096, &ns, &nslen);
    if (nsrc == 0) {
        while (nslen && strchr(" \t\r\n", ns[nslen - 1]))
            ns[--nslen] = '\0';
    }
    free(nsfile);
    nsfile = NULL;
    if (nsrc == -ENOMEM) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    cfg->namespace_ = ns && *ns ? ns : strdup("default");
    if (cfg->namespace_ != ns)
        free(ns);
    if (!cfg->namespace_) {
        kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    return 0;
fail:
    free(nsfile);
    kube_config_clear(cfg);
    return -1;
}

int kube_config_resolve(kube_config *cfg, const kube_config_opts *opts, kube_error *err)
{
    if (opts->kubeconfig && *opts->kubeconfig)
        return kube_config_load_file(cfg, opts->kubeconfig, opts->context, err);
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
        /* One file. kubectl merges a list field by field; reading only part of one would pick a
         * cluster or user the user did not mean, so a list is refused by name instead. */
        while (*env == ':')
            env++;
        size_t n = strcspn(env, ":");
        const char *rest = env + n;
        while (*rest == ':')
            rest++;
        if (*rest)
            return kube_error_set(err, KUBE_ERR_CONFIG,
                                  "KUBECONFIG=%s lists several files; merging them is not "
                                  "supported: name one file with --kubeconfig or KUBECONFIG",
                                  getenv("KUBECONFIG"));
        if (n) {
            char *first = strndup(env, n);
            if (!first)
                return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
            int rc = kube_config_load_file(cfg, first, opts->context, err);
            free(first);
            return rc;
        }
    }
    kube_error incluster = {0};
    if (getenv("KUBERNETES_SERVICE_HOST")) {
        if (kube_config_load_incluster(cfg, opts->incluster_root, &incluster) == 0)
            return 0;
    } else {
        kube_error_set(&incluster, KUBE_ERR_CONFIG, "KUBERNETES_SERVICE_HOST is not set");
    }
    const char *home = getenv("HOME");
    char *path = NULL;
    if (home && *home && asprintf(&path, "%s/.kube/config", home) < 0)
        path = NULL;
    int rc;
    if (path && access(path, F_OK) == 0) {
        rc = kube_config_load_file(cfg, path, opts->context, err);
    } else {
        rc = kube_error_set(err, KUBE_ERR_CONFIG,
                            "no Kubernetes configuration: no --kubeconfig given, KUBECONFIG "
                            "not set, in-cluster not usable (%s), %s not found",
                            incluster.message ? incluster.message : "?",
                            path ? path : "$HOME/.kube/config ($HOME not set)");
    }
    free(path);
    kube_error_clear(&incluster);
    return rc;
}

static int kube_config_dup(char **dst, const char *src, size_t len)
{
    if (!src)
        return 0;
    *dst = malloc(len + 1);
    if (!*dst)
        return -1;
    memcpy(*dst, src, len);
    (*dst)[len] = '\0';
    return 0;
}

#define KUBE_CONFIG_DUPS(f) kube_config_dup(&dst->f, src->f, src->f ? strlen(src->f) : 0)

int kube_config_copy(kube_config *dst, const kube_config *src, kube_error *err)
{
    *dst = (kube_config){.insecure = src->insecure,
                         .ca_data_len = src->ca_data_len,
                         .cert_data_len = src->cert_data_len,
                         .key_data_len = src->key_data_len,
                         .token_read_ms = src->token_read_ms};
    if (KUBE_CONFIG_DUPS(origin) || KUBE_CONFIG_DUPS(server) || KUBE_CONFIG_DUPS(namespace_) ||
        KUBE_CONFIG_DUPS(context) || KUBE_CONFIG_DUPS(ca_file) ||
        kube_config_dup(&dst->ca_data, src->ca_data, src->ca_data_len) ||
        KUBE_CONFIG_DUPS(proxy_url) || KUBE_CONFIG_DUPS(cert_file) || KUBE_CONFIG_DUPS(key_file) ||
        kube_config_dup(&dst->cert_data, src->cert_data, src->cert_data_len) ||
        kube_config_dup(&dst->key_data, src->key_data, src->key_data_len) ||
        KUBE_CONFIG_DUPS(token) || KUBE_CONFIG_DUPS(token_file) || KUBE_CONFIG_DUPS(user_agent)) {
        kube_config_clear(dst);
        return kube_error_set(err, KUBE_ERR_NOMEM, "out of memory");
    }
    return 0;
}

void kube_config_clear(kube_config *cfg)
{
    free(cfg->origin);
    free(cfg->server);
    free(cfg->namespace_);
    free(cfg->context);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->proxy_url);
    free(cfg->cert_file);
    free(cfg->key_file);
    free(cfg->cert_data);
    free(cfg->key_data);
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->user_agent);
    *cfg = (kube_config){0};
}

int kube_config_token(kube_config *cfg, uint64_t now_ms, const char **token, kube_error *err)
{
    *token = cfg->token;
    if (!cfg->token_file)
        return 0;
    if (cfg->token && now_ms - cfg->token_read_ms < KUBE_CONFIG_TOKEN_TTL_MS)
        return 0;
    char *fresh;
    kube_error rerr = {0};
    if (kube_config_read_token(cfg->token_file, &fresh, &rerr,
                               cfg->origin ? cfg->origin : "kubeconfig") == 0) {
        free(cfg->token);
        cfg->token = fresh;
        cfg->token_read_ms = now_ms;
    } else if (!cfg->token) {
        kube_error_copy(err, &rerr);
        kube_error_clear(&rerr);
        return -1;
    }
    kube_error_clear(&rerr);
    *token = cfg->token;
    return 0;
}

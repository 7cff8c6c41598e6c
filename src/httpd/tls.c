/* httpd_tls: OpenSSL only makes and checks the PEM here; the TLS itself is libmicrohttpd's
 * (GnuTLS). A bad certificate or key is found at start with a message naming the file, not at the
 * first handshake. */
#include "httpd/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* Certificates and keys are small; anything bigger is not one. */
#define HTTPD_TLS_MAX_FILE (1 << 20)
#define HTTPD_TLS_DAYS 365

/* The first queued OpenSSL error as text (the queue is emptied). */
static const char *httpd_tls_ossl(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (!e)
        return "unknown OpenSSL error";
    ERR_error_string_n(e, buf, len);
    return buf;
}

static char *httpd_tls_read(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        snprintf(err, errlen, "%s/%s: path too long", dir, name);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(HTTPD_TLS_MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, HTTPD_TLS_MAX_FILE + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad || n == 0 || n > HTTPD_TLS_MAX_FILE) {
        snprintf(err, errlen, "%s: %s", path,
                 !buf  ? "out of memory"
                 : bad ? "read error"
                 : n   ? "larger than 1 MiB"
                       : "empty");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

int httpd_tls_load(httpd_tls *out, const char *dir, const char *cert_name, const char *key_name,
                   char *err, size_t errlen)
{
    *out = (httpd_tls){0};
    char why[256];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    BIO *b = NULL;
    if (!(out->cert_pem = httpd_tls_read(dir, cert_name, err, errlen)) ||
        !(out->key_pem = httpd_tls_read(dir, key_name, err, errlen)))
        goto fail;
    if (!(b = BIO_new_mem_buf(out->cert_pem, -1)) ||
        !(x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        snprintf(err, errlen, "%s/%s: not a PEM certificate (%s)", dir, cert_name,
                 httpd_tls_ossl(why, sizeof(why)));
        goto fail;
    }
    BIO_free(b);
    if (!(b = BIO_new_mem_buf(out->key_pem, -1)) ||
        !(k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL))) {
        snprintf(err, errlen, "%s/%s: not an unencrypted PEM private key (%s)", dir, key_name,
                 httpd_tls_ossl(why, sizeof(why)));
        goto fail;
    }
    if (X509_check_private_key(x, k) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "%s/%s does not match the certificate %s/%s", dir, key_name, dir,
                 cert_name);
        goto fail;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
        snprintf(err, errlen, "%s/%s has expired", dir, cert_name);
        goto fail;
    }
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(k);
    return 0;
fail:
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(k);
    httpd_tls_clear(out);
    return -1;
}

/* One v3 extension from its openssl.cnf form, issuer = subject. */
static int httpd_tls_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = e && X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

static bool httpd_tls_is_ip(const char *name)
{
    unsigned char ip[16];
    return inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
}

bool httpd_tls_name_ok(const char *name)
{
    /* Nothing that could break the comma-separated list of subjectAltName. */
    return httpd_tls_is_ip(name) ||
           (*name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789-.") == strlen(name));
}

/* "DNS:a,IP:1.2.3.4,..." for subjectAltName; NULL for a name that is neither. */
static char *httpd_tls_san(const char *const *names, char *err, size_t errlen)
{
    size_t len = 1;
    for (const char *const *n = names; *n; n++)
        len += strlen(*n) + 5;
    char *san = malloc(len);
    if (!san) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    san[0] = 0;
    for (const char *const *n = names; *n; n++) {
        if (!httpd_tls_name_ok(*n)) {
            snprintf(err, errlen, "'%s' is neither a DNS name nor an IP address", *n);
            free(san);
            return NULL;
        }
        strcat(san, san[0] ? "," : "");
        strcat(san, httpd_tls_is_ip(*n) ? "IP:" : "DNS:");
        strcat(san, *n);
    }
    return san;
}

/* PEM text of whatever write() puts in a memory BIO. */
static char *httpd_tls_pem(BIO *b)
{
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        memcpy(s, data, (size_t)n);
        s[n] = 0;
    }
    return s;
}

int httpd_tls_self_signed(httpd_tls *out, const char *const *names, char *err, size_t errlen)
{
    *out = (httpd_tls){0};
    if (!names || !names[0]) {
        snprintf(err, errlen, "a certificate needs at least one name");
        return -1;
    }
    char why[256];
    int rc = -1;
    EVP_PKEY *k = NULL;
    X509 *x = NULL;
    BIGNUM *serial = NULL;
    BIO *cb = NULL, *kb = NULL;
    char *san = httpd_tls_san(names, err, errlen);
    if (!san)
        return -1;
    X509_NAME *subject;
    if (!(k = EVP_EC_gen("P-256")) || !(x = X509_new()) || !(serial = BN_new()) ||
        X509_set_version(x, 2) != 1 ||
        BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
        !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long)HTTPD_TLS_DAYS * 24 * 3600) ||
        !(subject = X509_get_subject_name(x)) ||
        X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8,
                                   (const unsigned char *)"modelpool-operator", -1, -1, 0) != 1 ||
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)names[0],
                                   -1, -1, 0) != 1 ||
        X509_set_issuer_name(x, subject) != 1 || X509_set_pubkey(x, k) != 1 ||
        /* Its own trust anchor: a scraper given this certificate as its CA can verify it. */
        httpd_tls_ext(x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
        httpd_tls_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign") < 0 ||
        httpd_tls_ext(x, NID_ext_key_usage, "serverAuth") < 0 ||
        httpd_tls_ext(x, NID_subject_key_identifier, "hash") < 0 ||
        httpd_tls_ext(x, NID_subject_alt_name, san) < 0 || !X509_sign(x, k, EVP_sha256()) ||
        !(cb = BIO_new(BIO_s_mem())) || !(kb = BIO_new(BIO_s_mem())) ||
        PEM_write_bio_X509(cb, x) != 1 ||
        PEM_write_bio_PrivateKey(kb, k, NULL, NULL, 0, NULL, NULL) != 1 ||
        !(out->cert_pem = httpd_tls_pem(cb)) || !(out->key_pem = httpd_tls_pem(kb))) {
        snprintf(err, errlen, "cannot make a self-signed certificate: %s",
                 httpd_tls_ossl(why, sizeof(why)));
        httpd_tls_clear(out);
    } else {
        rc = 0;
    }
    if (kb) {
        char *data;
        long n = BIO_get_mem_data(kb, &data);
        if (n > 0)
            OPENSSL_cleanse(data, (size_t)n);
    }
    BIO_free(cb);
    BIO_free(kb);
    BN_free(serial);
    X509_free(x);
    EVP_PKEY_free(k);
    free(san);
    return rc;
}

void httpd_tls_clear(httpd_tls *t)
{
    if (t->key_pem)
        OPENSSL_cleanse(t->key_pem, strlen(t->key_pem));
    free(t->key_pem);
    free(t->cert_pem);
    *t = (httpd_tls){0};
}

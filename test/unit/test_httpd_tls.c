/* Tests of httpd_tls and of HTTPS in httpd: a self-signed certificate carries the names asked for,
 * verifies against itself and matches its key; a certificate directory loads, and a mismatched key,
 * a missing file or garbage is refused with a message naming the file; libmicrohttpd accepts the
 * PEM and refuses half of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_main.h"
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "httpd/httpd.h"
#include "httpd/tls.h"
#include "loop/ev.h"

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    fclose(f);
}

static X509 *parse_cert(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static void test_self_signed(void **state)
{
    (void)state;
    httpd_tls t;
    char err[300];
    const char *names[] = {"operator-7f9c", "localhost", "10.1.2.3", "::1", NULL};
    assert_int_equal(httpd_tls_self_signed(&t, names, err, sizeof(err)), 0);
    assert_non_null(strstr(t.cert_pem, "-----BEGIN CERTIFICATE-----"));
    assert_non_null(strstr(t.key_pem, "PRIVATE KEY-----"));
    X509 *x = parse_cert(t.cert_pem);
    /* Valid now, for each name, signed by its own key. */
    assert_true(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
    assert_true(X509_cmp_current_time(X509_get0_notAfter(x)) > 0);
    assert_int_equal(X509_check_host(x, "operator-7f9c", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(x, "10.1.2.3", 0), 1);
    assert_int_equal(X509_check_ip_asc(x, "::1", 0), 1);
    assert_int_equal(X509_check_host(x, "elsewhere", 0, 0, NULL), 0);
    assert_int_equal(X509_check_ip_asc(x, "10.1.2.4", 0), 0);
    EVP_PKEY *pub = X509_get0_pubkey(x);
    assert_int_equal(X509_verify(x, pub), 1);
    assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 1);
    X509_free(x);

    /* Two certificates never share a key or serial. */
    httpd_tls t2;
    assert_int_equal(httpd_tls_self_signed(&t2, names, err, sizeof(err)), 0);
    assert_string_not_equal(t.key_pem, t2.key_pem);
    httpd_tls_clear(&t2);
    httpd_tls_clear(&t);
    assert_null(t.cert_pem);

    assert_true(httpd_tls_name_ok("pod-1.ns.svc"));
    assert_true(httpd_tls_name_ok("fe80::1"));
    assert_false(httpd_tls_name_ok("under_score"));
    assert_false(httpd_tls_name_ok(""));
    assert_false(httpd_tls_name_ok("a,IP:1.2.3.4"));
    const char *bad[] = {"ok", "bad,name", NULL};
    assert_int_equal(httpd_tls_self_signed(&t, bad, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'bad,name' is neither a DNS name nor an IP address"));
    const char *none[] = {NULL};
    assert_int_equal(httpd_tls_self_signed(&t, none, err, sizeof(err)), -1);
}

static void test_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_httpd_tls.XXXXXX";
    assert_non_null(mkdtemp(dir));
    httpd_tls a, b, t;
    char err[600];
    const char *names[] = {"a.test", NULL};
    assert_int_equal(httpd_tls_self_signed(&a, names, err, sizeof(err)), 0);
    assert_int_equal(httpd_tls_self_signed(&b, names, err, sizeof(err)), 0);
    write_file(dir, "tls.crt", a.cert_pem);
    write_file(dir, "tls.key", a.key_pem);
    write_file(dir, "other.key", b.key_pem);
    write_file(dir, "junk", "not PEM at all\n");

    assert_int_equal(httpd_tls_load(&t, dir, "tls.crt", "tls.key", err, sizeof(err)), 0);
    assert_string_equal(t.cert_pem, a.cert_pem);
    assert_string_equal(t.key_pem, a.key_pem);
    httpd_tls_clear(&t);

    assert_int_equal(httpd_tls_load(&t, dir, "tls.crt", "other.key", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "other.key does not match the certificate"));
    assert_null(t.cert_pem);
    assert_int_equal(httpd_tls_load(&t, dir, "missing.crt", "tls.key", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "missing.crt: No such file"));
    assert_int_equal(httpd_tls_load(&t, dir, "junk", "tls.key", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "junk: not a PEM certificate"));
    assert_int_equal(httpd_tls_load(&t, dir, "tls.crt", "junk", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "junk: not an unencrypted PEM private key"));

    /* libmicrohttpd takes the pair, and refuses a certificate without its key. */
    ev_loop *loop = ev_new();
    assert_non_null(loop);
    httpd_config cfg = {.bind = "127.0.0.1:0",
                        .request = NULL,
                        .answer = NULL,
                        .tls_cert_pem = a.cert_pem,
                        .tls_key_pem = a.key_pem};
    httpd *h = httpd_start_config(loop, &cfg, err, sizeof(err));
    assert_non_null(h);
    assert_true(httpd_port(h) > 0);
    httpd_stop(h);
    cfg.tls_key_pem = NULL;
    assert_null(httpd_start_config(loop, &cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "both a certificate and a key"));
    ev_free(loop);

    httpd_tls_clear(&a);
    httpd_tls_clear(&b);
    static const char *const files[] = {"tls.crt", "tls.key", "other.key", "junk"};
    for (size_t i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

TEST_MAIN(cmocka_unit_test(test_self_signed), cmocka_unit_test(test_load))

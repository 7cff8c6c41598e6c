/* httpd_tls: the certificate and key an HTTPS server presents, as PEM in memory (what
 * libmicrohttpd takes): read from a directory the way kubebuilder's flags name the files, or a
 * self-signed one made at start (as controller-runtime does when no certificate is given). */
#ifndef MP_HTTPD_TLS_H
#define MP_HTTPD_TLS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct httpd_tls {
    char *cert_pem; /* the certificate, then any chain */
    char *key_pem;  /* the private key; wiped when cleared */
} httpd_tls;

/* Reads dir/cert_name and dir/key_name and checks that they are PEM, that the key matches the
 * certificate and that the certificate has not expired. 0, or -1 with the reason in err. */
int httpd_tls_load(httpd_tls *out, const char *dir, const char *cert_name, const char *key_name,
                   char *err, size_t errlen);

/* A self-signed certificate (ECDSA P-256, valid from an hour ago for a year, for TLS server
 * authentication) for names: DNS names or IP addresses (either form; the first is also the
 * subject's CN), ending with NULL. 0, or -1 with the reason in err. */
int httpd_tls_self_signed(httpd_tls *out, const char *const *names, char *err, size_t errlen);

/* Whether name can go in a certificate: an IPv4 or IPv6 address, or a DNS name (letters, digits,
 * '-' and '.'). */
bool httpd_tls_name_ok(const char *name);

/* Wipes the key, frees both and zeroes out. */
void httpd_tls_clear(httpd_tls *t);

#endif

/* telemetry: the operator's Prometheus registry (process and API-request series here; the
 * controller adds its own) and its two HTTP endpoints: /metrics on one address, /healthz and
 * /readyz on another, as controller-runtime's operators serve them. /metrics is HTTPS for
 * callers allowed `get /metrics` (telemetry_secure); the probes stay plain HTTP. */
#ifndef MP_APP_TELEMETRY_H
#define MP_APP_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>

#include "httpd/httpd.h"
#include "kube/client.h"
#include "loop/ev.h"
#include "metrics/metrics.h"

typedef struct telemetry telemetry;

/* NULL when out of memory. */
telemetry *telemetry_new(void);
/* Stops the endpoints and frees the registry. NULL is a no-op. */
void telemetry_free(telemetry *t);

metrics *telemetry_registry(telemetry *t);

/* A kube_observe_fn (ud: the telemetry): counts modelpool_api_requests_total{verb,code}. */
void telemetry_api_request(void *ud, const char *verb, long http_code);

typedef struct telemetry_secure_opts {
    kube_client *client; /* asks the API server about each caller; borrowed */
    /* The certificate: cert_dir/cert_name and cert_dir/key_name; cert_dir NULL means a
     * self-signed one made now for this host's names (hostname, $POD_IP, localhost). */
    const char *cert_dir, *cert_name, *key_name;
} telemetry_secure_opts;

/* Makes telemetry_serve's /metrics HTTPS with the certificate o names, answered only to callers
 * whose bearer token the API server accepts (TokenReview) for a user allowed get /metrics
 * (SubjectAccessReview): 401 without a valid token, 403 not allowed, 503 when the API server
 * cannot tell. Call before telemetry_serve. 0, or -1 with err set (a bad certificate). */
int telemetry_secure(telemetry *t, const telemetry_secure_opts *o, char *err, size_t errlen);

/* Serves /metrics at metrics_addr and /healthz, /readyz at health_addr ("0": not served).
 * /readyz answers 200 "ok" while unready(ready_ud) returns NULL, else 503 with the line it returns
 * (why the process is not ready). 0, or -1 with err set. */
int telemetry_serve(telemetry *t, ev_loop *loop, const char *metrics_addr, const char *health_addr,
                    const char *(*unready)(void *ud), void *ready_ud, char *err, size_t errlen);
/* Counts h's open connections in modelpool_http_connections{port} (telemetry's own servers are
 * "metrics" and "health"); h is borrowed and must outlive t's last render. A few at most. */
void telemetry_count_connections(telemetry *t, const char *port, const httpd *h);
/* The ports listened on (0 when not serving): for logs and tests that bind port 0. */
int telemetry_metrics_port(const telemetry *t);
int telemetry_health_port(const telemetry *t);

#endif

/* telemetry: the operator's Prometheus registry (process and API-request series here; the
 * controller adds its own) and its two HTTP endpoints: /metrics on one address, /healthz and
 * /readyz on another, as controller-runtime's operators serve them. */
#ifndef MP_APP_TELEMETRY_H
#define MP_APP_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>

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

/* Serves /metrics at metrics_addr and /healthz, /readyz at health_addr ("0": not served).
 * /readyz answers 200 "ok" while unready(ready_ud) returns NULL, else 503 with the line it returns
 * (why the process is not ready). 0, or -1 with err set. */
int telemetry_serve(telemetry *t, ev_loop *loop, const char *metrics_addr, const char *health_addr,
                    const char *(*unready)(void *ud), void *ready_ud, char *err, size_t errlen);
/* The ports listened on (0 when not serving): for logs and tests that bind port 0. */
int telemetry_metrics_port(const telemetry *t);
int telemetry_health_port(const telemetry *t);

#endif

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
 * /readyz answers 200 once ready(ready_ud, ...) is true, 503 before with the text ready wrote to
 * why ("not ready: waiting for WHY"). 0, or -1 with err set. */
int telemetry_serve(telemetry *t, ev_loop *loop, const char *metrics_addr, const char *health_addr,
                    bool (*ready)(void *ud, char *why, size_t whylen), void *ready_ud, char *err,
                    size_t errlen);
/* The ports listened on (0 when not serving): for logs and tests that bind port 0. */
int telemetry_metrics_port(const telemetry *t);
int telemetry_health_port(const telemetry *t);

#endif

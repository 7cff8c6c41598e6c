/* sim_isvc: InferenceService fields and the probe answers. Each runtime answers only on its own
 * idle endpoint (plus /health), so an operator that probes the wrong path sees a 404 rather than
 * a lucky "idle". The runtime table is written out here on purpose instead of reusing the
 * operator's probe module: the simulator is the test's oracle and must not share its bugs. */
#include "sim_isvc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_runtime {
    const char *name;
    const char *path;   /* idle endpoint; NULL: none (generic uses its annotation) */
    const char *metric; /* Prometheus gauge of requests in flight; NULL: /slots JSON */
    int port;
} sim_runtime;

static const sim_runtime sim_runtimes[] = {
    {"llamacpp", "/slots", NULL, 8080},
    {"llamacpp-router", "/slots", NULL, 8080},
    {"vllm", "/metrics", "vllm:num_requests_running", 8000},
    {"tgi", "/metrics", "tgi_batch_current_size", 80},
    {"sglang", "/metrics", "sglang:num_running_reqs", 30000},
    {"personaplex", NULL, NULL, 8080},
    {"generic", NULL, NULL, 8080},
};

static const cJSON *sim_get(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const sim_runtime *sim_runtime_of(const cJSON *isvc)
{
    const char *name = sim_isvc_runtime(isvc);
    for (size_t i = 0; i < sizeof(sim_runtimes) / sizeof(sim_runtimes[0]); i++)
        if (strcmp(sim_runtimes[i].name, name) == 0)
            return &sim_runtimes[i];
    return NULL;
}

int sim_isvc_replicas(const cJSON *isvc)
{
    const cJSON *r = sim_get(isvc, "spec", "replicas");
    return cJSON_IsNumber(r) ? (int)r->valuedouble : 1;
}

const char *sim_isvc_runtime(const cJSON *isvc)
{
    const char *r = cJSON_GetStringValue(sim_get(isvc, "spec", "runtime"));
    return r && *r ? r : "llamacpp";
}

int sim_isvc_port(const cJSON *isvc)
{
    const cJSON *spec = sim_get(isvc, "spec", NULL);
    /* As the member controller builds the Deployment: the container port, else the endpoint's. */
    const cJSON *p = sim_get(spec, "containerPort", NULL);
    if (cJSON_IsNumber(p) && p->valuedouble >= 1 && p->valuedouble <= 65535)
        return (int)p->valuedouble;
    p = sim_get(spec, "endpoint", "port");
    if (cJSON_IsNumber(p) && p->valuedouble >= 1 && p->valuedouble <= 65535)
        return (int)p->valuedouble;
    const sim_runtime *rt = sim_runtime_of(isvc);
    return rt ? rt->port : 8080;
}

const char *sim_isvc_annotation(const cJSON *isvc, const char *key)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(sim_get(isvc, "metadata", "annotations"), key));
}

bool sim_isvc_flag(const cJSON *isvc, const char *key)
{
    const char *v = sim_isvc_annotation(isvc, key);
    return v && strcmp(v, "true") == 0;
}

uint64_t sim_isvc_ms(const cJSON *isvc, const char *key, uint64_t fallback)
{
    const char *v = sim_isvc_annotation(isvc, key);
    if (!v || *v < '0' || *v > '9')
        return fallback;
    char *end;
    unsigned long long ms = strtoull(v, &end, 10);
    return *end ? fallback : (uint64_t)ms;
}

static void sim_reply_set(sim_reply *out, unsigned code, const char *ctype, const char *body)
{
    out->code = code;
    out->content_type = ctype;
    snprintf(out->body, sizeof(out->body), "%s", body);
}

void sim_isvc_answer(const cJSON *isvc, const char *path, int inflight, sim_reply *out)
{
    static const char text[] = "text/plain; charset=utf-8";
    static const char json[] = "application/json";
    const char *probe = sim_isvc_annotation(isvc, "sim.modelpool.test/probe");
    if (probe && strcmp(probe, "error") == 0) {
        sim_reply_set(out, 500, text, "simulated error\n");
        return;
    }
    bool busy = inflight > 0 || sim_isvc_flag(isvc, "sim.modelpool.test/busy");
    int running = inflight > 0 ? inflight : busy; /* the gauge: requests being processed */
    const sim_runtime *rt = sim_runtime_of(isvc);
    const char *idle_path = rt ? rt->path : NULL;
    if (rt && strcmp(rt->name, "generic") == 0)
        idle_path = sim_isvc_annotation(isvc, "inference.llmkube.dev/idle-endpoint");

    if (strcmp(path, "/health") == 0) {
        sim_reply_set(out, 200, json, "{\"status\":\"ok\"}");
    } else if (!idle_path || strcmp(path, idle_path) != 0) {
        sim_reply_set(out, 404, text, "not found\n");
    } else if (rt->metric) {
        out->code = 200;
        out->content_type = "text/plain; version=0.0.4";
        snprintf(out->body, sizeof(out->body), "# TYPE %s gauge\n%s{model_name=\"sim\"} %d\n",
                 rt->metric, rt->metric, running);
    } else if (rt->path) {
        sim_reply_set(out, 200, json,
                      busy ? "[{\"id\":0,\"is_processing\":true}]"
                           : "[{\"id\":0,\"is_processing\":false}]");
    } else {
        sim_reply_set(out, busy ? 503 : 200, text, busy ? "busy\n" : "idle\n");
    }
}

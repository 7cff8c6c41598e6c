/* runtime: the table itself, looked up by name (a handful of entries: a scan). Unknown runtimes
 * are NULL, so each caller fails closed its own way (no probe; the generic default port). */
#include "api/runtime.h"

#include <stddef.h>
#include <string.h>

static const api_runtime api_runtimes[] = {
    {"llamacpp", "/slots", NULL, 8080, false},
    {"llamacpp-router", "/slots", NULL, 8080, false},
    {"vllm", "/metrics", "vllm:num_requests_running", 8000, false},
    {"tgi", "/metrics", "tgi_batch_current_size", 80, false},
    {"sglang", "/metrics", "sglang:num_running_reqs", 30000, false},
    {"personaplex", NULL, NULL, 8080, false},
    {"generic", NULL, NULL, 8080, true},
};

const api_runtime *api_runtime_find(const char *name)
{
    if (!name || !*name)
        name = "llamacpp";
    for (size_t i = 0; i < sizeof(api_runtimes) / sizeof(api_runtimes[0]); i++)
        if (strcmp(api_runtimes[i].name, name) == 0)
            return &api_runtimes[i];
    return NULL;
}

int api_runtime_port(const char *runtime, int endpoint_port, int container_port)
{
    if (container_port > 0)
        return container_port;
    if (endpoint_port > 0)
        return endpoint_port;
    const api_runtime *r = api_runtime_find(runtime);
    return r ? r->port : 8080;
}

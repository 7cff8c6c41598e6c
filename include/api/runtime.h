/* runtime: the one table of the member runtimes (spec.runtime of an InferenceService, DESIGN.md
 * "Idle probe"): each one's default port and idle check, for the operator and the router alike. */
#ifndef MP_API_RUNTIME_H
#define MP_API_RUNTIME_H

#include <stdbool.h>

/* One runtime: its idle check (the operator's prober asks what to GET and how to judge the
 * answer) and the port its server listens on by default (where both binaries find a member). */
typedef struct api_runtime {
    const char *name;
    const char *path;   /* NULL: no fixed path (generic: the annotation's; the others: no probe) */
    const char *metric; /* NULL: not a Prometheus probe */
    int port;           /* the port its server listens on by default */
    bool generic;       /* the path is the member's idle-endpoint annotation */
} api_runtime;

/* The runtime called name (NULL or "" mean llamacpp, the default); NULL for one we do not know. */
const api_runtime *api_runtime_find(const char *name);

/* The port a member serves (and is probed) on, where the member controller makes the server
 * listen: spec.containerPort, else spec.endpoint.port, else the runtime's default (8080 llama.cpp
 * and others, 8000 vLLM, 80 TGI, 30000 SGLang). 0 means "not set". */
int api_runtime_port(const char *runtime, int endpoint_port, int container_port);

#endif

/* probe: the idle check that must pass before a member is unloaded, per runtime (DESIGN.md
 * "Idle probe"). Pure functions: which request to make, and how to judge its answer. Anything we
 * cannot judge is never idle (fail closed). */
#ifndef MP_POOL_PROBE_H
#define MP_POOL_PROBE_H

#include <stddef.h>

typedef enum {
    PROBE_IDLE,
    PROBE_BUSY,
    PROBE_ERROR,       /* no answer, or one we cannot read: not idle */
    PROBE_UNSUPPORTED, /* this runtime has no idle check we know: not idle */
} probe_verdict;

/* The path to GET for a member of this runtime (NULL runtime means llamacpp, the default).
 * idle_endpoint is the member's inference.llmkube.dev/idle-endpoint annotation, or NULL.
 * Returns NULL when the runtime cannot be probed; then *why says why (static string). */
const char *probe_path(const char *runtime, const char *idle_endpoint, const char **why);

/* The port to probe: spec.endpoint.port, else spec.containerPort, else the runtime's default
 * (8080 llama.cpp and others, 8000 vLLM, 80 TGI, 30000 SGLang). 0 means "not set". */
int probe_port(const char *runtime, int endpoint_port, int container_port);

/* Judges one answer. http_code 0 means no answer (transport error; body then holds the error text).
 * Writes a one-line explanation to msg. */
probe_verdict probe_judge(const char *runtime, long http_code, const char *body, size_t len,
                          char *msg, size_t msglen);

const char *probe_verdict_name(probe_verdict v);

#endif

/* sim_isvc: what the member simulator reads from an InferenceService (replicas, port, the test's
 * sim.modelpool.test annotations) and the idle-probe answer a member of that runtime gives.
 * Pure functions over cJSON, so the answer a test asked for is decided in one place. */
#ifndef MP_SIM_ISVC_H
#define MP_SIM_ISVC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#define SIM_LABEL_SERVICE "inference.llmkube.dev/service"
#define SIM_FINALIZER "sim.modelpool.test/hold"

/* spec.replicas; absent (or not a number) means 1, as the CRD's default. */
int sim_isvc_replicas(const cJSON *isvc);
/* spec.runtime, "llamacpp" when absent. */
const char *sim_isvc_runtime(const cJSON *isvc);
/* spec.endpoint.port, else spec.containerPort, else the runtime's default (DESIGN.md: 8080
 * llama.cpp and others, 8000 vLLM, 80 TGI, 30000 SGLang). */
int sim_isvc_port(const cJSON *isvc);
/* metadata.annotations[key], or NULL. */
const char *sim_isvc_annotation(const cJSON *isvc, const char *key);
/* True when the annotation is exactly "true". */
bool sim_isvc_flag(const cJSON *isvc, const char *key);
/* A millisecond annotation (a decimal number), else fallback. */
uint64_t sim_isvc_ms(const cJSON *isvc, const char *key, uint64_t fallback);

typedef struct sim_reply {
    unsigned code;
    const char *content_type;
    char body[256];
} sim_reply;

/* The answer to GET path from a member's Pod whose InferenceService is isvc (NULL: no longer
 * cached, answered as an idle llama.cpp) with inflight OpenAI requests in progress: busy while
 * any is, or while the busy annotation says so. */
void sim_isvc_answer(const cJSON *isvc, const char *path, int inflight, sim_reply *out);

#endif

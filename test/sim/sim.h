/* sim: the member controller the simulator plays (DESIGN.md "Testing"): it watches
 * InferenceServices and their Pods through the project's informers and drives each member through
 * Creating -> Ready -> Stopped with one Pod that serves the idle probe on a loopback address. */
#ifndef MP_SIM_SIM_H
#define MP_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kube/client.h"
#include "loop/ev.h"

/* The contract tests rely on.
 *
 * Per InferenceService (desired = spec.replicas, absent = 1):
 *   desired >= 1, no live Pod: creates Pod <name>-<5 a-z> (labels app=<name>,
 *     inference.llmkube.dev/service=<name>; container `server`, image `sim`; finalizer
 *     sim.modelpool.test/hold with --finalizer), status Creating. After the load delay it listens
 *     on 127.0.0.N:<port> (N 2..254, one per live Pod; --ip-first/--ip-count move and widen the
 *     range, address index n being 127.<n>>16>.<n>>8 & 255>.<n & 255>), then writes the Pod Running
 * with that podIP and a ready `server` container, then status Ready, replicas 1. A Pod that is
 * terminating blocks a new one until it is gone (it still holds the GPU); extra live Pods are
 * deleted. desired == 0 (or the InferenceService is gone): stops listening, deletes its Pods (grace
 * 0); a Pod with the finalizer is held terminating for the terminate delay, then the finalizer is
 *     removed. Status Stopped, replicas 0, once no Pod is left.
 *   port: spec.endpoint.port, else spec.containerPort, else the runtime's default (8080; vllm
 *     8000, tgi 80, sglang 30000), as DESIGN.md's idle probe.
 * Annotations, read on every pass and on every request (so kubectl annotate acts at once):
 *   sim.modelpool.test/load-ms, terminate-ms  the delays (from the Pod's creation / the start of
 *       its deletion); lowering one releases a Pod held by a large one
 *   sim.modelpool.test/busy: "true"       busy answers: /slots is_processing true, the /metrics
 *       gauge 1, a generic idle-endpoint 503
 *   sim.modelpool.test/probe: "refuse"    no listener (connection refused); "error": HTTP 500
 *   sim.modelpool.test/fail: "true"       the Pod goes Failed instead of Running (or from Running),
 *       status Failed, no new Pod while the annotation stays
 *   sim.modelpool.test/evict: "true"      the running Pod goes Failed (reason Evicted, no address),
 *       status Failed, no new Pod while the annotation stays
 *   sim.modelpool.test/waiting-for-gpu: "true"  the Pod stays Pending, status WaitingForGPU
 *   sim.modelpool.test/early-stopped: "true"    status Stopped as soon as every Pod is terminating
 * Endpoints per runtime: llamacpp, llamacpp-router GET /slots; vllm, tgi, sglang GET /metrics
 *   (vllm:num_requests_running, tgi_batch_current_size, sglang:num_running_reqs); generic the path
 *   in inference.llmkube.dev/idle-endpoint (200 idle, 503 busy); all GET /health. Anything else
 *   404. GET /sim/requests answers how many requests the member served (itself not counted).
 * stdout, one line per change, in the order things happened:
 *   sim <ns>/<name> pod=<live Pod or -> phase=<phase> ip=<address or ->
 *   pod=- means the member holds no GPU; phase is the status the sim reports, or Terminating while
 *   its Pod is being deleted and the status is not yet Stopped. At exit, per member:
 *   sim <ns>/<name> requests=<n>
 */

typedef struct sim_options {
    const char *namespace_; /* NULL: all namespaces */
    bool finalizer;         /* put SIM_FINALIZER on Pods so their deletion can be seen */
    uint64_t load_ms;       /* Pod created -> Running, unless annotated */
    uint64_t terminate_ms;  /* Pod terminating -> finalizer removed, unless annotated */
    int ip_first, ip_count; /* Pod addresses (see above); 0 for the defaults */
} sim_options;

#define SIM_IP_FIRST_DEFAULT 2
#define SIM_IP_COUNT_DEFAULT 253

typedef struct sim sim;

/* The client and the loop must outlive the simulator. NULL when out of memory. */
sim *sim_new(ev_loop *loop, kube_client *client, const sim_options *opt);
/* Starts watching; everything else happens from the loop. 0 or -errno. */
int sim_start(sim *s);
/* Writes "sim <ns>/<name> requests=<n>" for every member known. */
void sim_print_requests(const sim *s, FILE *out);
/* Cancels every call in flight, closes every listener and frees everything. The Pods stay as they
 * are on the API server, for the next run to adopt. */
void sim_free(sim *s);

#endif

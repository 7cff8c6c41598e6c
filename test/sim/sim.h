/* sim: the member controller the simulator plays (DESIGN.md "Testing"): it watches
 * InferenceServices and their Pods through the project's informers and keeps each member's Pods
 * as the ReplicaSet behind a real InferenceService does, each Pod serving its idle probe on its
 * own loopback address. */
#ifndef MP_SIM_SIM_H
#define MP_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kube/client.h"
#include "loop/ev.h"

/* The contract tests rely on. Where a real member controller could be kinder or harsher, the sim
 * is harsher: it never waits for the GPU to be free.
 *
 * Per InferenceService (desired = spec.replicas, absent = 1). A Pod is active while it is not
 *   being deleted and not Failed or Succeeded, as a ReplicaSet counts them.
 *   Fewer active Pods than desired: creates Pods at once, one write after another, named
 *     <name>-<5 a-z> (labels app=<name>, inference.llmkube.dev/service=<name>; container `server`,
 *     image `sim`; finalizer sim.modelpool.test/hold with --finalizer), even while older Pods of
 *     the same member still terminate (they are not counted). replicas: 2 gives two Pods.
 *   After the load delay a Pod listens on its own 127.0.0.N:<port> (N 2..254, one per Pod that
 *     has run; --ip-first/--ip-count move and widen the range, address index n being
 *     127.<n>>16>.<n>>8 & 255>.<n & 255>; --ip-block B puts the range in 127.B.0.0/16, a test
 *     run's own block, test/README.md), then is written Running with that podIP and a ready
 *     `server` container.
 *   More active Pods than desired: deletes the extra ones as a ReplicaSet picks them (Pending
 *     before Running, not ready before ready, then newest first). desired == 0 (or the
 *     InferenceService is gone): deletes every Pod, Failed ones included. Deletion is grace 0;
 *     a Pod with the finalizer stays terminating for the terminate delay (its address still in
 *     its status, no longer listening), then the finalizer is removed and it is gone.
 *   Status (phase, replicas = ready Pods): Ready while at least one active Pod is Running;
 *     otherwise Stopped when desired is 0, even while Pods still terminate (as the real
 *     controller does); Failed while the fail/evict annotation has failed its Pods (none is
 *     replaced then); WaitingForGPU while held Pending by that annotation; else Creating.
 *   port: spec.containerPort, else spec.endpoint.port, else the runtime's default (8080; vllm
 *     8000, tgi 80, sglang 30000), as DESIGN.md's idle probe.
 * Annotations, read on every pass and on every request (so kubectl annotate acts at once):
 *   sim.modelpool.test/load-ms, terminate-ms  the delays (from the Pod's creation / the start of
 *       its deletion); lowering one releases a Pod held by a large one
 *   sim.modelpool.test/busy: "true"       busy answers: /slots is_processing true, the /metrics
 *       gauge 1, a generic idle-endpoint 503
 *   sim.modelpool.test/probe: "refuse"    no listener (connection refused); "error": HTTP 500;
 *       "hang": connections are accepted and requests read but never answered (the client's
 *       timeout decides) until the annotation changes (held requests are then answered as it
 *       now says) or the Pod stops serving (they are closed unanswered)
 *   sim.modelpool.test/fail: "true"       Pods go Failed instead of Running (or from Running),
 *       status Failed, no new Pod while the annotation stays
 *   sim.modelpool.test/evict: "true"      running Pods go Failed (reason Evicted, no address),
 *       status Failed, no new Pod while the annotation stays
 *   sim.modelpool.test/waiting-for-gpu: "true"  Pods stay Pending, status WaitingForGPU
 *   sim.modelpool.test/loading: "true"    status Progressing while its Pods run (a server still
 *       loading its model; with probe: error its idle probe fails, as a loading llama.cpp's does)
 * Endpoints per runtime: llamacpp, llamacpp-router GET /slots; vllm, tgi, sglang GET /metrics
 *   (vllm:num_requests_running, tgi_batch_current_size, sglang:num_running_reqs); generic the path
 *   in inference.llmkube.dev/idle-endpoint (200 idle, 503 busy); all GET /health. Anything else
 *   404. GET /sim/requests answers how many requests the member served (itself not counted).
 * OpenAI endpoints, every runtime (sim_oai.h has the format): POST /v1/chat/completions,
 *   /v1/completions, /v1/embeddings read a JSON body (over 32 MiB: 413; not JSON or no model: 400;
 *   another method: 405) and answer with the body's model (a llamacpp member: with its served
 *   name, see below) and the header X-Sim-Pod: <pod>, after
 *   max_tokens (default 8; embeddings 1) times sim.modelpool.test/token-ms (default 0) on a timer;
 *   "stream": true answers SSE, one event per token at that pace, a last event with
 *   finish_reason, then data: [DONE]. While any such request is in flight on a Pod (its body read
 *   whole, answer not yet handed over, client still there), that Pod's idle probe is busy (the
 *   gauge counts them), whatever the busy annotation says; a request whose body is still coming
 *   is not counted (llama.cpp's /slots shows a request only once it is on a slot).
 *   sim.modelpool.test/served-model: <name>  a body naming another model gets vLLM's 404; a
 *       llamacpp member instead takes any name and answers with <name> (else the member's own
 *       name), as llama-server (one model, --alias) does
 *   A connection idle for 5 s is closed (llama-server's keep-alive timeout).
 *   A Pod that stops serving drops its requests in flight with their connections (reset). A
 *   client that leaves ends its request at once, streamed or not (httpd_req_work).
 * With --llama-server (and --llama-model), the Pods of llamacpp and llamacpp-router members are
 * real llama-server processes (sim_llama.h) instead: started on the Pod's address and port when its
 *   load delay is over, the Pod then written Running with its container started but not ready,
 *   and ready once the server's /health answers 200 (the real load time); the member is
 *   Progressing while its server loads (a Running Pod, none ready) and Ready
 *   from then. The server answers every endpoint itself (/slots, /health, /v1/...), with one slot,
 *   the name sim.modelpool.test/served-model or else the member's name (--alias); the busy, probe,
 *   token-ms and served-model-404 rules above are the real server's own behaviour then, and
 *   /sim/requests is not served. A deleted Pod's server gets SIGTERM (SIGKILL after 5 s); with
 *   --finalizer its Pod stays terminating until the process has exited as well as for the
 *   terminate delay. A server that exits by itself is a crashed container: its Pod goes Failed
 *   and is replaced. Other runtimes' members stay simulated.
 * stdout, one line per change, in the order things happened (each printed right after the write
 *   that caused it, before the operator can see that write):
 *   sim <ns>/<name> pod=<pod> state=<Pending|Running|Failed|Terminating|Gone> ip=<addr|-> busy=<b>
 *     ip is set while the Pod holds the GPU: from Running until Gone, terminating or not (a Pod
 *     that never ran holds nothing); busy is the member's busy annotation at that moment, so
 *     "state=Terminating ... busy=true" is a busy member's Pod being deleted.
 *   sim <ns>/<name> phase=<status phase> ready=<ready Pods> holding=<Pods holding the GPU>
 *   sim <ns>/<name> llama=<pod> state=<started|ready|exited> pid=<pid> [status=<code|signal-N>]
 *     a real server's process started, loaded, or gone (reaped)
 *   At exit, per member: sim <ns>/<name> requests=<n>
 */

typedef struct sim_options {
    const char *namespace_; /* NULL: all namespaces */
    bool finalizer;         /* put SIM_FINALIZER on Pods so their deletion can be seen */
    uint64_t load_ms;       /* Pod created -> Running, unless annotated */
    uint64_t terminate_ms;  /* Pod terminating -> finalizer removed, unless annotated */
    int ip_first, ip_count; /* Pod addresses (see above); 0 for the defaults */
    /* A new Pod takes the next free address after the last one given (as the reference CNI's
     * host-local IPAM does), not the lowest free one (an address reused at once, as some CNIs do:
     * the default, the harsher). */
    bool ip_round_robin;
    /* Real llama.cpp servers for llamacpp members (see "With --llama-server" above); NULL: none. */
    const char *llama_server, *llama_model, *llama_log_dir;
    int llama_ctx; /* their context size */
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

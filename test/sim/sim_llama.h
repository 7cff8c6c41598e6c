/* sim_llama: a member Pod's real llama.cpp server (member-sim --llama-server): the process is
 * started on the Pod's address and port, its /health is polled until it answers 200 (the model is
 * loaded), and its end (SIGTERM, then SIGKILL after a grace) is seen on a pidfd, all on the loop.
 */
#ifndef MP_SIM_LLAMA_H
#define MP_SIM_LLAMA_H

#include <stddef.h>

#include "loop/ev.h"

typedef struct sim_llama_config {
    const char *server;  /* the llama-server binary */
    const char *model;   /* the GGUF it loads */
    const char *log_dir; /* each process's output goes to <log_dir>/<name>.log; NULL: discarded */
    int ctx_size;        /* -c, the context of its one slot */
} sim_llama_config;

typedef enum {
    SIM_LLAMA_LOADING, /* started, /health not 200 yet */
    SIM_LLAMA_READY,   /* /health answered 200 */
    SIM_LLAMA_EXITED,  /* the process is gone (reaped) */
} sim_llama_state;

/* The grace between SIGTERM and SIGKILL (a kubelet's default is 30 s; a test needs less). */
#define SIM_LLAMA_KILL_MS 5000

typedef struct sim_llama sim_llama;

/* Runs from the loop when the state changed (ready, exited). */
typedef void (*sim_llama_fn)(void *ud);

/* Whether ip:port can be listened on now (the server binds it with SO_REUSEADDR, so do we). 0 or
 * -errno. */
int sim_llama_can_bind(const char *ip, int port);

/* Starts `server -m model --host ip --port port --alias alias` with one slot and one thread;
 * name names its log file. NULL with err set when it cannot (fork, pidfd, memory). */
sim_llama *sim_llama_start(ev_loop *loop, const sim_llama_config *cfg, const char *name,
                           const char *ip, int port, const char *alias, sim_llama_fn changed,
                           void *ud, char *err, size_t errlen);
sim_llama_state sim_llama_state_of(const sim_llama *l);
int sim_llama_pid(const sim_llama *l);
/* The wait status once exited (see waitpid). */
int sim_llama_wait_status(const sim_llama *l);
/* SIGTERM now, SIGKILL after SIM_LLAMA_KILL_MS; a no-op once stopping or exited. */
void sim_llama_stop(sim_llama *l);
/* SIGKILLs a process still running and reaps it, then frees. A no-op for NULL. */
void sim_llama_free(sim_llama *l);

#endif

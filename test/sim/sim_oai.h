/* sim_oai: the OpenAI-compatible answers of a simulated member (chat completions, completions,
 * embeddings): the request body's fields the simulator acts on, and the JSON and SSE text it
 * sends back. Pure functions over cJSON, so tests can check the format without a socket. */
#ifndef MP_SIM_OAI_H
#define MP_SIM_OAI_H

#include <stdbool.h>
#include <stddef.h>

/* The largest request body read; a longer one is answered 413. */
#define SIM_OAI_BODY_MAX (32u << 20)
/* Tokens generated when the request names none. */
#define SIM_OAI_TOKENS_DEFAULT 8
/* The most tokens one request may ask for (a bound on the simulated work, not a runtime's). */
#define SIM_OAI_TOKENS_MAX 100000

typedef enum { SIM_OAI_CHAT, SIM_OAI_COMPLETIONS, SIM_OAI_EMBEDDINGS } sim_oai_kind;

/* The endpoint a POST path names: 0 with *kind set, or -1 for none of them. */
int sim_oai_kind_of(const char *path, sim_oai_kind *kind);

typedef struct sim_oai_req {
    sim_oai_kind kind;
    char *model; /* the body's, malloc'd */
    int tokens;  /* max_tokens (or max_completion_tokens), else the default; 1 for embeddings */
    bool stream; /* "stream": true (never for embeddings) */
    int inputs;  /* embeddings: how many inputs (a string is one) */
} sim_oai_req;

/* Reads a request body. 0, or -1 with *err an OpenAI-format error body (malloc'd, NULL when out
 * of memory) for a 400: not JSON, no model, bad max_tokens. */
int sim_oai_parse(sim_oai_kind kind, const char *body, size_t len, sim_oai_req *out, char **err);
void sim_oai_req_clear(sim_oai_req *r);

/* An OpenAI-format error body ({"error":{"message","type","param","code"}}), malloc'd or NULL. */
char *sim_oai_error(const char *message, const char *type, int code);
/* vLLM's answer (404) to a model it does not serve, malloc'd or NULL. */
char *sim_oai_model_not_found(const char *model);

/* The whole non-streamed answer to r, malloc'd or NULL. id names the completion; created is
 * its Unix time. */
char *sim_oai_response(const sim_oai_req *r, const char *id, long created);
/* Streamed answers, malloc'd or NULL: the SSE event for token i (0-based), the last one (empty
 * delta, finish_reason "length"), and the end marker. */
char *sim_oai_chunk(const sim_oai_req *r, const char *id, long created, int i);
char *sim_oai_chunk_last(const sim_oai_req *r, const char *id, long created);
#define SIM_OAI_DONE "data: [DONE]\n\n"

#endif

/* rt_oai: the OpenAI-compatible JSON bodies the router writes itself: the error body every client
 * library understands ({"error":{"message","type","param","code"}}) and the GET /v1/models list,
 * with each model's pool and residency in an extra "modelpool" object OpenAI clients ignore. */
#ifndef MP_ROUTER_OAI_H
#define MP_ROUTER_OAI_H

#include <stdbool.h>
#include <stddef.h>

/* The errors the router answers itself, each with its HTTP status, OpenAI "type" and "code"
 * (null where OpenAI sends null). The types and codes are the ones OpenAI's API uses where it has
 * one (400/404 invalid_request_error, model_not_found; 5xx server_error), so clients map them. */
typedef enum rt_oai_err {
    RT_OAI_BAD_REQUEST,        /* 400 invalid_request_error, code null: no model, not JSON */
    RT_OAI_MODEL_NOT_FOUND,    /* 404 invalid_request_error, model_not_found */
    RT_OAI_NOT_FOUND,          /* 404 invalid_request_error, code null: no such path */
    RT_OAI_METHOD_NOT_ALLOWED, /* 405 invalid_request_error, method_not_allowed */
    RT_OAI_TOO_LARGE,          /* 413 invalid_request_error, request_too_large */
    RT_OAI_BAD_GATEWAY,        /* 502 server_error, upstream_error: the member failed */
    RT_OAI_MODEL_LOADING,      /* 503 server_error, model_loading: swapBudget passed */
    RT_OAI_POOL_UNAVAILABLE,   /* 503 server_error, pool_unavailable: Degraded, target Failed */
    RT_OAI_OVERLOADED,         /* 503 server_error, overloaded: the body buffer budget is spent */
    RT_OAI_TIMEOUT,            /* 408 invalid_request_error, request_timeout: the upload stalled */
} rt_oai_err;

/* The HTTP status for err (400 for a value outside the enum). */
unsigned rt_oai_status(rt_oai_err err);

/* The error body for err with message (UTF-8; NULL is an empty message), as a malloc'd
 * NUL-terminated JSON string the caller frees; NULL only when out of memory. */
char *rt_oai_error(rt_oai_err err, const char *message);

/* The same with any type and code (code NULL gives "code": null). */
char *rt_oai_error_custom(const char *type, const char *code, const char *message);

/* One model a client can name: a member, under its own name or an alias. */
typedef struct rt_oai_model {
    const char *id;             /* the name clients send in "model" */
    const char *pool;           /* the ModelPool (OpenAI's "owned_by") */
    const char *ns;             /* its namespace, or NULL to leave it out */
    const char *member;         /* the InferenceService serving id */
    bool resident;              /* the member holds the slot now (from the pool's status) */
    const char *const *aliases; /* other names that select the same member */
    size_t naliases;
} rt_oai_model;

/* The GET /v1/models body: {"object":"list","data":[...]}, one element per entry in order and,
 * after each, one per alias (an alias is a model name a client may send, so it is listed):
 *   {"id":..,"object":"model","created":0,"owned_by":<pool>,
 *    "modelpool":{"namespace":..,"pool":..,"member":..,"resident":true|false,
 *                 "aliases":[..] (on the member's own entry) | "alias_of":<id> (on an alias's)}}
 * "created" is 0: a member has no creation time a client would care about. malloc'd JSON the
 * caller frees; NULL only when out of memory. */
char *rt_oai_models(const rt_oai_model *models, size_t n);

#endif

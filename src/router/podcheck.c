/* rt_podcheck: confirms a member Pod at its address by a read from the API server, before the
 * first request on a new connection (fwd's connected(), router/forward.h), and remembers the Pods
 * it refuted. Why a read after the connect is enough: the Pod's IP is set once by the kubelet and
 * released only with the Pod's sandbox, after which the Pod is terminating or terminal in the API
 * server (the kubelet updates the status as it tears the sandbox down); a read made after the
 * connect that shows the Pod alive at that address means the address was the Pod's at the connect,
 * so the connection reached it. Another Pod taking the address later cannot take over the
 * connection: its network stack has no state for it and answers with a reset. */
#include "router/podcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_PODCHECK_MAX_REFUTED 256

struct rt_podcheck {
    kube_client *client;
    const store *pods;
    long timeout_ms;
    rt_podref refuted[RT_PODCHECK_MAX_REFUTED];
    size_t nrefuted;
};

struct rt_podcheck_call {
    rt_podcheck *pc;
    kube_call *call;
    rt_podref pod;
    rt_podcheck_fn done;
    void *ud;
};

static bool rt_pc_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

rt_pod_verdict rt_podcheck_judge(long code, const api_pod *read, const char *uid, const char *ip,
                                 const char **why)
{
    const char *w = NULL;
    rt_pod_verdict v = RT_POD_GONE;
    if (code == 404)
        w = "the member's Pod is gone (its address may be another Pod's now)";
    else if (code < 200 || code > 299 || !read) {
        w = "the member's Pod could not be read from the API server";
        v = RT_POD_UNKNOWN;
    } else if (!rt_pc_eq(read->uid, uid))
        w = "the member's Pod was replaced by another of the same name";
    else if (read->terminating)
        w = "the member's Pod is terminating";
    else if (read->phase == API_POD_FAILED || read->phase == API_POD_SUCCEEDED)
        w = "the member's Pod has ended";
    else if (!rt_pc_eq(read->ip, ip))
        w = "the member's Pod no longer has that address";
    else
        v = RT_POD_SAME;
    if (why)
        *why = w;
    return v;
}

int rt_podref_set(rt_podref *r, const api_pod *pod)
{
    rt_podref_clear(r);
    r->ns = strdup(pod->ns ? pod->ns : "");
    r->name = strdup(pod->name ? pod->name : "");
    r->uid = strdup(pod->uid ? pod->uid : "");
    r->ip = strdup(pod->ip ? pod->ip : "");
    if (r->ns && r->name && r->uid && r->ip)
        return 0;
    rt_podref_clear(r);
    return -ENOMEM;
}

void rt_podref_clear(rt_podref *r)
{
    free(r->ns);
    free(r->name);
    free(r->uid);
    free(r->ip);
    *r = (rt_podref){0};
}

rt_podcheck *rt_podcheck_new(kube_client *client, const store *pods, long timeout_ms)
{
    rt_podcheck *pc = malloc(sizeof(*pc));
    if (pc)
        *pc = (rt_podcheck){.client = client, .pods = pods, .timeout_ms = timeout_ms};
    return pc;
}

void rt_podcheck_free(rt_podcheck *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < pc->nrefuted; i++)
        rt_podref_clear(&pc->refuted[i]);
    free(pc);
}

static const api_pod *rt_pc_cached(const rt_podcheck *pc, const rt_podref *r)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", r->ns, r->name);
    return store_get(pc->pods, key);
}

bool rt_podcheck_refuted(const rt_podcheck *pc, const api_pod *pod)
{
    for (size_t i = 0; i < pc->nrefuted; i++)
        if (rt_pc_eq(pc->refuted[i].uid, pod->uid) && rt_pc_eq(pc->refuted[i].ip, pod->ip))
            return true;
    return false;
}

/* Remembers r as refuted, forgetting those the cache no longer has as they were (gone from it,
 * or a record that shows them as they are now: a new UID, another address). When every slot holds
 * a Pod still cached, the oldest goes: the cost is one more read for it. */
static void rt_pc_refute(rt_podcheck *pc, const rt_podref *r)
{
    size_t n = 0;
    for (size_t i = 0; i < pc->nrefuted; i++) {
        const api_pod *c = rt_pc_cached(pc, &pc->refuted[i]);
        if (c && rt_pc_eq(c->uid, pc->refuted[i].uid) && rt_pc_eq(c->ip, pc->refuted[i].ip))
            pc->refuted[n++] = pc->refuted[i];
        else
            rt_podref_clear(&pc->refuted[i]);
    }
    pc->nrefuted = n;
    if (pc->nrefuted == RT_PODCHECK_MAX_REFUTED) {
        rt_podref_clear(&pc->refuted[0]);
        memmove(&pc->refuted[0], &pc->refuted[1], (pc->nrefuted - 1) * sizeof(pc->refuted[0]));
        pc->nrefuted--;
    }
    api_pod p = {.ns = r->ns, .name = r->name, .uid = r->uid, .ip = r->ip};
    /* -ENOMEM: not remembered; the cost is one more read of the Pod. */
    if (rt_podref_set(&pc->refuted[pc->nrefuted], &p) == 0)
        pc->nrefuted++;
}

static void rt_pc_done(void *ud, const kube_error *err, long code, const cJSON *body)
{
    rt_podcheck_call *c = ud;
    (void)err;
    int derr = 0;
    api_pod *read = code >= 200 && code <= 299 && body ? api_pod_decode(body, &derr) : NULL;
    const char *why = NULL;
    rt_pod_verdict v = rt_podcheck_judge(code, read, c->pod.uid, c->pod.ip, &why);
    free(read);
    if (v == RT_POD_GONE)
        rt_pc_refute(c->pc, &c->pod);
    c->call = NULL;
    rt_podcheck_fn done = c->done;
    void *dud = c->ud;
    rt_podref_clear(&c->pod);
    free(c);
    done(dud, v == RT_POD_SAME ? NULL : why);
}

rt_podcheck_call *rt_podcheck_start(rt_podcheck *pc, const rt_podref *pod, rt_podcheck_fn done,
                                    void *ud)
{
    rt_podcheck_call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    api_pod p = {.ns = pod->ns, .name = pod->name, .uid = pod->uid, .ip = pod->ip};
    char *path = kube_path("", "v1", pod->ns, "pods", pod->name, NULL);
    if (!path || rt_podref_set(&c->pod, &p) < 0) {
        free(path);
        free(c);
        return NULL;
    }
    c->pc = pc;
    c->done = done;
    c->ud = ud;
    /* A quorum read (no resourceVersion): the API server answers from etcd, not its cache.
     * Retried once (a kept connection to the API server may have died); after that the request
     * waits again instead. */
    kube_request req = {.method = KUBE_GET,
                        .path = path,
                        .timeout_ms = pc->timeout_ms,
                        .max_retries = 1,
                        .scratch = true};
    kube_error err = {0};
    c->call = kube_call_start(pc->client, &req, rt_pc_done, c, &err);
    kube_error_clear(&err);
    free(path);
    if (!c->call) {
        rt_podref_clear(&c->pod);
        free(c);
        return NULL;
    }
    return c;
}

void rt_podcheck_cancel(rt_podcheck_call *c)
{
    if (!c)
        return;
    kube_call_cancel(c->call);
    rt_podref_clear(&c->pod);
    free(c);
}

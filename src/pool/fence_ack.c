/* fence_ack: the rule is one pass over the Leases, stopping at the first that holds the fence up
 * (the one a log line names); the table of first observations is a map by key whose entries hold
 * the version and its time, replaced when the version changes. */
#include "pool/fence_ack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/fence.h"
#include "util/strmap.h"

uint64_t fence_ack_expiry(const api_router_lease *lease, uint64_t seen_ms, long fence_ms)
{
    if (lease->duration_s <= 0)
        return 0;
    return seen_ms + (uint64_t)lease->duration_s * 1000 + (uint64_t)(fence_ms > 0 ? fence_ms : 0);
}

fence_ack_verdict fence_ack_check(const fence_ack_lease *leases, size_t n, uint64_t now_ms,
                                  long fence_ms, const char *ns, const char *pool,
                                  const char *resident)
{
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) {
        const api_router_lease *l = leases[i].lease;
        if (l->fronts && *l->fronts && strcmp(l->fronts, ns ? ns : "") != 0)
            continue; /* a router of another namespace's pools only */
        counted++;
        if (resident && *resident && api_fenced_has(l->fenced, ns, pool, resident))
            continue;
        uint64_t expiry = fence_ack_expiry(l, leases[i].seen_ms, fence_ms);
        if (!expiry)
            return (fence_ack_verdict){.result = FENCE_ACK_NO_EXPIRY, .holder = l};
        if (now_ms < expiry)
            return (fence_ack_verdict){
                .result = FENCE_ACK_UNACKED, .holder = l, .expires_ms = expiry};
    }
    return (fence_ack_verdict){.result = counted ? FENCE_ACK_CONFIRMED : FENCE_ACK_NO_ROUTERS};
}

/* ---- first observations ---- */

typedef struct fence_seen_entry {
    strmap_node node;
    uint64_t seen_ms;
    char *rv;
    char key[]; /* the node's key */
} fence_seen_entry;

struct fence_seen {
    strmap map;
};

fence_seen *fence_seen_new(void)
{
    fence_seen *t = calloc(1, sizeof(*t));
    if (t && strmap_init(&t->map) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void fence_seen_drop(fence_seen *t, fence_seen_entry *e)
{
    strmap_remove(&t->map, &e->node);
    free(e->rv);
    free(e);
}

void fence_seen_free(fence_seen *t)
{
    if (!t)
        return;
    for (strmap_node *n; (n = strmap_first(&t->map));)
        fence_seen_drop(t, STRMAP_OWNER(n, fence_seen_entry, node));
    strmap_fini(&t->map);
    free(t);
}

int fence_seen_note(fence_seen *t, const char *key, const char *rv, uint64_t now_ms,
                    uint64_t *seen_ms)
{
    rv = rv ? rv : "";
    fence_seen_entry *e = STRMAP_FIND(&t->map, key, fence_seen_entry, node);
    *seen_ms = e && strcmp(e->rv, rv) == 0 ? e->seen_ms : now_ms;
    if (e && strcmp(e->rv, rv) == 0)
        return 0;
    char *copy = strdup(rv);
    if (!copy)
        return -ENOMEM; /* an old entry stays: its version is not this one, so it never matches */
    if (!e && !(e = STRMAP_FIND_OR_ADD(&t->map, key, fence_seen_entry, node, key))) {
        free(copy);
        return -ENOMEM;
    }
    free(e->rv);
    e->rv = copy;
    e->seen_ms = now_ms;
    return 0;
}

void fence_seen_forget(fence_seen *t, const char *key)
{
    strmap_node *n = strmap_get(&t->map, key);
    if (n)
        fence_seen_drop(t, STRMAP_OWNER(n, fence_seen_entry, node));
}

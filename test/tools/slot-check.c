/* slot-check: the end-to-end suite's invariant checker. It watches ModelPools, member
 * InferenceServices and their Pods through the project's own informers and, after every event,
 * checks each pool: at most one Pod, of all its members together (those of spec.members, and those
 * its status.members still records after their removal from the spec), holds the slot (Running or
 * Unknown, terminating or not; so two Pods of one member are a violation too). A Pending Pod never
 * ran and holds nothing: a member scaled up by a user may get one before the operator holds it
 * back, as in a cluster where it cannot be scheduled beside the incumbent. Succeeded and Failed
 * Pods have let go. A member's status.phase Ready is believed only with a live Pod of its own
 * (Running, not terminating): a status is written after the fact and lags its Pods (a member
 * controller throttled by 429 keeps saying Ready for a while after its Pod is gone), so a Ready
 * status without such a Pod is counted as stale, never as a violation; with one, the member already
 * counts in the Pod check, which stays the one that decides. Each violation is printed with the
 * Pods and members involved; on SIGTERM it prints a summary line and exits 1 if it ever saw one. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "informer/informer.h"
#include "kube/client.h"
#include "kube/config.h"
#include "loop/ev.h"
#include "pool/snapshot.h"

typedef struct check {
    ev_loop *loop;
    informer *pools, *isvcs, *pods;
    unsigned long events, checks, violations, stale_ready;
    bool synced;
} check;

static const char *check_str(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Pods by "namespace/<service label>", read from the JSON itself: the checker keeps whole objects
 * (the pass-through codec) and its own reading of them, independent of the operator's decoders. */
static int check_index_service(const void *pod, store_index_out *out, void *ud)
{
    (void)ud;
    const char *ns = check_str(pod, "metadata", "namespace");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "labels");
    const cJSON *svc = cJSON_GetObjectItemCaseSensitive(labels, API_SERVICE_LABEL);
    if (!cJSON_IsString(svc))
        return 0;
    char v[600];
    snprintf(v, sizeof(v), "%s/%s", ns ? ns : "", svc->valuestring);
    return store_index_emit(out, v);
}

/* The Pods of one pool holding the slot, as " <pod>(<member>,<phase>[,terminating])", and
 * whether the member being walked has a live Pod (Running, no deletionTimestamp). */
typedef struct check_holders {
    const char *member;
    int n;
    bool member_live;
    char text[2048];
} check_holders;

static bool check_live(const char *key, const void *pod, void *ud)
{
    (void)key;
    check_holders *h = ud;
    const char *phase = check_str(pod, "status", "phase");
    if (!phase || (strcmp(phase, "Running") != 0 && strcmp(phase, "Unknown") != 0))
        return true;
    h->n++;
    bool terminating =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
                                         "deletionTimestamp") != NULL;
    if (strcmp(phase, "Running") == 0 && !terminating)
        h->member_live = true;
    size_t len = strlen(h->text);
    snprintf(h->text + len, sizeof(h->text) - len, " %s(%s,%s%s)",
             check_str(pod, "metadata", "name"), h->member, phase,
             terminating ? ",terminating" : "");
    return true;
}

/* A member listed twice (a spec the operator rejects) is still one member with the same Pods. */
static bool check_listed_before(const cJSON *pool, const cJSON *entry, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pool, "spec"), "members"))
    {
        if (m == entry)
            return false;
        const char *other = check_str(m, "inferenceServiceRef", "name");
        if (other && strcmp(other, name) == 0)
            return true;
    }
    return false;
}

/* Adds name's live Pods to holders, and name to ready when it is Ready with one of them. */
static void check_member(check *c, const char *ns, const char *name, check_holders *holders,
                         char *ready, size_t ready_len)
{
    char mkey[600];
    snprintf(mkey, sizeof(mkey), "%s/%s", ns ? ns : "", name);
    holders->member = name;
    holders->member_live = false;
    store_index_each(informer_store(c->pods), API_INDEX_SERVICE, mkey, check_live, holders);
    const cJSON *isvc = store_get(informer_store(c->isvcs), mkey);
    const char *phase = isvc ? check_str(isvc, "status", "phase") : NULL;
    if (!phase || strcmp(phase, "Ready") != 0)
        return;
    if (!holders->member_live) {
        c->stale_ready++;
        return;
    }
    strncat(ready, " ", ready_len - strlen(ready) - 1);
    strncat(ready, name, ready_len - strlen(ready) - 1);
}

/* Whether name is in the pool's spec.members, or in its status.members before entry. */
static bool check_counted(const cJSON *pool, const cJSON *entry, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pool, "spec"), "members"))
    {
        const char *other = check_str(m, "inferenceServiceRef", "name");
        if (other && strcmp(other, name) == 0)
            return true;
    }
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pool, "status"), "members"))
    {
        if (m == entry)
            return false;
        const char *other = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
        if (other && strcmp(other, name) == 0)
            return true;
    }
    return false;
}

static bool check_pool(const char *key, const void *pool, void *ud)
{
    check *c = ud;
    const char *ns = check_str(pool, "metadata", "namespace");
    check_holders holders = {0};
    char ready[1024] = "";
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pool, "spec"), "members"))
    {
        const char *name = check_str(m, "inferenceServiceRef", "name");
        if (name && !check_listed_before(pool, m, name))
            check_member(c, ns, name, &holders, ready, sizeof(ready));
    }
    /* A member removed from the spec that the pool still records holds the slot as well. */
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pool, "status"), "members"))
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
        if (name && !check_counted(pool, m, name))
            check_member(c, ns, name, &holders, ready, sizeof(ready));
    }
    c->checks++;
    /* Two members Ready, each with a live Pod, are two holders: the Pod count decides alone, and
     * the Ready members are named beside it. */
    if (holders.n > 1) {
        c->violations++;
        printf("VIOLATION pool=%s pods holding the slot:%s ready members with a live Pod:%s\n", key,
               holders.text, ready);
        fflush(stdout);
    }
    return true;
}

static void check_all(check *c)
{
    c->events++;
    if (!c->synced)
        return;
    /* A list's changes come adds first, deletions last: mid-way, a new Pod stands beside one the
     * list already dropped, a state that never was. Checked once the list is all in. */
    if (informer_listing(c->pools) || informer_listing(c->isvcs) || informer_listing(c->pods))
        return;
    store_each(informer_store(c->pools), check_pool, c);
}

static void check_listed(void *ud)
{
    check *c = ud;
    c->events--; /* not an event: the check a list's changes put off */
    check_all(c);
}

static void check_add(void *ud, const void *o)
{
    (void)o;
    check_all(ud);
}

static void check_update(void *ud, const void *a, const void *b)
{
    (void)a;
    (void)b;
    check_all(ud);
}

static void check_synced(void *ud)
{
    check *c = ud;
    if (informer_synced(c->pools) && informer_synced(c->isvcs) && informer_synced(c->pods)) {
        c->synced = true;
        printf("slot-check: synced\n");
        fflush(stdout);
        check_all(c);
    }
}

static void check_error(void *ud, const kube_error *err)
{
    (void)ud;
    fprintf(stderr, "slot-check: list/watch error: %s\n", err->message);
}

static void check_signal(ev_loop *loop, int fd, int events, void *ud)
{
    (void)fd;
    (void)events;
    (void)ud;
    ev_stop(loop);
}

static informer *check_informer(check *c, kube_client *client, const char *group,
                                const char *resource, const char *selector)
{
    informer_config cfg = {.group = group,
                           .version = *group ? API_VERSION : "v1",
                           .resource = resource,
                           .label_selector = selector,
                           .codec = &store_codec_json_trimmed};
    informer_handlers h = {.on_add = check_add,
                           .on_update = check_update,
                           .on_delete = check_add,
                           .on_synced = check_synced,
                           .on_listed = check_listed,
                           .on_error = check_error,
                           .ud = c};
    return informer_new(c->loop, client, &cfg, &h);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: slot-check KUBECONFIG\n");
        return 2;
    }
    kube_config cfg = {0};
    kube_error err = {0};
    if (kube_config_load_file(&cfg, argv[1], NULL, &err) < 0) {
        fprintf(stderr, "slot-check: %s\n", err.message);
        return 2;
    }
    check c = {.loop = ev_new()};
    kube_client *client = kube_client_new(c.loop, &cfg, &err);
    if (!client) {
        fprintf(stderr, "slot-check: %s\n", err.message);
        return 2;
    }
    c.pools = check_informer(&c, client, API_GROUP, "modelpools", NULL);
    c.isvcs = check_informer(&c, client, API_GROUP, "inferenceservices", NULL);
    c.pods = check_informer(&c, client, "", "pods", API_SERVICE_LABEL);
    if (!c.pools || !c.isvcs || !c.pods ||
        store_add_index(informer_store(c.pods), API_INDEX_SERVICE, check_index_service, NULL) < 0)
        return 2;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    ev_fd_set(c.loop, sfd, EV_READ, check_signal, &c);
    informer_start(c.pools);
    informer_start(c.isvcs);
    informer_start(c.pods);
    ev_run(c.loop);
    printf("slot-check: %lu events, %lu checks, %lu violations, %lu stale Ready (a member Ready "
           "without a live Pod, not counted)\n",
           c.events, c.checks, c.violations, c.stale_ready);
    close(sfd);
    informer_free(c.pools);
    informer_free(c.isvcs);
    informer_free(c.pods);
    kube_client_free(client);
    ev_free(c.loop);
    kube_config_clear(&cfg);
    return c.violations ? 1 : (c.synced ? 0 : 3);
}

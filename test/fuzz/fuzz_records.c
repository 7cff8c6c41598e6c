/* libFuzzer entry point for the cache record decoders: arbitrary JSON into each of the Pod,
 * InferenceService, ModelPool and router Lease decoders, and the records through the index
 * functions and the scale patch, so every string and array a decoder packs is read back. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Collects index values through the store's public emit; a store holds the one record. */
static void fuzz_index(const store_codec *codec, const char *index, store_index_fn fn, cJSON *obj)
{
    store *s = store_new(codec);
    if (!s) {
        cJSON_Delete(obj);
        return;
    }
    if (store_add_index(s, index, fn, NULL) == 0)
        store_put(s, obj, NULL);
    else
        cJSON_Delete(obj);
    store_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    cJSON *obj = cJSON_Parse(text);
    free(text);
    if (!obj)
        return 0;
    int err = 0;
    api_pod *pod = api_pod_decode(obj, &err);
    if (pod && pod->name && strlen(pod->name) == (size_t)-1)
        abort(); /* reads every byte of the copy */
    free(pod);
    api_isvc *isvc = api_isvc_decode(obj, &err);
    if (isvc) {
        bool jp = false;
        free(api_scale_patch(isvc, 1, &jp));
        (void)api_isvc_replicas(isvc);
    }
    free(isvc);
    api_pool *pool = api_pool_decode(obj, &err);
    if (pool) {
        size_t total = 0;
        for (size_t i = 0; i < pool->n_members; i++)
            total += pool->members[i] ? strlen(pool->members[i]) : 0;
        for (size_t i = 0; i < pool->status.n_members; i++)
            total += strlen(pool->status.members[i].name);
        for (size_t i = 0; i < pool->status.n_conditions; i++)
            total += strlen(pool->status.conditions[i].type);
        if (total == (size_t)-1)
            abort();
    }
    free(pool);
    api_router_lease *lease = api_router_lease_decode(obj, &err);
    if (lease && (strlen(lease->name) + (lease->rv ? strlen(lease->rv) : 0) == (size_t)-1 ||
                  (api_fenced_has(lease->fenced, "a", "b", "c") && !lease->fenced)))
        abort(); /* reads every byte of the copies, the annotation entry by entry */
    free(lease);
    fuzz_index(&api_pod_codec, API_INDEX_SERVICE, api_index_pod_service, cJSON_Duplicate(obj, 1));
    fuzz_index(&api_pool_codec, API_INDEX_MEMBER, api_index_pool_members, obj);
    return 0;
}

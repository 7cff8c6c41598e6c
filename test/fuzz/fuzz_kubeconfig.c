/* libFuzzer entry point for kubeconfig parsing (YAML to cJSON, the walk over contexts, clusters
 * and users, base64). Relative paths point into a folder that does not exist, so the fuzzer
 * exercises the checks without reading files. */
#include <stddef.h>
#include <stdint.h>

#include "kube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kube_config cfg = {0};
    kube_error err = {0};
    if (kube_config_parse(&cfg, (const char *)data, size, "/nonexistent/fuzz/kubeconfig", NULL,
                          &err) == 0) {
        kube_config copy = {0};
        if (kube_config_copy(&copy, &cfg, &err) == 0)
            kube_config_clear(&copy);
    }
    kube_config_clear(&cfg);
    kube_error_clear(&err);
    return 0;
}

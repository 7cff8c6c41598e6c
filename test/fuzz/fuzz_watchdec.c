/* libFuzzer entry point for the watch stream decoder: the input is cut into chunks at places
 * chosen by its first bytes, with a small event limit so the oversize paths are reached too. */
#include <stddef.h>
#include <stdint.h>

#include "kube/watchdec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t step = (size_t)data[0] + 1; /* chunk size */
    size_t max = (size_t)data[1] * 8 + 1;
    data += 2;
    size -= 2;
    kube_wdec d;
    kube_error err = {0};
    kube_wdec_event ev;
    kube_wdec_init(&d, max);
    int rc = 0;
    for (size_t at = 0; at < size && rc >= 0; at += step) {
        size_t n = size - at < step ? size - at : step;
        rc = kube_wdec_feed(&d, data + at, n, &err);
        while (rc >= 0 && (rc = kube_wdec_next(&d, &ev, &err)) == 1)
            cJSON_Delete(ev.object);
    }
    if (rc >= 0)
        kube_wdec_finish(&d, &err);
    kube_error_clear(&err);
    kube_wdec_free(&d);
    return 0;
}

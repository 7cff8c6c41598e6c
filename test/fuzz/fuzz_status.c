/* libFuzzer entry point for the API server's error answers: kube_error_from_http over any body (a
 * metav1.Status or a proxy's page) and kube_retry_after_parse over the same bytes as a header
 * value. The first two bytes are the HTTP code. The error is always an HTTP error with a message,
 * and a body that is not a Status is quoted on one line, under the transport's code. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    long code = (long)data[0] << 8 | data[1];
    size_t len = size - 2;
    char *body = malloc(len + 1);
    if (!body)
        return 0;
    memcpy(body, data + 2, len);
    body[len] = '\0';

    kube_error err = {0};
    kube_error_from_http(&err, code, len ? body : NULL,
                         len); /* the body's NUL is not given to it */
    if (err.kind == KUBE_ERR_HTTP) {
        if (!err.message)
            abort();
        cJSON *json = cJSON_ParseWithLength(body, len);
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "kind"));
        if (!(cJSON_IsObject(json) && kind && strcmp(kind, "Status") == 0)) {
            if (err.http_code != code)
                abort();
            for (const char *p = err.message; *p; p++)
                if (iscntrl((unsigned char)*p))
                    abort();
        }
        cJSON_Delete(json);
    } else if (err.kind != KUBE_ERR_NOMEM) {
        abort();
    }
    kube_error_clear(&err);

    long s = kube_retry_after_parse(body);
    if (s < -1)
        abort();
    if (s >= 0) {
        const char *p = body + strspn(body, " \t");
        if (!isdigit((unsigned char)*p))
            abort();
    }
    free(body);
    return 0;
}

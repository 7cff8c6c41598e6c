/* libFuzzer entry point for the Authorization header parser: whatever a caller sends, the parser
 * either refuses it or returns a token inside the input, non-empty, with no blank or control byte.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/access.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0; /* a header value is a C string by the time it reaches the parser */
    const char *tok = NULL;
    size_t len = 0;
    if (kube_access_bearer(s, &tok, &len) == 0) {
        if (len == 0 || tok < s || tok + len > s + strlen(s))
            abort();
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f)
                abort();
    }
    free(s);
    return 0;
}

/* libFuzzer entry point for the idle probe's answer reader (probe_judge): llama.cpp's /slots JSON
 * and the Prometheus text of vLLM, TGI and SGLang. The first byte picks the runtime and the HTTP
 * code, the second the message buffer's size; the rest is the body, in a buffer of its exact size.
 * A verdict is one of the four, the message ends inside its buffer, and only a 2xx answer can ever
 * be idle. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const runtimes[] = {"llamacpp", "vllm", "tgi",         "sglang",
                                           "generic",  NULL,   "personaplex", "llamacpp-router"};
    static const long codes[] = {200, 200, 200, 0, 204, 404, 500, 302};
    if (size < 2)
        return 0;
    const char *runtime = runtimes[data[0] & 7];
    long code = codes[(data[0] >> 3) & 7];
    size_t msglen = data[1];
    size_t len = size - 2;
    char *body = malloc(len ? len : 1); /* no terminating NUL: the reader must keep to len */
    char *msg = malloc(msglen ? msglen : 1);
    if (!body || !msg) {
        free(body);
        free(msg);
        return 0;
    }
    memcpy(body, data + 2, len);
    probe_verdict v = probe_judge(runtime, code, body, len, msg, msglen);
    if (v != PROBE_IDLE && v != PROBE_BUSY && v != PROBE_ERROR && v != PROBE_UNSUPPORTED)
        abort();
    if (msglen && !memchr(msg, '\0', msglen))
        abort();
    if (v == PROBE_IDLE && (code < 200 || code > 299))
        abort();
    free(body);
    free(msg);
    return 0;
}

/* probe: the idle check that must pass before a member is unloaded, per runtime (DESIGN.md
 * "Idle probe"). Pure functions: which request to make, and how to judge its answer. Anything we
 * cannot judge is never idle (fail closed). */
#ifndef MP_POOL_PROBE_H
#define MP_POOL_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "api/runtime.h"

typedef enum {
    PROBE_IDLE,
    PROBE_BUSY,
    PROBE_ERROR,       /* no answer, or one we cannot read: not idle */
    PROBE_UNSUPPORTED, /* this runtime has no idle check we know: not idle */
} probe_verdict;

/* Whether a member of this runtime, with that idle-endpoint annotation (or NULL), has an idle
 * check: a known path, or generic with a non-empty annotation. Everything else fails closed. */
bool probe_supported(const char *runtime, const char *idle_endpoint);

/* The path to GET for a member of this runtime (NULL runtime means llamacpp, the default), in
 * *path. idle_endpoint is the member's inference.llmkube.dev/idle-endpoint annotation, or NULL.
 * 0, or when the runtime cannot be probed: -ENOENT (an unknown runtime), -EOPNOTSUPP (a runtime
 * without an idle check), -ENODATA (generic without the annotation), -EINVAL (an annotation that
 * is not a path). */
int probe_path(const char *runtime, const char *idle_endpoint, const char **path);
/* What a probe_path error means, for the member's status (static text). */
const char *probe_path_error(int rc);

/* Judges one answer. http_code 0 means no answer (transport error; body then holds the error text).
 * Writes a one-line explanation to msg. */
probe_verdict probe_judge(const char *runtime, long http_code, const char *body, size_t len,
                          char *msg, size_t msglen);

const char *probe_verdict_name(probe_verdict v);

#endif

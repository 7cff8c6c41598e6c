/* kube_path: API paths from their parts. Each part is percent-encoded on its own, so a name with
 * odd characters (RBAC names have ':') cannot change which resource a request touches. */
#include <stdbool.h>

#include "buf.h"
#include "kube/client.h"

static bool kube_path_seg(kube_buf *b, const char *prefix, const char *seg)
{
    return kube_buf_adds(b, prefix) == 0 && kube_buf_add_escaped(b, seg) == 0;
}

char *kube_path(const char *group, const char *version, const char *namespace_,
                const char *resource, const char *name, const char *subresource)
{
    /* An empty name would turn a GET of one object into a LIST: refuse rather than guess. */
    if (!version || !*version || (resource && !*resource) || (name && (!*name || !resource)) ||
        (subresource && (!*subresource || !name)))
        return NULL;
    if (namespace_ && !*namespace_)
        namespace_ = NULL; /* "" is client-go's NamespaceAll */
    kube_buf b = {0};
    bool ok = group && *group
                  ? kube_path_seg(&b, "/apis/", group) && kube_path_seg(&b, "/", version)
                  : kube_path_seg(&b, "/api/", version);
    if (ok && namespace_)
        ok = kube_path_seg(&b, "/namespaces/", namespace_);
    if (ok && resource)
        ok = kube_path_seg(&b, "/", resource);
    if (ok && name)
        ok = kube_path_seg(&b, "/", name);
    if (ok && subresource)
        ok = kube_path_seg(&b, "/", subresource);
    if (!ok) {
        kube_buf_free(&b);
        return NULL;
    }
    return kube_buf_take(&b);
}

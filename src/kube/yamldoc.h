/* kube_yaml: reads one YAML document into a cJSON tree so the kubeconfig code can walk plain
 * objects. Internal to src/kube. Scalars stay strings (the reader decides what "true" means);
 * empty, "~" and "null" plain scalars become JSON null. */
#ifndef MP_KUBE_YAMLDOC_H
#define MP_KUBE_YAMLDOC_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Returns the document, or NULL with *errmsg set to a malloc'd description ("line 3 column 5:
 * mapping values are not allowed in this context"). Aliases, duplicate keys, non-scalar keys,
 * several documents and nesting deeper than 64 are refused: no kubeconfig needs them and each
 * is a way to feed a parser something other than configuration. */
cJSON *kube_yaml_parse(const char *text, size_t len, char **errmsg);

#endif

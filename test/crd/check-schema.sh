#!/usr/bin/env bash
# Structural check of crd/modelpools.inference.llmkube.dev.yaml, no API server needed: its openAPIV3Schema must
# equal the seed (test/crd/modelpool.schema.json, a copy of the shared seed schema) field for field after the translation documented in the
# CRD's header, and may add only the listed bounds and CEL rules. Usage: check-schema.sh [CRD] [SEED]
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
crd=${1:-$top/crd/modelpools.inference.llmkube.dev.yaml}
seed=${2:-${MP_SEED_SCHEMA:-$top/test/crd/modelpool.schema.json}}

[ -r "$crd" ] || { echo "check-schema: cannot read the CRD $crd" >&2; exit 1; }
[ -r "$seed" ] || { echo "check-schema: cannot read the seed schema $seed (set MP_SEED_SCHEMA)" >&2; exit 1; }
# python3 and its yaml module come from the Debian packages python3 and python3-yaml.
python3 -c 'import yaml' 2>/dev/null ||
	{ echo "check-schema: python3 with the yaml module is needed (Debian packages python3 python3-yaml)" >&2; exit 1; }

exec python3 - "$crd" "$seed" <<'PY'
import json, sys, yaml

crd_path, seed_path = sys.argv[1], sys.argv[2]
with open(crd_path) as f:
    docs = [d for d in yaml.safe_load_all(f) if d is not None]
with open(seed_path) as f:
    seed = json.load(f)

errors = []
def err(path, msg):
    errors.append(f"{path or '<root>'}: {msg}")

# What the CRD may add to the seed, by path, and nothing else. Each is a bound for the CEL cost estimator or a
# rule for what the seed implies but cannot express (see the CRD's comments).
ALLOWED_ADDITIONS = {
    ".spec": {"x-kubernetes-validations"},
    ".spec.default": {"maxLength"},
    ".spec.members": {"maxItems", "x-kubernetes-validations"},
    ".spec.members[]": {"x-kubernetes-validations"},
    ".spec.members[].inferenceServiceRef.name": {"maxLength"},
    ".spec.swapBudget": {"maxLength", "x-kubernetes-validations"},
}
# Status fields the operator writes beyond the seed (optional, so every status valid under the seed stays
# valid): each is documented in docs/guarantees.md. Spec gets none: users' manifests are the seed's.
ALLOWED_STATUS_PROPERTIES = {
    ".status.members[]": {"releasing": {"type": "boolean"}},
}

def translate(node, path, optional):
    """The seed node as the CRD must write it (see the CRD header for why)."""
    out = dict(node)
    t = out.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        if len(kinds) != 1 or len(t) != 2:
            err(path, f"seed type {t} is not [X, \"null\"]")
        # The seed marks exactly the optional fields with "null"; that is what makes dropping it (rather than
        # `nullable: true`) faithful. Check it still holds, in case the seed changes.
        if not optional:
            err(path, "seed allows null on a required field: revisit the nullable translation")
        out["type"] = kinds[0]
    elif optional and path not in ("",):
        err(path, "seed field is optional but not null-typed: revisit the nullable translation")
    if out.get("additionalProperties") is False:
        del out["additionalProperties"]  # pruning + strict field validation instead
        out["__closed__"] = True
    required = set(out.get("required", []))
    if "properties" in out:
        out["properties"] = {k: translate(v, f"{path}.{k}", k not in required)
                             for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = translate(out["items"], f"{path}[]", False)
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = translate(out["additionalProperties"], f"{path}{{}}", False)
    return out

def compare(want, got, path):
    if not isinstance(got, dict):
        err(path, f"expected a schema object, found {got!r}")
        return
    closed = want.pop("__closed__", False)
    if closed and (got.get("additionalProperties") not in (None,) or got.get("x-kubernetes-preserve-unknown-fields")):
        err(path, "seed forbids unknown fields here; the CRD must neither declare additionalProperties nor preserve unknown fields")
    if "nullable" in got:
        err(path, "nullable is not used by this CRD (see its header)")
    for key, w in want.items():
        if key not in got:
            err(path, f"missing {key!r} (seed has {w!r})")
            continue
        g = got[key]
        if key == "properties":
            added = ALLOWED_STATUS_PROPERTIES.get(path, {})
            for name, schema in added.items():
                if name in g and {k: v for k, v in g[name].items() if k != "description"} != schema:
                    err(f"{path}.{name}", f"expected {schema!r} (and a description)")
            if set(w) != set(g) - set(added):
                missing, extra = sorted(set(w) - set(g)), sorted(set(g) - set(w) - set(added))
                err(path, f"properties differ: missing {missing}, not in seed {extra}")
            for name in sorted(set(w) & set(g)):
                compare(w[name], g[name], f"{path}.{name}")
        elif key == "items":
            compare(w, g, f"{path}[]")
        elif key == "additionalProperties" and isinstance(w, dict):
            compare(w, g, f"{path}{{}}")
        elif key == "required":
            if sorted(w) != sorted(g):
                err(path, f"required {sorted(g)} != seed {sorted(w)}")
        elif w != g or type(w) is not type(g):
            err(path, f"{key}: {g!r} != seed {w!r}")
    for key in sorted(set(got) - set(want)):
        if key not in ALLOWED_ADDITIONS.get(path, set()):
            err(path, f"{key!r} is not in the seed and not an allowed addition")

# The CRD object itself: names, scope, version, subresource, columns (DESIGN.md's compatibility contract).
if len(docs) != 1:
    err("", f"expected one YAML document, found {len(docs)}")
crd = docs[0]
spec = crd.get("spec", {})
def expect(what, got, want):
    if got != want:
        err(what, f"{got!r} != {want!r}")
expect("apiVersion", crd.get("apiVersion"), "apiextensions.k8s.io/v1")
expect("kind", crd.get("kind"), "CustomResourceDefinition")
expect("metadata.name", crd.get("metadata", {}).get("name"), "modelpools.inference.llmkube.dev")
expect("spec.group", spec.get("group"), "inference.llmkube.dev")
expect("spec.scope", spec.get("scope"), "Namespaced")
names = spec.get("names", {})
for k, v in {"kind": "ModelPool", "plural": "modelpools", "singular": "modelpool", "shortNames": ["mpool"]}.items():
    expect(f"spec.names.{k}", names.get(k), v)
versions = spec.get("versions", [])
expect("spec.versions[].name", [v.get("name") for v in versions], ["v1alpha1"])
ver = versions[0] if versions else {}
expect("v1alpha1.served", ver.get("served"), True)
expect("v1alpha1.storage", ver.get("storage"), True)
expect("v1alpha1.subresources", ver.get("subresources"), {"status": {}})
cols = [(c.get("name"), c.get("jsonPath"), c.get("priority", 0)) for c in ver.get("additionalPrinterColumns", [])]
expect("v1alpha1.additionalPrinterColumns", cols, [
    ("Policy", ".spec.swapPolicy", 0), ("Resident", ".status.residentMember", 0), ("Phase", ".status.phase", 0),
    ("Pending", ".status.pendingMember", 1), ("Age", ".metadata.creationTimestamp", 0)])

got = ver.get("schema", {}).get("openAPIV3Schema")
compare(translate(seed, "", False), got, "")

# Every CEL rule must carry a message for the user (the API server would otherwise print the rule itself).
def rules(node, path):
    if not isinstance(node, dict):
        return
    for r in node.get("x-kubernetes-validations", []):
        if not r.get("message"):
            err(path, f"CEL rule without a message: {r.get('rule')!r}")
        yield path, r
    for name, sub in node.get("properties", {}).items():
        yield from rules(sub, f"{path}.{name}")
    if "items" in node:
        yield from rules(node["items"], f"{path}[]")
n_rules = len(list(rules(got or {}, "")))

if errors:
    print(f"check-schema: {crd_path} does not match {seed_path}:", file=sys.stderr)
    for e in errors:
        print("  " + e, file=sys.stderr)
    sys.exit(1)
print(f"check-schema: {crd_path} matches the seed field for field ({n_rules} CEL rules added)")
PY

#!/usr/bin/env python3
"""Checks for the Helm chart that are easier on parsed YAML than in shell (used by test/helm/*.sh):
  docs VALUES README     the chart README's values table and values.yaml agree both ways (names and defaults);
                         prints each row's example as its --set-json arguments, one row a line (tab-separated)
  drift KUSTOMIZE HELM   config/default's objects == the chart's default render, after the differences the
                         chart makes on purpose (HELM_LABELS, IMAGE_NAME, NOT_IN_CHART); prints a unified
                         diff of each object that differs
  get FILE KIND/NAME PATH  one field of one rendered object, a string as it is, else JSON; PATH is dotted
                         (\\. for a dot in a key, [n] for a list item); exits 3 when it is absent
  kinds FILE             the rendered objects as sorted 'Kind/name' lines
"""
import difflib
import json
import re
import sys

import yaml

TABLE_BEGIN = "<!-- helm-values:begin -->"
TABLE_END = "<!-- helm-values:end -->"

# Values that are one entry in the table though they are maps (their content is one setting).
WHOLE = {"resources", "serviceMonitor.tlsConfig", "router.resources"}

# What the chart adds to config/default's objects on purpose, and nothing else:
HELM_LABELS = (
    "helm.sh/chart",  # the chart and its version
    "app.kubernetes.io/instance",  # the release
    "app.kubernetes.io/version",  # appVersion
    "app.kubernetes.io/managed-by",  # Helm
)
# The image: kustomize's `modelpool-operator:latest` is a placeholder an overlay replaces; the chart pins
# appVersion, the Helm convention (image.tag overrides it).
IMAGE_NAME = "modelpool-operator"
# Helm makes the release namespace (helm install --create-namespace); a Namespace object in the chart would
# collide with it. README says how to label it for Pod Security as config/manager/namespace.yaml does.
NOT_IN_CHART = {("Namespace", "modelpool-system")}


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def key(obj):
    return (obj.get("kind", "?"), obj.get("metadata", {}).get("name", "?"))


def leaves(values, prefix=""):
    """The documented names: scalars, empty maps and lists, and WHOLE entries, as dotted paths."""
    out = {}
    for k, v in values.items():
        name = prefix + k
        if isinstance(v, dict) and v and name not in WHOLE:
            out.update(leaves(v, name + "."))
        else:
            out[name] = v
    return out


def table_rows(readme_path):
    text = open(readme_path).read()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        sys.exit(f"chart_check: {readme_path} has no {TABLE_BEGIN} ... {TABLE_END} table")
    body = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    rows = []
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "value":
            continue
        if len(cells) != 4:
            sys.exit(f"chart_check: README values row needs 4 cells (value, default, example, meaning): {line}")
        rows.append(cells)
    return rows


def code(cell):
    return re.findall(r"`([^`]*)`", cell)


def cmd_docs(values_path, readme_path):
    values = leaves(yaml.safe_load(open(values_path)))
    rows = table_rows(readme_path)
    errors = []
    seen = set()
    examples = []
    for name_cell, default_cell, example_cell, meaning in rows:
        names = code(name_cell)
        if len(names) != 1:
            errors.append(f"row {name_cell!r}: the value's name must be one `code` span")
            continue
        name = names[0]
        if name in seen:
            errors.append(f"{name}: listed twice")
        seen.add(name)
        if name not in values:
            errors.append(f"{name}: in README but not in values.yaml")
            continue
        default = code(default_cell)
        try:
            documented = json.loads(default[0]) if len(default) == 1 else None
        except json.JSONDecodeError:
            documented = None
        if documented is None and values[name] is not None:
            errors.append(f"{name}: default cell must be the JSON of the default, one `code` span: {default_cell}")
        elif documented != values[name]:
            errors.append(f"{name}: README says default {json.dumps(documented)}, values.yaml has {json.dumps(values[name])}")
        sets = code(example_cell)
        if not sets or not any(s.split("=", 1)[0] == name for s in sets):
            errors.append(f"{name}: the example must set it (`{name}=JSON`, more `key=JSON` spans if it needs others)")
        for s in sets:
            if "=" not in s:
                errors.append(f"{name}: example {s!r} is not key=JSON")
                continue
            try:
                json.loads(s.split("=", 1)[1])
            except json.JSONDecodeError as e:
                errors.append(f"{name}: example {s!r}: {e}")
        if not meaning:
            errors.append(f"{name}: no meaning")
        examples.append("\t".join(sets))
    for name in values:
        if name not in seen:
            errors.append(f"{name}: in values.yaml but not in README's values table")
    if errors:
        sys.exit("chart_check docs:\n  " + "\n  ".join(errors))
    print("\n".join(examples))


def strip_labels(labels):
    for k in HELM_LABELS:
        labels.pop(k, None)


def normalise_helm(obj):
    meta = obj.get("metadata", {})
    strip_labels(meta.get("labels", {}))
    tmpl = obj.get("spec", {}).get("template", {}).get("metadata")
    if tmpl:
        strip_labels(tmpl.get("labels", {}))
    for c in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        if c.get("image", "").startswith(IMAGE_NAME + ":"):
            c["image"] = IMAGE_NAME + ":<tag>"
    return obj


def normalise_kustomize(obj):
    for c in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        if c.get("image", "").startswith(IMAGE_NAME + ":"):
            c["image"] = IMAGE_NAME + ":<tag>"
    return obj


def cmd_drift(kustomize_path, helm_path):
    k = {key(o): normalise_kustomize(o) for o in load_all(kustomize_path) if key(o) not in NOT_IN_CHART}
    h = {key(o): normalise_helm(o) for o in load_all(helm_path)}
    failed = False
    for missing in sorted(set(k) - set(h)):
        print(f"drift: {missing[0]}/{missing[1]} is in config/default but the chart does not render it")
        failed = True
    for extra in sorted(set(h) - set(k)):
        print(f"drift: {extra[0]}/{extra[1]} is rendered by the chart (default values) but not in config/default")
        failed = True
    for kk in sorted(set(k) & set(h)):
        a = json.dumps(k[kk], indent=2, sort_keys=True).splitlines()
        b = json.dumps(h[kk], indent=2, sort_keys=True).splitlines()
        if a != b:
            failed = True
            print(f"drift: {kk[0]}/{kk[1]} differs (- config/default, + chart):")
            print("\n".join(difflib.unified_diff(a, b, "config/default", "chart", lineterm="", n=3)))
    if failed:
        sys.exit(1)
    print(f"drift: none ({len(k)} objects compared)")


def cmd_get(path, kind_name, field):
    kind, name = kind_name.split("/", 1)
    objs = [o for o in load_all(path) if key(o) == (kind, name)]
    if len(objs) != 1:
        print(f"chart_check get: {len(objs)} objects {kind_name} in {path}", file=sys.stderr)
        sys.exit(3)
    v = objs[0]
    for part in re.findall(r"(?:[^.\[\]\\]|\\.)+|\[\d+\]", field):
        try:
            v = v[int(part[1:-1])] if part.startswith("[") else v[part.replace("\\.", ".")]
        except (KeyError, IndexError, TypeError):
            print(f"chart_check get: {kind_name} has no {field}", file=sys.stderr)
            sys.exit(3)
    print(v if isinstance(v, str) else json.dumps(v, sort_keys=True))


def cmd_kinds(path):
    print("\n".join(sorted(f"{k}/{n}" for k, n in map(key, load_all(path)))))


def main(argv):
    cmds = {"docs": (cmd_docs, 2), "drift": (cmd_drift, 2), "get": (cmd_get, 3), "kinds": (cmd_kinds, 1)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.exit(__doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env bash
# ctest helm.drift: kustomize (config/default) and the chart with default values must render the same
# objects, field for field, but for what the chart changes on purpose (Helm's labels, the image tag pinned
# to appVersion, no Namespace: see chart_check.py). On drift it prints a unified diff per object; fix the
# chart (charts/modelpool-operator/templates) or config/ until both say the same.
# Usage: MP_SOURCE_DIR=<repo> bash test/helm/drift.sh
set -euo pipefail
export MP_SOURCE_DIR=${MP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
MP_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mp-helm-drift.XXXXXX")
export MP_STATE_DIR
trap 'rm -rf "$MP_STATE_DIR"' EXIT
# shellcheck source=../e2e/lib.sh
source "$MP_SOURCE_DIR/test/e2e/lib.sh"
# shellcheck source=lib.sh
source "$MP_SOURCE_DIR/test/helm/lib.sh"
helm_setup
s=$MP_STATE_DIR

log "config/default (kubectl kustomize) against the chart's defaults (helm template --include-crds)"
kubectl kustomize "$MP_SOURCE_DIR/config/default" >"$s/kustomize.yaml" || fail "kubectl kustomize config/default"
helm template modelpool-operator "$chart" -n modelpool-system --include-crds >"$s/helm.yaml" || fail "helm template"
check drift "$s/kustomize.yaml" "$s/helm.yaml" ||
	fail "the chart and config/default drifted apart (diff above: - config/default, + chart)"

log "the comparison itself finds drift: a changed flag, a rule more, an object more and one less, a label more"
# Each edit of the kustomize side must make the check fail and name what differs; else a pass proves nothing.
drifted() { # NAME REGEX PYTHON: apply PYTHON to the kustomize objects (list `docs`), expect REGEX in the output.
	python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
byname = {(d["kind"], d["metadata"]["name"]): d for d in docs}
exec(sys.argv[2])
yaml.safe_dump_all(docs, open(sys.argv[3], "w"))' "$s/kustomize.yaml" "$3" "$s/edited.yaml"
	local out
	if out=$(check drift "$s/edited.yaml" "$s/helm.yaml"); then
		fail "drift check passed after: $1"
	fi
	grep -qE -- "$2" <<<"$out" || fail "drift check after '$1' does not say '$2':"$'\n'"$out"
}
drifted "another metrics port" '^- +"--metrics-bind-address=:9999",$' \
	'a = byname[("Deployment", "modelpool-operator")]["spec"]["template"]["spec"]["containers"][0]["args"]; a[1] = "--metrics-bind-address=:9999"'
drifted "a rule more" '^- +"secrets"$' \
	'byname[("ClusterRole", "modelpool-operator")]["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})'
drifted "an object more" '^drift: ConfigMap/modelpool-operator-drift is in config/default but the chart does not render it$' \
	'docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "modelpool-operator-drift", "namespace": "modelpool-system"}})'
drifted "an object less" '^drift: Role/modelpool-operator-leader-election is rendered by the chart \(default values\) but not in config/default$' \
	'docs.remove(byname[("Role", "modelpool-operator-leader-election")])'
drifted "a label more" '^- +"app.kubernetes.io/part-of": "modelpool",?$' \
	'byname[("ServiceAccount", "modelpool-operator")]["metadata"]["labels"]["app.kubernetes.io/part-of"] = "modelpool"'

log "helm.drift: none"

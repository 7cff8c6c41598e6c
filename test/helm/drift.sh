#!/usr/bin/env bash
# ctest helm.drift: kustomize (config/default) and the chart with default values must render the same
# objects, field for field, but for what the chart changes on purpose (Helm's labels, the image tag pinned
# to appVersion, no Namespace: see chart_check.py); so must config/default plus config/router and the chart
# with router.enabled=true (the router's RBAC rules, Deployment and Services). On drift it prints a unified
# diff per object; fix the chart (charts/modelpool-operator/templates) or config/ until both say the same.
# Usage: MP_SOURCE_DIR=<repo> bash test/helm/drift.sh
set -euo pipefail
# shellcheck source=standalone.sh
source "$(dirname "${BASH_SOURCE[0]}")/standalone.sh" drift

log "config/default (kubectl kustomize) against the chart's defaults (helm template --include-crds)"
kubectl kustomize "$MP_SOURCE_DIR/config/default" >"$s/kustomize.yaml" || fail "kubectl kustomize config/default"
helm template modelpool-operator "$chart" -n modelpool-system --include-crds >"$s/helm.yaml" || fail "helm template"
check drift "$s/kustomize.yaml" "$s/helm.yaml" ||
	fail "the chart and config/default drifted apart (diff above: - config/default, + chart)"

log "config/default + config/router against the chart with router.enabled=true"
{
	cat "$s/kustomize.yaml"
	echo ---
	kubectl kustomize "$MP_SOURCE_DIR/config/router" || fail "kubectl kustomize config/router"
} >"$s/kustomize-router.yaml"
helm template modelpool-operator "$chart" -n modelpool-system --include-crds --set router.enabled=true \
	>"$s/helm-router.yaml" || fail "helm template --set router.enabled=true"
out=$(check drift "$s/kustomize-router.yaml" "$s/helm-router.yaml") ||
	fail "the chart's router and config/router drifted apart (- config/, + chart):"$'\n'"$out"
echo "$out" >&2
# The router's objects were among those compared (a chart that rendered none would have shown up as missing).
for o in ClusterRole/modelpool-router ClusterRoleBinding/modelpool-router ServiceAccount/modelpool-router \
	Role/modelpool-router-registration RoleBinding/modelpool-router-registration \
	Deployment/modelpool-router Service/modelpool-router Service/modelpool-router-metrics-service; do
	check get "$s/helm-router.yaml" "$o" kind >/dev/null || fail "the chart renders no $o with router.enabled=true"
done

log "the comparison itself finds drift: a changed flag, a rule more, an object more and one less, a label more"
# Each edit of the kustomize side must make the check fail and name what differs; else a pass proves nothing.
# drifted compares with the default render; drifted_router with the router's.
kfile=kustomize hfile=helm
drifted() { # NAME REGEX PYTHON: apply PYTHON to the kustomize objects (list `docs`), expect REGEX in the output.
	python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
byname = {(d["kind"], d["metadata"]["name"]): d for d in docs}
exec(sys.argv[2])
yaml.safe_dump_all(docs, open(sys.argv[3], "w"))' "$s/$kfile.yaml" "$3" "$s/edited.yaml"
	local out
	if out=$(check drift "$s/edited.yaml" "$s/$hfile.yaml"); then
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
drifted_router() { kfile=kustomize-router hfile=helm-router drifted "$@"; }
drifted_router "the router may patch members" '^- +"inferenceservices"$' \
	'byname[("ClusterRole", "modelpool-router")]["rules"].append({"apiGroups": ["inference.llmkube.dev"], "resources": ["inferenceservices"], "verbs": ["patch"]})'
drifted_router "the router may not patch pools" '^\+ +"patch"$' \
	'byname[("ClusterRole", "modelpool-router")]["rules"][0]["verbs"].remove("patch")'
drifted_router "the router's binding names another account" '^- +"name": "modelpool-operator"' \
	'byname[("ClusterRoleBinding", "modelpool-router")]["subjects"][0]["name"] = "modelpool-operator"'
drifted_router "another API port" '^- +"--bind-address=:9080",$' \
	'byname[("Deployment", "modelpool-router")]["spec"]["template"]["spec"]["containers"][0]["args"][0] = "--bind-address=:9080"'

log "helm.drift: none"

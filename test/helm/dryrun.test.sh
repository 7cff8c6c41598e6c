# helm.dryrun (run by test/helm/run-one.sh against a fresh control plane): the chart's objects, with the
# defaults and with each example of the chart README's values table, are accepted by a real API server in a server-side
# dry run, with no warning, in a namespace that enforces the restricted Pod Security Standard (the router's
# objects too, with router.enabled); then helm's own `install --dry-run=server` sees the ServiceMonitor kind
# served (test CRD) and renders one, and renders the router with its NOTES.
# shellcheck source=lib.sh
source "$MP_SOURCE_DIR/test/helm/lib.sh"
helm_setup
s=$MP_STATE_DIR
sys=modelpool-system

log "the release namespace as the chart README creates it (restricted Pod Security), team-a, and a ServiceMonitor CRD"
kubectl_admin create namespace "$sys" >/dev/null
kubectl_admin label namespace "$sys" pod-security.kubernetes.io/enforce=restricted \
	pod-security.kubernetes.io/warn=restricted >/dev/null
kubectl_admin create namespace team-a >/dev/null
apply_crd "$MP_SOURCE_DIR/test/crds/servicemonitors.monitoring.coreos.com.yaml"

# dry_run NAME [--set-json K=V]...: render, then apply as a server dry run; any error or warning fails.
dry_run() {
	local name=$1 out
	shift
	render "$s/$name.yaml" "$@"
	out=$(kubectl_admin apply --dry-run=server -f "$s/$name.yaml" 2>&1) || fail "server dry run of $name ($*):"$'\n'"$out"
	grep -qi 'warning' <<<"$out" && fail "server dry run of $name ($*) warned:"$'\n'"$out"
	expect_eq "objects the dry run of $name took" "$(check kinds "$s/$name.yaml" | wc -l)" "$(grep -c '(server dry run)$' <<<"$out")"
}

log "defaults"
dry_run default
log "each example of the chart README's values table"
dry_run_example() { # N LINE ARGS...
	echo "  $2" >&2
	dry_run "example-$1" "${@:3}"
}
each_example dry_run_example
[ "$examples" -gt 20 ] || fail "only $examples examples"
# The dry run created nothing.
expect_fail NotFound kubectl_admin get crd modelpools.inference.llmkube.dev
expect_fail NotFound kubectl_admin -n "$sys" get deployment modelpool-operator

log "the control: a Pod template that breaks the restricted standard is refused with a warning here"
render "$s/bad.yaml" --set-json 'podLabels={"x":"y"}'
sed -i 's/allowPrivilegeEscalation: false/allowPrivilegeEscalation: true/' "$s/bad.yaml"
out=$(kubectl_admin apply --dry-run=server -f "$s/bad.yaml" 2>&1) || true
grep -q 'would violate PodSecurity "restricted' <<<"$out" || fail "no Pod Security warning for a privileged template:"$'\n'"$out"

log "the router: its objects pass the server's checks, a Pod of its template the restricted standard"
dry_run router --set router.enabled=true --set serviceMonitor.enabled=true
check kinds "$s/router.yaml" | grep_all -x Deployment/modelpool-router || fail "no router Deployment rendered"
# Pod Security enforces on Pods: a Pod from the router's template, as no controller-manager makes one here.
python3 -c 'import sys, yaml, json
d = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "Deployment" and o["metadata"]["name"] == "modelpool-router"][0]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": dict(d["spec"]["template"]["metadata"], name="router-check", namespace=sys.argv[2]),
	"spec": d["spec"]["template"]["spec"]}))' "$s/router.yaml" "$sys" >"$s/router-pod.json"
kubectl_admin create --dry-run=server -f "$s/router-pod.json" >/dev/null || fail "a Pod from the chart's router template is refused in $sys"
out=$(helm install modelpool-operator "$chart" -n "$sys" --dry-run=server --set router.enabled=true 2>&1) ||
	fail "helm install --dry-run=server with the router:"$'\n'"$out"
grep -q 'http://modelpool-router.modelpool-system.svc/v1' <<<"$out" || fail "NOTES do not say where the router is:"$'\n'"$out"

log "helm install --dry-run=server: discovery finds the ServiceMonitor kind, so the chart renders one"
out=$(helm install modelpool-operator "$chart" -n "$sys" --dry-run=server --set serviceMonitor.enabled=true 2>&1) ||
	fail "helm install --dry-run=server:"$'\n'"$out"
grep -qx 'kind: ServiceMonitor' <<<"$out" || fail "no ServiceMonitor in helm's dry run:"$'\n'"$out"
grep -qx 'kind: Service' <<<"$out" || fail "no metrics Service in helm's dry run"
grep -q 'kubectl get modelpools --all-namespaces' <<<"$out" || fail "NOTES do not say how to check:"$'\n'"$out"
kubectl_admin delete crd servicemonitors.monitoring.coreos.com --wait >/dev/null
wait_for 60 bash -c '! kubectl --kubeconfig "$KUBECONFIG" api-resources --api-group=monitoring.coreos.com -o name | grep -q .'
out=$(helm install modelpool-operator "$chart" -n "$sys" --dry-run=server --set serviceMonitor.enabled=true 2>&1) ||
	fail "helm install --dry-run=server without the ServiceMonitor kind:"$'\n'"$out"
grep -qx 'kind: ServiceMonitor' <<<"$out" && fail "a ServiceMonitor rendered where the kind is not served"
grep -q 'does not serve monitoring.coreos.com/v1 ServiceMonitor' <<<"$out" || fail "NOTES do not say the ServiceMonitor was skipped:"$'\n'"$out"

log "helm.dryrun: all checks passed"

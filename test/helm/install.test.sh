# helm.install (run by test/helm/run-one.sh against a fresh control plane): a real `helm install` of the chart,
# the operator binary run with the flags and environment of the Deployment Helm created (no kubelet runs
# here) and with only the rights the chart granted its ServiceAccount; it warms and swaps the sample pool.
# With router.enabled, the router is run the same way (its own ServiceAccount's rights): ready, it lists the
# pool's models and answers a scrape checked by its review rights.
# `helm upgrade` to one watched namespace narrows the rights and changes the flags, and the operator run from
# them still swaps; `helm uninstall` removes the operator and leaves the CRD, the pool and its members.
# shellcheck source=lib.sh
source "$MP_SOURCE_DIR/test/helm/lib.sh"
helm_setup
s=$MP_STATE_DIR
sys=modelpool-system
g=inference.llmkube.dev

# Two loopback ports nobody uses: the chart's ports, so the operator's servers never collide with a
# parallel test's (the rendered flags bind every interface).
mport=$(unused_port)
hport=$(unused_port)
while [ "$hport" == "$mport" ]; do hport=$(unused_port); done

# rendered_env DEPLOYMENT_JSON: the container's env as NAME=VALUE lines.
rendered_env() {
	# The downward API the kubelet would resolve; any other env form is not known here and fails the test.
	jq -r --arg ns "$sys" '.spec.template.spec.containers[0].env[] |
		if .valueFrom.fieldRef.fieldPath == "metadata.namespace" then "\(.name)=\($ns)"
		elif .valueFrom.fieldRef.fieldPath == "metadata.name" then "\(.name)=modelpool-operator-helm-test"
		elif .valueFrom.fieldRef.fieldPath == "status.podIP" then "\(.name)=127.0.0.1"
		elif has("value") then "\(.name)=\(.value)"
		else error("env \(.name): no stand-in for \(.valueFrom)") end' "$1"
}
# run_rendered_operator LOG: the operator with the Deployment's args and env as the API server stores them,
# as the operator's identity (ServiceAccount modelpool-system/modelpool-operator).
run_rendered_operator() {
	kubectl_admin -n "$sys" get deployment modelpool-operator -o json >"$s/deployment.json"
	mapfile -t op_args < <(jq -r '.spec.template.spec.containers[0].args[]' "$s/deployment.json")
	mapfile -t op_env < <(rendered_env "$s/deployment.json")
	echo "operator: ${op_env[*]} modelpool-operator ${op_args[*]}" >&2
	env "${op_env[@]}" "$MP_BUILD_DIR/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" "${op_args[@]}" \
		>>"$MP_STATE_DIR/$1" 2>&1 &
	MP_OPERATOR_PID=$!
}
# run_rendered_router: modelpool-router with the router Deployment's args and env, as the router's identity
# (ServiceAccount modelpool-system/modelpool-router); its three listen addresses moved to loopback ports the
# kernel picks (the operator holds the chart's), which router_port reads from router.log.
run_rendered_router() {
	kubectl_admin -n "$sys" get deployment modelpool-router -o json >"$s/router-deployment.json"
	expect_eq "router command" /usr/local/bin/modelpool-router \
		"$(jq -r '.spec.template.spec.containers[0].command | join(" ")' "$s/router-deployment.json")"
	mapfile -t rt_args < <(jq -r '.spec.template.spec.containers[0].args[]' "$s/router-deployment.json" |
		sed -E 's/^(--(bind|metrics-bind|health-probe-bind)-address)=.*/\1=127.0.0.1:0/')
	mapfile -t rt_env < <(rendered_env "$s/router-deployment.json")
	echo "router: ${rt_env[*]} modelpool-router ${rt_args[*]}" >&2
	env "${rt_env[@]}" "$MP_BUILD_DIR/modelpool-router" --kubeconfig "$MP_ROUTER_KUBECONFIG" "${rt_args[@]}" \
		>>"$MP_STATE_DIR/router.log" 2>&1 &
	MP_ROUTER_PID=$!
}
healthy() { curl -fsS "http://127.0.0.1:$hport/readyz"; }
# scrape_code: the HTTP status of a scrape over HTTPS with the token of monitoring/prometheus.
scrape_code() {
	curl -sk -o "$s/metrics.txt" -w '%{http_code}' -H "Authorization: Bearer $reader" \
		"https://127.0.0.1:$mport/metrics" || true
}
gone() { ! kubectl_admin "$@" >/dev/null 2>&1; }

log "members' CRD (their controller's) and the simulator; then helm install, ports $mport/$hport"
apply_crd "$MP_SOURCE_DIR/test/crds/inferenceservices.inference.llmkube.dev.yaml"
start_sim --load-ms 100
out=$(helm install modelpool-operator "$chart" -n "$sys" --create-namespace \
	--set-json "metrics.port=$mport" --set-json "health.port=$hport" --set router.enabled=true 2>&1) ||
	fail "helm install:"$'\n'"$out"
echo "$out" >&2
grep -q "kubectl get modelpools --all-namespaces" <<<"$out" || fail "NOTES do not say how to check"
expect_eq "release" "modelpool-operator deployed 1" \
	"$(helm list -n "$sys" -o json | jq -r '.[] | "\(.name) \(.status) \(.revision)"')"
kubectl_admin wait --for=condition=Established --timeout=60s crd/modelpools.$g >/dev/null
expect_eq "CRD as in crd/" "$(kubectl_admin create --dry-run=client -o json -f "$MP_SOURCE_DIR/crd/modelpools.$g.yaml" | jq -c .spec)" \
	"$(kubectl_admin get crd modelpools.$g -o json | jq -c '.spec | del(.conversion)')"
kubectl_admin -n "$sys" get serviceaccount/modelpool-operator role/modelpool-operator-leader-election \
	rolebinding/modelpool-operator-leader-election role/modelpool-operator-fence-acks \
	rolebinding/modelpool-operator-fence-acks deployment/modelpool-operator >/dev/null
kubectl_admin get clusterrole/modelpool-operator clusterrolebinding/modelpool-operator >/dev/null
wait_for 60 kubectl_operator auth can-i list modelpools.$g -A
kubectl_admin -n "$sys" get serviceaccount/modelpool-router deployment/modelpool-router service/modelpool-router >/dev/null
wait_for 60 kubectl_router auth can-i patch modelpools.$g -A
expect_eq "router can-i patch members" no "$(kubectl_router auth can-i patch inferenceservices.$g -A 2>/dev/null || true)"

log "the operator, run from the rendered flags with the chart's rights, warms and swaps the sample pool"
run_rendered_operator operator.log
kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/inferenceservices.yaml" >/dev/null
kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/modelpool.yaml" >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_eq "replicas after the swap" "0 1" "$(isvc_get llama-8b '{.spec.replicas}') $(isvc_get qwen-7b '{.spec.replicas}')"
# --fence-acks (the default): the router Leases of the release namespace (POD_NAMESPACE) are watched with the
# chart's fence-acks Role.
grep -q ' started .* router_leases=modelpool-system' "$MP_STATE_DIR/operator.log" ||
	fail "the router Leases of $sys are not watched: $(grep ' started ' "$MP_STATE_DIR/operator.log")"
grep -q 'router Leases failed' "$MP_STATE_DIR/operator.log" &&
	fail "the chart's rights do not let the operator watch the router Leases: $(grep 'router Leases failed' "$MP_STATE_DIR/operator.log")"
wait_for 30 healthy
# A Prometheus's ServiceAccount bound to the chart's metrics-reader ClusterRole, as NOTES tells.
kubectl_admin create namespace monitoring >/dev/null
kubectl_admin -n monitoring create serviceaccount prometheus >/dev/null
kubectl_admin create clusterrolebinding prometheus-metrics --clusterrole=modelpool-operator-metrics-reader \
	--serviceaccount=monitoring:prometheus >/dev/null
reader=$(kubectl_admin -n monitoring create token prometheus)
expect_eq "scrape without a token" 401 "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$mport/metrics" || true)"
expect_eq "scrape with metrics-reader's token (the chart's review rights)" 200 "$(scrape_code)"
grep -Eq '^modelpool_swaps_total\{namespace="default",pool="shared-gpu"\} [1-9]' "$s/metrics.txt" ||
	fail "no swap in /metrics: $(grep swaps_total "$s/metrics.txt")"

log "the router, run from the rendered flags with the chart's router rights: ready, lists the pool's models, metrics reviewed"
run_rendered_router
wait_for 60 router_ready
rport=$(router_port api)
# Its home is the release namespace (POD_NAMESPACE): the pool's models in "default" are named qualified.
expect_eq "models the router fronts" "default/shared-gpu/default/llama-8b default/shared-gpu/default/qwen-7b" \
	"$(curl -fsS "http://127.0.0.1:$rport/v1/models" |
		jq -r '[.data[] | "\(.modelpool.namespace)/\(.modelpool.pool)/\(.id)"] | sort | join(" ")')"
rmport=$(router_port metrics)
expect_eq "router scrape without a token" 401 "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$rmport/metrics" || true)"
expect_eq "router scrape with metrics-reader's token (the chart's router review rights)" 200 \
	"$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $reader" "https://127.0.0.1:$rmport/metrics" || true)"
stop_router
grep -qi forbidden "$MP_STATE_DIR/router.log" && fail "the router was refused something:"$'\n'"$(grep -i forbidden "$MP_STATE_DIR/router.log")"
expect_eq "Lease holder (leader election from the chart's flag and Role)" modelpool-operator-helm-test \
	"$(kubectl_admin -n "$sys" get lease modelpool-operator -o 'jsonpath={.spec.holderIdentity}' | cut -c1-28)"

log "helm upgrade: watch namespace default only, JSON logs; the ClusterRole becomes a Role in default"
stop_operator # as a rollout would: the old Pod ends before the new one starts (one replica here)
out=$(helm upgrade modelpool-operator "$chart" -n "$sys" --reuse-values \
	--set watchNamespace=default --set logging.format=json 2>&1) || fail "helm upgrade:"$'\n'"$out"
grep -q "watching namespace default only" <<<"$out" || fail "NOTES after the upgrade:"$'\n'"$out"
expect_eq "revision" 2 "$(helm list -n "$sys" -o json | jq -r '.[0].revision')"
wait_for 60 gone get clusterrole modelpool-operator
wait_for 60 gone get clusterrolebinding modelpool-operator
kubectl_admin -n default get role/modelpool-operator rolebinding/modelpool-operator >/dev/null
wait_for 60 kubectl_operator auth can-i list modelpools.$g -n default
expect_eq "can-i list pools in every namespace" no "$(kubectl_operator auth can-i list modelpools.$g -A 2>/dev/null || true)"
wait_for 60 gone get clusterrole modelpool-router
wait_for 60 kubectl_router auth can-i patch modelpools.$g -n default
expect_eq "router can-i list pools in every namespace" no "$(kubectl_router auth can-i list modelpools.$g -A 2>/dev/null || true)"
grep -qx -- --namespace=default <<<"$(kubectl_admin -n "$sys" get deployment modelpool-router -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')" ||
	fail "no --namespace=default in the router's args after the upgrade"
expect_eq "can-i patch members in kube-system" no \
	"$(kubectl_operator auth can-i patch inferenceservices.$g -n kube-system 2>/dev/null || true)"
run_rendered_operator operator-upgraded.log
grep -qx -- --namespace=default <<<"$(printf '%s\n' "${op_args[@]}")" || fail "no --namespace=default in ${op_args[*]}"
kubectl_admin scale isvc llama-8b --replicas=1 >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_eq "replicas after the swap back" "1 0" "$(isvc_get llama-8b '{.spec.replicas}') $(isvc_get qwen-7b '{.spec.replicas}')"
head -n 1 "$MP_STATE_DIR/operator-upgraded.log" | jq -e . >/dev/null || fail "the log is not JSON after logging.format=json"
# The reviews are cluster-scoped: with one namespace watched they come from the metrics-auth ClusterRole.
expect_eq "scrape after narrowing to one namespace" 200 "$(scrape_code)"
stop_operator

log "helm uninstall: the operator's objects go; the CRD, the pool and its members stay as they were"
helm uninstall modelpool-operator -n "$sys" >&2 || fail "helm uninstall"
expect_eq "releases left" 0 "$(helm list -n "$sys" -o json | jq length)"
for o in deployment/modelpool-operator serviceaccount/modelpool-operator role/modelpool-operator-leader-election \
	rolebinding/modelpool-operator-leader-election role/modelpool-operator-fence-acks \
	rolebinding/modelpool-operator-fence-acks service/modelpool-operator-metrics-service; do
	wait_for 60 gone -n "$sys" get "$o"
done
wait_for 60 gone -n default get role/modelpool-operator
for o in deployment/modelpool-router serviceaccount/modelpool-router service/modelpool-router \
	service/modelpool-router-metrics-service poddisruptionbudget/modelpool-router; do
	wait_for 60 gone -n "$sys" get "$o"
done
wait_for 60 gone -n default get role/modelpool-router
wait_for 60 gone -n default get rolebinding/modelpool-operator
for o in clusterrole/modelpool-operator-metrics-reader clusterrole/modelpool-operator-metrics-auth \
	clusterrolebinding/modelpool-operator-metrics-auth; do
	wait_for 60 gone get "$o"
done
kubectl_admin get crd modelpools.$g >/dev/null || fail "helm uninstall deleted the CRD"
expect_eq "the pool after uninstall" "Ready/llama-8b" "$(pool_get shared-gpu '{.status.phase}/{.status.residentMember}')"
expect_eq "members' replicas after uninstall" "1 0" "$(isvc_get llama-8b '{.spec.replicas}') $(isvc_get qwen-7b '{.spec.replicas}')"

log "install again over the CRD and pools left behind, then uninstall"
helm install modelpool-operator "$chart" -n "$sys" >/dev/null 2>"$s/reinstall.err" ||
	fail "helm install over the existing CRD: $(cat "$s/reinstall.err")"
kubectl_admin -n "$sys" get deployment/modelpool-operator >/dev/null
helm uninstall modelpool-operator -n "$sys" >/dev/null
kubectl_admin get modelpool shared-gpu >/dev/null || fail "the pool went with the second uninstall"

log "helm.install: all checks passed"

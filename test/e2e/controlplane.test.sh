# The control plane every other e2e test stands on: the pinned kube-apiserver version, the admin identity,
# the operator identity denied until RBAC grants it (and the router's, a user of its own), and watches that
# deliver events.
# Run by run-one.sh (lib.sh sourced, bash -euo pipefail, KUBECONFIG = admin).

# The version the build pinned, so this test follows a bump of test/controlplane/apiserver/go.mod.
want=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$MP_SOURCE_DIR/test/controlplane/apiserver/go.mod")
log "server version is $want"
got=$(kubectl_admin version -o json | tr -d ' \n' | grep -o '"serverVersion":{[^}]*}' |
	grep -o '"gitVersion":"[^"]*"' | cut -d'"' -f4)
expect_eq "kube-apiserver gitVersion" "$want" "$got"

ns=e2e-controlplane
log "admin can create, get and delete a ConfigMap"
kubectl_admin create namespace "$ns" >/dev/null
kubectl_admin -n "$ns" create configmap probe --from-literal=key=value >/dev/null
expect_eq "admin reads probe" value "$(kubectl_admin -n "$ns" get configmap probe -o 'jsonpath={.data.key}')"

log "the operator identity is authenticated and denied before any grant"
expect_fail "Forbidden.*User \"$MP_OPERATOR_USER\" cannot get resource \"configmaps\"" \
	kubectl_operator -n "$ns" get configmap probe

log "a Role and RoleBinding let the operator get, and only get"
kubectl_admin -n "$ns" create role cm-reader --verb=get --resource=configmaps >/dev/null
kubectl_admin -n "$ns" create rolebinding cm-reader --role=cm-reader \
	--serviceaccount="$MP_OPERATOR_SA_NAMESPACE:$MP_OPERATOR_SA_NAME" >/dev/null
# The authorizer reads RBAC objects from its own cache, so the grant takes effect shortly after the write.
wait_for 60 kubectl_operator -n "$ns" get configmap probe
expect_eq "operator reads probe" value "$(kubectl_operator -n "$ns" get configmap probe -o 'jsonpath={.data.key}')"
expect_fail "Forbidden" kubectl_operator -n "$ns" delete configmap probe
expect_fail "Forbidden" kubectl_operator -n "$ns" get configmaps
# The router is another user: the operator's grant does not reach it.
expect_fail "Forbidden.*User \"$MP_ROUTER_USER\" cannot get resource \"configmaps\"" \
	kubectl_router -n "$ns" get configmap probe

kubectl_admin -n "$ns" delete configmap probe >/dev/null
expect_fail "NotFound" kubectl_admin -n "$ns" get configmap probe

log "a watch delivers an ADDED event for an object created after it started"
kubectl_admin -n "$ns" create configmap before >/dev/null
watch_out=$MP_STATE_DIR/watch.out
kubectl_admin -n "$ns" get configmaps --watch --output-watch-events >"$watch_out" 2>&1 &
watch_pid=$!
# "before" arrives from the initial list: once it is printed, the watch that follows the list is open.
wait_for 60 grep -Eq '^ADDED +before ' "$watch_out"
kubectl_admin -n "$ns" create configmap after >/dev/null
wait_for 60 grep -Eq '^ADDED +after ' "$watch_out"
kill "$watch_pid"
wait "$watch_pid" || true

log "ok"

# A standby that may not use its Lease says so: run with --leader-elect and a Lease namespace the
# operator's RBAC does not cover (its Role allows Leases in modelpool-system only), it logs one error
# line per episode (not one every retry period), answers /readyz with 503 and the API server's words,
# and writes nothing. Granting the rights ends the episode: it leads, /readyz turns 200, it reconciles.
install_crds_and_samples
install_operator_rbac
start_sim

lease_ns=default
MP_OPERATOR_LOG=a start_operator --leader-elect --leader-election-namespace "$lease_ns"
oplog="$MP_STATE_DIR/operator-a.log"
wait_for 60 grep -q "caches synced" "$oplog"

log "the standby reports that it may not read the Lease, at error level"
wait_for 60 grep -qE ' error +"cannot take part in leader election" .*namespace=default' "$oplog"
grep -E ' error +"cannot take part' "$oplog" | grep_all 'reason=Forbidden' || fail "no reason=Forbidden: $(grep 'cannot take part' "$oplog")"

readyz() {
	local port
	port=$(operator_port health operator-a.log) || return 1
	curl -sS -w '\n%{http_code}\n' "http://127.0.0.1:$port/readyz"
}
log "/readyz says why, with 503"
out=$(readyz)
echo "$out"
expect_eq "/readyz code" 503 "$(tail -n 1 <<<"$out")"
grep -q "^leader election: cannot read the Lease default/modelpool-operator: .*forbidden" <<<"$out" ||
	fail "/readyz does not say why: $out"

log "one error line for the episode, however many times the standby tries"
# Each attempt is a GET answered 403; wait for a few retry periods' worth of them.
forbidden_gets() {
	local n
	n=$(metric_value 'modelpool_api_requests_total{verb="GET",code="403"}' operator-a.log) || return 1
	echo "$n"
	[ "$n" -ge 4 ]
}
wait_for 60 forbidden_gets
expect_eq "error lines for one episode" 1 "$(grep -cE ' error +"cannot take part in leader election"' "$oplog")"
expect_eq "writes of a standby" 0 "$(grep -cE ' (status|scale) pool=' "$oplog" || true)"

log "granting the rights ends the episode: it leads and reconciles"
kubectl_admin apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: modelpool-operator-leader-election, namespace: $lease_ns}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: modelpool-operator-leader-election, namespace: $lease_ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: modelpool-operator-leader-election}
subjects:
  - {kind: ServiceAccount, name: modelpool-operator, namespace: modelpool-system}
YAML
wait_for 60 grep -q "became leader" "$oplog"
grep -q "lease usable again" "$oplog" || fail "the end of the episode is not logged"
ready_now() { [ "$(readyz | tail -n 1)" == 200 ]; }
wait_for 30 ready_now
wait_for 90 pool_is shared-gpu Ready llama-8b

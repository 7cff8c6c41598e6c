# Two replicas, one leader: both run with --leader-elect and the operator's own identity (the Role in
# config/rbac allows Leases in modelpool-system only). The standby keeps its cache warm and writes
# nothing; killing the leader (SIGKILL: no release) hands the Lease over once it expires, and the new
# leader finishes a swap the old one had started. A clean stop (SIGTERM) releases the Lease, exit 0.
# A leader cut off from the API server stops itself (exit 1) after the renew deadline.
install_crds_and_samples
install_operator_rbac
start_slot_check
start_sim --load-ms 300

lease_holder() { kubectl_admin -n modelpool-system get lease modelpool-operator -o 'jsonpath={.spec.holderIdentity}'; }
# holder_is PREFIX: the Lease is held by an identity of that log's operator (its "became leader" line).
identity_of() { sed -n 's/.*became leader.*identity=\([^ ]*\).*/\1/p' "$MP_STATE_DIR/operator-$1.log" | tail -n 1; }
holder_is() {
	local want got
	want=$(identity_of "$1")
	got=$(lease_holder)
	echo "holder=$got want=$want"
	[ -n "$want" ] && [ "$got" == "$want" ]
}
# writes_of NAME: status writes and scale patches the operator logged.
writes_of() { grep -cE ' (status|scale) pool=' "$MP_STATE_DIR/operator-$1.log" || true; }

log "replica a becomes leader and warms the pool"
MP_OPERATOR_LOG=a start_operator --leader-elect --leader-election-namespace modelpool-system
pid_a=$MP_OPERATOR_PID
wait_for 60 grep -q "became leader" "$MP_STATE_DIR/operator-a.log"
wait_for 30 holder_is a
wait_for 90 pool_is shared-gpu Ready llama-8b

log "replica b syncs its cache and stands by without writing"
MP_OPERATOR_LOG=b start_operator --leader-elect --leader-election-namespace modelpool-system
pid_b=$MP_OPERATOR_PID
wait_for 60 grep -q "caches synced" "$MP_STATE_DIR/operator-b.log"
grep -q "waiting for leadership" "$MP_STATE_DIR/operator-b.log" || fail "b does not say it waits for leadership"

log "a swap starts under a and is deferred: the incumbent is busy"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 60 condition_is shared-gpu SwapDeferred True/PodsBusy
wait_for 30 replicas_are qwen-7b 0
expect_eq "standby's writes" 0 "$(writes_of b)"
holder_is a >/dev/null || fail "the lease moved while a was healthy: $(lease_holder)"

log "a is killed; b takes the lease once it expires and finishes the swap"
kill -KILL "$pid_a"
wait "$pid_a" || true
killed_at=$SECONDS
wait_for 60 holder_is b
log "b leads $((SECONDS - killed_at)) s after a was killed (lease duration 15 s)"
expect_eq "transitions" 1 "$(kubectl_admin -n modelpool-system get lease modelpool-operator -o 'jsonpath={.spec.leaseTransitions}')"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=false --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_eq "incumbent replicas" 0 "$(member_replicas llama-8b)"
no_live_pods llama-8b || fail "llama-8b still has Pods: $(live_pods llama-8b)"
[ "$(writes_of b)" -gt 0 ] || fail "b leads but wrote nothing"
# A new leader plans only from caches listed again after it took the lease: a standby's watches may
# lag the last leader's writes. Its first write comes after the line saying all three were listed.
first_write=$(grep -nE ' (status|scale) pool=' "$MP_STATE_DIR/operator-b.log" | head -n 1 | cut -d: -f1)
listed=$(grep -n 'caches listed again as leader' "$MP_STATE_DIR/operator-b.log" | head -n 1 | cut -d: -f1)
[ -n "$listed" ] || fail "b never said it listed its caches again as leader"
[ "$listed" -lt "$first_write" ] || fail "b wrote (line $first_write) before its caches were listed again (line $listed)"

log "SIGTERM: b exits 0 and releases the lease"
MP_OPERATOR_PID=$pid_b stop_operator
expect_eq "holder after release" "" "$(lease_holder)"
grep -q "lease released" "$MP_STATE_DIR/operator-b.log" || fail "b did not log the release"

log "a leader that cannot renew (API server down) stops itself before its lease can expire"
MP_OPERATOR_LOG=c start_operator --leader-elect --leader-election-namespace modelpool-system
pid_c=$MP_OPERATOR_PID
wait_for 60 holder_is c
stop_apiserver KILL
rc=0
wait "$pid_c" || rc=$?
expect_eq "exit status of a leader that lost its lease" 1 "$rc"
grep -q "leader election lost" "$MP_STATE_DIR/operator-c.log" || fail "c did not log why it stopped"
start_apiserver

log "without a namespace for the Lease, --leader-elect outside a cluster is a clear error"
expect_fail "needs --leader-election-namespace" env -u POD_NAMESPACE \
	"$MP_BUILD_DIR/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" --leader-elect
stop_slot_check

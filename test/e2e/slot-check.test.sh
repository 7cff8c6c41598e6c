# slot-check itself, on states written by hand (no operator, no simulator; Pods and statuses set as
# admin): a member whose status still says Ready after its Pod is gone (the chaos run's seed 178053688:
# the simulator's status writes were throttled by 429) is not a violation, nor is one Ready beside a
# Pending or a Succeeded Pod; two live Pods in one pool are, Ready or not, terminating or not, and so
# are a Pod of a member removed from the spec that the pool's status still records and another's.
ns=slot-check
install_crds

# pod MEMBER NAME PHASE [FINALIZER]: a Pod of MEMBER (its labels as the member controller sets them)
# in that phase; with FINALIZER it stays after a delete, terminating.
pod() {
	kubectl_admin -n "$ns" apply -f - >/dev/null <<-YAML
		apiVersion: v1
		kind: Pod
		metadata:
		  name: $2
		  labels: {app: $1, inference.llmkube.dev/service: $1}
		  ${4:+finalizers: [$4]}
		spec:
		  containers: [{name: model, image: example.test/model}]
	YAML
	[ "$3" == Pending ] ||
		kubectl_admin -n "$ns" patch pod "$2" --subresource=status --type=merge \
			-p "{\"status\":{\"phase\":\"$3\"}}" >/dev/null
}
# member_phase MEMBER PHASE: the member's status.phase, as its controller would write it.
member_phase() {
	kubectl_admin -n "$ns" patch isvc "$1" --subresource=status --type=merge \
		-p "{\"status\":{\"phase\":\"$2\"}}" >/dev/null
}
# check_once LOG: slot-check from a full list of the current state to its first check of every pool,
# then SIGTERM; prints its exit status. Its first check runs on the loop right after "synced", before
# the signal can be read.
check_once() {
	local rc=0
	"$MP_BUILD_DIR/slot-check" "$KUBECONFIG" >"$MP_STATE_DIR/$1" 2>&1 &
	local pid=$!
	wait_for 60 grep -q "slot-check: synced" "$MP_STATE_DIR/$1"
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	cat "$MP_STATE_DIR/$1" >&2
	echo "$rc"
}

log "pa: a1 Ready with no Pod; pb: b1 Ready with a Pending Pod; pc: c1 Ready with a Succeeded Pod"
create_members "$ns" a0 a1 b0 b1 c0 c1 d0 d1 e0 e1 f0 f1
for p in a b c; do
	create_pool "$ns" "p$p" "" "${p}0" "${p}1"
	pod "${p}0" "${p}0-1" Running
	member_phase "${p}0" Ready
	member_phase "${p}1" Ready
done
pod b1 b1-1 Pending
pod c1 c1-1 Succeeded
expect_eq "slot-check exit status on stale Ready statuses" 0 "$(check_once stale.log)"
summary=$(grep '^slot-check: .* violations, ' "$MP_STATE_DIR/stale.log")
stale=$(sed -n 's/.* 0 violations, \([0-9]*\) stale Ready .*/\1/p' <<<"$summary")
[ -n "$stale" ] && [ "$stale" -ge 3 ] || fail "slot-check did not count a1, b1 and c1 as stale Ready: $summary"

log "pd: two members Ready, each with a Running Pod; pe: e1 Stopped with its Pod still terminating"
create_pool "$ns" pd "" d0 d1
pod d0 d0-1 Running
pod d1 d1-1 Running
member_phase d0 Ready
member_phase d1 Ready
create_pool "$ns" pe "" e0 e1
pod e0 e0-1 Running
member_phase e0 Ready
pod e1 e1-1 Running example.test/hold
kubectl_admin -n "$ns" delete pod e1-1 --wait=false >/dev/null
member_phase e1 Stopped
expect_eq "slot-check exit status on two live Pods in a pool" 1 "$(check_once live.log)"
grep -q "^VIOLATION pool=$ns/pd pods holding the slot: d[01]-1(d[01],Running) d[01]-1(d[01],Running) ready members with a live Pod: d0 d1\$" \
	"$MP_STATE_DIR/live.log" || fail "no violation for pd with both Pods and both Ready members"
grep -q "^VIOLATION pool=$ns/pe pods holding the slot: .*e1-1(e1,Running,terminating)" "$MP_STATE_DIR/live.log" ||
	fail "no violation for pe with e1's terminating Pod"
! grep -q "^VIOLATION pool=$ns/p[abc] " "$MP_STATE_DIR/live.log" || fail "a stale Ready status counted as a violation"

log "pf: f1 removed from the spec, still recorded in the status, its Pod running beside f0's"
create_pool "$ns" pf "" f0
kubectl_admin -n "$ns" patch modelpool pf --subresource=status --type=merge \
	-p '{"status":{"members":[{"name":"f0"},{"name":"f1","releasing":true}]}}' >/dev/null
pod f0 f0-1 Running
pod f1 f1-1 Running
expect_eq "slot-check exit status with a removed member's Pod" 1 "$(check_once removed.log)"
grep -q "^VIOLATION pool=$ns/pf pods holding the slot: f0-1(f0,Running) f1-1(f1,Running) " \
	"$MP_STATE_DIR/removed.log" || fail "no violation for pf with the removed member's Pod"
kubectl_admin -n "$ns" delete pod f1-1 --wait=true >/dev/null

log "e1's Pod goes: pe has one holder left"
kubectl_admin -n "$ns" patch pod e1-1 --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
wait_for 30 bash -c "! kubectl --kubeconfig '$KUBECONFIG' -n '$ns' get pod e1-1"
kubectl_admin -n "$ns" delete pod d1-1 --wait=true >/dev/null
expect_eq "slot-check exit status once every pool has one holder" 0 "$(check_once after.log)"

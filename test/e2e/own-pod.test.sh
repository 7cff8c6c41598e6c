# Issue 12 rule 1: the slot is free for the target only when no Pod of any member holds it, the
# target's own old Pods included: a target held at 0 whose Pod still terminates is not scaled to 1
# until that Pod is gone, for its member controller (the simulator, as a ReplicaSet) would start a
# second Pod beside the terminating one at once. (1) A member stopped by its user just before a
# pool is created still has its Pod terminating (finalizer, terminate-ms) when the cold pool picks
# it as its default. (2) A warm pool swaps from m-c to m-d; while m-d loads (slowly) and the
# operator is down, m-c is requested back and runs; the operator, back, holds m-c at 0 (its Pod
# terminates slowly) and stops m-d: m-c is the target, held at 0, with its own Pod terminating. m-d's
# Pod, which never ran, terminates slowly too: m-c is drained only after the drain fence, and a slot
# already free by then would rightly keep m-c as it runs.
# slot-check watches the whole test for two Pods holding the slot, of one member or of two.
ns=own-pod
operator_up --slot-check --finalizer --load-ms 300

create_members "$ns" m-a m-b m-c m-d

# pod_terminating MEMBER: the member has a Pod with a deletionTimestamp.
pod_terminating() {
	local got
	got=$(kubectl_admin -n "$ns" get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{" "}{end}')
	echo "$got"
	grep -Eq '=[^ ]+' <<<"$got"
}

log "m-a runs outside any pool, then its user stops it; its Pod stays terminating"
kubectl_admin -n "$ns" scale isvc m-a --replicas=1 >/dev/null
wait_for 60 member_phase_is m-a Ready "$ns"
old=$(live_pods m-a "$ns")
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/terminate-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc m-a --replicas=0 >/dev/null
wait_for 30 pod_terminating m-a
wait_for 30 member_phase_is m-a Stopped "$ns"

log "a cold pool with default m-a: m-a is pending but held at 0 while its old Pod $old terminates"
create_pool "$ns" pool m-a m-a m-b
wait_for 30 pending_is pool m-a "$ns"
# expect_held WHEN: m-a still at 0, its only Pod the old terminating one.
expect_held() {
	expect_eq "m-a replicas while its old Pod terminates ($1)" 0 "$(member_replicas m-a "$ns")"
	expect_eq "m-a Pods while its old Pod terminates ($1)" "$old" "$(live_pods m-a "$ns")"
	expect_eq "phase/pending ($1)" Swapping/m-a "$(pool_field pool phase/pendingMember "$ns")"
}
replan_barrier pool "$ns"
expect_held "after the pool was planned"
# An event about the member itself (its annotations) re-plans too.
kubectl_admin -n "$ns" annotate isvc m-a example.test/poke=1 --overwrite >/dev/null
replan_barrier pool "$ns"
expect_held "after a member update and a re-plan"

log "the old Pod is released: it goes, then m-a starts and is resident"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/terminate-ms=0 --overwrite >/dev/null
wait_for 60 pool_is pool Ready m-a "$ns"
expect_sole_resident pool m-a "$ns"
new=$(live_pods m-a "$ns")
[ "$new" != "$old" ] || fail "m-a's resident Pod is the old one"
sim_overlap "$ns" m-a m-b || fail "two Pods held the GPU at once (the simulator's log)"

log "(2) a warm pool swaps from m-c to m-d, which loads slowly"
create_pool "$ns" pool2 m-c m-c m-d
wait_for 60 pool_is pool2 Ready m-c "$ns"
kubectl_admin -n "$ns" annotate isvc m-d sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc m-d --replicas=1 >/dev/null
wait_for 60 condition_is pool2 Swapping True/Loading "$ns"
wait_for 30 no_live_pods m-c "$ns"
log "the operator is down; m-c is requested back and runs (m-d's Pod never ran)"
stop_operator
for m in m-c m-d; do
	kubectl_admin -n "$ns" annotate isvc "$m" sim.modelpool.test/terminate-ms=600000 --overwrite >/dev/null
done
kubectl_admin -n "$ns" scale isvc m-c --replicas=1 >/dev/null
wait_for 60 member_phase_is m-c Ready "$ns"
old=$(live_pods m-c "$ns")
log "the operator is back: m-c is the target, held at 0 while its Pod $old terminates"
start_operator
wait_for 30 pending_is pool2 m-c "$ns"
wait_for 30 pod_terminating m-c
wait_for 30 replicas_are m-d 0 "$ns"
kubectl_admin -n "$ns" annotate isvc m-d sim.modelpool.test/terminate-ms=0 --overwrite >/dev/null
wait_for 30 no_live_pods m-d "$ns"
replan_barrier pool2 "$ns"
expect_eq "m-c replicas while its old Pod terminates" 0 "$(member_replicas m-c "$ns")"
expect_eq "m-c Pods while its old Pod terminates" "$old" "$(live_pods m-c "$ns")"
expect_eq "pool2 phase/pending" Swapping/m-c "$(pool_field pool2 phase/pendingMember "$ns")"
log "the old Pod is released: m-c starts again and is resident"
kubectl_admin -n "$ns" annotate isvc m-c sim.modelpool.test/terminate-ms=0 --overwrite >/dev/null
wait_for 60 pool_is pool2 Ready m-c "$ns"
expect_sole_resident pool2 m-c "$ns"
[ "$(live_pods m-c "$ns")" != "$old" ] || fail "m-c's resident Pod is the old one"
sim_overlap "$ns" m-c m-d || fail "two Pods held the GPU at once (the simulator's log)"

stop_operator
stop_slot_check

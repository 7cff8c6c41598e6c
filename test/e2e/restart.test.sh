# The intent of a swap lives in the pool's status (pendingMember, the Swapping condition), not in
# the process (DESIGN.md rule 3): the operator is killed with SIGKILL mid-swap and started again,
# and the swap neither reverts nor stalls. Killed (1) while the incumbent is busy and the swap is
# deferred, (2) while the target is loading, (3) right after a request was recorded, at whatever
# step it had reached. slot-check watches for two members holding the slot throughout.
operator_up --samples --slot-check --load-ms 300
wait_for 90 pool_is shared-gpu Ready llama-8b

restart_operator() {
	kill_operator
	log "operator killed (SIGKILL); starting it again"
	start_operator
}
swapping_is() { condition_is shared-gpu Swapping "$1"; }
# not_reverted FROM TO STAGE: after a restart the swap is where it was: TO pending, still Swapping
# at STAGE, FROM still resident in status.
not_reverted() {
	expect_eq "resident/pending after the restart" "$1/$2" \
		"$(pool_field shared-gpu residentMember/pendingMember)"
	expect_eq "Swapping condition after the restart" "True/$3" "$(pool_condition shared-gpu Swapping)"
}

log "(1) killed while the swap to qwen-7b is deferred (llama-8b busy)"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 60 condition_is shared-gpu SwapDeferred True/PodsBusy
wait_for 30 replicas_are qwen-7b 0
deferred_since=$(condition_since shared-gpu SwapDeferred)
deferred_events=$(event_count shared-gpu Normal/SwapDeferred)
[ "$deferred_events" -ge 1 ] || fail "no Normal SwapDeferred Event for the deferral: $(pool_events shared-gpu)"
probes=$(grep -c ' probed pool=' "$MP_STATE_DIR/operator.log")
restart_operator
replan_barrier shared-gpu
not_reverted llama-8b qwen-7b Draining
# The new process has no probe results (they live in memory): until its first probe answers, the
# deferral stands; it is not flipped to NotDeferred and back (a second SwapDeferred Event).
more_probes() { [ "$(grep -c ' probed pool=' "$MP_STATE_DIR/operator.log")" -gt "$probes" ]; }
wait_for 30 more_probes
replan_barrier shared-gpu
expect_eq "SwapDeferred after the restart" True/PodsBusy "$(pool_condition shared-gpu SwapDeferred)"
expect_eq "SwapDeferred lastTransitionTime across the restart" "$deferred_since" \
	"$(condition_since shared-gpu SwapDeferred)"
expect_eq "SwapDeferred Events across the restart" "$deferred_events" "$(event_count shared-gpu Normal/SwapDeferred)"
expect_eq "busy incumbent's replicas" 1 "$(member_replicas llama-8b)"
expect_eq "held target's replicas" 0 "$(member_replicas qwen-7b)"
[ -n "$(live_pods llama-8b)" ] || fail "the busy incumbent lost its Pod"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=false --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_sole_resident shared-gpu qwen-7b
wait_for 30 condition_is shared-gpu SwapDeferred False/NotDeferred

log "(2) killed while llama-8b is loading (held in Creating by a long load-ms)"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin scale isvc llama-8b --replicas=1 >/dev/null
wait_for 60 swapping_is True/Loading
wait_for 30 replicas_are qwen-7b 0
wait_for 30 no_live_pods qwen-7b
wait_for 30 replicas_are llama-8b 1
restart_operator
replan_barrier shared-gpu
not_reverted qwen-7b llama-8b Loading
expect_eq "loading target's replicas" 1 "$(member_replicas llama-8b)"
expect_eq "stopped incumbent's replicas" 0 "$(member_replicas qwen-7b)"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/load-ms- >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_sole_resident shared-gpu llama-8b

log "(3) killed right after the request was recorded, three times"
# The target loads slowly until the restarted operator has started it, so a Pod the member
# started on its own before the dead operator could hold it back (see docs/guarantees.md: between a request
# and the hold) never reaches Running beside the incumbent.
from=llama-8b
for to in qwen-7b llama-8b qwen-7b; do
	kubectl_admin annotate isvc "$to" sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
	kubectl_admin scale isvc "$to" --replicas=1 >/dev/null
	wait_for 30 pending_is shared-gpu "$to"
	restart_operator
	wait_for 60 swapping_is True/Loading
	expect_eq "resident/pending while $to loads" "$from/$to" \
		"$(pool_field shared-gpu residentMember/pendingMember)"
	no_live_pods "$from" || fail "$from still has Pods while $to loads: $(live_pods "$from")"
	kubectl_admin annotate isvc "$to" sim.modelpool.test/load-ms- >/dev/null
	wait_for 90 pool_is shared-gpu Ready "$to"
	expect_sole_resident shared-gpu "$to"
	from=$to
done
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
wait_for 30 condition_is shared-gpu Swapping False/NotSwapping

stop_operator
stop_slot_check

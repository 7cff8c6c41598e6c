# A target that cannot become Ready is reported, not waited on silently (DESIGN.md rule 7): a target
# whose Pod fails (simulator annotation fail) makes the pool Degraded with SlotAllocated
# False/TargetFailed and a Warning Event that `kubectl describe modelpool` shows. The user can go back
# to the previous member, or fix the target and the pool resumes by itself. A target stuck in
# WaitingForGPU longer than swapBudget is reported the same way. slot-check watches throughout.
operator_up --samples --slot-check --load-ms 300

wait_for 90 pool_is shared-gpu Ready llama-8b

# expect_target_failed REASON TARGET WARNINGS: the pool reports the stuck target and does not sit in
# Swapping; one more Warning REASON Event than the WARNINGS there were before, and only one.
expect_target_failed() {
	wait_for 60 condition_is shared-gpu SlotAllocated "False/$1"
	expect_eq "phase with a stuck target" Degraded "$(pool_field shared-gpu phase)"
	expect_eq "pendingMember" "$2" "$(pool_field shared-gpu pendingMember)"
	grep -q "target $2 is" <<<"$(condition_message shared-gpu SlotAllocated)" ||
		fail "SlotAllocated does not name $2: $(condition_message shared-gpu SlotAllocated)"
	wait_for 30 events_more shared-gpu "Warning/$1" "$3"
	kubectl_admin describe modelpool shared-gpu | tee "$MP_STATE_DIR/describe.out" |
		grep -Eq "Warning +$1 .*target $2 is" ||
		fail "kubectl describe modelpool shows no Warning $1 event:"$'\n'"$(cat "$MP_STATE_DIR/describe.out")"
	# Still reported after another plan: no flapping back to Swapping.
	replan_barrier shared-gpu
	expect_eq "phase/SlotAllocated after a re-plan" "Degraded/False/$1" \
		"$(pool_field shared-gpu phase)/$(pool_condition shared-gpu SlotAllocated)"
	expect_eq "resident replicas" 0 "$(member_replicas llama-8b)"
	expect_eq "Warning $1 Events" $(($3 + 1)) "$(event_count shared-gpu "Warning/$1")"
}

log "qwen-7b is requested but its Pod fails: Degraded, TargetFailed, a Warning Event"
kubectl_admin annotate isvc qwen-7b sim.modelpool.test/fail=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
expect_target_failed TargetFailed qwen-7b 0
grep -qw "qwen-7b:Failed:false" <<<"$(pool_members shared-gpu)" || fail "members[] does not show qwen-7b Failed: $(pool_members shared-gpu)"
no_live_pods llama-8b || fail "llama-8b still has Pods: $(live_pods llama-8b)"

log "the user goes back to llama-8b: the failed target is stopped and llama-8b is resident again"
kubectl_admin scale isvc llama-8b --replicas=1 >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_sole_resident shared-gpu llama-8b
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
wait_for 30 condition_is shared-gpu Swapping False/NotSwapping

log "qwen-7b again, still failing; then the member is fixed and the pool resumes by itself"
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 30 pending_is shared-gpu qwen-7b
expect_target_failed TargetFailed qwen-7b 1
kubectl_admin annotate isvc qwen-7b sim.modelpool.test/fail- >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_sole_resident shared-gpu qwen-7b
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
wait_for 30 events_more shared-gpu Normal/SwapCompleted 0

log "a target WaitingForGPU longer than swapBudget is reported too, and resumes once it gets the GPU"
kubectl_admin patch modelpool shared-gpu --type=merge -p '{"spec":{"swapBudget":"1s"}}' >/dev/null
kubectl_admin annotate isvc llama-8b sim.modelpool.test/waiting-for-gpu=true --overwrite >/dev/null
kubectl_admin scale isvc llama-8b --replicas=1 >/dev/null
wait_for 30 pending_is shared-gpu llama-8b
wait_for 60 condition_is shared-gpu SlotAllocated False/TargetWaitingForGPU
expect_eq "phase" Degraded "$(pool_field shared-gpu phase)"
wait_for 30 events_more shared-gpu Warning/TargetWaitingForGPU 0
no_live_pods qwen-7b || fail "qwen-7b still has Pods: $(live_pods qwen-7b)"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/waiting-for-gpu- >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_sole_resident shared-gpu llama-8b
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident

stop_operator
stop_slot_check

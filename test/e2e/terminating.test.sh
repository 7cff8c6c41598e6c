# A Pod still terminating holds the GPU: the simulator puts a finalizer on every Pod and holds the
# incumbent's in deletion (terminate-ms) while its InferenceService already reports Stopped
# (as a real member does once no Pod is ready). The target stays at 0 replicas, re-planned or not, until
# that Pod is gone; then the swap completes. slot-check watches the whole test.
operator_up --samples --slot-check --finalizer --load-ms 1000

log "the pool warms llama-8b"
wait_for 90 pool_is shared-gpu Ready llama-8b

log "llama-8b's Pod will stay terminating, with the member already Stopped; qwen-7b is requested"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/terminate-ms=600000 --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 30 pending_is shared-gpu qwen-7b
wait_for 30 replicas_are llama-8b 0

# pod_terminating MEMBER: the member has a Pod with a deletionTimestamp.
pod_terminating() {
	local got
	got=$(kubectl_admin get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{" "}{end}')
	echo "$got"
	grep -Eq '=[^ ]+' <<<"$got"
}
wait_for 30 pod_terminating llama-8b
wait_for 30 member_phase_is llama-8b Stopped
wait_for 30 replicas_are qwen-7b 0
wait_for 30 no_live_pods qwen-7b

# expect_held: the state while the incumbent's Pod terminates.
expect_held() {
	expect_eq "target replicas while the incumbent's Pod terminates ($1)" 0 "$(member_replicas qwen-7b)"
	no_live_pods qwen-7b || fail "qwen-7b has live Pods beside a terminating llama-8b ($1): $(live_pods qwen-7b)"
	[ -n "$(live_pods llama-8b)" ] || fail "llama-8b's Pod is gone already ($1): the test held nothing"
	expect_eq "phase/pending ($1)" Swapping/qwen-7b "$(pool_field shared-gpu phase/pendingMember)"
	expect_eq "Swapping condition ($1)" True/Draining "$(pool_condition shared-gpu Swapping)"
}
expect_held "after the scale-down"
log "re-planned twice (spec changes) while the Pod terminates: still held"
replan_barrier shared-gpu
expect_held "after a re-plan"
# An event about the incumbent itself re-plans too (an annotation change updates the member).
kubectl_admin annotate isvc llama-8b example.test/poke=1 --overwrite >/dev/null
replan_barrier shared-gpu
expect_held "after a member update and a re-plan"

log "the Pod is released (terminate-ms lowered): gone, then qwen-7b starts and becomes resident"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/terminate-ms=0 --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_sole_resident shared-gpu qwen-7b
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
wait_for 30 condition_is shared-gpu Swapping False/NotSwapping

# The simulator prints one line per change, in order: llama-8b's Pod was gone before qwen-7b had a
# running one (ip= is set from Running until Gone), and never did two Pods hold the GPU at once.
sim_lines=$(grep -E '^sim default/(llama-8b|qwen-7b) pod=' "$MP_STATE_DIR/sim.log")
gone=$(grep -n '^sim default/llama-8b pod=[^ ]* state=Gone ' <<<"$sim_lines" | tail -n 1 | cut -d: -f1)
up=$(grep -n '^sim default/qwen-7b pod=[^ ]* state=Running ip=[0-9]' <<<"$sim_lines" | head -n 1 | cut -d: -f1)
[ -n "$gone" ] && [ -n "$up" ] && [ "$gone" -lt "$up" ] ||
	fail "qwen-7b ran before llama-8b's Pod was gone:"$'\n'"$sim_lines"
sim_overlap default llama-8b qwen-7b || fail "two Pods held the GPU at once:"$'\n'"$sim_lines"

stop_operator
stop_slot_check

# A swap as a user sees it: the cold sample pool warms its default; a request for the other member
# while the incumbent is busy is recorded (pendingMember) and deferred with SwapDeferred=PodsBusy,
# the incumbent keeps serving and the target is held at 0 replicas; once the incumbent is idle it
# is stopped, its Pod is gone, and only then the target starts and becomes resident. A checker
# watches the whole test for two members holding the slot at once.
install_crds_and_samples
install_operator_rbac
start_slot_check
# A Pod loads for 2 s: `kubectl scale` starts the target's Pod before the operator can hold it back
# (the race DESIGN.md names; a request through the pool has none), and on a loaded machine the
# operator's reaction can pass a shorter load time, a false alarm of slot-check, not of this test.
start_sim --load-ms 2000
# No router registers here: with no router Lease nothing says routers stopped, so every swap waits its whole
# drain fence, which this test holds (docs/router.md, "Acknowledged swaps"; e2e.fence-acks the early end).
start_operator

log "a cold pool warms its default member"
wait_for 90 pool_is shared-gpu Ready llama-8b
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
expect_eq "pending member" "" "$(pool_field shared-gpu pendingMember)"
expect_eq "members[]" "llama-8b:Ready:true qwen-7b:Stopped:false" \
	"$(pool_members shared-gpu)"
expect_eq "observedGeneration" "$(pool_get shared-gpu '{.metadata.generation}')" \
	"$(pool_field shared-gpu observedGeneration)"
kubectl_admin get modelpools | tee /dev/stderr | grep -Eq '^shared-gpu +sticky +llama-8b +Ready' ||
	fail "kubectl get modelpools does not show Policy, Resident and Phase"

log "a request for qwen-7b while llama-8b is busy is deferred, never forced"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 60 condition_is shared-gpu SwapDeferred True/PodsBusy
expect_eq "phase while deferred" Swapping "$(pool_field shared-gpu phase)"
expect_eq "pending member" qwen-7b "$(pool_field shared-gpu pendingMember)"
expect_eq "resident while deferred" llama-8b "$(pool_field shared-gpu residentMember)"
expect_eq "incumbent replicas while busy" 1 "$(member_replicas llama-8b)"
wait_for 30 replicas_are qwen-7b 0
[ -n "$(live_pods llama-8b)" ] || fail "the busy incumbent lost its Pod"
kubectl_admin describe modelpool shared-gpu | grep_all SwapDeferred ||
	fail "no SwapDeferred event in kubectl describe"

log "once llama-8b is idle the swap completes: llama-8b stopped and gone, then qwen-7b resident"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=false --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_eq "incumbent replicas" 0 "$(member_replicas llama-8b)"
expect_eq "target replicas" 1 "$(member_replicas qwen-7b)"
no_live_pods llama-8b || fail "llama-8b still has Pods after the swap: $(live_pods llama-8b)"
expect_eq "pending member after the swap" "" "$(pool_field shared-gpu pendingMember)"
wait_for 30 condition_is shared-gpu SwapDeferred False/NotDeferred
wait_for 30 condition_is shared-gpu SlotAllocated True/Resident
# The drain fence: the operator probes (and so unloads) the incumbent no sooner than --drain-fence (2s)
# after it began the swap, so a router's request forwarded on a read from before the swap has reached the
# Pod. fence_gap FROM TARGET INCUMBENT: from the operator's log after line FROM, the ms from the status
# write that set pendingMember TARGET to the first probe answer for INCUMBENT (the swap is seen when the
# write's watch event arrives, after that log line).
fence_gap() {
	tail -n +"$(($1 + 1))" "$MP_STATE_DIR/operator.log" | python3 -c '
import datetime, sys
def ms(line):
    t = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
begun = None
for line in sys.stdin:
    if begun is None and " status " in line and "pending=" + sys.argv[1] in line:
        begun = ms(line)
    elif begun is not None and " probed " in line and "/" + sys.argv[2] + "-" in line:
        print(int(ms(line) - begun))
        break
' "$2" "$3"
}
expect_fence() { # FROM TARGET INCUMBENT
	local gap
	gap=$(fence_gap "$@")
	log "first probe of $3 $gap ms after the swap to $2 began"
	[ -n "$gap" ] && [ "$gap" -ge 1950 ] || fail "$3 was probed ${gap:-never} ms after the swap to $2 began, inside the 2 s drain fence"
}
expect_fence 0 qwen-7b llama-8b
events=$(kubectl_admin get events --field-selector involvedObject.name=shared-gpu -o 'jsonpath={range .items[*]}{.reason}{" "}{end}')
for r in SwapStarted SwapDeferred SwapCompleted; do
	grep -qw "$r" <<<"$events" || fail "no $r event on the pool (events: $events)"
done

log "sticky: a spec change re-plans the warm pool, and it does not go back to its default"
kubectl_admin patch modelpool shared-gpu --type=merge -p '{"spec":{"swapBudget":"120s"}}' >/dev/null
wait_for 30 observed_current shared-gpu
expect_eq "resident after a spec change" qwen-7b "$(pool_field shared-gpu residentMember)"
expect_eq "default member's replicas" 0 "$(member_replicas llama-8b)"

log "a second swap, back to llama-8b: the fence counts from this swap, not the last"
from=$(wc -l <"$MP_STATE_DIR/operator.log")
kubectl_admin scale isvc llama-8b --replicas=1 >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_fence "$from" llama-8b qwen-7b

stop_operator
stop_slot_check

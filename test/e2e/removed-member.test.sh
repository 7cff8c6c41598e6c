# Issue 26 item 1: a member the pool is releasing (busy) is removed from spec.members mid-swap. Its
# Pod still holds the GPU: the target is not started beside it, the pool keeps it recorded
# (status.members, releasing) and still drains it, and once it is idle it is scaled to 0 and its Pod
# is gone; only then does the target start, and the removed member is forgotten.
# Setup: the pool (m-a resident) loses its operator; meanwhile m-x is scaled to 1 and serves, busy,
# and m-y is requested through the pool. Back, the operator takes m-y as the newest request and
# releases m-x (superseded): m-x is releasing, not resident, with a busy running Pod.
# Two Pods held the slot while the operator was down, so slot-check is not used; the simulator's
# log (one line per Pod change, in order) is the audit: m-y never ran while m-x's Pod lived.
ns=removed
operator_up --finalizer --load-ms 300

pool_ready "$ns" pool m-a m-a m-x m-y
expect_sole_resident pool m-a "$ns"


log "the operator stops; m-x serves busy beside m-a; m-y is requested through the pool"
stop_operator
kubectl_admin -n "$ns" annotate isvc m-x sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc/m-x --replicas=1 >/dev/null
wait_for 60 member_phase_is m-x Ready "$ns"
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=m-y --overwrite >/dev/null
busy_pod=$(live_pods m-x "$ns")

log "the operator is back: swapping to m-y, m-x released but busy"
start_operator
wait_for 60 pending_is pool m-y "$ns"
# releasing_is MEMBER: status.members lists MEMBER with releasing true.
releasing_is() {
	local got
	got=$(pool_get pool "{.status.members[?(@.name==\"$1\")].releasing}" "$ns")
	echo "releasing($1)=$got"
	[ "$got" == "true" ]
}
wait_for 30 releasing_is m-x
wait_for 60 condition_is pool SwapDeferred True/PodsBusy "$ns"
wait_for 60 replicas_are m-a 0 "$ns"
wait_for 60 no_live_pods m-a "$ns"

log "m-x is removed from spec.members while its Pod is busy"
kubectl_admin -n "$ns" patch modelpool pool --type=json \
	-p '[{"op":"remove","path":"/spec/members/1"}]' >/dev/null
expect_eq "spec.members after the edit" "m-a m-y" \
	"$(pool_get pool '{.spec.members[*].inferenceServiceRef.name}' "$ns")"
wait_for 60 observed_current pool "$ns"

# expect_held: m-y not started, m-x's busy Pod still there and still recorded by the pool.
expect_held() {
	expect_eq "m-y's replicas while m-x's Pod lives ($1)" 0 "$(member_replicas m-y "$ns")"
	no_live_pods m-y "$ns" || fail "m-y has live Pods beside m-x's ($1): $(live_pods m-y "$ns")"
	expect_eq "m-x's Pod ($1)" "$busy_pod" "$(live_pods m-x "$ns")"
	expect_eq "phase/pending ($1)" Swapping/m-y "$(pool_field pool phase/pendingMember "$ns")"
	releasing_is m-x >/dev/null || fail "m-x is no longer recorded as releasing ($1): $(pool_members pool "$ns")"
}
expect_held "after the removal"
log "re-planned twice while m-x stays busy: still held"
replan_barrier pool "$ns"
expect_held "after a re-plan"
kubectl_admin -n "$ns" annotate isvc m-x example.test/poke=1 --overwrite >/dev/null
replan_barrier pool "$ns"
expect_held "after an update of m-x and a re-plan"
condition_message pool Swapping "$ns" | grep_all "m-x (removed from spec.members)" ||
	fail "the Swapping condition does not say the removed member holds the GPU: $(condition_message pool Swapping "$ns")"

log "m-x goes idle: still drained by the pool, scaled to 0; then m-y starts and m-x is forgotten"
kubectl_admin -n "$ns" annotate isvc m-x sim.modelpool.test/busy=false --overwrite >/dev/null
wait_for 60 replicas_are m-x 0 "$ns"
wait_for 90 pool_is pool Ready m-y "$ns"
expect_sole_resident pool m-y "$ns"
no_live_pods m-x "$ns" || fail "m-x still has live Pods: $(live_pods m-x "$ns")"
expect_eq "status.members once m-x is gone" "m-a:Stopped:false m-y:Ready:true" "$(pool_members pool "$ns")"

# The simulator's log: m-x's Pod was gone before m-y had a running one, never two at once, and
# m-x was never deleted busy.
sim_overlap "$ns" m-x m-y || fail "m-y ran beside m-x: $(grep -E "^sim $ns/(m-x|m-y) pod=" "$MP_STATE_DIR/sim.log")"
[ -z "$(sim_deleted_busy "$ns" m-x)" ] || fail "m-x was unloaded busy: $(sim_deleted_busy "$ns" m-x)"
stop_operator

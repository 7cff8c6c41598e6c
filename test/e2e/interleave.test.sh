# Fast interleaved activations over four members, with slot-check watching the whole test: never
# two Pods holding the slot, never two members Ready. Pods linger terminating (finalizer,
# terminate-ms) longer than a new Pod takes to load, so a member started too early would run beside
# one still going, and requests land in every stage of a swap: while the incumbent drains, while
# its Pods go, while the target loads, and back to a member that was just stopped.
#  1. Paced: each request is made as soon as it means something and the next follows as soon as
#     the pool has recorded it (milliseconds; no swap waits to finish). The last requested member
#     ends resident.
#  2. A burst of `kubectl scale` with no wait at all: of requests the operator sees together one
#     wins and the others are released (docs/guarantees.md: which request wins), a newer one supersedes, so which one ends
#     resident is not asserted, only that exactly one does, and the pool is Ready. One more paced
#     request then ends resident.
#  3. Paced again while the resident is busy: it is never unloaded, every request is held at 0
#     replicas, and once it is idle the last one ends resident.
ns=interleave
install_crds
install_operator_rbac
start_slot_check
# load-ms leaves the operator ample time to hold back a member its user just scaled up (docs/guarantees.md:
# between a request and the hold its own controller may start a Pod, at once, as a ReplicaSet does).
start_sim --finalizer --terminate-ms 1500 --load-ms 1000
start_operator

create_members "$ns" m-a m-b m-c m-d
create_pool "$ns" pool m-a m-a m-b m-c m-d
wait_for 90 pool_is pool Ready m-a "$ns"
expect_sole_resident pool m-a "$ns"

# requestable X: scaling X to 1 is a request now, or X already is the target or the settled
# resident. A member at 1 is not requested again by scaling it to 1; a member at 0 always can be:
# the pool releases members only while they are up (docs/guarantees.md: which request wins).
requestable() {
	local got res pend reps
	got=$(pool_field pool residentMember/pendingMember "$ns")
	IFS=/ read -r res pend <<<"$got"
	reps=$(member_replicas "$1" "$ns")
	echo "resident=$res pending=$pend $1.replicas=$reps"
	[ "$pend" == "$1" ] && return 0
	[ "$res" == "$1" ] && [ -z "$pend" ] && return 0
	[ "$reps" == 0 ]
}
# recorded X: the pool has taken the request for X (pending, or already resident).
recorded() {
	local got
	got=$(pool_field pool residentMember/pendingMember "$ns")
	echo "$got"
	[ "${got#*/}" == "$1" ] || [ "$got" == "$1/" ]
}
request() {
	wait_for 60 requestable "$1"
	kubectl_admin -n "$ns" scale isvc "$1" --replicas=1 >/dev/null
	wait_for 60 recorded "$1"
}
# settled: the pool is Ready, nothing pending, and only the resident is at 1 replica.
settled() {
	local got up
	got=$(pool_field pool phase/residentMember/pendingMember "$ns")
	up=$(kubectl_admin -n "$ns" get isvc -o 'jsonpath={range .items[?(@.spec.replicas>0)]}{.metadata.name}{" "}{end}')
	echo "$got up: $up"
	[ "$got" == "Ready/${up% }/" ]
}

log "paced: B A C B D A C D B A, each as soon as the last one is recorded"
seq=""
for x in b a c b d a c d b a; do
	request "m-$x"
	seq+="$x"
done
log "requested $seq"
wait_for 90 pool_is pool Ready m-a "$ns"
wait_for 30 settled
expect_sole_resident pool m-a "$ns"

log "burst: C B D A C B D with no wait in between"
for x in c b d a c b d; do
	kubectl_admin -n "$ns" scale isvc "m-$x" --replicas=1 >/dev/null
done
wait_for 120 settled
winner=$(pool_field pool residentMember "$ns")
log "after the burst $winner is resident"
expect_sole_resident pool "$winner" "$ns"

log "one more request after the burst: it ends resident"
last=m-c
[ "$winner" != m-c ] || last=m-b
request "$last"
wait_for 90 pool_is pool Ready "$last" "$ns"
wait_for 30 settled
expect_sole_resident pool "$last" "$ns"

log "requests interleaved while the resident $last is busy: it is never unloaded busy, the last one wins"
kubectl_admin -n "$ns" annotate isvc "$last" sim.modelpool.test/busy=true --overwrite >/dev/null
others=$(printf '%s\n' m-a m-d m-b m-c | grep -vx "$last" | paste -sd ' ' -)
for x in $others; do
	request "$x"
done
final=${others##* }
wait_for 60 condition_is pool SwapDeferred True/PodsBusy "$ns"
replan_barrier pool "$ns"
expect_eq "pending while the resident is busy" "$final" "$(pool_field pool pendingMember "$ns")"
expect_eq "busy resident's replicas" 1 "$(member_replicas "$last" "$ns")"
[ -n "$(live_pods "$last" "$ns")" ] || fail "the busy resident $last lost its Pod"
for x in $others; do
	expect_eq "replicas of $x, requested while $last is busy" 0 "$(member_replicas "$x" "$ns")"
done
kubectl_admin -n "$ns" annotate isvc "$last" sim.modelpool.test/busy- >/dev/null
wait_for 90 pool_is pool Ready "$final" "$ns"
wait_for 30 settled
expect_sole_resident pool "$final" "$ns"
expect_eq "conditions" \
	"MembersValid=True/Valid SlotAllocated=True/Resident SwapDeferred=False/NotDeferred Swapping=False/NotSwapping" \
	"$(pool_conditions pool "$ns")"

stop_operator
stop_slot_check

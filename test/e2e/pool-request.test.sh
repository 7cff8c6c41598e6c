# Issue 19: a request through the pool, the race-free way to switch by hand (and the router's):
# `kubectl annotate modelpool P modelpool-operator.dev/request=B`. The operator persists the swap,
# removes the annotation, drains the resident, and only then raises B's replicas, so B's member
# controller never starts a Pod beside the resident (one Pod of B is ever created, where
# `kubectl scale` races the operator). A request naming no member is refused with a Warning and
# removed. slot-check watches throughout.
ns=pool-request
operator_up --slot-check --finalizer --terminate-ms 300 --load-ms 300

pool_ready "$ns" pool m-a m-a m-b

annotation() { pool_get pool '{.metadata.annotations.modelpool-operator\.dev/request}' "$ns"; }
no_annotation() {
	local got
	got=$(annotation)
	echo "request annotation: '$got'"
	[ -z "$got" ]
}
# created MEMBER: how many Pods the simulator created for the member.
created() { grep -c "\"created pod\" member=$ns/$1 " "$MP_STATE_DIR/sim.log" || true; }

log "request m-b through the pool while m-a serves"
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=m-b >/dev/null
wait_for 60 pool_is pool Ready m-b "$ns"
wait_for 30 no_annotation
expect_sole_resident pool m-b "$ns"
expect_eq "Pods created for m-b" 1 "$(created m-b)"
sim_overlap "$ns" m-a m-b || fail "two Pods held the GPU at once (the simulator's log)"

log "a request naming no member: refused with a Warning, removed, nothing changes"
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=no-such >/dev/null
wait_for 30 no_annotation
wait_for 30 events_more pool Warning/RequestIgnored 0 "$ns"
replan_barrier pool "$ns"
expect_sole_resident pool m-b "$ns"

log "back to m-a through the pool; a request for the resident itself is only removed"
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=m-a >/dev/null
wait_for 60 pool_is pool Ready m-a "$ns"
wait_for 30 no_annotation
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=m-a >/dev/null
wait_for 30 no_annotation
replan_barrier pool "$ns"
expect_sole_resident pool m-a "$ns"
expect_eq "SwapStarted Events (warm-up, to m-b, back to m-a)" 3 "$(event_count pool Normal/SwapStarted "$ns")"

stop_operator
stop_slot_check

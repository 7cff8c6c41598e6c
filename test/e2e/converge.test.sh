# Issue 12 rule 3: two members requested while the operator was down converge to one. The pool
# (m-a resident) loses its operator; meanwhile users scale m-b and m-c to 1 and both start serving
# beside m-a, and m-b gets a request in flight (busy). When the operator is back, the rule is: a
# requested member that already has a running Pod wins, the first such in spec.members order (else
# the first requested in that order); the others are held at 0 after an idle probe and an Event
# RequestSuperseded names them. So m-b (busy, first in order) wins and is never unloaded, m-c is held
# at 0, m-a is drained, and exactly one member keeps Pods. Two Pods held the slot while the operator
# was down, so slot-check watches only from the point the operator has converged (a last swap).
ns=converge
operator_up --finalizer --load-ms 300

pool_ready "$ns" pool m-a m-a m-b m-c
expect_sole_resident pool m-a "$ns"

# members_with_pods: the members that have live Pods, space-separated, in spec order.
members_with_pods() {
	local m out=""
	for m in m-a m-b m-c; do
		[ -z "$(live_pods "$m" "$ns")" ] || out+="$m "
	done
	echo "${out% }"
}
converged_to() {
	local got
	got="$(members_with_pods)|$(pool_field pool phase/residentMember/pendingMember "$ns")"
	echo "$got"
	[ "$got" == "$1|Ready/$1/" ]
}

log "the operator stops; m-b and m-c are scaled to 1 and serve beside m-a, m-b busy"
stop_operator
kubectl_admin -n "$ns" annotate isvc m-b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc/m-b isvc/m-c --replicas=1 >/dev/null
wait_for 60 member_phase_is m-b Ready "$ns"
wait_for 60 member_phase_is m-c Ready "$ns"
expect_eq "members with Pods while the operator is down" "m-a m-b m-c" "$(members_with_pods)"
busy_pod=$(live_pods m-b "$ns")

log "the operator is back: m-b (busy, running, first in spec order) wins; m-c held, m-a drained"
start_operator
wait_for 60 converged_to m-b
expect_sole_resident pool m-b "$ns"
expect_eq "m-b's Pod (busy throughout)" "$busy_pod" "$(live_pods m-b "$ns")"
# Of either type: the rule names the reason, not whether it is a warning.
superseded() {
	local got
	got=$(pool_events pool "$ns" | grep -c '/RequestSuperseded$' || true)
	echo "$got RequestSuperseded events"
	[ "$got" -gt 0 ]
}
wait_for 30 superseded
event_messages pool RequestSuperseded "$ns" | grep_all -w m-c || fail "no RequestSuperseded Event names m-c"
replan_barrier pool "$ns"
expect_sole_resident pool m-b "$ns"
deleted=$(sim_deleted_busy "$ns" m-b)
[ -z "$deleted" ] || fail "a Pod of the busy m-b was deleted while busy:"$'\n'"$deleted"

log "converged: from here on no two Pods hold the slot; a last swap to m-c once m-b is idle"
start_slot_check
kubectl_admin -n "$ns" annotate isvc m-b sim.modelpool.test/busy- >/dev/null
kubectl_admin -n "$ns" scale isvc m-c --replicas=1 >/dev/null
wait_for 60 converged_to m-c
expect_sole_resident pool m-c "$ns"
deleted=$(sim_deleted_busy "$ns" m-b)
[ -z "$deleted" ] || fail "a Pod of the busy m-b was deleted while busy:"$'\n'"$deleted"

stop_operator
stop_slot_check

# Issue 26 item 6: a member scaled up beside the resident (kubectl scale) is held back at once. The
# resident is busy (its idle probe says so) and the requested member's server is still loading
# (status Progressing, its idle probe failing, as a loading llama.cpp's /slots does): the operator
# records the request (pendingMember) and scales the member back to 0 before any probe of the
# resident answers; before the fix it waited for the drain fence and a probe of the loading member,
# which fails, and the member stayed at 1 beside the resident (seen failing: m-a's probe answered
# first and m-b stayed up). Then the swap goes on as usual.
ns=hold-back
operator_up --load-ms 50

pool_ready "$ns" pool m-a m-a m-b

kubectl_admin -n "$ns" annotate --overwrite isvc m-a sim.modelpool.test/busy=true >/dev/null
kubectl_admin -n "$ns" annotate --overwrite isvc m-b sim.modelpool.test/loading=true \
	sim.modelpool.test/probe=error >/dev/null
from=$(wc -l <"$MP_STATE_DIR/operator.log")
log "kubectl scale of m-b beside the busy m-a: held back before any probe of m-a answers"
# The operator is paused until m-b's server runs (loading), so the first plan that sees the request
# sees a running Pod: what a real member looks like by the time a slower operator gets to it.
kill -STOP "$MP_OPERATOR_PID"
kubectl_admin -n "$ns" scale isvc m-b --replicas=1 >/dev/null
wait_for 30 member_phase_is m-b Progressing "$ns"
kill -CONT "$MP_OPERATOR_PID"
resident_probed() { tail -n +"$from" "$MP_STATE_DIR/operator.log" | grep -q " probed pool=$ns/pool pod=$ns/m-a-"; }
held_or_probed() { replicas_are m-b 0 "$ns" || resident_probed; }
wait_for 60 held_or_probed
wait_for 30 pending_is pool m-b "$ns"
# The order, from the operator's log: the scale of m-b to 0, then the first answer of m-a's probe.
order=$(tail -n +"$from" "$MP_STATE_DIR/operator.log" |
	grep -E " scale pool=$ns/pool member=m-b replicas=0 | probed pool=$ns/pool pod=$ns/m-a-" |
	head -n 1)
case "$order" in
*" scale pool=$ns/pool member=m-b replicas=0 "*) ;;
*) fail "m-a's probe answered before m-b was held back (first: ${order:-nothing})" ;;
esac
grep -q "reason=HeldBack" <<<"$order" || fail "m-b was not held back unprobed: $order"
wait_for 30 replicas_are m-b 0 "$ns"
expect_eq "resident while m-a is busy" m-a "$(pool_field pool residentMember "$ns")"
expect_eq "m-a still up" 1 "$(member_replicas m-a "$ns")"

log "m-a idle: the swap goes on as usual"
kubectl_admin -n "$ns" annotate --overwrite isvc m-b sim.modelpool.test/loading- sim.modelpool.test/probe- >/dev/null
kubectl_admin -n "$ns" annotate --overwrite isvc m-a sim.modelpool.test/busy=false >/dev/null
wait_for 90 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"

# Issue 26 item 2: a target that never comes up is reported, not waited on in silence. m-b's Pods stay
# Pending (the simulator's load delay set to 10 minutes; its phase stays Creating), the pool's
# swapBudget is 5s. Once m-b has been started for longer than that, the pool is Degraded with
# SlotAllocated and TargetReady False/TargetNotReady naming m-b, its phase and its Pod's state, one
# Warning Event TargetNotReady (not one per reconcile), and the router answers 503 with that message.
# When the Pod finally runs, the swap completes by itself. slot-check watches throughout.
ns=notready
router_setup --terminate-ms 200 --load-ms 200

MP_POOL_BUDGET=5s pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns"

log "m-b's Pods will stay Pending; m-b is requested through the pool"
kubectl_admin -n "$ns" annotate isvc m-b sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/request=m-b --overwrite >/dev/null
wait_for 60 condition_is pool Swapping True/Loading "$ns"
expect_eq "TargetReady while m-b loads" False/Loading "$(pool_condition pool TargetReady "$ns")"
wait_for 60 condition_is pool SlotAllocated False/TargetNotReady "$ns"
expect_eq "phase/resident/pending" Degraded/m-a/m-b "$(pool_field pool phase/residentMember/pendingMember "$ns")"
expect_eq "TargetReady past the budget" False/TargetNotReady "$(pool_condition pool TargetReady "$ns")"
expect_condition_message pool SlotAllocated "$ns" "SlotAllocated's message does not say what m-b waits for" \
	'*target m-b is not Ready within swapBudget (5000 ms) of its start: phase Creating; pod m-b-* Pending*'
wait_for 30 events_more pool Warning/TargetNotReady 0 "$ns"

log "re-planned (the same budget, spelled otherwise; m-b updated): no second Event"
kubectl_admin -n "$ns" patch modelpool pool --type=merge -p '{"spec":{"swapBudget":"5000ms"}}' >/dev/null
wait_for 60 observed_current pool "$ns"
kubectl_admin -n "$ns" annotate isvc m-b example.test/poke=1 --overwrite >/dev/null
kubectl_admin -n "$ns" patch modelpool pool --type=merge -p '{"spec":{"swapBudget":"5s"}}' >/dev/null
wait_for 60 observed_current pool "$ns"
expect_eq "TargetNotReady Events" 1 "$(event_count pool Warning/TargetNotReady "$ns")"
expect_eq "SlotAllocated after re-plans" False/TargetNotReady "$(pool_condition pool SlotAllocated "$ns")"

log "the router answers 503 with the condition's message"
expect_eq "request for m-b" 503 "$(router_chat m-b)"
expect_eq "503 code" pool_unavailable "$(reply_field .error.code)"
expect_like "503 message without what m-b waits for" "$(reply_field .error.message)" \
	'*target m-b is not Ready within swapBudget*Pending*'

log "m-b's Pod runs at last: the swap completes, TargetReady is gone"
kubectl_admin -n "$ns" annotate isvc m-b sim.modelpool.test/load-ms=0 --overwrite >/dev/null
wait_for 60 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"
expect_eq "TargetReady once resident" / "$(pool_condition pool TargetReady "$ns")"
expect_eq "request for m-b once resident" 200 "$(router_chat m-b)"
expect_eq "TargetNotReady Events" 1 "$(event_count pool Warning/TargetNotReady "$ns")"

stop_router
stop_operator
stop_slot_check

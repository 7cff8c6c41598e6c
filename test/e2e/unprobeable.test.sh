# Issue 26 item 3: a resident whose idle probe cannot decide does not wedge the pool. m-a's /slots
# answers 500 (the simulator's probe=error); the pool's swapBudget is 5s. A request for m-b through
# the router starts a swap that cannot drain m-a (fail closed: never unloaded); after swapBudget the
# request is dropped: pendingMember cleared, Swapping False/RequestDropped, SwapDeferred
# True/IdleCheckFailed naming the probe's error, one RequestDropped Warning; m-a serves again through
# the router and requests for m-b get 503 with that message. Once m-a's probe answers again the
# episode ends and m-b can be swapped in. Then the opt-in: with the pool annotated
# modelpool-operator.dev/unprobeable-unload-after, an unprobeable resident is unloaded after that
# long instead. slot-check watches throughout.
ns=unprobeable
router_setup --terminate-ms 200 --load-ms 200

MP_POOL_BUDGET=5s pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns"
expect_eq "m-a before anything" 200 "$(router_chat m-a)"
pod_a=$(live_pods m-a "$ns")

log "m-a's idle probe answers 500; m-b is requested through the router"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/probe=error --overwrite >/dev/null
MP_REPLY=held-b router_chat m-b >"$MP_STATE_DIR/held-b.code" &
held=$!
wait_for 30 pending_is pool m-b "$ns"
wait_for 30 condition_is pool SwapDeferred True/IdleCheckFailed "$ns"

log "after swapBudget the request is dropped and m-a serves again"
wait_for 60 condition_is pool Swapping False/RequestDropped "$ns"
expect_eq "phase/resident/pending" Ready/m-a/ "$(pool_field pool phase/residentMember/pendingMember "$ns")"
expect_eq "SwapDeferred" True/IdleCheckFailed "$(pool_condition pool SwapDeferred "$ns")"
expect_condition_message pool SwapDeferred "$ns" "SwapDeferred's message does not name the probe's error and the drop" \
	'*member m-a: pod m-a-*500*the request for m-b was dropped after swapBudget (5000 ms)*'
wait_for 30 events_more pool Warning/RequestDropped 0 "$ns"
wait "$held" || true
expect_eq "the held request for m-b" 503 "$(cat "$MP_STATE_DIR/held-b.code")"
expect_eq "m-a's replicas" 1 "$(member_replicas m-a "$ns")"
expect_eq "m-a's Pod (never unloaded)" "$pod_a" "$(live_pods m-a "$ns")"
expect_eq "m-b's replicas" 0 "$(member_replicas m-b "$ns")"
expect_eq "m-a through the router again" 200 "$(router_chat m-a)"
expect_eq "m-b while the drop stands" 503 "$(router_chat m-b)"
expect_eq "503 code" pool_unavailable "$(reply_field .error.code)"
expect_like "503 message without the reason" "$(reply_field .error.message)" '*cannot swap away from its resident m-a*500*'
expect_eq "RequestDropped Events" 1 "$(event_count pool Warning/RequestDropped "$ns")"
expect_eq "pending after the 503" "" "$(pool_field pool pendingMember "$ns")"

log "m-a's probe answers again: the episode ends, m-b is swapped in on request"
# A budget the swaps below fit in on a loaded machine (the drop is not under test any more).
kubectl_admin -n "$ns" patch modelpool pool --type=merge -p '{"spec":{"swapBudget":"60s"}}' >/dev/null
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/probe- >/dev/null
wait_for 60 condition_is pool Swapping False/NotSwapping "$ns"
expect_eq "m-b once m-a can be probed" 200 "$(router_chat m-b)"
expect_sole_resident pool m-b "$ns"
expect_eq "RequestDropped Events" 1 "$(event_count pool Warning/RequestDropped "$ns")"

log "opt-in: the pool unloads an unprobeable resident after 2s instead of dropping the request"
kubectl_admin -n "$ns" annotate modelpool pool modelpool-operator.dev/unprobeable-unload-after=2s --overwrite >/dev/null
kubectl_admin -n "$ns" annotate isvc m-b sim.modelpool.test/probe=error --overwrite >/dev/null
expect_eq "m-a requested while m-b cannot be probed" 200 "$(router_chat m-a)"
expect_sole_resident pool m-a "$ns"
grep_all " scale pool=$ns/pool member=m-b replicas=0 reason=UnprobeableUnload" "$MP_STATE_DIR/operator.log" ||
	fail "m-b was not unloaded by the opt-in: $(grep ' scale pool=' "$MP_STATE_DIR/operator.log")"
expect_eq "RequestDropped Events" 1 "$(event_count pool Warning/RequestDropped "$ns")"

stop_router
stop_operator
stop_slot_check

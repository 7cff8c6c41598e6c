# Issue 26 item 3, the router's half: a swap whose resident's idle probe cannot decide has not begun
# to drain it, and the router keeps serving it. m-a's /slots answers 500 (the simulator's
# probe=error); a request for m-b through the router starts a swap that cannot drain m-a. The pool
# shows Swapping True/AwaitingProbe (pendingMember m-b) and requests for m-a are answered 200 while
# it does (before: held until the operator dropped the request after swapBudget, so both models
# answered nothing). Once m-a's probe answers again the drain begins (Swapping True/Draining, the
# drain fence from then) and m-b is swapped in for the request still held. slot-check watches
# throughout.
ns=awaiting-probe
router_setup --terminate-ms 200 --load-ms 200

create_members "$ns" m-a m-b
# A budget far above what this test takes: the drop is not under test here (see unprobeable).
MP_POOL_BUDGET=300s create_pool "$ns" pool m-a m-a m-b
wait_for 60 pool_is pool Ready m-a "$ns"
start_router --home-namespace "$ns"
wait_for 30 router_ready
url="http://127.0.0.1:$(router_port api)"
# post MODEL [OUT]: a chat completion through the router; prints the status code, the body in OUT.
post() {
	curl -sS -o "${2:-$MP_STATE_DIR/body}" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		--data-binary "{\"model\":\"$1\",\"messages\":[]}" "$url/v1/chat/completions"
}
expect_eq "m-a before anything" 200 "$(post m-a)"
pod_a=$(live_pods m-a "$ns")

log "m-a's idle probe answers 500; m-b is requested through the router"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/probe=error --overwrite >/dev/null
post m-b "$MP_STATE_DIR/held-b" >"$MP_STATE_DIR/held-b.code" &
held=$!
wait_for 30 pending_is pool m-b "$ns"
wait_for 60 condition_is pool Swapping True/AwaitingProbe "$ns"
case "$(condition_message pool Swapping "$ns")" in
*"m-a serves until its idle probe can decide"*"500"*) ;;
*) fail "Swapping's message does not say m-a serves and why: $(condition_message pool Swapping "$ns")" ;;
esac

log "the drain has not begun: m-a answers through the router while m-b is pending"
for i in 1 2 3; do
	expect_eq "m-a while the swap awaits its probe ($i)" 200 "$(post m-a)"
done
expect_eq "pending after m-a answered" m-b "$(pool_get pool '{.status.pendingMember}' "$ns")"
expect_eq "Swapping after m-a answered" True/AwaitingProbe "$(pool_condition pool Swapping "$ns")"
expect_eq "m-a's Pod (never unloaded)" "$pod_a" "$(live_pods m-a "$ns")"
expect_eq "m-b's replicas" 0 "$(isvc_get m-b '{.spec.replicas}' "$ns")"
kill -0 "$held" 2>/dev/null || fail "the request for m-b was answered: $(cat "$MP_STATE_DIR/held-b.code")"

log "m-a's probe answers again: the drain begins and m-b is swapped in for the held request"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/probe- >/dev/null
wait "$held" || true
expect_eq "the held request for m-b" 200 "$(cat "$MP_STATE_DIR/held-b.code")"
expect_sole_resident pool m-b "$ns"
expect_eq "RequestDropped Events" 0 "$(event_count pool Warning/RequestDropped "$ns")"

stop_router
stop_operator
stop_slot_check

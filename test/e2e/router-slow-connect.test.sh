# Issue 27: a slow connect waits again. 30 requests held for m-b while the pool swaps it in are released
# at once to a Pod that is slow to take connections: test/tools/slow-accept-proxy.py at m-b's Pod address
# (the simulator does not listen there: probe refuse) relays to a simulated server ("upstream", in no
# pool, answering as m-b), and drops the first SYN of every connect (its one-connection backlog is full),
# so each connect completes only when the router sends its SYN again, a second later: past the drain
# fence's window (--drain-fence 400ms on both: 200 ms after a read of the pool). Such a request sends
# nothing, waits again (no refusal) and goes on a later read over the connection it made (kept for its
# next try). All 30 get 200 from the member, each late connect's request waited again, and the router
# connected in one burst only. Before the fix a late connect counted as a refused one and was closed,
# so each try connected anew, late again while the Pod stayed slow: 502 upstream_error "not sent within
# the drain fence's window (connected too late)" after five. On the old code (a late forward counted as
# a refusal, its connection closed) this test failed in 3 runs of 3: the router connected in 3 to 5
# bursts, no request waited again, and in one run the requests got that 502.
ns=router-slow
install_crds
install_operator_rbac
install_router_rbac
start_slot_check
start_sim --terminate-ms 200 --load-ms 200
# The drain fence as the routers have it: their window, 200 ms, is far under the second a dropped SYN costs.
start_operator --drain-fence 400ms

pool_ready "$ns" pool m-a m-a m-b
create_members "$ns" upstream
kubectl_admin -n "$ns" annotate --overwrite isvc upstream sim.modelpool.test/served-model=m-b >/dev/null
kubectl_admin -n "$ns" patch isvc upstream --type=merge -p '{"spec":{"replicas":1}}' >/dev/null
wait_for 60 member_phase_is upstream Ready "$ns"
# m-b's Pod gets an address but no listener of the simulator's, and m-b stays Progressing (not Ready, so
# not resident: its requests stay held) until the proxy listens there.
kubectl_admin -n "$ns" annotate --overwrite isvc m-b sim.modelpool.test/probe=refuse \
	sim.modelpool.test/loading=true >/dev/null
router_up --home-namespace "$ns" --drain-fence 400ms
url="http://127.0.0.1:$(router_port api)/v1/chat/completions"

held() { router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}"; }
# pod_ip MEMBER: the address of the member's Running Pod (fails while it has none).
pod_ip() {
	local ip
	ip=$(kubectl_admin -n "$ns" get pods -l "app=$1" -o 'jsonpath={.items[?(@.status.phase=="Running")].status.podIP}')
	[ -n "$ip" ] && echo "$ip"
}
waited_again() { grep -c "\"a forward was not sent within the drain fence's window; it waits again\"" "$MP_STATE_DIR/router.log" || true; }

log "30 requests for m-b, held while the pool swaps it in"
clients=()
for i in $(seq 1 30); do
	curl -sS -o "$MP_STATE_DIR/c$i" -w '%{http_code}\n' --max-time 120 -X POST -H 'Content-Type: application/json' \
		--data-binary '{"model":"m-b","messages":[]}' "$url" >"$MP_STATE_DIR/c$i.code" 2>"$MP_STATE_DIR/c$i.err" &
	clients+=($!)
done
wait_eq 60 30 held
wait_for 60 pod_ip m-b
ip=$(pod_ip m-b)
python3 "$MP_SOURCE_DIR/test/tools/slow-accept-proxy.py" --listen "$ip:8080" --upstream "$(pod_ip upstream):8080" \
	>"$MP_STATE_DIR/slow-accept.log" 2>&1 &
proxy=$!
wait_for 10 grep -q '^listening' "$MP_STATE_DIR/slow-accept.log"
expect_eq "held while m-b loads" 30 "$(held)"

log "m-b's server has loaded: the 30 go at once to a Pod that takes every connection late"
kubectl_admin -n "$ns" annotate --overwrite isvc m-b sim.modelpool.test/loading- >/dev/null
wait "${clients[@]}" || true # each code is checked below
log "proxy: $(tr '\n' ' ' <"$MP_STATE_DIR/slow-accept.log")"
log "forwards not sent within the fence's window, waited again: $(waited_again)"
for i in $(seq 1 30); do
	[ "$(cat "$MP_STATE_DIR/c$i.code")" = 200 ] ||
		fail "request $i: $(cat "$MP_STATE_DIR/c$i.code") $(cat "$MP_STATE_DIR/c$i" "$MP_STATE_DIR/c$i.err")"
	expect_eq "request $i answered by" m-b "$(reply_field .model "$MP_STATE_DIR/c$i")"
done
# Every connect the proxy made late (its SYN dropped: done a second later, well past the window) waited
# again, and its connection carried the next try: the router connected in one burst only.
bursts=$(grep -c '^dropped' "$MP_STATE_DIR/slow-accept.log" || true)
expect_eq "bursts of connects the proxy made late (the late connections carried the next tries)" 1 "$bursts"
late=$(awk '$1 == "dropped" {print $2; exit}' "$MP_STATE_DIR/slow-accept.log")
[ "$(waited_again)" -ge "$late" ] || fail "$late connects were late, $(waited_again) forwards waited again"
! grep_all '"upstream failed"' "$MP_STATE_DIR/router.log" || fail "a forward failed: $(grep '"upstream failed"' "$MP_STATE_DIR/router.log")"
expect_eq "requests the member's server answered" 30 "$(curl -fsS "http://$(pod_ip upstream):8080/sim/requests")"
wait_eq 10 0 held
expect_sole_resident pool m-b "$ns"

kill "$proxy"
wait "$proxy" || true
stop_router
stop_operator
stop_slot_check

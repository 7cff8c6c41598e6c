# Issue 27: the resident does not starve behind a request the operator never takes. With the operator
# stopped, a request for m-b is held and the router asks the pool for it (the request annotation);
# nobody takes it (no pendingMember). Requests for the resident m-a that arrive long past
# --resident-grace (1ms here, so every one does) are still answered 200 by m-a meanwhile, the held
# request still waiting. Only once the operator is back and takes the request (Swapping, m-b pending)
# does the swap go on: the held request is answered by m-b.
ns=router-untaken
router_setup --terminate-ms 200 --load-ms 200

MP_POOL_BUDGET=120s pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns" --resident-grace 1ms
url="http://127.0.0.1:$(router_port api)"
requested() { pool_get pool '{.metadata.annotations.modelpool-operator\.dev/request}' "$ns"; }

log "the operator stops; a request for m-b is held and asked for through the pool"
stop_operator
curl -sS --max-time 110 -o "$MP_STATE_DIR/held.body" -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"m-b","messages":[]}' \
	"$url/v1/chat/completions" >"$MP_STATE_DIR/held.code" 2>"$MP_STATE_DIR/held.err" &
client=$!
wait_eq 30 1 router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}"
wait_eq 30 m-b requested
expect_eq "activations" 1 "$(activations)"

log "requests for the resident past the grace: answered by m-a while the request is not taken"
for i in 1 2 3 4 5; do
	expect_eq "m-a ($i)" 200 "$(router_chat m-a --max-time 60)"
	expect_eq "answered by" m-a "$(reply_field .model)"
done
expect_eq "pendingMember (nobody took the request)" "" "$(pool_field pool pendingMember "$ns")"
expect_eq "still held" 1 "$(router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}")"
kill -0 "$client" 2>/dev/null || fail "the held client ended: $(cat "$MP_STATE_DIR/held.code") $(cat "$MP_STATE_DIR/held.err")"

log "the operator is back: it takes the request, m-b is swapped in and answers the held client"
start_operator
wait "$client" || true
expect_eq "held request" 200 "$(cat "$MP_STATE_DIR/held.code")"
expect_eq "answered by" m-b "$(jq -r .model "$MP_STATE_DIR/held.body")"
expect_eq "activations" 1 "$(activations)"
wait_for 30 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"

stop_router
stop_operator
stop_slot_check

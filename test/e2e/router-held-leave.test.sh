# Issue 27: a held client that leaves, its request all sent, by FIN (close) or by RST (SO_LINGER 0). The
# router must see it at once, whether or not it has read the whole body (a chunked body's last chunk and
# the rest of a body after its model stay unread while held) and whatever the HTTP version: its held gauge
# drops, the request is never forwarded, and when its clients were the last waiters before the operator
# began the swap, the request is withdrawn; a client that stays gets its answer. The clients that leave
# are raw sockets (held_client.py), not curl, so the way they leave is exact. (A client that only
# half-closes is httpd's unit tests': test_httpd_intake.)
ns=routerleave
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns"
port=$(router_port api)

held() { router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}"; }
withdrawals() { grep -c '"withdrew the request: its clients left"' "$MP_STATE_DIR/router.log" || true; }
# served MEMBER: the requests the simulator's Pods of MEMBER have counted (every path but this one).
served() {
	local ip
	ip=$(kubectl_admin -n "$ns" get pods -l "app=$1" -o jsonpath='{.items[0].status.podIP}')
	curl -fsS "http://$ip:8080/sim/requests"
}
has_pod() { [ -n "$(live_pods "$1" "$ns")" ]; }
# client NAME MODE VARIANT: held_client.py for m-b in the background, its pid in pid_NAME, its output
# NAME.out; returns once the request is all sent.
client() {
	python3 "$MP_SOURCE_DIR/test/e2e/held_client.py" "$port" m-b "$2" "$3" >"$MP_STATE_DIR/$1.out" 2>&1 &
	printf -v "pid_$1" %s "$!"
	wait_for 10 grep -q '^sent' "$MP_STATE_DIR/$1.out"
}
# leave NAME HELD: the client leaves (SIGUSR1); then the router holds HELD requests.
leave() {
	local pid="pid_$1"
	kill -USR1 "${!pid}"
	wait "${!pid}" || fail "client $1: $(cat "$MP_STATE_DIR/$1.out")"
	log "client $1: $(tr '\n' ' ' <"$MP_STATE_DIR/$1.out")"
	wait_eq 10 "$2" held
}

log "m-a is busy (the operator cannot begin the swap); five clients held for m-b leave"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/busy=true >/dev/null
client fin1 fin plain
client rst1 rst plain
client fin_chunked fin chunked
client rst_big rst big
client fin_http10 fin http10
wait_eq 30 5 held
wait_for 30 pending_is pool m-b "$ns"
leave fin1 4
leave rst1 3
leave fin_chunked 2
leave rst_big 1
expect_eq "withdrawals while one client waits" 0 "$(withdrawals)"
leave fin_http10 0
wait_eq 30 1 withdrawals
wait_for 30 pending_is pool "" "$ns"
expect_eq "departed requests" 5 "$(router_metric "modelpool_router_requests_total{namespace=\"$ns\",pool=\"pool\",member=\"m-b\",code=\"499\"}")"
expect_sole_resident pool m-a "$ns"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/busy=false >/dev/null

log "m-b loads slowly; five clients held for it: one stays, four leave once the swap began"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-b sim.modelpool.test/load-ms=600000 >/dev/null
curl -sS -o "$MP_STATE_DIR/stay" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-b","messages":[]}' --max-time 120 "http://127.0.0.1:$port/v1/chat/completions" \
	>"$MP_STATE_DIR/stay.code" &
stay=$!
wait_eq 30 1 held
client fin_big fin big
client rst_chunked rst chunked
client fin2 fin plain
client rst_http10 rst http10
wait_eq 30 5 held
# The operator has begun: m-a is unloaded, m-b loading (its Pod exists, not Ready).
wait_for 60 replicas_are m-a 0 "$ns"
wait_for 60 has_pod m-b
leave fin_big 4
leave rst_chunked 3
leave fin2 2
leave rst_http10 1
log "m-b finishes loading"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-b sim.modelpool.test/load-ms=200 >/dev/null
wait "$stay" || true
expect_eq "the client that stayed" 200 "$(cat "$MP_STATE_DIR/stay.code")"
expect_eq "answered by" m-b "$(jq -r .model "$MP_STATE_DIR/stay")"
wait_eq 10 0 held
expect_sole_resident pool m-b "$ns"
expect_eq "requests m-b served (the one that stayed, alone)" 1 "$(served m-b)"
expect_eq "withdrawals (the operator had begun: no other)" 1 "$(withdrawals)"

stop_router
stop_operator
stop_slot_check

# A request never reaches another Pod that took a member Pod's freed address. The router's links to the API
# server are frozen (test/tools/freeze-proxy.py: its watches stop, its new requests pass), then the resident
# member's Pod is deleted and a Pod of another namespace's member takes its address (the simulator hands out
# the lowest free address at once, as a CNI may); the router's cache still lists the deleted Pod there, and
# the drain fence's read confirms the member resident. A request for the member must not be answered by the
# other Pod (the simulator's answers name their Pod), and no byte of it may reach that Pod: the router reads
# the Pod before the first request on a new connection, finds it gone, and holds the request (503 at the
# budget). Once the links thaw and the member has a Pod again, it is served by that Pod.
ns=reused
other=reused-other
budget_s=6

router_setup
create_members "$ns" m-a
create_members "$other" m-other
MP_POOL_BUDGET=${budget_s}s create_pool "$ns" pool m-a m-a
wait_for 60 pool_is pool Ready m-a "$ns"

log "the router's links to the API server through a proxy that can freeze them"
python3 "$MP_SOURCE_DIR/test/tools/freeze-proxy.py" --upstream "${MP_APISERVER_URL#https://}" \
	--port-file "$MP_STATE_DIR/freeze.port" >>"$MP_STATE_DIR/freeze.log" 2>&1 &
freeze_pid=$!
wait_for 30 test -s "$MP_STATE_DIR/freeze.port"
sed -e "s#server: .*#server: https://127.0.0.1:$(cat "$MP_STATE_DIR/freeze.port")#" "$MP_ROUTER_KUBECONFIG" \
	>"$MP_STATE_DIR/router-frozen.kubeconfig"
MP_ROUTER_KUBECONFIG=$MP_STATE_DIR/router-frozen.kubeconfig start_router --home-namespace "$ns"
wait_for 60 router_ready
url="http://127.0.0.1:$(router_port api)/v1/chat/completions"

# ask OUT: a request for m-a with a bearer token; the body to OUT, the headers to OUT.h; prints the status.
ask() {
	curl -sS -o "$1" -D "$1.h" -w '%{http_code}' --max-time $((budget_s + 20)) -X POST \
		-H 'Content-Type: application/json' -H 'Authorization: Bearer secret-of-reused' \
		--data-binary '{"model":"m-a","messages":[{"role":"user","content":"hi"}]}' "$url"
}
answered_by() { tr -d '\r' <"$1.h" | awk -F': ' 'tolower($1) == "x-sim-pod" {print $2}'; }

code=$(ask "$MP_STATE_DIR/first.json")
expect_eq "the first request's status" 200 "$code"
pod=$(kubectl_admin -n "$ns" get pods -l app=m-a -o jsonpath='{.items[0].metadata.name}')
ip=$(kubectl_admin -n "$ns" get pods -l app=m-a -o jsonpath='{.items[0].status.podIP}')
expect_eq "the first request answered by" "$pod" "$(answered_by "$MP_STATE_DIR/first.json")"

log "m-a's replacement gets no address for now; the router's links freeze; m-a's Pod $pod ($ip) is deleted"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/load-ms=600000 >/dev/null
kill -USR1 "$freeze_pid"
wait_for 10 grep -q "^frozen" "$MP_STATE_DIR/freeze.log"
kubectl_admin -n "$ns" delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1
log "a Pod of $other/m-other takes $ip"
kubectl_admin -n "$other" scale inferenceservice m-other --replicas=1 >/dev/null
other_ip() { kubectl_admin -n "$other" get pods -l app=m-other -o jsonpath='{.items[0].status.podIP}'; }
other_ready() {
	[ "$(kubectl_admin -n "$other" get pods -l app=m-other \
		-o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 60 other_ready
expect_eq "the address m-other's Pod got" "$ip" "$(other_ip)"
other_pod=$(kubectl_admin -n "$other" get pods -l app=m-other -o jsonpath='{.items[0].metadata.name}')
port=$(kubectl_admin -n "$other" get pods -l app=m-other -o jsonpath='{.items[0].spec.containers[0].ports[0].containerPort}')
served_by_other() { curl -fsS "http://$ip:${port:-8080}/sim/requests"; }
before=$(served_by_other)

log "a request for m-a while the router's cache still lists $pod at $ip"
code=$(ask "$MP_STATE_DIR/second.json")
by=$(answered_by "$MP_STATE_DIR/second.json")
log "answered $code by ${by:-no Pod}: $(head -c 300 "$MP_STATE_DIR/second.json")"
[ "$by" != "$other_pod" ] || fail "the request for $ns/m-a (and its Authorization header) was answered by $other/$other_pod at $ip"
expect_eq "requests $other_pod served" "$before" "$(served_by_other)"
expect_eq "the request's status (held: m-a has no Pod the router can confirm)" 503 "$code"
grep -q "member Pod's address is not confirmed" "$MP_STATE_DIR/router.log" ||
	fail "the router's log does not say why the request waited"

log "the links thaw; m-a's new Pod gets an address; m-a is served by it"
kill -USR2 "$freeze_pid"
wait_for 10 grep -q "^thawed" "$MP_STATE_DIR/freeze.log"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/load-ms=0 >/dev/null
served() {
	[ "$(ask "$MP_STATE_DIR/third.json")" = 200 ] && case "$(answered_by "$MP_STATE_DIR/third.json")" in m-a-*) true ;; *) false ;; esac
}
wait_for 60 served
kill "$freeze_pid"
stop_router
stop_slot_check

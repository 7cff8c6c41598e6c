# The probe-to-deletion window with a lagging router: the router's link to the API server is slowed (a
# toxiproxy latency toxic, its watch frozen) while a swap away from the resident it serves is requested with
# kubectl. The operator (direct) probes the resident idle in a gap of the traffic and scales it to 0; a router
# that still forwards on its stale cache sends requests to a Pod about to be deleted: a busy model unloaded.
# The simulator's answers come a little late throughout (a member controller and kubelet are not instant), so
# the Pod stops serving a moment after the operator's write, as it does in a cluster. Each round swaps to m-b
# under the lag, removes it, and lets the router's own request bring m-a back.
# Checked: no Pod of the pool deleted while serving (sim.log busy=true), every request ends 200 from the
# right member's Pod or 503 with Retry-After (none cut, none past the budget plus a margin), slot-check clean.
# Then fail closed: with no byte passing to the router, a request for the resident waits out the budget and
# gets 503 (unconfirmed) with Retry-After; once the link is back it is served.
# MP_FENCE_ROUNDS sets the rounds (default 5); MP_TOXIPROXY names toxiproxy-server (run-one.sh finds it).
ns=router-fence
rounds=${MP_FENCE_ROUNDS:-5}
budget_s=20
# How long the router's watch lags: longer than any swap here, so the router never sees one before the
# toxic is removed (removing it lets everything held through at once). MP_FENCE_LAG_MS=0 is the control: a
# router that keeps up holds the resident's requests once the swap is pending, and the test passes.
lag_ms=${MP_FENCE_LAG_MS:-60000}
[ -x "${MP_TOXIPROXY:-}" ] || fail "MP_TOXIPROXY must name toxiproxy-server (test/controlplane/build-toxiproxy.sh)"

install_crds
install_operator_rbac
install_router_rbac
start_slot_check

log "toxiproxy: the router's link to the API server, and the simulator's (the operator is direct)"
start_toxiproxy
toxi=$MP_TOXI_API
# proxy NAME KUBECONFIG: a proxy to the API server and a copy of KUBECONFIG through it (NAME-proxied.kubeconfig).
proxy() {
	toxi_proxy "$1"
	sed -e "s#server: .*#server: https://127.0.0.1:$MP_TOXI_PORT#" "$2" >"$MP_STATE_DIR/$1-proxied.kubeconfig"
}
# toxic_on PROXY NAME LATENCY_MS / toxic_off PROXY NAME: a latency toxic on what the API server sends.
toxic_on() {
	curl -fsS -X POST "$toxi/proxies/$1/toxics" \
		-d "{\"name\":\"$2\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$3}}" >/dev/null
}
toxic_off() { curl -fsS -X DELETE "$toxi/proxies/$1/toxics/$2" >/dev/null; }
proxy router "$MP_ROUTER_KUBECONFIG"
proxy sim "$KUBECONFIG"

# The member controller and kubelet the simulator plays take a moment to act on a scale to 0 (a real one
# takes longer still): every answer to it comes $sim_lag_ms late, so a Pod stops serving that long after
# the operator's write. Without it the window here is a few ms (nothing but loopback between the writes).
sim_lag_ms=250
toxic_on sim kubelet "$sim_lag_ms"
KUBECONFIG=$MP_STATE_DIR/sim-proxied.kubeconfig start_sim --finalizer --terminate-ms 200 --load-ms 300
start_operator
create_members "$ns" m-a m-b
for m in m-a m-b; do
	# Requests of 3 tokens, 80 ms each: about 240 ms of work, with the client's gaps between them.
	kubectl_admin -n "$ns" annotate --overwrite inferenceservice "$m" sim.modelpool.test/token-ms=80 >/dev/null
done
MP_POOL_BUDGET=${budget_s}s create_pool "$ns" pool m-a m-a m-b
wait_for 60 pool_is pool Ready m-a "$ns"
# Every status the pool shows, as kubectl sees it: a router that keeps up asks for m-a back at once, so
# m-b's turn can be too short to poll.
kubectl_admin -n "$ns" get modelpool pool --watch \
	-o 'jsonpath={.status.phase}/{.status.residentMember}{"\n"}' >"$MP_STATE_DIR/pool.watch" &
watch_pid=$!
# became SINCE PHASE/RESIDENT: the pool showed that after line SINCE of the watch.
became() { tail -n +"$(($1 + 1))" "$MP_STATE_DIR/pool.watch" | grep_all -x "$2"; }

MP_ROUTER_KUBECONFIG=$MP_STATE_DIR/router-proxied.kubeconfig start_router --home-namespace "$ns"
wait_for 60 router_ready
url="http://127.0.0.1:$(router_port api)/v1/chat/completions"

now_ms() { date +%s%3N; }

reqs=$MP_STATE_DIR/requests.jsonl
stop=$MP_STATE_DIR/load.stop
margin_s=15
log "steady, gappy traffic for m-a through the router: one client, ~240 ms requests, 20-150 ms gaps"
python3 "$MP_SOURCE_DIR/test/tools/paced-load.py" --url "$url" --model m-a --out "$reqs" --stop "$stop" \
	--clients 1 --max-tokens 3 --gap-min-ms 20 --gap-max-ms 150 --timeout $((budget_s + margin_s)) &
load_pid=$!

# served_since T_MS: a request that began at or after T_MS was answered 200 by a Pod of m-a.
served_since() {
	jq -se --argjson t "$1" 'any(.[]; .t0_ms >= $t and .code == 200 and (.pod // "" | startswith("m-a-")))' "$reqs"
}
busy_deletions() { { sim_deleted_busy "$ns" m-a; sim_deleted_busy "$ns" m-b; } | grep -c . || true; }
# The requests that went wrong (jq conditions on a request line): cut, refused or hung (neither 200 nor 503
# with Retry-After), and answered by a Pod not m-a's (forwarded to an address another member now holds).
cut_q='.code != 200 and (.code != 503 or .retry_after == null)'
wrong_q='.code == 200 and ((.pod // "") | startswith("m-a-") | not)'
# count_where / first_where JQ_CONDITION [FROM_MS TO_MS]: how many requests (begun in that span) meet it;
# the first three of them.
count_where() {
	jq -s --argjson a "${2:-0}" --argjson b "${3:-1e15}" \
		"[.[] | select(.t0_ms >= \$a and .t0_ms < \$b) | select($1)] | length" "$reqs"
}
first_where() { jq -sc "[.[] | select($1)][:3][]" "$reqs"; }

hit_rounds=0
for round in $(seq 1 "$rounds"); do
	t_start=$(now_ms)
	busy_before=$(busy_deletions)
	wait_for 60 served_since "$t_start"
	toxic_on router lag "$lag_ms"
	log "round $round: the router's link lags ${lag_ms} ms; swap to m-b requested with kubectl"
	mark=$(wc -l <"$MP_STATE_DIR/pool.watch")
	kubectl_admin -n "$ns" annotate --overwrite modelpool pool modelpool-operator.dev/request=m-b >/dev/null
	wait_for 90 became "$mark" Ready/m-b
	toxic_off router lag
	t_off=$(now_ms)
	# The router catches up, sees m-b resident and asks for m-a back for the traffic.
	wait_for 90 pool_is pool Ready m-a "$ns"
	wait_for 60 served_since "$t_off"
	t_end=$(now_ms)
	busy=$(($(busy_deletions) - busy_before))
	codes=$(jq -sr --argjson a "$t_start" --argjson b "$t_end" \
		'[.[] | select(.t0_ms >= $a and .t0_ms < $b) | "\(.code)\(if .code == 200 then " " + (.pod // "-" | .[:3]) else "" end)"]
		| group_by(.) | map("\(length) x \(.[0])") | join(", ")' "$reqs")
	log "round $round: $((t_end - t_start)) ms; Pods deleted busy: $busy; requests: $codes"
	hit=$(($(count_where "$cut_q" "$t_start" "$t_end") + $(count_where "$wrong_q" "$t_start" "$t_end")))
	[ "$busy" -eq 0 ] && [ "$hit" -eq 0 ] || hit_rounds=$((hit_rounds + 1))
done
touch "$stop"
wait "$load_pid"
log "$hit_rounds of $rounds rounds hit the window"

# Every check runs, so a failure shows all the evidence at once.
problems=()
deleted_busy=$({ sim_deleted_busy "$ns" m-a; sim_deleted_busy "$ns" m-b; })
[ -z "$deleted_busy" ] || problems+=("Pods of the pool deleted while serving (a busy model unloaded):"$'\n'"$deleted_busy")
total=$(wc -l <"$reqs")
[ "$total" -ge 10 ] || problems+=("only $total requests")
n=$(count_where "$cut_q")
[ "$n" -eq 0 ] || problems+=("$n requests ended neither 200 nor 503 with Retry-After (cut, refused or hung); the first: $(first_where "$cut_q")")
n=$(count_where "$wrong_q")
[ "$n" -eq 0 ] || problems+=("$n requests for m-a answered by another member's Pod (at an address it now holds); the first: $(first_where "$wrong_q")")
late=$(first_where ".ms > $(((budget_s + 5) * 1000))")
[ -z "$late" ] || problems+=("requests answered past the budget plus a margin: $late")
sim_overlap "$ns" m-a m-b || problems+=("two Pods held the GPU at once (the simulator's log)")
[ "${#problems[@]}" -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"

log "fail closed: no byte passes between the router and the API server; a request for the resident m-a waits out the budget, 503"
wait_for 60 pool_is pool Ready m-a "$ns"
unconfirmed_q='modelpool_router_unavailable_total{namespace="router-fence",pool="pool",reason="unconfirmed"}'
before=$(router_metric "$unconfirmed_q" || echo 0)
curl -fsS -X POST "$toxi/proxies/router/toxics" \
	-d '{"name":"cut","type":"timeout","stream":"downstream","attributes":{"timeout":0}}' >/dev/null
# Half the fence (1 s) after its last read the router may no longer forward: a time the design sets.
sleep 1.5
code=$(curl -sS -o "$MP_STATE_DIR/unconfirmed.json" -D "$MP_STATE_DIR/unconfirmed.headers" -w '%{http_code}' \
	--max-time $((budget_s + margin_s)) -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-a","messages":[{"role":"user","content":"hi"}]}' "$url")
expect_eq "a request the router cannot confirm" 503 "$code"
grep -qi '^retry-after: [0-9]' "$MP_STATE_DIR/unconfirmed.headers" || fail "no Retry-After on the 503"
grep -q 'could not be confirmed resident' "$MP_STATE_DIR/unconfirmed.json" ||
	fail "the 503 does not say why: $(cat "$MP_STATE_DIR/unconfirmed.json")"
expect_eq "503s counted as unconfirmed" $((before + 1)) "$(router_metric "$unconfirmed_q")"
expect_eq "m-a's replicas while the router could not read" 1 "$(member_replicas m-a "$ns")"
curl -fsS -X DELETE "$toxi/proxies/router/toxics/cut" >/dev/null
log "the link is back: the next request is answered by m-a"
expect_eq "after the link is back" 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time $((budget_s + margin_s)) \
	-X POST -H 'Content-Type: application/json' --data-binary '{"model":"m-a","messages":[]}' "$url")"

stop_router
kill -TERM "$watch_pid" "$MP_TOXI_PID"
wait "$watch_pid" || true
wait "$MP_TOXI_PID" || true
stop_operator
stop_slot_check

# Issue 14: two router replicas, many clients sending interleaved models for minutes, slot-check watching.
# Never two members live in the pool; every request ends 200, or 503 with Retry-After (its budget ran out);
# none hangs past its budget plus a margin; every member is served (no starvation while the budget allows a
# swap); and the routers' requests through the pool are few compared to the requests (one per swap, not one
# per request). Issue 27: the second router reaches the API server through toxiproxy, MP_SOAK_LAG_MS
# (default 50) behind on what the API server sends it, so it loses every race to ask for a member; every
# model must still be answered through each router (no replica's waiters starve: the slower one names its
# longest waiter in the pool, the faster one asks for it and leaves it resident for it within its grace).
# Without that, router 2's waiters for one model were never answered (0 of them in 60 s).
# MP_SOAK_S sets the length (default 120 s); MP_TOXIPROXY names toxiproxy-server (run-one.sh finds it).
ns=router-soak
soak_s=${MP_SOAK_S:-120}
budget_s=20
router_setup --terminate-ms 200 --load-ms 400

create_members "$ns" m-a m-b m-c
for m in m-a m-b m-c; do
	kubectl_admin -n "$ns" annotate --overwrite inferenceservice "$m" sim.modelpool.test/token-ms=20 >/dev/null
done
MP_POOL_BUDGET=${budget_s}s create_pool "$ns" pool m-a m-a m-b m-c
wait_for 60 pool_is pool Ready m-a "$ns"
[ -x "${MP_TOXIPROXY:-}" ] || fail "MP_TOXIPROXY must name toxiproxy-server (test/controlplane/build-toxiproxy.sh)"
start_toxiproxy
toxi_proxy router-2
sed -e "s#server: .*#server: https://127.0.0.1:$MP_TOXI_PORT#" "${MP_ROUTER_KUBECONFIG:-$KUBECONFIG}" \
	>"$MP_STATE_DIR/router-2.kubeconfig"
lag_ms=${MP_SOAK_LAG_MS:-50}
if [ "$lag_ms" -gt 0 ]; then
	curl -fsS -X POST "$MP_TOXI_API/proxies/router-2/toxics" \
		-d "{\"name\":\"lag\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$lag_ms}}" >/dev/null
fi
start_router --home-namespace "$ns" --resident-grace 2s
router1=$MP_ROUTER_PID
MP_ROUTER_LOG=2 MP_ROUTER_KUBECONFIG="$MP_STATE_DIR/router-2.kubeconfig" start_router --home-namespace "$ns" \
	--resident-grace 2s
router2=$MP_ROUTER_PID
wait_for 30 router_ready router.log
wait_for 30 router_ready router-2.log

log "two routers (the second $lag_ms ms behind on the API server), 2 x 6 clients, models at random, streamed and not, for $soak_s s"
margin_s=15
load() { # LOG PORT SEED [ARGS]
	local out=$1 port=$2 seed=$3
	shift 3
	"$MP_BUILD_DIR/oai-load" --url "http://127.0.0.1:$port/v1/chat/completions" --concurrency 6 \
		--duration "$soak_s" --model m-a,m-b,m-c --seed "$seed" --max-tokens 10 \
		--timeout $((budget_s + margin_s)) --out "$MP_STATE_DIR/$out" "$@" >"$MP_STATE_DIR/$out.summary"
}
load load-1.jsonl "$(router_port api router.log)" 1 &
l1=$!
load load-2.jsonl "$(router_port api router-2.log)" 2 --stream &
l2=$!
wait "$l1" "$l2"
cat "$MP_STATE_DIR"/load-*.summary >&2

all="$MP_STATE_DIR/load-all.jsonl"
cat "$MP_STATE_DIR"/load-1.jsonl "$MP_STATE_DIR"/load-2.jsonl >"$all"
total=$(wc -l <"$all")
[ "$total" -ge 10 ] || fail "only $total requests in $soak_s s"
bad=$(jq -c 'select(.code != 200 and (.code != 503 or .retry_after == null))' "$all" | head -n 5)
[ -z "$bad" ] || fail "requests that ended neither 200 nor 503 with Retry-After: $bad"
late=$(jq -c --argjson max $(((budget_s + 5) * 1000)) 'select(.ms > $max)' "$all" | head -n 5)
[ -z "$late" ] || fail "requests answered past the budget plus a margin: $late"
for m in m-a m-b m-c; do
	n=$(jq -r --arg m "$m" 'select(.model == $m and .code == 200) | .model' "$all" | wc -l)
	log "$m: $n answered"
	[ "$n" -gt 0 ] || fail "$m starved: no request answered"
	for r in 1 2; do
		n=$(jq -r --arg m "$m" 'select(.model == $m and .code == 200) | .model' "$MP_STATE_DIR/load-$r.jsonl" | wc -l)
		log "  through router $r: $n"
		[ "$n" -gt 0 ] || fail "$m starved through router $r (router 2 $lag_ms ms behind): no request answered"
	done
done
wrong=$(jq -c 'select(.code == 200) | . as $r | select(($r.pod // "" | startswith($r.model + "-")) | not)' "$all" | head -n 3)
[ -z "$wrong" ] || fail "requests answered by another member's Pod: $wrong"
asks=$(cat "$MP_STATE_DIR"/router.log "$MP_STATE_DIR"/router-2.log | grep -c '"requested member through the pool"' || true)
swaps=$(event_count pool Normal/SwapStarted "$ns")
log "$total requests, $swaps swaps, $asks requests through the pool"
[ "$asks" -le $((2 * swaps + 2)) ] || fail "$asks requests through the pool for $swaps swaps"

wait_eq 60 "" pool_field pool pendingMember "$ns"
stop_router
MP_ROUTER_PID=$router1 stop_router
stop_operator
stop_slot_check

# Issue 14: the router and the operator dividing the work of a swap. While the resident streams an answer,
# a request for another member is held; once the grace of a busy resident is over the router asks for the
# other member, the operator drains (its idle probe sees the stream: the simulator's /slots says busy while a
# request is in flight) and swaps only after the stream ended; the held request is then answered. A member
# that does not load within the pool's swapBudget gets 503 model_loading with Retry-After, and the swap
# still completes. A member whose server answers to another name gets the body's model rewritten to it.
ns=router-swap
router_setup --terminate-ms 200 --load-ms 200

create_members "$ns" m-a m-b m-e m-f
# m-e serves as vLLM does (a name other than its served one is 404), so the served-name rewrite is
# needed; a llamacpp member takes any name (as llama-server does).
kubectl_admin -n "$ns" patch inferenceservice m-e --type=merge -p '{"spec":{"runtime":"vllm"}}' >/dev/null
create_pool "$ns" pool m-a m-a m-b
MP_POOL_BUDGET=2s create_pool "$ns" slow m-f m-e m-f
wait_for 60 pool_is pool Ready m-a "$ns"
wait_for 60 pool_is slow Ready m-f "$ns"
router_up --home-namespace "$ns" --resident-grace 500ms
url="http://127.0.0.1:$(router_port api)"

now_ms() { date +%s%3N; }

log "m-a streams 20 tokens, 150 ms apart; m-b is asked for during the stream"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/token-ms=150 >/dev/null
(
	curl -sS -N -X POST -H 'Content-Type: application/json' \
		--data-binary '{"model":"m-a","stream":true,"max_tokens":20,"messages":[]}' \
		"$url/v1/chat/completions" >"$MP_STATE_DIR/stream"
	now_ms >"$MP_STATE_DIR/stream.end"
) &
stream_pid=$!
wait_for 10 grep -q '^data: ' "$MP_STATE_DIR/stream"
code=$(curl -sS -o "$MP_STATE_DIR/b" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-b","messages":[]}' "$url/v1/chat/completions")
b_end=$(now_ms)
wait "$stream_pid"
expect_eq "m-b answered" 200 "$code"
expect_eq "answered by" m-b "$(jq -r .model "$MP_STATE_DIR/b")"
expect_eq "the stream ran to its end" 1 "$(grep -c '^data: \[DONE\]' "$MP_STATE_DIR/stream")"
expect_eq "tokens streamed" 20 "$(grep -c '"content":"tok' "$MP_STATE_DIR/stream")"
[ "$b_end" -gt "$(cat "$MP_STATE_DIR/stream.end")" ] ||
	fail "m-b was answered ($b_end) before m-a's stream ended ($(cat "$MP_STATE_DIR/stream.end")): m-a was unloaded busy"
expect_eq "activations" 1 "$(activations)"
expect_sole_resident pool m-b "$ns"
grep -q 'reason=SwapDeferred message="PodsBusy' "$MP_STATE_DIR/operator.log" ||
	fail "the operator never saw m-a busy: the drain did not wait for the stream"

# (Not a target that loads longer than the budget: the operator now starts it at once, as soon as the router
# acknowledged the swap, and calls the pool Degraded (TargetNotReady), which the router passes on instead.)
log "m-e cannot be swapped in within swapBudget (m-f stays busy): 503 model_loading with Retry-After; then the swap completes"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-f sim.modelpool.test/busy=true >/dev/null
t0=$(now_ms)
code=$(curl -sS -o "$MP_STATE_DIR/e" -D "$MP_STATE_DIR/e.headers" -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"m-e","messages":[]}' "$url/v1/chat/completions")
waited=$(($(now_ms) - t0))
expect_eq "past the budget" 503 "$code"
expect_eq "error code" model_loading "$(jq -r .error.code "$MP_STATE_DIR/e")"
retry=$(tr -d '\r' <"$MP_STATE_DIR/e.headers" | awk -F': ' 'tolower($1) == "retry-after" {print $2}')
[[ "$retry" =~ ^[1-9][0-9]*$ ]] || fail "Retry-After is '$retry', want whole seconds >= 1"
[ "$waited" -ge 2000 ] || fail "answered after $waited ms, before the 2 s budget"
kubectl_admin -n "$ns" annotate inferenceservice m-f sim.modelpool.test/busy- >/dev/null
wait_for 60 pool_is slow Ready m-e "$ns"
expect_eq "m-e answers now" 200 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"m-e","messages":[]}' "$url/v1/chat/completions")"

log "a member serving another name: the router rewrites the body's model"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-e \
	sim.modelpool.test/served-model=Org/E-7B modelpool-operator.dev/served-model=Org/E-7B >/dev/null
wait_eq 30 200 curl -sS -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-e","messages":[]}' "$url/v1/chat/completions"
expect_eq "asked by its served name" 200 "$(curl -sS -o "$MP_STATE_DIR/e" -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"Org/E-7B","messages":[]}' "$url/v1/chat/completions")"
expect_eq "the member saw its own name" Org/E-7B "$(jq -r .model "$MP_STATE_DIR/e")"

stop_router
stop_operator
stop_slot_check

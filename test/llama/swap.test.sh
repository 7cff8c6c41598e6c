# Issue 29: a swap while the resident, a real llama-server, generates a long answer. The operator's idle
# probe reads the real /slots: it defers the swap (SwapDeferred PodsBusy) while the slot works, the answer
# arrives whole, and only then is the resident's server stopped and the target's started; the two
# processes never run at once (their own lines in sim.log), nor do two Pods hold the slot (slot-check).
source "$MP_SOURCE_DIR/test/llama/lib.sh"
ns=llama-swap
install_crds
install_operator_rbac
start_slot_check
start_sim_llama --load-ms 0
start_operator

create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b
wait_for 120 pool_is pool Ready m-a "$ns"
url=$(pod_url m-a "$ns") || fail "no Running Pod of m-a"
log "m-a is a real llama-server at $url: $(curl -fsS "$url/health")"
expect_eq "/v1/models names the member" m-a "$(curl -fsS "$url/v1/models" | jq -r '.data[0].id')"

log "m-a generates $LLAMA_LONG_TOKENS tokens; m-b is asked for meanwhile"
curl -sS -o "$MP_STATE_DIR/answer" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary "{\"model\":\"m-a\",\"max_tokens\":$LLAMA_LONG_TOKENS,\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" \
	"$url/v1/chat/completions" >"$MP_STATE_DIR/answer.code" &
answer_pid=$!
wait_for 30 slots_busy "$url"
# Through the pool, as the router asks (kubectl scale would start m-b's server before the operator can hold
# it back: the race DESIGN.md names, and a real server does start).
kubectl_admin -n "$ns" annotate --overwrite modelpool pool modelpool-operator.dev/request=m-b >/dev/null
wait_for 60 condition_is pool SwapDeferred True/PodsBusy "$ns"
expect_eq "resident while deferred" m-a "$(pool_get pool '{.status.residentMember}' "$ns")"
expect_eq "pending while deferred" m-b "$(pool_get pool '{.status.pendingMember}' "$ns")"
llama_line started m-b "$ns" >/dev/null && fail "m-b's server started while m-a was generating"

wait "$answer_pid"
answered=$(wc -l <"$MP_STATE_DIR/sim.log")
expect_eq "the answer's status" 200 "$(cat "$MP_STATE_DIR/answer.code")"
expect_eq "tokens in the answer" "$LLAMA_LONG_TOKENS" "$(jq -r .usage.completion_tokens "$MP_STATE_DIR/answer")"
expect_eq "finish_reason" length "$(jq -r '.choices[0].finish_reason' "$MP_STATE_DIR/answer")"

log "the answer is whole; now the swap completes"
wait_for 120 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"
started=$(llama_line started m-b "$ns") || fail "no server started for m-b"
exited=$(llama_line exited m-a "$ns") || fail "m-a's server never exited"
[ "$started" -gt "$answered" ] || fail "m-b's server started (sim.log line $started) before m-a's answer ended (line $answered)"
[ "$started" -gt "$exited" ] || fail "m-b's server started (line $started) before m-a's exited (line $exited)"
grep -q "^sim $ns/m-a llama=[^ ]* state=exited .* status=0\$" "$MP_STATE_DIR/sim.log" ||
	fail "m-a's server did not exit cleanly on SIGTERM: $(grep "llama=.*state=exited" "$MP_STATE_DIR/sim.log")"
url=$(pod_url m-b "$ns") || fail "no Running Pod of m-b"
expect_eq "m-b answers as itself" m-b "$(curl -fsS -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-b","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}' "$url/v1/chat/completions" | jq -r .model)"
llama_overlap "$ns" m-a m-b || fail "two llama-server processes of one pool ran at once"

stop_operator
stop_slot_check

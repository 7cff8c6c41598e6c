# Issue 29: modelpool-router in front of real llama-server members. A whole and a streamed chat completion
# from the resident's real server; /v1/models in the shape OpenAI clients read (and the server's own);
# requests for the other member held across a swap that waits for the resident's long streamed answer,
# then answered by the new server; a member whose server answers to another name (--alias, declared with
# modelpool-operator.dev/served-model): the router rewrites the body's model and llama-server, which
# accepts any name, answers with its own; a pooled connection the server closed (idle past its 5 s
# keep-alive, or its 100 requests a connection) costs the client nothing.
source "$MP_SOURCE_DIR/test/llama/lib.sh"
ns=llama-router
install_crds
install_operator_rbac
install_router_rbac
start_slot_check
start_sim_llama --load-ms 0
start_operator

create_members "$ns" m-a m-b
kubectl_admin -n "$ns" annotate inferenceservice m-b sim.modelpool.test/served-model=Org/B-Tiny \
	modelpool-operator.dev/served-model=Org/B-Tiny >/dev/null
create_pool "$ns" pool m-a m-a m-b
wait_for 120 pool_is pool Ready m-a "$ns"
start_router --home-namespace "$ns" --resident-grace 500ms
wait_for 30 router_ready
url="http://127.0.0.1:$(router_port api)"
now_ms() { date +%s%3N; }
# chat OUT MODEL TOKENS [STREAM]: a chat completion through the router; the body to $MP_STATE_DIR/OUT,
# the status code printed. Streams ask for usage in the last chunk, to count the tokens.
chat() {
	local stream=${4:-false}
	curl -sS -N -o "$MP_STATE_DIR/$1" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary \
		"{\"model\":\"$2\",\"max_tokens\":$3,\"ignore_eos\":true,\"stream\":$stream,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" \
		"$url/v1/chat/completions"
}
# sse_check OUT MODEL TOKENS: a whole stream: every event a chunk of MODEL, usage TOKENS, then [DONE].
sse_check() {
	local f=$MP_STATE_DIR/$1
	expect_eq "$1: ends with [DONE]" "data: [DONE]" "$(grep '^data: ' "$f" | tail -n 1)"
	expect_eq "$1: models in the chunks" "$2" "$(grep '^data: {' "$f" | cut -c7- | jq -r .model | sort -u | paste -sd ' ')"
	expect_eq "$1: object" chat.completion.chunk "$(grep '^data: {' "$f" | cut -c7- | jq -r .object | sort -u | paste -sd ' ')"
	expect_eq "$1: tokens" "$3" "$(grep '^data: {' "$f" | cut -c7- | jq -r '.usage.completion_tokens // empty' | tail -n 1)"
	expect_eq "$1: finish_reason" length "$(grep '^data: {' "$f" | cut -c7- | jq -r '.choices[0].finish_reason // empty' | tail -n 1)"
}

log "/v1/models through the router, as OpenAI clients read it"
curl -fsS "$url/v1/models" >"$MP_STATE_DIR/models"
jq -e '.object == "list" and (.data | length) >= 2 and all(.data[]; (.id | type) == "string" and
	.object == "model" and (.created | type) == "number" and (.owned_by | type) == "string")' \
	"$MP_STATE_DIR/models" >/dev/null || fail "/v1/models is not an OpenAI model list: $(cat "$MP_STATE_DIR/models")"
for name in m-a m-b; do
	jq -e --arg n "$name" 'any(.data[]; .id == $n)' "$MP_STATE_DIR/models" >/dev/null || fail "/v1/models lacks $name"
done
# The server's own list has the same four fields a client reads (and more of its own).
curl -fsS "$(pod_url m-a "$ns")/v1/models" | jq -e '.object == "list" and .data[0].id == "m-a" and
	.data[0].object == "model" and (.data[0].created | type) == "number" and .data[0].owned_by == "llamacpp"' >/dev/null ||
	fail "llama-server's /v1/models changed shape"

log "a whole and a streamed chat completion from m-a's real server"
expect_eq "whole: status" 200 "$(chat whole m-a 16)"
expect_eq "whole: object/model/role" "chat.completion m-a assistant" \
	"$(jq -r '"\(.object) \(.model) \(.choices[0].message.role)"' "$MP_STATE_DIR/whole")"
expect_eq "whole: tokens" 16 "$(jq -r .usage.completion_tokens "$MP_STATE_DIR/whole")"
expect_eq "stream: status" 200 "$(chat stream m-a 16 true)"
sse_check stream m-a 16

log "m-a streams $LLAMA_LONG_TOKENS tokens; a whole and a streamed request for m-b are held across the swap"
(
	chat long m-a "$LLAMA_LONG_TOKENS" true >"$MP_STATE_DIR/long.code"
	now_ms >"$MP_STATE_DIR/long.end"
) &
long_pid=$!
wait_for 30 slots_busy "$(pod_url m-a "$ns")"
(
	chat b-whole m-b 8 >"$MP_STATE_DIR/b-whole.code"
	now_ms >"$MP_STATE_DIR/b-whole.end"
) &
b1=$!
(
	chat b-stream m-b 8 true >"$MP_STATE_DIR/b-stream.code"
	now_ms >"$MP_STATE_DIR/b-stream.end"
) &
b2=$!
wait_for 60 condition_is pool SwapDeferred True/PodsBusy "$ns"
wait "$long_pid" "$b1" "$b2"
expect_eq "long: status" 200 "$(cat "$MP_STATE_DIR/long.code")"
sse_check long m-a "$LLAMA_LONG_TOKENS"
for b in b-whole b-stream; do
	expect_eq "$b: status" 200 "$(cat "$MP_STATE_DIR/$b.code")"
	[ "$(cat "$MP_STATE_DIR/$b.end")" -gt "$(cat "$MP_STATE_DIR/long.end")" ] ||
		fail "$b was answered before m-a's stream ended: m-a was unloaded busy"
done
# The router rewrote "m-b" to the served name; llama-server answers with its own name whatever it is sent.
expect_eq "b-whole: model" Org/B-Tiny "$(jq -r .model "$MP_STATE_DIR/b-whole")"
expect_eq "b-whole: tokens" 8 "$(jq -r .usage.completion_tokens "$MP_STATE_DIR/b-whole")"
sse_check b-stream Org/B-Tiny 8
expect_eq "activations" 1 "$(activations)"
expect_sole_resident pool m-b "$ns"
llama_overlap "$ns" m-a m-b || fail "two llama-server processes of one pool ran at once"

log "the served name: asked by it, and an unknown name never reaches the server"
expect_eq "by the served name" 200 "$(chat served Org/B-Tiny 4)"
expect_eq "served: model" Org/B-Tiny "$(jq -r .model "$MP_STATE_DIR/served")"
expect_eq "unknown name" 404 "$(chat unknown Org/Nope 4)"
expect_eq "unknown: code" model_not_found "$(jq -r .error.code "$MP_STATE_DIR/unknown")"

log "pooled connections llama-server closed: idle past its keep-alive (5 s), and after 100 requests"
sleep 6 # longer than llama-server's keep-alive timeout: the router's pooled connection is closed under it
expect_eq "after the server closed the idle connection" 200 "$(chat idle m-b 1)"
codes=$(for i in $(seq 1 110); do chat many m-b 1; echo; done | sort | uniq -c | awk '{print $1 ":" $2}')
expect_eq "110 requests in a row" "110:200" "$codes"

stop_router
stop_operator
stop_slot_check

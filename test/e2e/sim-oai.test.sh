#!/usr/bin/env bash
# End to end on a real kube-apiserver: the member simulator's Pods answer OpenAI requests as a member would
# (chat completions, completions, embeddings; whole or streamed as SSE, one event per token at the member's
# sim.modelpool.test/token-ms), name the Pod that served in X-Sim-Pod, report busy on their idle probe while a
# request is in flight (and idle again once it is answered or its client left), reject a model other than the
# one annotated as served (vLLM's 404), answer bad bodies 400 and bodies over 32 MiB 413, and are refused
# like any other request once their Pod stops serving.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -F apply_crd >/dev/null || source "$here/lib.sh"
top=${MP_SOURCE_DIR:-$(cd "$here/../.." && pwd)}

sim=${MP_BUILD_DIR:?}/member-sim
[ -x "$sim" ] || fail "no simulator at $sim (build the member-sim target)"
ns=sim-oai
sim_out=$MP_STATE_DIR/sim-oai.out
sim_err=$MP_STATE_DIR/sim-oai.err
show_sim_logs() {
	local rc=$?
	[ "$rc" -eq 0 ] && return 0
	echo "----- last 40 lines of the simulator's stderr -----" >&2
	tail -n 40 "$sim_err" >&2 2>/dev/null || true
}
trap show_sim_logs EXIT

k() { kubectl_admin -n "$ns" "$@"; }
phase_is() { [ "$(k get isvc "$1" -o 'jsonpath={.status.phase}')" == "$2" ]; }
running_pod() {
	k get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}{.status.podIP}{"\n"}{end}' |
		awk '$2 == "Running" {print $1, $3; n++} END {exit n == 1 ? 0 : 1}'
}
# post URL BODY [curl args...]: prints the response body; headers go to $MP_STATE_DIR/h, the code to .../code.
post() {
	local url=$1 body=$2
	shift 2
	curl -sS --max-time 30 -D "$MP_STATE_DIR/h" -o "$MP_STATE_DIR/b" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "$body" "$@" "$url" >"$MP_STATE_DIR/code"
	cat "$MP_STATE_DIR/b"
}
code() { cat "$MP_STATE_DIR/code"; }
header() { tr -d '\r' <"$MP_STATE_DIR/h" | sed -n "s/^$1: //Ip"; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

apply_crd "$top/test/crds/inferenceservices.inference.llmkube.dev.yaml"
kubectl_admin create namespace "$ns" >/dev/null
pa=$(unused_port)
pb=$(unused_port)
k apply -f - >/dev/null <<EOF
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: alpha
  annotations: {sim.modelpool.test/token-ms: "50"}
spec: {runtime: llamacpp, replicas: 1, endpoint: {port: $pa}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: beta
  annotations: {sim.modelpool.test/served-model: org/beta-7b, sim.modelpool.test/token-ms: "50"}
spec: {runtime: vllm, replicas: 1, containerPort: $pb}
EOF
"$sim" --kubeconfig "$KUBECONFIG" --ip-block "$MP_SIM_IP_BLOCK" --namespace "$ns" --finalizer --load-ms 100 -v \
	>>"$sim_out" 2>>"$sim_err" &
sim_pid=$!
wait_for 60 phase_is alpha Ready
wait_for 60 phase_is beta Ready
read -r a ipa < <(running_pod alpha)
read -r b ipb < <(running_pod beta)
A=http://$ipa:$pa
B=http://$ipb:$pb

log "chat completion, whole: the body's model, max_tokens tokens, X-Sim-Pod"
out=$(post "$A/v1/chat/completions" '{"model":"alpha","messages":[{"role":"user","content":"hi"}],"max_tokens":3}')
expect_eq "chat code" 200 "$(code)"
expect_eq "chat X-Sim-Pod" "$a" "$(header X-Sim-Pod)"
expect_eq "chat content type" application/json "$(header Content-Type)"
expect_eq "chat object/model" "chat.completion alpha" "$(json 'd["object"], d["model"]' <<<"$out" | tr -d "(),'")"
expect_eq "chat content" "tok0 tok1 tok2 " "$(json 'd["choices"][0]["message"]["content"]' <<<"$out")"
expect_eq "chat usage" 3 "$(json 'd["usage"]["completion_tokens"]' <<<"$out")"
out=$(post "$A/v1/chat/completions" '{"model":"alpha","messages":[]}')
expect_eq "default tokens" 8 "$(json 'd["usage"]["completion_tokens"]' <<<"$out")"
# As llama-server (one model): any name is taken, and the answer names the member's own.
out=$(post "$A/v1/chat/completions" '{"model":"some-other-name","messages":[],"max_tokens":1}')
expect_eq "llamacpp member asked by another name" "200 alpha" "$(code) $(json 'd["model"]' <<<"$out")"

log "completions and embeddings"
out=$(post "$A/v1/completions" '{"model":"alpha","prompt":"x","max_tokens":2}')
expect_eq "completions code" 200 "$(code)"
expect_eq "completions" "text_completion tok0 tok1 " "$(json 'd["object"]+" "+d["choices"][0]["text"]' <<<"$out")"
out=$(post "$A/v1/embeddings" '{"model":"alpha","input":["a","b"]}')
expect_eq "embeddings code" 200 "$(code)"
expect_eq "embeddings" "list 2 alpha" "$(json 'd["object"]+" "+str(len(d["data"]))+" "+d["model"]' <<<"$out")"

log "streamed: one SSE event per token, the last with its finish_reason, then [DONE]"
post "$A/v1/chat/completions" '{"model":"alpha","messages":[],"max_tokens":5,"stream":true}' >"$MP_STATE_DIR/sse"
expect_eq "stream code" 200 "$(code)"
expect_eq "stream content type" text/event-stream "$(header Content-Type)"
expect_eq "stream X-Sim-Pod" "$a" "$(header X-Sim-Pod)"
expect_eq "stream events" 7 "$(grep -c '^data: ' "$MP_STATE_DIR/sse")"
expect_eq "stream end" "data: [DONE]" "$(grep '^data: ' "$MP_STATE_DIR/sse" | tail -n 1)"
expect_eq "stream tokens in order" "tok0 tok1 tok2 tok3 tok4 " "$(grep '^data: {' "$MP_STATE_DIR/sse" | sed 's/^data: //' |
	python3 -c 'import json,sys; print("".join(json.loads(l)["choices"][0]["delta"].get("content","") for l in sys.stdin))')"
expect_eq "stream finish" length "$(grep '^data: {' "$MP_STATE_DIR/sse" | tail -n 1 | sed 's/^data: //' |
	json 'd["choices"][0]["finish_reason"]')"

log "errors: not JSON or no model 400, GET 405, over 32 MiB 413, all in OpenAI's format"
post "$A/v1/chat/completions" 'not json' >/dev/null
expect_eq "not JSON" 400 "$(code)"
out=$(post "$A/v1/chat/completions" '{"messages":[]}')
expect_eq "no model" "400 invalid_request_error" "$(code) $(json 'd["error"]["type"]' <<<"$out")"
expect_eq "GET" 405 "$(curl -sS -o /dev/null -w '%{http_code}' "$A/v1/chat/completions")"
head -c $((33 << 20)) /dev/zero >"$MP_STATE_DIR/big"
expect_eq "33 MiB body" 413 "$(curl -sS -o /dev/null -w '%{http_code}' --data-binary @"$MP_STATE_DIR/big" "$A/v1/completions" 2>/dev/null || true)"

log "served-model: another model name is vLLM's 404; the served one is answered"
out=$(post "$B/v1/chat/completions" '{"model":"beta","messages":[]}')
expect_eq "beta by member name" 404 "$(code)"
expect_eq "404 body" "NotFoundError The model \`beta\` does not exist." "$(json 'd["type"]+" "+d["message"]' <<<"$out")"
out=$(post "$B/v1/chat/completions" '{"model":"org/beta-7b","messages":[],"max_tokens":1}')
expect_eq "beta by served name" "200 org/beta-7b $b" "$(code) $(json 'd["model"]' <<<"$out") $(header X-Sim-Pod)"

log "a request in flight makes its Pod's probe busy (the vLLM gauge counts them); answered or abandoned, idle again"
slots_busy() { curl -sS --max-time 5 "$A/slots" | grep_all '"is_processing":true'; }
slots_idle() { curl -sS --max-time 5 "$A/slots" | grep_all '"is_processing":false'; }
running_is() { curl -sS --max-time 5 "$B/metrics" | grep -Eq "^vllm:num_requests_running(\{[^}]*\})? $1\$"; }
# Every request so far was answered: none is in flight any more.
slots_idle || fail "alpha busy after its requests were answered: $(curl -sS "$A/slots")"
running_is 0 || fail "beta busy after its requests were answered: $(curl -sS "$B/metrics")"
# 100000 tokens at the members' 50 ms (from their manifests): these run until their clients leave.
endless=(curl -sS --max-time 300 -o /dev/null -H 'Content-Type: application/json' --data-binary)
"${endless[@]}" '{"model":"alpha","messages":[],"max_tokens":100000,"stream":true}' "$A/v1/chat/completions" &
a_stream=$!
wait_for 30 slots_busy
"${endless[@]}" '{"model":"org/beta-7b","prompt":"x","max_tokens":100000}' "$B/v1/completions" &
b_whole=$!
"${endless[@]}" '{"model":"org/beta-7b","prompt":"x","max_tokens":100000,"stream":true}' "$B/v1/completions" &
b_stream=$!
wait_for 30 running_is 2
kill "$b_whole"
wait "$b_whole" || true
wait_for 30 running_is 1 # the client of a whole answer left: seen while the answer was still delayed
kill "$b_stream"
wait "$b_stream" || true
wait_for 30 running_is 0
slots_busy || fail "alpha idle while its stream still runs"
kill "$a_stream"
wait "$a_stream" || true
wait_for 30 slots_idle

log "a client that leaves ends its request, streamed or waiting for a whole answer: the probe is idle again"
for stream in true false; do
	curl -sS --max-time 1 -o /dev/null -H 'Content-Type: application/json' \
		--data-binary '{"model":"alpha","messages":[],"max_tokens":100000,"stream":'$stream'}' "$A/v1/chat/completions" || true
	wait_for 30 slots_idle
done

log "the busy annotation still makes the probe busy with nothing in flight"
k annotate isvc alpha sim.modelpool.test/busy=true >/dev/null
wait_for 30 slots_busy
k annotate isvc alpha sim.modelpool.test/busy- >/dev/null
wait_for 30 slots_idle

log "oai-load: 8 clients, two model names round robin: the served one answered by beta's Pod, the other 404"
load=$MP_BUILD_DIR/oai-load
"$load" --url "$B/v1/chat/completions" --concurrency 8 --requests 40 --model org/beta-7b,beta --max-tokens 2 \
	--out "$MP_STATE_DIR/load.jsonl" >"$MP_STATE_DIR/load.sum"
expect_eq "load summary codes" "40 {'200': 20, '404': 20}" "$(json 'str(d["requests"])+" "+str(d["codes"])' <"$MP_STATE_DIR/load.sum")"
expect_eq "load lines" 40 "$(wc -l <"$MP_STATE_DIR/load.jsonl")"
expect_eq "load: model -> code, pod" "beta 404 $b"$'\n'"org/beta-7b 200 $b" "$(python3 -c '
import json, sys
print("\n".join(sorted({"%s %d %s" % (d["model"], d["code"], d["pod"]) for d in map(json.loads, open(sys.argv[1]))})))' \
	"$MP_STATE_DIR/load.jsonl")"
"$load" --url "$A/v1/completions" --concurrency 3 --requests 6 --model alpha --stream --max-tokens 3 --seed 7 \
	--out - >"$MP_STATE_DIR/load2.out"
expect_eq "streamed load" "6 {'200': 6}" "$(tail -n 1 "$MP_STATE_DIR/load2.out" | json 'str(d["requests"])+" "+str(d["codes"])')"
head -n 6 "$MP_STATE_DIR/load2.out" | python3 -c '
import json, sys
for d in map(json.loads, sys.stdin):
    assert d["bytes"] > 0 and d["first_byte_ms"] <= d["ms"] and d["retry_after"] is None, d' ||
	fail "streamed load lines: $(cat "$MP_STATE_DIR/load2.out")"
expect_fail "requests and --duration" "$load" --url "$A/v1/completions" --requests 1 --duration 1

log "a Pod that stops serving (terminating) refuses OpenAI requests like its probes"
k annotate isvc alpha sim.modelpool.test/terminate-ms=600000 >/dev/null
k scale isvc alpha --replicas=0 >/dev/null
refused() {
	local rc=0
	curl -sS --max-time 5 -o /dev/null --data-binary '{"model":"alpha"}' "$A/v1/chat/completions" 2>/dev/null || rc=$?
	[ "$rc" -eq 7 ]
}
wait_for 60 refused
served=$(curl -sS --max-time 5 "$B/sim/requests")
[ "$served" -ge 42 ] || fail "beta counted $served requests, expected at least 42"

kill -TERM "$sim_pid"
wait "$sim_pid" || fail "the simulator did not exit 0 on SIGTERM"

#!/usr/bin/env bash
# The demo: a real kube-apiserver + etcd on loopback, the CRDs and samples, the member simulator,
# the operator and the router; sends a chat completion for qwen-7b (not resident) through the router
# with curl, shows it held while the pool swaps, then the answer, `kubectl get modelpools` before and
# after, and a few of the operator's metrics (over HTTPS, with the token of a ServiceAccount allowed
# to read them); then stops everything. The members' Pods are real llama.cpp servers (llama-server with a
# tiny random-weight model: it answers gibberish, for real) when test/llama/build.sh has built one into the
# cache (scripts/test.sh does); else the simulator answers for them. The demo says which.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/bootstrap.sh"
bash "$top/test/controlplane/build.sh" >/dev/null
cmake -S "$top" -B "$top/build/demo" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$top/build/demo" -j"$(nproc)" --target modelpool-operator modelpool-router member-sim >/dev/null
state=$(mktemp -d /tmp/modelpool-demo.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; bash "$top/test/controlplane/stop.sh" "$state"; rm -rf "$state"' EXIT
bash "$top/test/controlplane/start.sh" "$state" >/dev/null
source "$state/env"
k() { kubectl "$@"; }
k apply -f "$top/crd/modelpools.inference.llmkube.dev.yaml" -f "$top/test/crds/inferenceservices.inference.llmkube.dev.yaml"
k wait --for=condition=Established crd --all --timeout=60s
until k get modelpools >/dev/null 2>&1; do sleep 0.5; done
k apply -f "$top/config/samples/inferenceservices.yaml" -f "$top/config/samples/modelpool.yaml"
members=(--load-ms 1000)
if server=$(bash "$top/test/llama/build.sh" --cached 2>/dev/null) &&
	model=$(bash "$top/test/llama/model.sh" tiny 2>/dev/null); then
	echo "--- members: real llama.cpp servers ($server, model $(basename "$model"))"
	members=(--load-ms 0 --finalizer --llama-server "$server" --llama-model "$model" --llama-log-dir "$state")
else
	echo "--- members: simulated (no llama-server in the cache: bash test/llama/build.sh builds one, ~10 min)"
fi
# The operator's namespace: router replicas register there (a Lease each) before they forward, and the operator
# reads their acknowledgements of a swap there.
kubectl --kubeconfig "$KUBECONFIG" create namespace modelpool-system >/dev/null
"$top/build/demo/member-sim" --kubeconfig "$KUBECONFIG" "${members[@]}" >"$state/sim.log" 2>&1 & pids+=($!)
"$top/build/demo/modelpool-operator" --kubeconfig "$KUBECONFIG" \
	--metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
	--router-lease-namespace modelpool-system >"$state/operator.log" 2>&1 & pids+=($!)
# The router: one OpenAI endpoint for both models (metrics plain here, on loopback).
"$top/build/demo/modelpool-router" --kubeconfig "$KUBECONFIG" --home-namespace default --bind-address 127.0.0.1:0 \
	--metrics-secure=false --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
	>"$state/router.log" 2>&1 & pids+=($!)
show() { echo "--- $*"; k get modelpools,inferenceservices; }
for _ in $(seq 1 60); do [ "$(k get mpool shared-gpu -o jsonpath='{.status.phase}')" == Ready ] && break; sleep 1; done
show "cold pool warmed its default"
rport() { grep ' started ' "$state/router.log" | grep -o " $1=[0-9]*" | cut -d= -f2; }
for _ in $(seq 1 60); do curl -fs "http://127.0.0.1:$(rport health_port)/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
api="http://127.0.0.1:$(rport port)"
echo "--- the models behind the router (curl $api/v1/models)"
curl -fsS "$api/v1/models" | jq -c '.data[] | {id, resident: .modelpool.resident}'
echo "--- a chat completion for qwen-7b, which is not resident: the router holds it while the pool swaps"
start=$(date +%s%3N)
curl -sS "$api/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"model":"qwen-7b","messages":[{"role":"user","content":"Hello!"}],"max_tokens":5}' \
	>"$state/answer.json" & pids+=($!)
curl_pid=$!
for _ in $(seq 1 100); do
	held=$(curl -fsS "http://127.0.0.1:$(rport metrics_port)/metrics" |
		awk '$1 ~ /^modelpool_router_held_requests\{/ {s += $2} END {print s + 0}')
	[ "$held" -gt 0 ] && break
	sleep 0.1
done
echo "--- while held ($held request held by the router):"
k get modelpools
wait "$curl_pid"
echo "--- the answer, after $(($(date +%s%3N) - start)) ms:"
jq -c '{model, content: .choices[0].message.content}' "$state/answer.json"
show "after the swap"
k describe modelpool shared-gpu | sed -n '/Events:/,$p'
port=$(grep -o ' metrics_port=[0-9]*' "$state/operator.log" | head -n 1 | cut -d= -f2)
# Metrics are HTTPS for callers allowed get /metrics: a ServiceAccount bound to the metrics-reader
# ClusterRole, as a Prometheus would be, and its token. -k: the certificate is self-signed.
k apply -f "$top/config/rbac/metrics_reader_role.yaml" >/dev/null
k create serviceaccount demo-scraper >/dev/null
k create clusterrolebinding demo-scraper --clusterrole=modelpool-operator-metrics-reader \
	--serviceaccount=default:demo-scraper >/dev/null
token=$(k create token demo-scraper)
echo "--- without a token: HTTP $(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/metrics")"
echo "--- the operator's metrics (curl -H 'Authorization: Bearer <demo-scraper's token>' https://127.0.0.1:$port/metrics), a few of them"
curl -fsSk -H "Authorization: Bearer $token" "https://127.0.0.1:$port/metrics" |
	grep -E '^(modelpool_pool_resident|modelpool_swaps_total|modelpool_drain_fence_total|modelpool_reaction_seconds_(count|sum)|process_resident_memory_bytes)'

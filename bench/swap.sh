#!/usr/bin/env bash
# bench/swap.sh: what a swap costs beyond the member's own work, through two router replicas, against a real
# kube-apiserver + etcd (test/controlplane), the operator and the member simulator (test/sim) on loopback.
# One pool of two members; the simulator brings a Pod up in BENCH_LOAD_MS (its load time) and the members are
# idle when a swap begins (no drain). BENCH_SWAPS times, a chat completion for the member that is not
# resident, alternately through router 1 and router 2 (each request makes one swap), timed by curl from send
# to answer; a swap's overhead is that time less BENCH_LOAD_MS. Run with the operator's acknowledged swaps on
# (the routers' Leases end the drain fence, docs/router.md "Acknowledged swaps") and off (every swap waits
# the whole fence, --drain-fence 2s), then prints both rows as Markdown (p50, p90, max), which
# bench/swap-results.md records.
#
# Environment: BENCH_BUILD (build/bench, a Release build made here), BENCH_SWAPS (20 per mode), BENCH_LOAD_MS
# (500), BENCH_KEEP (keep the temp dir with the logs).
# Needs: cmake and the project's build dependencies, python3, kubectl, curl. Run nothing else alongside.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
build=${BENCH_BUILD:-$src/build/bench}
swaps=${BENCH_SWAPS:-20}
load_ms=${BENCH_LOAD_MS:-500}
export MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
[ $# -eq 0 ] || { echo "usage: bench/swap.sh  (settings in the environment: see its header)" >&2; exit 2; }
say() { echo "bench-swap: $(date +%T) $*" >&2; }

say "building (Release) in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMP_TESTS=ON >/dev/null
cmake --build "$build" -j2 --target modelpool-operator modelpool-router member-sim >/dev/null

bench_name=swap
# shellcheck source=lib.sh
source "$src/bench/lib.sh"
bench_control_plane
ns=sbench
system_namespace
# 127.5.0.0 and up: clear of the e2e tests' and the other benchmarks' addresses.
"$build/member-sim" --kubeconfig "$KUBECONFIG" --namespace "$ns" --load-ms "$load_ms" --ip-first $((5 * 65536 + 2)) \
	--ip-count 256 >"$dir/sim.out" 2>"$dir/sim.log" &
pids+=("$!")
create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b
kubectl_admin -n "$ns" patch modelpool pool --type=merge -p '{"spec":{"swapBudget":"120s"}}' >/dev/null

# run_mode NAME OPERATOR-ARGS...: the operator and two routers, BENCH_SWAPS swaps; prints the overheads (ms),
# one a line, to $dir/NAME.ms.
run_mode() {
	local name=$1 op r1 r2 i model via t resident
	shift
	"$build/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" --metrics-bind-address 0 \
		--health-probe-bind-address 127.0.0.1:0 --router-lease-namespace modelpool-system "$@" \
		>"$dir/operator-$name.log" 2>&1 &
	op=$!
	for i in 1 2; do
		"$build/modelpool-router" --kubeconfig "$KUBECONFIG" --namespace "$ns" --home-namespace "$ns" \
			--metrics-secure=false --bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 \
			--health-probe-bind-address 127.0.0.1:0 >"$MP_STATE_DIR/router-$name-$i.log" 2>&1 &
		eval "r$i=\$!"
	done
	pids+=("$op" "$r1" "$r2")
	wait_for 60 router_ready "router-$name-1.log"
	wait_for 60 router_ready "router-$name-2.log"
	wait_for 120 pool_settled
	: >"$dir/$name.ms"
	for i in $(seq 1 "$swaps"); do
		resident=$(kubectl_admin -n "$ns" get modelpool pool -o 'jsonpath={.status.residentMember}')
		model=m-a
		[ "$resident" = m-a ] && model=m-b
		via="router-$name-$((i % 2 + 1)).log"
		t=$(curl -sS -o "$dir/answer.json" -w '%{http_code} %{time_total}' --max-time 150 \
			-H 'Content-Type: application/json' -d "{\"model\":\"$model\",\"messages\":[],\"max_tokens\":1}" \
			"http://127.0.0.1:$(router_port api "$via")/v1/chat/completions")
		[ "${t%% *}" = 200 ] || { say "swap $i to $model through $via: HTTP ${t%% *}"; cat "$dir/answer.json" >&2; exit 1; }
		awk -v s="${t#* }" -v l="$load_ms" 'BEGIN { printf "%.0f\n", s * 1000 - l }' >>"$dir/$name.ms"
		wait_for 60 pool_settled
	done
	kill -TERM "$op" "$r1" "$r2"
	wait "$op" "$r1" "$r2" || true
}
# The pool at rest: Ready, nothing pending.
pool_settled() {
	[ "$(kubectl_admin -n "$ns" get modelpool pool -o 'jsonpath={.status.phase}/{.status.pendingMember}')" = Ready/ ]
}
# stats NAME: p50, p90 and max of $dir/NAME.ms.
stats() {
	sort -n "$dir/$1.ms" | awk '{ v[NR] = $1 } END { printf "%d | %d | %d | %d", NR, v[int((NR + 1) * 0.5)], v[int((NR * 0.9) + 0.5)], v[NR] }'
}

say "acknowledged swaps on: $swaps swaps"
run_mode acks --fence-acks=true
say "acknowledged swaps off (the whole fence each swap): $swaps swaps"
run_mode fence --fence-acks=false
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "| operator | swaps | overhead p50 (ms) | p90 | max |"
echo "|---|---|---|---|---|"
echo "| acknowledged swaps on | $(stats acks) |"
echo "| off (whole fence) | $(stats fence) |"
echo
echo "commit $commit, member load time $load_ms ms, two router replicas, $(date -u +%F)"

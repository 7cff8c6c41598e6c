#!/usr/bin/env bash
# bench/run.sh [N...]: footprint, cold start, reaction latency, API requests per swap and idle CPU of the
# operator against a real kube-apiserver + etcd (test/controlplane), with the member simulator (test/sim)
# playing the InferenceService controller and the kubelet. For each N (default: 100 1000 10000) on a fresh
# control plane: N pools of 3 members (bench/bench.py create), simulators until every member is Ready or
# Stopped, then the operator: cold start, an idle minute, BENCH_SWAPS swaps one after another (each requested
# through the pool's annotation, as the router does), then for each K in BENCH_HUNG_K BENCH_HUNG_SWAPS swaps
# while K other pools' incumbents hang their idle probes. One JSON per N goes to $BENCH_OUT/raw/N.json;
# bench/report.py turns them into results.csv, results.md and the plots.
#
# Environment: BENCH_SWAPS (300), BENCH_IDLE_S (60), BENCH_OUT (bench/), BENCH_PER_NS (pools per namespace and
# per simulator process, 1000: each simulator serves one listener per live Pod and a process has 20000 fds),
# BENCH_BUILD (build/bench, a Release build made here), BENCH_DEADLINE_S (3600, per phase), BENCH_HUNG_K
# ("2 8": hung pools below and above the operator's 4 concurrent reconciles; "" skips the phase),
# BENCH_HUNG_SWAPS (50: each takes seconds once the hung pools hold every reconcile slot), BENCH_HOLDBACKS (50:
# members scaled to 1 beside their resident, as `kubectl scale`; the audit log times how long each stays at 1).
# Needs: cmake and the project's build dependencies, python3, kubectl, gnuplot (installed with apt-get if
# missing). Heavy: run nothing else alongside (2 cores). Everything it starts it stops, also on Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
out=${BENCH_OUT:-$here}
build=${BENCH_BUILD:-$src/build/bench}
swaps=${BENCH_SWAPS:-300}
idle_s=${BENCH_IDLE_S:-60}
per_ns=${BENCH_PER_NS:-1000}
deadline=${BENCH_DEADLINE_S:-3600}
hung_ks=${BENCH_HUNG_K-2 8}
hung_swaps=${BENCH_HUNG_SWAPS:-50}
holdbacks=${BENCH_HOLDBACKS:-50}
export BENCH_PER_NS=$per_ns MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
[ $# -gt 0 ] || set -- 100 1000 10000
for n in "$@"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/run.sh [N...]  (N: pools)" >&2; exit 2; }; done

say() { echo "bench: $(date +%T) $*" >&2; }

if ! command -v gnuplot >/dev/null; then
	say "installing gnuplot-nox for the plots"
	DEBIAN_FRONTEND=noninteractive apt-get install -y gnuplot-nox >/dev/null || say "no gnuplot: plots will be skipped"
fi
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$src" diff --quiet HEAD -- src include 2>/dev/null || commit+="+changes"
say "building (Release) in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 --target modelpool-operator member-sim >/dev/null

# shellcheck source=../test/controlplane/start.sh
source "$src/test/controlplane/start.sh"
# shellcheck source=../test/e2e/lib.sh
source "$src/test/e2e/lib.sh"

state="" pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
	[ -z "$state" ] || bash "$src/test/controlplane/stop.sh" "$state" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ticks=$(getconf CLK_TCK)
# cpu_s PID: user+system CPU seconds of a process so far.
cpu_s() { awk -v t="$ticks" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat"; }
# kib PID FIELD: VmRSS or VmHWM in KiB.
kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
# priv PID: private memory in KiB (smaps_rollup Private_Clean + Private_Dirty): what the process
# alone holds, without the shared libraries' file pages that RSS also counts.
priv() { awk '$1 == "Private_Clean:" || $1 == "Private_Dirty:" { s += $2 } END { print s + 0 }' "/proc/$1/smaps_rollup"; }
# dirty PID: Private_Dirty in KiB: what Private is without the clean file pages that only this
# process happens to map (the libraries count as private when no other process maps them).
dirty() { awk '$1 == "Private_Dirty:" { print $2 }' "/proc/$1/smaps_rollup"; }
# anon PID: its anonymous memory in KiB (smaps_rollup Anonymous: heap, stacks, private mappings).
anon() { awk '$1 == "Anonymous:" { print $2 }' "/proc/$1/smaps_rollup"; }
now_ns() { date +%s%N; }

# start_op LOG: the operator with its ServiceAccount identity, logs at info.
# Its /metrics, once it has them, on a loopback port of its own: the default :8080 would clash with
# the simulated Pods' probe listeners.
metrics_args=() metrics_url=""
if "$build/modelpool-operator" --help | grep -q -- --metrics-bind-address; then
	metrics_port=$(_cp_pick_port)
	metrics_args=(--metrics-bind-address "127.0.0.1:$metrics_port")
	# Plain HTTP: the benchmark reads its own histograms; access reviews are not what it measures.
	"$build/modelpool-operator" --help | grep -q -- --metrics-secure && metrics_args+=(--metrics-secure=false)
	metrics_url=http://127.0.0.1:$metrics_port/metrics
	export BENCH_METRICS_URL=$metrics_url # bench.py hung reads the histograms around its phase
fi
start_op() {
	"$build/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" "${metrics_args[@]}" ${BENCH_OPERATOR_ARGS:-} >"$1" 2>&1 &
	op=$!
	pids+=("$op")
}
stop_op() {
	kill -TERM "$op"
	wait "$op" || say "operator exit status $?"
	local p keep=()
	for p in "${pids[@]}"; do [ "$p" == "$op" ] || keep+=("$p"); done
	pids=("${keep[@]}")
}
# log_ns LOG PATTERN: the time (ns) of the first log line matching PATTERN.
log_ns() {
	local ts
	ts=$(grep -m1 -- "$2" "$1" | awk '{print $1}')
	[ -n "$ts" ] && date -d "$ts" +%s%N
}

run_one() {
	local n=$1 dir raw nsims k t0 t_synced rss_empty priv_empty dirty_empty anon_empty cs
	dir=$(mktemp -d "${TMPDIR:-/tmp}/mp-bench-$n.XXXXXX")
	state=$dir/cp
	raw=$out/raw/$n.json
	mkdir -p "$out/raw"
	say "N=$n: control plane in $state"
	export MP_APISERVER_EXTRA_ARGS="--audit-policy-file=$here/audit-policy.yaml --audit-log-path=$state/audit.log --audit-log-maxsize=0"
	cp_start "$state"
	# shellcheck disable=SC1091
	source "$state/env"
	export MP_STATE_DIR=$state
	apply_crd "$src/crd/modelpools.inference.llmkube.dev.yaml" "$src/test/crds/inferenceservices.inference.llmkube.dev.yaml"
	install_operator_rbac

	# The operator's footprint with nothing to cache: the base that per-object bytes are counted from.
	start_op "$dir/operator-empty.log"
	wait_for 60 grep -q "caches synced" "$dir/operator-empty.log"
	sleep 2
	rss_empty=$(kib "$op" VmRSS) priv_empty=$(priv "$op") dirty_empty=$(dirty "$op") anon_empty=$(anon "$op")
	stop_op

	say "N=$n: creating objects"
	python3 "$here/bench.py" create "$n" >&2
	nsims=$(((n + per_ns - 1) / per_ns))
	for ((k = 0; k < nsims; k++)); do
		# 127.1.0.0 and up, 4096 addresses per simulator: below the test runs' blocks (127.16 and up).
		"$build/member-sim" --kubeconfig "$KUBECONFIG" --namespace "bench-$k" --load-ms 0 \
			--ip-first $((65536 + k * 4096)) --ip-count 4096 >"$dir/sim-$k.out" 2>"$dir/sim-$k.log" &
		pids+=("$!")
	done
	say "N=$n: waiting for $nsims simulator(s) to bring the members up"
	python3 "$here/bench.py" wait-members "$n" "$deadline" >&2

	say "N=$n: cold start"
	local cpu_api0 cpu_etcd0 cpu_api1 cpu_etcd1 cpu_op_sync
	cpu_api0=$(cpu_s "$MP_APISERVER_PID") cpu_etcd0=$(cpu_s "$MP_ETCD_PID")
	python3 "$here/bench.py" coldstart "$n" "$dir/coldstart.json" "$deadline" &
	cs=$!
	pids+=("$cs")
	wait_for 120 test -f "$dir/coldstart.json.ready"
	t0=$(now_ns)
	start_op "$dir/operator.log"
	wait "$cs"
	cpu_op_sync=$(cpu_s "$op")
	cpu_api1=$(cpu_s "$MP_APISERVER_PID") cpu_etcd1=$(cpu_s "$MP_ETCD_PID")
	t_synced=$(log_ns "$dir/operator.log" "caches synced")
	local rss_sync hwm_sync
	rss_sync=$(kib "$op" VmRSS) hwm_sync=$(kib "$op" VmHWM)

	say "N=$n: idle for $idle_s s"
	sleep 5 # the cold start's Events and last watch events
	local c0 c1 t_idle0 t_idle1 rss_steady priv_steady dirty_steady anon_steady
	t_idle0=$(now_ns) c0=$(cpu_s "$op")
	sleep "$idle_s"
	t_idle1=$(now_ns) c1=$(cpu_s "$op")
	rss_steady=$(kib "$op" VmRSS) priv_steady=$(priv "$op") dirty_steady=$(dirty "$op") anon_steady=$(anon "$op")

	say "N=$n: $swaps swaps"
	local cpu_sw0 cpu_sw1
	cpu_sw0=$(cpu_s "$op")
	python3 "$here/bench.py" swaps "$n" "$swaps" "$dir/swaps.json" >&2
	cpu_sw1=$(cpu_s "$op")
	sleep 1
	local metrics=""
	[ -z "$metrics_url" ] || metrics=$(curl -fsS --max-time 5 "$metrics_url" | grep -E '^modelpool_' || true)

	say "N=$n: $holdbacks members scaled to 1 beside the resident (kubectl scale), each held back"
	python3 "$here/bench.py" holdback "$n" "$holdbacks" "$dir/holdback.json" >&2

	local k hung_done=()
	for k in $hung_ks; do
		if [ "$k" -ge "$n" ]; then
			say "N=$n: no pool left to measure beside $k hung ones: skipped"
			continue
		fi
		say "N=$n: $hung_swaps swaps while $k other pools' incumbents hang their idle probes"
		python3 "$here/bench.py" hung "$n" "$k" "$hung_swaps" "$dir/hung-$k.json" >&2
		hung_done+=("$k")
	done
	local hwm rss_end
	hwm=$(kib "$op" VmHWM)
	rss_end=$(kib "$op" VmRSS)
	stop_op

	local sw0 sw1 win
	sw0=$(python3 -c "import json;print(json.load(open('$dir/swaps.json'))['summary']['t_start_ns'])")
	sw1=$(python3 -c "import json;print(json.load(open('$dir/swaps.json'))['summary']['t_end_ns'])")
	local hung_windows=()
	for k in "${hung_done[@]}"; do
		hung_windows+=("hung$k:$(python3 -c "import json;s=json.load(open('$dir/hung-$k.json'))['summary'];print(f\"{s['t_start_ns']}:{s['t_end_ns']}\")")")
		python3 "$here/bench.py" own "$state/audit.log" "$MP_OPERATOR_USER" "$dir/hung-$k.json" >"$dir/hung-$k.own.json"
	done
	win=$(python3 "$here/bench.py" audit "$state/audit.log" "$MP_OPERATOR_USER" \
		"cold:$t0:$(python3 -c "import json;print(json.load(open('$dir/coldstart.json'))['t_all_ns'])")" \
		"idle:$t_idle0:$t_idle1" "swaps:$sw0:$sw1" "${hung_windows[@]}")

	local own holdback
	own=$(python3 "$here/bench.py" own "$state/audit.log" "$MP_OPERATOR_USER" "$dir/swaps.json")
	holdback=$(python3 "$here/bench.py" window "$state/audit.log" modelpool-e2e-admin "$MP_OPERATOR_USER" "$dir/holdback.json")

	python3 - "$raw" "$dir" "${hung_done[@]}" <<EOF
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, "$here")
from report import machine
hung = []
for k in sys.argv[3:]:
    h = json.load(open(f"{sys.argv[2]}/hung-{k}.json"))["summary"]
    hung.append({"k": int(k), "swaps": h, "own": json.load(open(f"{sys.argv[2]}/hung-{k}.own.json")),
                 "metrics_before": h.pop("metrics_before", ""), "metrics_after": h.pop("metrics_after", "")})
cold = json.load(open("$dir/coldstart.json"))
sw = json.load(open("$dir/swaps.json"))["summary"]
audit = json.loads('''$win''')
own = json.loads('''$own''')
holdback = json.loads('''$holdback''')
metrics = '''$metrics'''
json.dump({
  "pools": $n, "objects": 5 * $n, "simulators": $nsims,
  "rss_empty_kib": $rss_empty, "rss_sync_kib": $rss_sync, "hwm_sync_kib": $hwm_sync,
  "rss_steady_kib": $rss_steady, "priv_empty_kib": $priv_empty, "dirty_empty_kib": $dirty_empty,
  "anon_empty_kib": $anon_empty, "priv_steady_kib": $priv_steady, "dirty_steady_kib": $dirty_steady,
  "anon_steady_kib": $anon_steady, "rss_end_kib": $rss_end, "rss_peak_kib": $hwm,
  "t0_ns": $t0, "t_synced_ns": int("${t_synced:-0}"), "t_all_ns": cold["t_all_ns"], "t_first_ns": cold["t_first_ns"],
  "cpu_operator_cold_s": $cpu_op_sync, "cpu_apiserver_cold_s": round($cpu_api1 - $cpu_api0, 2),
  "cpu_etcd_cold_s": round($cpu_etcd1 - $cpu_etcd0, 2),
  "idle_s": ($t_idle1 - $t_idle0) / 1e9, "idle_cpu_s": round($c1 - $c0, 2),
  "cpu_operator_swaps_s": round($cpu_sw1 - $cpu_sw0, 2),
  "swaps": sw, "audit": audit, "own": own, "metrics": metrics, "hung": hung, "holdback": holdback,
  "hung_swaps_each": $hung_swaps, "commit": "$commit", "measured": "$(date -u +%FT%TZ)", "machine": machine(),
}, open(sys.argv[1], "w"), indent=1)
EOF
	say "N=$n: done: $raw"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
	bash "$src/test/controlplane/stop.sh" "$state" || true
	state=""
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$dir"
}

for n in "$@"; do run_one "$n"; done
python3 "$here/report.py" "$out"

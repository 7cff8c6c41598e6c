#!/usr/bin/env bash
# bench/heap.sh N [OUT]: where the operator's heap goes at N pools. The same cluster as bench/run.sh
# (fresh control plane, N pools of 3 members, the member simulator), then the operator under
# heaptrack: cold start, an idle pause, BENCH_SWAPS swaps, and a SIGKILL while steady, so every
# allocation still live is in the trace as "leaked". Writes OUT/heap-N.txt (heaptrack_print: the
# live bytes by allocation site, every stack) and OUT/heap-N.status (VmRSS, VmHWM and smaps_rollup
# just before the kill; run alone, also glibc's malloc_stats through gdb). OUT defaults to a temp
# dir. Heavy like run.sh: run nothing alongside.
#
# Environment: BENCH_SWAPS (100), BENCH_IDLE_S (10), BENCH_PER_NS, BENCH_BUILD (build/heap: a
# RelWithDebInfo build, for stacks), BENCH_DEADLINE_S (1800), BENCH_HEAPTRACK (1; 0 runs the
# operator alone: only the .status file, with figures heaptrack does not inflate).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
n=${1:?usage: bench/heap.sh N [OUT]}
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/heap.sh N [OUT]" >&2; exit 2; }
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/mp-heap.XXXXXX")}
build=${BENCH_BUILD:-$src/build/heap}
swaps=${BENCH_SWAPS:-100}
idle_s=${BENCH_IDLE_S:-10}
per_ns=${BENCH_PER_NS:-1000}
deadline=${BENCH_DEADLINE_S:-1800}
export BENCH_PER_NS=$per_ns MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
use_ht=${BENCH_HEAPTRACK:-1}
for tool in gdb $([ "$use_ht" = 0 ] || echo heaptrack); do
	command -v "$tool" >/dev/null || { echo "bench/heap.sh: needs $tool (apt-get install $tool)" >&2; exit 2; }
done
mkdir -p "$out"

say() { echo "heap: $(date +%T) $*" >&2; }
say "building (RelWithDebInfo) in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
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
	[ -z "$state" ] || bash "$src/test/controlplane/stop.sh" "$state" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dir=$(mktemp -d "${TMPDIR:-/tmp}/mp-heap-$n.XXXXXX")
state=$dir/cp
cp_start "$state"
# shellcheck disable=SC1091
source "$state/env"
export MP_STATE_DIR=$state
apply_crd "$src/crd/modelpools.inference.llmkube.dev.yaml" "$src/test/crds/inferenceservices.inference.llmkube.dev.yaml"
install_operator_rbac
say "creating $n pools"
python3 "$here/bench.py" create "$n" >&2
nsims=$(((n + per_ns - 1) / per_ns))
for ((k = 0; k < nsims; k++)); do
	"$build/member-sim" --kubeconfig "$KUBECONFIG" --namespace "bench-$k" --load-ms 0 \
		--ip-first $((65536 + k * 4096)) --ip-count 4096 >"$dir/sim-$k.out" 2>"$dir/sim-$k.log" &
	pids+=("$!")
done
python3 "$here/bench.py" wait-members "$n" "$deadline" >&2

say "operator$([ "$use_ht" = 0 ] || echo " under heaptrack")"
python3 "$here/bench.py" coldstart "$n" "$dir/coldstart.json" "$deadline" &
cs=$!
pids+=("$cs")
wait_for 120 test -f "$dir/coldstart.json.ready"
wrap=()
[ "$use_ht" = 0 ] || wrap=(heaptrack -o "$out/heap-$n")
"${wrap[@]}" "$build/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" \
	--metrics-bind-address "127.0.0.1:$(_cp_pick_port)" --metrics-secure=false \
	--health-probe-bind-address "127.0.0.1:$(_cp_pick_port)" >"$dir/operator.log" 2>&1 &
pids+=("$!")
wait "$cs"
op=$(pgrep -n -f "^$build/modelpool-operator --kubeconfig")
say "cold start done (operator pid $op); idle $idle_s s, then $swaps swaps"
sleep "$idle_s"
[ "$swaps" -eq 0 ] || python3 "$here/bench.py" swaps "$n" "$swaps" "$dir/swaps.json" >&2
sleep 2
{
	grep -E '^(VmRSS|VmHWM)' "/proc/$op/status"
	grep -E '^(Rss|Private_Clean|Private_Dirty|Anonymous)' "/proc/$op/smaps_rollup"
} >"$out/heap-$n.status"
if [ "$use_ht" = 0 ]; then
	# glibc's own account of the heap (in use against held from the system) goes to the
	# operator's stderr. (Not under heaptrack: its own allocations would be in it.)
	gdb -p "$op" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || say "gdb could not attach"
	sleep 1
	sed -n '/^Arena 0:/,$p' "$dir/operator.log" | grep -v '^[0-9]\{4\}-' >>"$out/heap-$n.status" || true
	kill -KILL "$op"
	say "done: $out/heap-$n.status"
	exit 0
fi
kill -KILL "$op"
wait_for 120 sh -c "ls '$out'/heap-$n*.zst '$out'/heap-$n*.gz 2>/dev/null | grep -q ."
sleep 3 # heaptrack's interpreter finishes the file
trace=$(ls "$out"/heap-"$n"*.zst "$out"/heap-"$n"*.gz 2>/dev/null | head -1 || true)
heaptrack_print -f "$trace" --print-leaks 1 --print-peaks 0 --print-allocators 0 \
	--print-temporary 0 --merge-backtraces 0 -n 400 -s 0 >"$out/heap-$n.txt" 2>&1 || true
say "done: $out/heap-$n.txt $out/heap-$n.status"

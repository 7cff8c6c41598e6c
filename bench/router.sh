#!/usr/bin/env bash
# bench/router.sh: what modelpool-router costs in front of a resident member, against a real kube-apiserver
# + etcd (test/controlplane), the operator and the member simulator (test/sim) on loopback. One pool of two
# members (m-a resident, m-b not); the load client is test/tools/oai-load. In one run, direct to m-a's Pod,
# through the router, and through a plain reverse proxy (Debian's haproxy, when installed: the practical
# limit of a proxy on these cores; BENCH_PROXY=0 skips it), the order rotating, BENCH_ROUNDS rounds of:
# added latency (concurrency 1, not streamed, max_tokens 1), requests per second at 16 and 64 concurrent
# clients, streamed tokens per second (concurrency 8, max_tokens 256; token-ms 0, then paced at token-ms 5),
# with the CPU of the process in between and (router) its drain-fence reads of the pool;
# the router's RSS and CPU idle (before and after the traffic); then BENCH_HOLD clients at once for m-b,
# which cannot load within the run, and the router's RSS while it holds them all. The raw JSON goes to
# $BENCH_OUT/raw/router-<UTC time>.json; bench/router-report.py turns it into router-results.md.
#
# Environment: BENCH_BUILD (build/bench, a Release build made here), BENCH_OUT (bench/), BENCH_ROUNDS (5),
# BENCH_LAT_REQUESTS (2000 per target per round), BENCH_RPS_S (8 seconds per target per round),
# BENCH_STREAM_REQUESTS (48 per target per round), BENCH_HOLD (10000 held clients; 0 skips), BENCH_IDLE_S
# (60, each idle window), BENCH_PROXY (1: haproxy beside the router when installed; 0 none), BENCH_KEEP
# (keep the temp dir with the logs).
# Needs: cmake and the project's build dependencies, python3, kubectl, curl. Heavy: run nothing else
# alongside (2 cores). Everything it starts it stops, also on Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
out=${BENCH_OUT:-$here}
build=${BENCH_BUILD:-$src/build/bench}
rounds=${BENCH_ROUNDS:-5}
lat_n=${BENCH_LAT_REQUESTS:-2000}
rps_s=${BENCH_RPS_S:-8}
stream_n=${BENCH_STREAM_REQUESTS:-48}
hold=${BENCH_HOLD:-10000}
idle_s=${BENCH_IDLE_S:-60}
use_proxy=${BENCH_PROXY:-1}
export MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
[ $# -eq 0 ] || { echo "usage: bench/router.sh  (settings in the environment: see its header)" >&2; exit 2; }

say() { echo "bench-router: $(date +%T) $*" >&2; }

commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$src" diff --quiet HEAD -- src include test/sim test/tools 2>/dev/null || commit+="+changes"
say "building (Release) in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMP_TESTS=ON >/dev/null
cmake --build "$build" -j2 --target modelpool-operator modelpool-router member-sim oai-load >/dev/null

# Every held client is a socket in the router and in the load client: as many fds as allowed.
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((hold + 100)) ] || { say "ulimit -n $(ulimit -n) is too low for $hold held clients"; exit 1; }

bench_name=router
# shellcheck source=lib.sh
source "$src/bench/lib.sh"

ticks=$(getconf CLK_TCK)
# cpu_ticks PID: utime+stime in clock ticks; cpu_ns PID: time on CPU in ns (schedstat, finer), summed
# over the process's threads (/proc/PID/schedstat is its main thread's alone: haproxy runs one thread
# per core, and its second thread's time was not counted before).
cpu_ticks() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$1/stat"; }
cpu_ns() { cat "/proc/$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
# kib PID FIELD: a /proc/PID/status field in KiB (VmRSS, VmHWM, RssAnon, ...).
kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
now_ns() { date +%s%N; }
# mem PID: the memory fields as a JSON object.
mem() {
	printf '{"rss_kib": %s, "hwm_kib": %s, "anon_kib": %s, "file_kib": %s, "fds": %s}' \
		"$(kib "$1" VmRSS)" "$(kib "$1" VmHWM)" "$(kib "$1" RssAnon)" "$(kib "$1" RssFile)" "$(fds "$1")"
}

bench_control_plane
ns=rbench
# 127.2.0.0 and up: clear of the e2e tests' 127.0.0.x and bench/run.sh's 127.1.x.x.
"$build/member-sim" --kubeconfig "$KUBECONFIG" --namespace "$ns" --load-ms 200 --ip-first $((2 * 65536 + 2)) \
	--ip-count 256 >"$dir/sim.out" 2>"$dir/sim.log" &
sim=$!
pids+=("$sim")
"$build/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" --metrics-bind-address 0 \
	--health-probe-bind-address 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
pids+=("$!")
create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b
kubectl_admin -n "$ns" patch modelpool pool --type=merge -p '{"spec":{"swapBudget":"900s"}}' >/dev/null
wait_for 120 pool_is pool Ready m-a "$ns"
pod_ip=$(kubectl_admin -n "$ns" get pods -l inference.llmkube.dev/service=m-a -o 'jsonpath={.items[0].status.podIP}')
[ -n "$pod_ip" ] || { say "m-a has no Pod IP"; exit 1; }

# The router at log level 0 (info), as it runs in a cluster: debug lines per request are not its cost.
# Every client here is 127.0.0.1, so the per-client cap (256 by default) is off: the held clients stand
# for many Pods.
# The operator's namespace: router replicas register there (a Lease each) before they forward.
system_namespace
"$build/modelpool-router" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-secure=false \
	--bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
	--max-connections-per-client 0 >"$MP_STATE_DIR/router.log" 2>&1 &
router=$!
pids+=("$router")
wait_for 60 router_ready
# The held clients fit the router's connection limit (its open-files limit decides it): fewer if need be.
max_conns=$(sed -n 's/.* max_connections=\([0-9]*\).*/\1/p' "$MP_STATE_DIR/router.log" | head -1)
if [ -n "$max_conns" ] && [ "$hold" -gt $((max_conns - 100)) ]; then
	say "holding $((max_conns - 100)) clients, not $hold: the router's --max-connections is $max_conns here"
	hold=$((max_conns - 100))
fi
router_url="http://127.0.0.1:$(router_port api)/v1/chat/completions"
direct_url="http://$pod_ip:8080/v1/chat/completions"
metrics_url="http://127.0.0.1:$(router_port metrics)/metrics"
say "router pid $router at $router_url; m-a's Pod at $direct_url"
targets="direct router"
proxy="" proxy_url="" proxy_version=""
if [ "$use_proxy" = 1 ] && command -v haproxy >/dev/null; then
	# A plain HTTP reverse proxy to the same Pod, keep-alive both ways, its defaults otherwise (threads: one
	# per core).
	proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	cat >"$dir/haproxy.cfg" <<CFG
global
	maxconn 8000
defaults
	mode http
	timeout connect 5s
	timeout client 120s
	timeout server 120s
	option http-keep-alive
frontend bench
	bind 127.0.0.1:$proxy_port
	default_backend member
backend member
	http-reuse always
	server m-a $pod_ip:8080
CFG
	haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
	proxy=$!
	pids+=("$proxy")
	proxy_url="http://127.0.0.1:$proxy_port/v1/chat/completions"
	proxy_version=$(haproxy -v | awk 'NR == 1 { print $3 }')
	wait_for 30 curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' \
		--data-binary '{"model":"m-a","messages":[]}' "$proxy_url"
	targets="direct router proxy"
	say "haproxy $proxy_version pid $proxy at $proxy_url"
fi
curl -fsS -X POST -H 'Content-Type: application/json' --data-binary '{"model":"m-a","messages":[]}' "$router_url" >/dev/null
curl -fsS -X POST -H 'Content-Type: application/json' --data-binary '{"model":"m-a","messages":[]}' "$direct_url" >/dev/null
# The router's drain-fence reads of the pool so far (every result).
fence_reads() { curl -fsS "$metrics_url" | awk '/^modelpool_router_fence_reads_total\{/ { s += $2 } END { print s + 0 }'; }

# idle NAME: the router's CPU over idle_s seconds with nothing sent, and its memory after.
idle() {
	local t0 t1 c0 c1 n0 n1
	sleep 5 # the last requests' and watches' aftermath
	t0=$(now_ns) c0=$(cpu_ticks "$router") n0=$(cpu_ns "$router")
	sleep "$idle_s"
	t1=$(now_ns) c1=$(cpu_ticks "$router") n1=$(cpu_ns "$router")
	printf '{"name": "%s", "seconds": %s, "cpu_ticks": %s, "cpu_s": %s, "cpu_ns": %s, "mem": %s}' "$1" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')" $((c1 - c0)) \
		"$(awk -v t=$((c1 - c0)) -v h="$ticks" 'BEGIN { printf "%.2f", t / h }')" $((n1 - n0)) "$(mem "$router")"
}

# load NAME TARGET ARGS...: one oai-load run against TARGET (direct, router or proxy) for m-a; prints its
# summary with the CPU during the run (ns) of the process in between (router or proxy; 0 direct) and of the
# simulator, and the router's drain-fence reads meanwhile.
load() {
	local name=$1 target=$2 url via=0 v0=0 v1=0 s0 s1 f0 f1 sum
	shift 2
	case $target in
	direct) url=$direct_url ;;
	router) url=$router_url via=$router ;;
	proxy) url=$proxy_url via=$proxy ;;
	esac
	[ "$via" = 0 ] || v0=$(cpu_ns "$via")
	s0=$(cpu_ns "$sim") f0=$(fence_reads)
	times >"$dir/times0"
	"$build/oai-load" --url "$url" --model m-a --timeout 60 "$@" >"$dir/sum"
	times >"$dir/times1"
	[ "$via" = 0 ] || v1=$(cpu_ns "$via")
	s1=$(cpu_ns "$sim") f1=$(fence_reads)
	printf '{"phase": "%s", "target": "%s", "args": "%s", "via_cpu_ns": %s, "sim_cpu_ns": %s, "fence_reads": %s, "client_cpu_s": %s, "summary": %s}' \
		"$name" "$target" "$*" $((v1 - v0)) $((s1 - s0)) $((f1 - f0)) \
		"$(awk 'FNR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
			"$dir/times1" "$dir/times0" | paste -sd' ' | awk '{ printf "%.3f", $1 - $2 }')" "$(cat "$dir/sum")"
}

say "idle ($idle_s s)"
mem_idle=$(mem "$router")
idle_before=$(idle before)

runs=()
# Warm-up, not reported: connections, caches, the allocator.
for t in $targets; do load warmup "$t" --concurrency 64 --duration 2 >/dev/null; done
# order R: the targets rotated by R, so a drift in the machine's load favours none.
order() {
	local -a ts=($targets)
	local n=${#ts[@]} i out=""
	for ((i = 0; i < n; i++)); do out+="${ts[$(((i + $1) % n))]} "; done
	echo "${out% }"
}
for ((r = 1; r <= rounds; r++)); do
	order=$(order "$r")
	say "round $r/$rounds ($order)"
	for t in $order; do runs+=("$(load latency "$t" --concurrency 1 --requests "$lat_n" --max-tokens 1)"); done
	for t in $order; do runs+=("$(load rps16 "$t" --concurrency 16 --duration "$rps_s" --max-tokens 1)"); done
	for t in $order; do runs+=("$(load rps "$t" --concurrency 64 --duration "$rps_s" --max-tokens 1)"); done
	for t in $order; do
		runs+=("$(load stream "$t" --concurrency 8 --requests "$stream_n" --stream --max-tokens 256)")
	done
done
# The same streams at a member's pace (token-ms 5, 200 tokens/s per stream): the router must deliver them
# at the rate the member makes them, which token-ms 0 (a race for the same 2 cores) cannot show.
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/token-ms=5 >/dev/null
sleep 1 # the simulator's watch
for ((r = 1; r <= rounds; r++)); do
	order=$(order "$r")
	say "paced streams, round $r/$rounds ($order)"
	for t in $order; do
		runs+=("$(load stream-paced "$t" --concurrency 8 --requests 16 --stream --max-tokens 256)")
	done
done
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/token-ms=0 >/dev/null
mem_after_load=$(mem "$router")
say "idle after the traffic ($idle_s s)"
idle_after=$(idle after)

hold_json=null
if [ "$hold" -gt 0 ]; then
	say "$hold clients at once for m-b, which cannot load within the run"
	kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-b sim.modelpool.test/load-ms=3600000 >/dev/null
	held() { curl -fsS "$metrics_url" | awk '/^modelpool_router_held_requests\{/ { s += $2 } END { print s + 0 }'; }
	mem_before_hold=$(mem "$router")
	t0=$(now_ns)
	"$build/oai-load" --url "$router_url" --model m-b --concurrency "$hold" --requests "$hold" --timeout 900 \
		--out "$dir/hold.jsonl" >"$dir/hold.summary" 2>"$dir/hold.err" &
	bench_child=$!
	peak=0 t_all=0 deadline=$((SECONDS + 300))
	while [ "$SECONDS" -lt "$deadline" ]; do
		n=$(held || echo 0)
		[ "$n" -le "$peak" ] || peak=$n
		if [ "$n" -ge "$hold" ]; then
			t_all=$(now_ns)
			break
		fi
		kill -0 "$bench_child" 2>/dev/null || break
		sleep 1
	done
	sleep 2 # settled: nothing more arrives
	n=$(held || echo 0)
	mem_held=$(mem "$router")
	phase=$(pool_get pool '{.status.phase}/{.status.residentMember}/{.status.pendingMember}' "$ns")
	kill -TERM "$bench_child" 2>/dev/null || true
	wait "$bench_child" 2>/dev/null || true
	bench_child=""
	# A held (suspended) connection is not polled by libmicrohttpd, so a client that left is only noticed
	# when its request is answered: what the router still holds 10 s after every client closed.
	sleep 10
	left=$(held || echo null)
	mem_left=$(mem "$router")
	hold_json=$(printf '{"clients": %s, "held_peak": %s, "held_at_measure": %s, "seconds_to_all": %s, "pool": "%s", "mem_before": %s, "mem_held": %s, "held_after_clients_left": %s, "mem_after_clients_left": %s}' \
		"$hold" "$((peak > n ? peak : n))" "$n" \
		"$(awk -v a="$t0" -v b="$t_all" 'BEGIN { print b ? sprintf("%.2f", (b - a) / 1e9) : "null" }')" \
		"$phase" "$mem_before_hold" "$mem_held" "$left" "$mem_left")
fi

mkdir -p "$out/raw"
raw=$out/raw/router-$(date -u +%Y%m%dT%H%M%SZ).json
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n' "${runs[@]}" >"$dir/runs.jsonl"
python3 - "$raw" "$dir/runs.jsonl" <<EOF
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, "$here")
from report import machine
runs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
json.dump({
  "commit": "$commit", "measured": "$(date -u +%FT%TZ)", "machine": machine(), "loadavg_end": "$loadavg",
  "rounds": $rounds, "proxy": "$proxy_version", "fence_ms": 2000, "mem_idle": json.loads('''$mem_idle'''), "mem_after_load": json.loads('''$mem_after_load'''),
  "idle": [json.loads('''$idle_before'''), json.loads('''$idle_after''')], "runs": runs,
  "hold": json.loads('''$hold_json'''),
}, open(sys.argv[1], "w"), indent=1)
EOF
say "done: $raw"
python3 "$here/router-report.py" "$raw" "$out/router-results.md"

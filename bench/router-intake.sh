#!/usr/bin/env bash
# bench/router-intake.sh: the router's memory under stalled uploads (issue 25): against a real kube-apiserver
# + etcd (test/controlplane), the operator and the member simulator on loopback, with the router's defaults
# (--body-buffer-budget 128Mi, --body-idle-timeout 30s). For N in BENCH_STALLS (8 50): N clients each
# announce a 31 MiB body whose model comes last (as OpenAI's Python SDK sends it), send 31 MiB of it and stop;
# once all have sent what they will, the router's RSS and its buffered-bytes gauge are read, and BENCH_SMALL
# small requests (model last, as the SDK sends them) are timed meanwhile; then the clients leave. What each
# stalled client got is counted (503 at once, the connection reset while sending, or nothing: held). The
# report goes to $BENCH_OUT/router-intake-results.md with the machine and the commit.
#
# Environment: BENCH_BUILD (build/bench, a Release build made here), BENCH_OUT (bench/), BENCH_STALLS
# ("8 50"), BENCH_SMALL (20), BENCH_ROUTER (a modelpool-router binary to measure instead of the one built,
# e.g. an older commit's; its flags must match), BENCH_KEEP (keep the temp dir with the logs).
# Needs: cmake and the project's build dependencies, python3, kubectl, curl.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
out=${BENCH_OUT:-$here}
build=${BENCH_BUILD:-$src/build/bench}
stalls=${BENCH_STALLS:-8 50}
small=${BENCH_SMALL:-20}
export MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
[ $# -eq 0 ] || { echo "usage: bench/router-intake.sh  (settings in the environment: see its header)" >&2; exit 2; }

say() { echo "bench-intake: $(date +%T) $*" >&2; }

commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$src" diff --quiet HEAD -- src include 2>/dev/null || commit+="+changes"
say "building (Release) in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMP_TESTS=ON >/dev/null
cmake --build "$build" -j2 --target modelpool-operator modelpool-router member-sim >/dev/null
router_bin=${BENCH_ROUTER:-$build/modelpool-router}

bench_name=intake
# shellcheck source=lib.sh
source "$src/bench/lib.sh"
mib() { awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

bench_control_plane
ns=ibench
"$build/member-sim" --kubeconfig "$KUBECONFIG" --namespace "$ns" --load-ms 200 --ip-first $((3 * 65536 + 2)) \
	--ip-count 256 >"$dir/sim.out" 2>"$dir/sim.log" &
pids+=("$!")
"$build/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" --metrics-bind-address 0 \
	--health-probe-bind-address 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
pids+=("$!")
create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b
wait_for 120 pool_is pool Ready m-a "$ns"

# The operator's namespace: router replicas register there (a Lease each) before they forward.
system_namespace
"$router_bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-secure=false \
	--bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
	>"$MP_STATE_DIR/router.log" 2>&1 &
router=$!
pids+=("$router")
wait_for 60 router_ready
port=$(router_port api)
url="http://127.0.0.1:$port/v1/chat/completions"
gauge() { router_metric modelpool_router_buffered_bytes 2>/dev/null | awk '{ printf "%.1f", $1 / 1048576 }' || echo n/a; }
small_body='{"messages":[{"role":"user","content":"hello"}],"model":"m-a"}'
curl -fsS -X POST -H 'Content-Type: application/json' --data-binary "$small_body" "$url" >/dev/null
sleep 5
idle_rss=$(mib "$router" VmRSS)
say "router pid $router idle: $idle_rss MiB"

# The stalled clients: one thread each; SIGTERM closes them all. Each prints its outcome once known.
cat >"$dir/stall.py" <<'EOF'
import signal, socket, sys, threading
port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
socks = []
def say(what):
    with lock:
        sys.stdout.write(what + "\n")
        sys.stdout.flush()
def one(i):
    s = socket.create_connection(("127.0.0.1", port))
    with lock:
        socks.append(s)
    head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (size + 64)).encode()
    body = b'{"messages":[{"role":"user","content":"' + b"x" * (size - 40)
    try:
        s.sendall(head + body)
    except OSError:
        say("reset")
        return
    s.settimeout(0.5)
    try:
        got = s.recv(64)
        say(got.split(b" ")[1].decode() if got else "closed")
    except socket.timeout:
        say("held")
    except OSError:
        say("reset")
threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
say("done")
signal.sigwait([signal.SIGTERM])
EOF

rows=""
for n in $stalls; do
	say "$n stalled uploads of 31 MiB"
	python3 "$dir/stall.py" "$port" "$n" $((31 * 1024 * 1024)) >"$dir/stall-$n.out" 2>&1 &
	bench_child=$!
	wait_for 300 grep -qx done "$dir/stall-$n.out"
	rss=$(mib "$router" VmRSS) buffered=$(gauge)
	codes="" times=""
	for _ in $(seq "$small"); do
		r=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' -X POST -H 'Content-Type: application/json' \
			--data-binary "$small_body" "$url" || echo "000 0")
		codes+="${r%% *} " times+="${r##* } "
	done
	rss2=$(mib "$router" VmRSS) hwm=$(mib "$router" VmHWM)
	outcome=$(grep -v done "$dir/stall-$n.out" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
	ok=$(tr ' ' '\n' <<<"$codes" | grep -c '^200$' || true)
	p50=$(tr ' ' '\n' <<<"$times" | grep . | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] * 1000 }')
	max=$(tr ' ' '\n' <<<"$times" | grep . | sort -n | tail -n 1 | awk '{ printf "%.1f", $1 * 1000 }')
	kill -TERM "$bench_child" 2>/dev/null || true
	wait "$bench_child" 2>/dev/null || true
	bench_child=""
	[ "$buffered" = n/a ] || wait_eq 60 0.0 gauge # an older router has no gauge
	sleep 2
	after=$(mib "$router" VmRSS)
	say "$n: rss $rss -> $rss2 MiB (peak $hwm), gauge $buffered MiB; clients: $outcome; small $ok/$small 200, p50 $p50 ms; after $after MiB"
	rows+="| $n | $outcome | $buffered | $rss / $rss2 | $hwm | $ok/$small, p50 $p50 ms, max $max ms | $after |"$'\n'
done

cpu=$(awk -F: '/^model name/ { sub(/^ /, "", $2); print $2; exit }' /proc/cpuinfo)
{
	echo "# Router memory under stalled uploads (issue 25)"
	echo
	echo "bench/router-intake.sh, $(date -u +%Y-%m-%dT%H:%MZ), commit $commit${BENCH_ROUTER:+ (router: $BENCH_ROUTER)}, on $(nproc) x $cpu,"
	echo "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr). Release build, the router's defaults"
	echo "(--body-buffer-budget 128Mi, --body-idle-timeout 30s), a real kube-apiserver + etcd, the member simulator."
	echo
	echo "Each stalled client announces a 31 MiB body whose model comes last, sends 31 MiB of it and stops."
	echo "Idle RSS before: $idle_rss MiB. Budget + idle: $(awk -v i="$idle_rss" 'BEGIN { printf "%.1f", 128 + i }') MiB."
	echo
	echo "| stalled clients | what they got | buffered gauge (MiB) | RSS with them / after $small small requests (MiB) | peak RSS (MiB) | small requests meanwhile | RSS after they left (MiB) |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	printf '%s' "$rows"
	echo
	echo "\"held\": the router keeps its bytes (within the budget) and waits for the rest, until --body-idle-timeout;"
	echo "\"503\": refused when its head arrived (the budget had no room for 31 MiB); \"reset\": refused the same way,"
	echo "but the refusal reached a client still sending as a reset. Small requests carry the model last, so they"
	echo "are buffered too (in the budget's last eighth, kept for bodies up to 64 KiB)."
} >"$out/router-intake-results.md"
say "wrote $out/router-intake-results.md"

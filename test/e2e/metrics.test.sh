# Health and metrics as a cluster sees them: /healthz answers, /readyz turns 200 once the caches are
# synced, and /metrics tells the story of a swap: resident gauges per member, swaps counted, both
# reaction clocks observed (a request through the pool's annotation starts clock a as a scale-up does),
# API requests counted by verb and code, no LIST after the initial sync but the one read of the pool's
# Pods before each start, and a deleted pool's series gone.
operator_up --samples --load-ms 300

wait_for 60 operator_port health
health=$(operator_port health)
wait_for 60 curl -fsS "http://127.0.0.1:$health/readyz"
expect_eq "/healthz" ok "$(curl -fsS "http://127.0.0.1:$health/healthz")"
expect_eq "/metrics on the health port" 404 \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$health/metrics")"

resident() { metric_value "modelpool_pool_resident{namespace=\"default\",pool=\"shared-gpu\",member=\"$1\"}"; }
resident_is() {
	local got
	got=$(resident "$1") || return 1
	echo "$got"
	[ "$got" == "$2" ]
}
series_gone() { ! scrape | grep_all "pool=\"$1\""; }

log "the warm pool: llama-8b resident, one swap (the warm-up) counted"
wait_for 90 pool_is shared-gpu Ready llama-8b
wait_for 30 resident_is llama-8b 1
expect_eq "qwen-7b's gauge" 0 "$(resident qwen-7b)"
expect_eq "swaps" 1 "$(metric_value 'modelpool_swaps_total{namespace="default",pool="shared-gpu"}')"
lists=$(metric_value 'modelpool_api_requests_total{verb="LIST",code="200"}')
[ "$lists" -ge 3 ] || fail "expected a LIST per informer, the counter says $lists"
# slot_reads: the reads of a pool's Pods right before a start or a stop without an idle probe (each one
# sent, or each one held).
slot_reads() { grep -cE 'reason=SlotFree|start held|reason=NoRunningPod|stop held' "$MP_STATE_DIR/operator.log" || true; }
reads=$(slot_reads)

log "a swap to qwen-7b: both reaction clocks stop once, the gauges flip, no LIST in steady state"
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
wait_for 30 resident_is qwen-7b 1
expect_eq "llama-8b's gauge" 0 "$(resident llama-8b)"
expect_eq "swaps" 2 "$(metric_value 'modelpool_swaps_total{namespace="default",pool="shared-gpu"}')"
expect_eq "swap durations observed" 2 \
	"$(metric_value 'modelpool_swap_duration_seconds_count{namespace="default",pool="shared-gpu"}')"
expect_eq "reaction a (member scaled up -> incumbent scaled down)" 1 \
	"$(metric_value 'modelpool_reaction_seconds_count{path="a"}')"
expect_eq "reaction b (incumbent's Pod gone -> target scaled up)" 1 \
	"$(metric_value 'modelpool_reaction_seconds_count{path="b"}')"
[ "$(metric_value 'modelpool_api_requests_total{verb="PATCH",code="200"}')" -ge 4 ] ||
	fail "expected status and replicas PATCHes to be counted"
expect_eq "LISTs after the initial sync (the reads before a start or an unprobed stop)" "$((lists + $(slot_reads) - reads))" \
	"$(metric_value 'modelpool_api_requests_total{verb="LIST",code="200"}')"
[ "$(slot_reads)" -gt "$reads" ] || fail "qwen-7b was started without a read of the pool's Pods"
# Each failed reconcile (a 409 when a member changed under a write is routine) is logged once.
failures=$(grep -cE 'write conflict, will re-plan|write failed|scale refused|status write refused|request refused|write not sent|action failed|plan failed' "$MP_STATE_DIR/operator.log" || true)
expect_eq "reconcile errors (one per failure logged)" "$failures" "$(metric_value modelpool_reconcile_errors_total)"
expect_eq "reconciles counted as errors" "$failures" "$(metric_value 'modelpool_reconcile_total{result="error"}')"
for s in modelpool_workqueue_depth 'modelpool_watch_restarts_total{resource="pods"}' \
	'modelpool_relists_total{resource="modelpools"}' process_resident_memory_bytes \
	process_cpu_seconds_total modelpool_reconcile_duration_seconds_count; do
	metric_value "$s" >/dev/null || fail "no series $s in /metrics"
done

log "a request through the pool starts reaction clock a too: back to llama-8b by the annotation"
kubectl_admin annotate modelpool shared-gpu modelpool-operator.dev/request=llama-8b --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready llama-8b
expect_eq "reaction a (request annotation -> incumbent scaled down)" 2 \
	"$(metric_value 'modelpool_reaction_seconds_count{path="a"}')"
expect_eq "reaction b" 2 "$(metric_value 'modelpool_reaction_seconds_count{path="b"}')"

log "a busy incumbent's deferral is counted by reason"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 60 condition_is shared-gpu SwapDeferred True/PodsBusy
wait_for 30 metric_value 'modelpool_swap_deferrals_total{namespace="default",pool="shared-gpu",reason="PodsBusy"}'

log "a deleted pool's series are removed"
kubectl_admin delete modelpool shared-gpu >/dev/null
wait_for 30 series_gone shared-gpu
# Nor is a deleted pool kept on the resync backstop: nothing is left waiting in the queue.
waiting_is_zero() {
	local got
	got=$(metric_value modelpool_workqueue_waiting) || return 1
	echo "$got"
	[ "$got" == 0 ]
}
wait_for 30 waiting_is_zero
metric_value 'modelpool_reaction_seconds_count{path="a"}' >/dev/null ||
	fail "process-wide series went with the pool"

stop_operator

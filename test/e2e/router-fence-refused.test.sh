# Issue 25, a drain-fence read refused: a router whose role lacks `get` on modelpools (it can still list and
# watch them, so its caches sync) cannot read a pool for the drain fence. That is an error, not a wait: a
# request for the pool is answered 503 at once (not after the pool's 300 s swapBudget) naming the missing
# right, /readyz answers 503 naming it, the error is logged once however often the read is tried again, and
# granting the right mends it without a restart.
ns=router-refused
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" pool m-a m-a

log "the router's ClusterRole without get on modelpools (list, watch and patch stay)"
kubectl_admin get clusterrole modelpool-router -o json | jq 'del(.metadata.resourceVersion)' >"$MP_STATE_DIR/role.json"
jq '(.rules[] | select(.resources | index("modelpools")) | .verbs) |= map(select(. != "get"))' \
	"$MP_STATE_DIR/role.json" | kubectl_admin replace -f - >/dev/null
wait_for 60 bash -c "! kubectl --kubeconfig '$MP_ROUTER_KUBECONFIG' auth can-i get modelpools.inference.llmkube.dev -n '$ns'"
kubectl_router auth can-i list modelpools.inference.llmkube.dev -n "$ns" >/dev/null || fail "list was withheld too"

router_up --home-namespace "$ns"
health="http://127.0.0.1:$(router_port health)"
# ask: a chat completion for m-a; prints the status, the answer in $MP_STATE_DIR/body. --max-time only bounds
# a hang (the pool's swapBudget is 300 s): the answer must not wait for a read that cannot succeed.
ask() { router_chat m-a --max-time 60; }
why="cannot get modelpools in namespace $ns: forbidden"

log "a request: 503 at once, naming the missing right"
expect_eq "status" 503 "$(ask)"
expect_eq "code" pool_unavailable "$(reply_field .error.code)"
grep -qF "$why" <<<"$(reply_field .error.message)" ||
	fail "the answer does not name the missing right: $(cat "$MP_STATE_DIR/body")"
expect_eq "a second request" 503 "$(ask)"

log "/readyz 503 names it; /healthz stays 200"
expect_eq "/readyz" 503 "$(curl -s -o /dev/null -w '%{http_code}' "$health/readyz")"
body=$(curl -s "$health/readyz")
grep -qF "not ready: $why" <<<"$body" || fail "/readyz does not name the missing right: $body"
expect_eq "/healthz" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$health/healthz")"

log "the read is tried again, and the error is logged once"
failed='modelpool_router_fence_reads_total{namespace="'$ns'",pool="pool",result="failed"}'
three_reads() { [ "$(router_metric "$failed")" -ge 3 ]; }
wait_for 60 three_reads
expect_eq "error lines" 1 "$(grep -c "the drain fence's read of the pool was refused" "$MP_STATE_DIR/router.log")"
grep "the drain fence's read of the pool was refused" "$MP_STATE_DIR/router.log" | grep_all ' error ' ||
	fail "not logged at error level: $(grep "the drain fence's read" "$MP_STATE_DIR/router.log")"
[ "$(router_metric 'modelpool_router_unavailable_total{namespace="'$ns'",pool="pool",reason="fence_refused"}')" -ge 2 ] ||
	fail "the 503s are not counted as fence_refused"

log "the right granted again: ready and serving without a restart or a request"
kubectl_admin replace -f "$MP_STATE_DIR/role.json" >/dev/null
wait_for 60 router_ready
expect_eq "status after the grant" 200 "$(ask)"
grep -q "the drain fence's read of the pool is allowed again" "$MP_STATE_DIR/router.log" || fail "no recovery line"
kill -0 "$MP_ROUTER_PID" || fail "the router restarted"

stop_router
stop_operator
stop_slot_check

# Issue 28: a router replica registers with a Lease of its own in the operator's namespace and acknowledges a
# swap (docs/router.md, "Acknowledged swaps"). With the operator stopped, the pool's status is written by hand
# as the operator writes it, so each step is seen: the entry appears once the drain has begun and the stream
# the router was relaying from the resident has ended (its answer's head alone is not enough), the resident
# gets nothing while it may stand (even when the pool shows it resident again and the Lease cannot be
# written), the replica is unready once its registration lapsed, the entry is withdrawn once it can write
# again and only then is the resident served; at shutdown the Lease is deleted. A router of one namespace's
# pools names it in its Lease (the operator counts it for that namespace's swaps only).
ns=router-registration
router_setup --terminate-ms 200 --load-ms 200
MP_POOL_BUDGET=120s pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns"
lease_of_log() { grep ' started ' "$MP_STATE_DIR/router.log" | tail -n 1 | grep -o ' lease=[^ ]*' | cut -d= -f2; }
lease=$(lease_of_log)
[ -n "$lease" ] || fail "the router's start line names no Lease"
lget() { kubectl_admin -n modelpool-system get lease "$lease" -o "jsonpath=$1"; }
fenced() { lget '{.metadata.annotations.modelpool-operator\.dev/fenced}'; }
fronts() { lget '{.metadata.annotations.modelpool-operator\.dev/fronts-namespace}'; }
held() { router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}"; }
url="http://127.0.0.1:$(router_port api)"

log "registered: its Lease is labelled and held by it; nothing acknowledged at rest"
expect_eq "label" true "$(lget '{.metadata.labels.modelpool-operator\.dev/router}')"
expect_eq "duration" 10 "$(lget '{.spec.leaseDurationSeconds}')"
expect_eq "the namespace it fronts (every one)" "" "$(fronts)"
[ -n "$(lget '{.spec.holderIdentity}')" ] || fail "the Lease has no holder"
expect_eq "m-a" 200 "$(router_chat m-a --max-time 30)"
expect_eq "acknowledgements at rest" "" "$(fenced)"

log "the operator stops; m-a streams a reply (20 tokens, 150 ms apart) when the pool shows a swap to m-b"
stop_operator
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a sim.modelpool.test/token-ms=150 >/dev/null
curl -sS -N -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-a","stream":true,"max_tokens":20,"messages":[]}' \
	"$url/v1/chat/completions" >"$MP_STATE_DIR/stream" &
stream=$!
wait_for 10 grep -q '^data: ' "$MP_STATE_DIR/stream"
kubectl_admin -n "$ns" patch modelpool pool --subresource=status --type=merge \
	-p '{"status":{"pendingMember":"m-b"}}' >/dev/null
# A request for m-a is held once the router's cache shows the swap.
curl -sS --max-time 110 -o /dev/null -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"m-a","messages":[]}' "$url/v1/chat/completions" &
probe_client=$!
wait_eq 30 1 held
log "no acknowledgement while the stream to m-a runs (its head came long ago), then one once it ended"
kill -0 "$stream" 2>/dev/null || fail "the stream ended before the check"
expect_eq "acknowledgements while m-a streams" "" "$(fenced)"
wait "$stream"
expect_eq "the stream ran to its end" 1 "$(grep -c '^data: \[DONE\]' "$MP_STATE_DIR/stream")"
wait_eq 30 "$ns/pool=m-a" fenced
kubectl_admin -n "$ns" annotate inferenceservice m-a sim.modelpool.test/token-ms- >/dev/null

log "the Lease cannot be written any more; the pool shows m-a resident with no swap again"
kubectl_admin -n modelpool-system delete rolebinding modelpool-router-registration >/dev/null
wait_for 60 bash -c "! kubectl --kubeconfig '$MP_ROUTER_KUBECONFIG' auth can-i patch leases.coordination.k8s.io -n modelpool-system >/dev/null 2>&1"
kubectl_admin -n "$ns" patch modelpool pool --subresource=status --type=merge \
	-p '{"status":{"pendingMember":null}}' >/dev/null
expect_eq "pendingMember" "" "$(pool_field pool pendingMember "$ns")"
curl -sS --max-time 110 -o "$MP_STATE_DIR/held.body" -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"m-a","messages":[]}' \
	"$url/v1/chat/completions" >"$MP_STATE_DIR/held.code" 2>"$MP_STATE_DIR/held.err" &
client=$!
wait_eq 30 2 held
log "the acknowledgement may stand: m-a gets nothing, until the registration lapses (/readyz says why)"
wait_for 30 bash -c "! curl -fsS 'http://127.0.0.1:$(router_port health)/readyz' >/dev/null 2>&1"
body=$(curl -sS "http://127.0.0.1:$(router_port health)/readyz" || true)
grep -q "Lease modelpool-system/$lease" <<<"$body" || fail "/readyz does not name the Lease: $body"
expect_eq "the entry, as the Lease still says" "$ns/pool=m-a" "$(fenced)"
expect_eq "still held" 2 "$(held)"
kill -0 "$client" 2>/dev/null || fail "the held client ended: $(cat "$MP_STATE_DIR/held.code") $(cat "$MP_STATE_DIR/held.err")"

log "the right is back: the entry is withdrawn, and only then is m-a served"
kubectl_admin apply -n modelpool-system -f "$MP_SOURCE_DIR/config/router/lease_role_binding.yaml" >/dev/null
wait "$client" || true
wait "$probe_client" || true
expect_eq "held request" 200 "$(cat "$MP_STATE_DIR/held.code")"
expect_eq "answered by" m-a "$(jq -r .model "$MP_STATE_DIR/held.body")"
expect_eq "acknowledgements once answered" "" "$(fenced)"
wait_for 30 router_ready

log "shutdown: the Lease is deleted"
stop_router
expect_fail NotFound kubectl_admin -n modelpool-system get lease "$lease"

log "a router of one namespace's pools (--namespace) names it in its Lease"
router_up --namespace "$ns"
lease=$(lease_of_log)
expect_eq "the namespace it fronts" "$ns" "$(fronts)"
stop_router
stop_slot_check

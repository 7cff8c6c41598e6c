# Issue 14's router, a pool deleted while a request is held for it: the held request is answered 404 and
# the pool's held-requests gauge must not go negative. Today the pool's series are forgotten at the delete
# event and the rejection on the next tick brings the gauge back at -1 (for good: nothing forgets it again).
ns=routergauge
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" gone g-a g-a g-b
router_up --home-namespace "$ns"
url="http://127.0.0.1:$(router_port api)"

held() { router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"gone\"}"; }

log "a pool deleted while a request is held for it"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice g-b sim.modelpool.test/load-ms=600000 >/dev/null
curl -sS -o "$MP_STATE_DIR/gone.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data-binary '{"model":"g-b","messages":[]}' "$url/v1/chat/completions" >"$MP_STATE_DIR/gone.code" &
client=$!
wait_eq 60 1 held
kubectl_admin -n "$ns" delete modelpool gone --wait=false >/dev/null
wait "$client" || true
expect_eq "held request of a deleted pool" 404 "$(cat "$MP_STATE_DIR/gone.code")"
gauge=$(held || echo absent)
log "held gauge of the deleted pool: $gauge"
[ "$gauge" = absent ] || [ "$gauge" = 0 ] || fail "held gauge of the deleted pool: expected absent or 0, got $gauge"

stop_router

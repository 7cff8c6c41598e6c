# Issue 14's router, SIGTERM while a request is held whose body is only partly read (the router pauses
# the body once the model is known): the held client must get its answer, 503 in OpenAI's format with
# Retry-After ("another replica can take the request"), before the router exits. httpd must first read and
# discard the rest of the body (several loop turns); the router stops as soon as nothing is in flight.
ns=routershut
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns"
url="http://127.0.0.1:$(router_port api)"

log "a request held for m-b (slow to load), then SIGTERM"
kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-b sim.modelpool.test/load-ms=600000 >/dev/null
{
	printf '{"model":"m-b","messages":[],"pad":"'
	head -c $((600 * 1024)) /dev/zero | tr '\0' x
	printf '"}'
} >"$MP_STATE_DIR/big"
curl -sS --max-time 60 -o "$MP_STATE_DIR/held.body" -D "$MP_STATE_DIR/held.headers" -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary "@$MP_STATE_DIR/big" \
	"$url/v1/chat/completions" >"$MP_STATE_DIR/held.code" 2>"$MP_STATE_DIR/held.err" &
client=$!
wait_eq 60 1 router_metric "modelpool_router_held_requests{namespace=\"$ns\",pool=\"pool\"}"
stop_router
wait "$client" || true
log "held client: code $(cat "$MP_STATE_DIR/held.code") $(cat "$MP_STATE_DIR/held.err")"
expect_eq "held request at shutdown" 503 "$(cat "$MP_STATE_DIR/held.code")"
grep -qi '^retry-after: ' "$MP_STATE_DIR/held.headers" || fail "no Retry-After on the shutdown 503"

# Issue 14's router, a request body streamed without Content-Length (chunked) that passes --max-body-size
# only after the request went to the resident: the client must get 413 in OpenAI's format and the router
# must live on and answer the next request. Today the request is freed while httpd still delivers its
# body to it (use after free under ASan; the connection is never answered otherwise).
ns=routerbody
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" pool m-a m-a m-b
router_up --home-namespace "$ns" --max-body-size 65536
url="http://127.0.0.1:$(router_port api)"

log "a chunked body for the resident that passes the cap once forwarded"
{
	printf '{"model":"m-a","messages":[],"pad":"'
	head -c $((1024 * 1024)) /dev/zero | tr '\0' x
	printf '"}'
} >"$MP_STATE_DIR/big"
code=$(curl -sS --max-time 60 -o "$MP_STATE_DIR/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-H 'Transfer-Encoding: chunked' --data-binary "@$MP_STATE_DIR/big" "$url/v1/chat/completions" || true)
log "oversized chunked body answered $code"
if ! kill -0 "$MP_ROUTER_PID" 2>/dev/null; then
	grep -A12 'ERROR: AddressSanitizer' "$MP_STATE_DIR/router.log" >&2 || tail -n 30 "$MP_STATE_DIR/router.log" >&2
	fail "the router died on the oversized chunked body"
fi
expect_eq "next request for the resident" 200 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST \
	-H 'Content-Type: application/json' --data-binary '{"model":"m-a","messages":[]}' "$url/v1/chat/completions")"
expect_eq "oversized chunked body" 413 "$code"
stop_router

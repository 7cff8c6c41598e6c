# Issue 27: --upstream-timeout is the longest a member may send nothing (no byte of its head or body) once
# the request is sent. A member silent for longer than it before its head gets the client a 502
# upstream_error; one that goes silent in the middle of a streamed answer gets the stream cut (no [DONE]);
# a member that keeps sending, with gaps under it, is answered in full however long it takes.
ns=router-timeout
router_setup --terminate-ms 200 --load-ms 200
create_members "$ns" m-a
create_pool "$ns" pool m-a m-a
wait_for 60 pool_is pool Ready m-a "$ns"
start_router --home-namespace "$ns" --upstream-timeout 3s
wait_for 30 router_ready
url="http://127.0.0.1:$(router_port api)/v1/chat/completions"
# post BODY: the status code (000 when curl got no complete answer); the answer in $MP_STATE_DIR/body.
post() {
	curl -sS -o "$MP_STATE_DIR/body" -w '%{http_code}' --max-time 60 -X POST -H 'Content-Type: application/json' \
		--data-binary "$1" "$url" 2>"$MP_STATE_DIR/curl.err" || true
}
token_ms() { kubectl_admin -n "$ns" annotate --overwrite inferenceservice m-a "sim.modelpool.test/token-ms=$1" >/dev/null; }

log "silent for 8 s before its head (4 tokens of 2 s, answered whole at the end): 502"
token_ms 2000
code=$(post '{"model":"m-a","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}')
expect_eq "status" 502 "$code"
expect_eq "error code" upstream_error "$(jq -r '.error.code' "$MP_STATE_DIR/body")"
jq -r '.error.message' "$MP_STATE_DIR/body" | grep_all "upstream timeout" ||
	fail "the 502 does not name the upstream timeout: $(cat "$MP_STATE_DIR/body")"

log "a streamed answer whose head comes at once, then 4 s between its events: cut after the head"
token_ms 4000
code=$(post '{"model":"m-a","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}')
log "status $code, curl: $(cat "$MP_STATE_DIR/curl.err"), events: $(grep -c '^data:' "$MP_STATE_DIR/body" || true)"
expect_eq "status of the cut stream" 200 "$code"
! grep_all -F '[DONE]' "$MP_STATE_DIR/body" || fail "the stream was not cut: $(cat "$MP_STATE_DIR/body")"
[ -s "$MP_STATE_DIR/curl.err" ] || fail "curl saw a complete answer, not a cut one"

log "gaps of 0.3 s, 12 events (about 3.6 s in all, longer than the timeout): served in full"
token_ms 300
code=$(post '{"model":"m-a","max_tokens":12,"stream":true,"messages":[{"role":"user","content":"hi"}]}')
expect_eq "status" 200 "$code"
grep_all -F '[DONE]' "$MP_STATE_DIR/body" || fail "the stream did not end: $(cat "$MP_STATE_DIR/body")"
token_ms 1000
code=$(post '{"model":"m-a","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}')
expect_eq "status of an answer silent 2 s, under the timeout" 200 "$code"
stop_router
stop_slot_check

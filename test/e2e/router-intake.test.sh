# Issue 25 (items 2 and 4): what the router takes in, against the real API server and the simulator's
# members. The bodies it keeps in memory come out of one budget (--body-buffer-budget): past it a new
# request that needs buffering gets 503 with Retry-After in OpenAI's format while a small request is still
# served, and the buffered-bytes gauge never passes the budget; an upload that stalls before its model is
# known gets 408 and its bytes go back (--body-idle-timeout). Parsing: a second "model" key is 400 and asks
# for nothing; conflicting Content-Length headers are 400; a path whose percent-encoding would decode into
# another path is 400, one that only spells a character differently is served. Before issue 25 the router
# buffered without bound (the 503 never came), a stalled upload held its bytes until the 300 s idle
# timeout, and a duplicate "model" was routed by its first value.
ns=routerintake
router_setup --terminate-ms 200 --load-ms 200

pool_ready "$ns" pool i-a i-a i-b
budget=$((2 * 1024 * 1024))
router_up --home-namespace "$ns" --body-buffer-budget 2Mi --body-idle-timeout 10m
port=$(router_port api)

buffered() { router_metric modelpool_router_buffered_bytes; }
# at_least N: the gauge is N or more (and never past the budget, checked on every look).
at_least() {
	local v
	v=$(buffered) || return 1
	[ "${v%.*}" -le "$budget" ] || fail "buffered bytes $v past the budget $budget"
	[ "${v%.*}" -ge "$1" ]
}

# client.py MODE PORT ARGS: raw HTTP/1.1 on one connection, the answer on stdout.
#   upload TOTAL SENT: announces TOTAL bytes, sends SENT of a body whose model would come last, then
#     sends nothing more and prints what comes back until the router closes.
#   head LENGTH: sends only a head announcing LENGTH bytes, prints the answer.
#   raw HEAD: sends HEAD (\r\n written as such) and prints the answer.
cat >"$MP_STATE_DIR/client.py" <<'EOF'
import socket, sys
mode, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
def head(n):
    return ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % n).encode()
if mode == "upload":
    total, sent = int(sys.argv[3]), int(sys.argv[4])
    start = b'{"messages":[{"role":"user","content":"'
    s.sendall(head(total) + start + b"x" * (sent - len(start)))
elif mode == "head":
    s.sendall(head(int(sys.argv[3])))
else:
    s.sendall(sys.argv[3].replace("\\r\\n", "\r\n").encode())
s.settimeout(120)
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
        if mode != "upload" and b"\r\n\r\n" in out:
            hdr, _, body = out.partition(b"\r\n\r\n")
            cl = [l.split(b":", 1)[1] for l in hdr.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if cl and len(body) >= int(cl[0]):
                break
except OSError as e:
    out += ("\n[%s]" % e).encode()
sys.stdout.write(out.decode("latin-1"))
EOF
client() { python3 "$MP_STATE_DIR/client.py" "$1" "$port" "${@:2}"; }

log "an upload of 1.5 MiB stalls before its model: its length is reserved from the 2 MiB budget"
python3 "$MP_STATE_DIR/client.py" upload "$port" $((1536 * 1024)) $((256 * 1024)) >"$MP_STATE_DIR/stalled.out" &
stalled=$!
wait_for 30 at_least $((1536 * 1024))

log "a new request that would buffer 1 MiB more: 503 at once, with Retry-After, in OpenAI's format"
client head $((1024 * 1024)) >"$MP_STATE_DIR/over.out"
head -n 1 "$MP_STATE_DIR/over.out" | grep -q '^HTTP/1.1 503 ' || fail "over the budget: $(head -c 400 "$MP_STATE_DIR/over.out")"
grep -qi '^Retry-After: [1-9]' "$MP_STATE_DIR/over.out" || fail "503 without Retry-After: $(head -c 400 "$MP_STATE_DIR/over.out")"
sed -n '/^\r$/,$p' "$MP_STATE_DIR/over.out" | tail -n +2 >"$MP_STATE_DIR/over.json"
expect_eq "503 error code" "server_error overloaded" "$(jq -r '"\(.error.type) \(.error.code)"' "$MP_STATE_DIR/over.json")"

log "small requests are still served, the model first or last"
expect_eq "model first" 200 "$(router_post /v1/chat/completions '{"model":"i-a","messages":[{"role":"user","content":"hi"}]}')"
expect_eq "model last" 200 "$(router_post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"model":"i-a"}')"
at_least 0

log "parsing: a second \"model\" key is 400 and asks for no swap"
expect_eq "duplicate model" 400 "$(router_post /v1/chat/completions '{"model":"i-a","messages":[],"model":"i-b"}')"
expect_eq "duplicate model message" 'duplicate "model" key' "$(reply_field .error.message)"
expect_eq "activations after a duplicate model" 0 "$(activations)"

log "parsing: conflicting Content-Length headers are 400"
client raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 40\r\n\r\n{"model":"i-a"}' \
	>"$MP_STATE_DIR/cl.out"
head -n 1 "$MP_STATE_DIR/cl.out" | grep -q '^HTTP/1.1 400 ' || fail "conflicting lengths: $(head -c 300 "$MP_STATE_DIR/cl.out")"

log "paths: an encoded '/' or a dot segment is 400; an encoded unreserved character is only spelling"
expect_eq "encoded slash" 400 "$(router_post /v1/chat%2Fcompletions '{"model":"i-a","messages":[]}')"
expect_eq "encoded dot segment" 400 "$(router_post /v1/%2e%2e/v1/chat/completions '{"model":"i-a","messages":[]}' --path-as-is)"
expect_eq "encoded unreserved" 200 "$(router_post /v1/chat/%63ompletions '{"model":"i-a","messages":[]}')"

log "the stalled upload's client leaves: its bytes go back"
kill "$stalled" 2>/dev/null || true
wait "$stalled" 2>/dev/null || true
wait_eq 30 0 buffered
stop_router

log "with --body-idle-timeout 1s a stalled upload gets 408 and its bytes go back"
router_up --home-namespace "$ns" --body-buffer-budget 2Mi --body-idle-timeout 1s
port=$(router_port api)
client upload $((1024 * 1024)) $((64 * 1024)) >"$MP_STATE_DIR/idle.out"
head -n 1 "$MP_STATE_DIR/idle.out" | grep -q '^HTTP/1.1 408 ' || fail "stalled upload: $(head -c 400 "$MP_STATE_DIR/idle.out")"
grep -q '"code":"request_timeout"' "$MP_STATE_DIR/idle.out" || fail "408 body: $(head -c 400 "$MP_STATE_DIR/idle.out")"
wait_eq 30 0 buffered
stop_router

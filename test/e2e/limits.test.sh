# Issue 25, item 3: connection floods cannot take the probes or the router down. Both binaries start with a
# soft open-files limit of 1024 (as many containers do) and must raise it. With 1,000 idle connections on
# the operator's and the router's probe ports and 3,000 half-sent request heads on the router's endpoint,
# (from 20 addresses: under the per-client cap) /healthz answers on both (the probe floods come from a
# workload's address, 127.3.0.1, and curl, as kubelet, from another: the heaviest client pays), the router still forwards a request (its outbound sockets still open), the
# gauge counts the endpoint's connections, and the half-sent heads are closed after --header-timeout.
ns=limits
ulimit -S -n 1024
router_setup --terminate-ms 200 --load-ms 200
pool_ready "$ns" pool l-a l-a l-b
router_up --home-namespace "$ns" --header-timeout=10s
wait_for 30 operator_port health
url="http://127.0.0.1:$(router_port api)"

log "both raised the soft open-files limit to the hard one"
hard=$(ulimit -H -n)
grep_all "\"open files limit\" soft=$hard hard=$hard" "$MP_STATE_DIR/router.log" || fail "router: no raised limit in its log"
grep_all "\"open files limit\" soft=$hard hard=$hard" "$MP_STATE_DIR/operator.log" || fail "operator: no raised limit in its log"

# flood NAME PORT COUNT [ARGS]: conn_flood.py in the background, its output in flood-NAME.log.
flood() {
	local name=$1
	shift
	python3 "$MP_SOURCE_DIR/test/e2e/conn_flood.py" "$@" >"$MP_STATE_DIR/flood-$name.log" 2>&1 &
}
flooded() { grep_all '^open ' "$MP_STATE_DIR/flood-$1.log"; }
api_conns() { router_metric 'modelpool_http_connections{port="api"}'; }
api_conns_at_least() { [ "$(api_conns)" -ge "$1" ]; }
api_conns_below() { [ "$(api_conns)" -lt "$1" ]; }

log "3,000 half-sent heads on the router's endpoint, 1,000 idle connections on each probe port"
flood api "$(router_port api)" 3000 --partial --sources 20
flood router-health "$(router_port health)" 1000 --reopen --sources 1
flood operator-health "$(operator_port health)" 1000 --reopen --sources 1
for f in api router-health operator-health; do wait_for 60 flooded "$f"; done
wait_for 30 api_conns_at_least 3000

log "the probes answer, and the router forwards a request"
expect_eq "router /healthz" 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 "http://127.0.0.1:$(router_port health)/healthz")"
expect_eq "operator /healthz" 200 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 "http://127.0.0.1:$(operator_port health)/healthz")"
expect_eq "l-a answers through the router" 200 "$(curl -sS -o "$MP_STATE_DIR/body" -w '%{http_code}' --max-time 20 \
	-X POST -H 'Content-Type: application/json' --data-binary '{"model":"l-a","prompt":"hi"}' "$url/v1/completions")"
expect_eq "answered by" l-a "$(jq -r .model "$MP_STATE_DIR/body")"
if grep -E 'Too many open files|EMFILE' "$MP_STATE_DIR/router.log" "$MP_STATE_DIR/operator.log"; then
	fail "a process ran out of open files"
fi

log "the half-sent heads are closed after --header-timeout"
wait_for 60 api_conns_below 10
stop_router
stop_operator

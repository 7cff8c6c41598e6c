# Scrapers that leave while their access review is in flight, against both binaries' secure /metrics (the
# default): the API server answers slowly (a toxiproxy latency toxic on each binary's link to it), and a storm
# of TLS scrapes with made-up bearer tokens closes (FIN or RST, no close_notify) before any verdict. Each
# review belongs to connections that are gone: it is cancelled with them, and its verdict must never reach a
# freed request (issue 25: a use after free, a crash of either binary in its default configuration).
# Checked: both binaries alive, serving a valid scraper afterwards, exiting 0 on SIGTERM, their logs free of
# sanitizer reports (run-one.sh); the scrapes really left first, and their reviews really reached the API
# server. MP_STORM_COUNT sets the scrapes per binary (default 300).
count=${MP_STORM_COUNT:-300}
latency_ms=1500
[ -x "${MP_TOXIPROXY:-}" ] || fail "MP_TOXIPROXY must name toxiproxy-server (test/controlplane/build-toxiproxy.sh)"

install_crds
install_operator_rbac
install_router_rbac
kubectl_admin create namespace monitoring >/dev/null
kubectl_admin -n monitoring create serviceaccount prometheus >/dev/null
kubectl_admin create clusterrolebinding prometheus-metrics --clusterrole=modelpool-operator-metrics-reader \
	--serviceaccount=monitoring:prometheus >/dev/null

log "toxiproxy between each binary and the API server"
start_toxiproxy
# proxy NAME KUBECONFIG: a proxy to the API server and a copy of KUBECONFIG through it (NAME-proxied.kubeconfig).
proxy() {
	toxi_proxy "$1"
	sed -e "s#server: .*#server: https://127.0.0.1:$MP_TOXI_PORT#" "$2" >"$MP_STATE_DIR/$1-proxied.kubeconfig"
}
proxy operator "$MP_OPERATOR_KUBECONFIG"
proxy router "$MP_ROUTER_KUBECONFIG"

MP_OPERATOR_KUBECONFIG=$MP_STATE_DIR/operator-proxied.kubeconfig start_operator --metrics-secure=true
MP_ROUTER_KUBECONFIG=$MP_STATE_DIR/router-proxied.kubeconfig start_router --home-namespace monitoring --metrics-secure=true
wait_for 60 operator_port metrics
wait_for 60 router_port metrics
ports=("$(operator_port metrics)" "$(router_port metrics)")

# scrape_code PORT TOKEN: the HTTP status of one scrape of the secure /metrics at PORT.
scrape_code() {
	curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" "https://127.0.0.1:$1/metrics" || true
}
# serves PORT: a scraper bound to metrics-reader, with a token never seen (a full review), gets 200.
serves() {
	local c
	c=$(scrape_code "$1" "$(kubectl_admin -n monitoring create token prometheus)")
	echo "$c"
	[ "$c" == 200 ]
}
for p in "${ports[@]}"; do wait_for 60 serves "$p"; done

# Counted by the API server itself.
token_reviews() {
	kubectl_admin get --raw /metrics |
		awk '/^apiserver_request_total\{/ && index($0, "resource=\"tokenreviews\"") {s += $NF} END {print s + 0}'
}
tr0=$(token_reviews)

log "the API server's answers to both binaries come ${latency_ms} ms late"
for name in operator router; do
	curl -fsS -X POST "$MP_TOXI_API/proxies/$name/toxics" \
		-d "{\"name\":\"slow\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$latency_ms}}" >/dev/null
done

log "a storm of $count aborted TLS scrapes against each binary at once, each gone within 300 ms"
pids=()
for i in 0 1; do
	python3 "$MP_SOURCE_DIR/test/tools/aborted-scrapes.py" --port "${ports[$i]}" --count "$count" \
		--token-prefix "storm$i" --seed $((i + 1)) >"$MP_STATE_DIR/storm.$i.json" &
	pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
for i in 0 1; do
	cat "$MP_STATE_DIR/storm.$i.json" >&2
	aborted=$(jq .aborted "$MP_STATE_DIR/storm.$i.json")
	[ "$aborted" -gt 0 ] || fail "no scrape of port ${ports[$i]} left before its answer: the storm tested nothing"
done
kill -0 "$MP_OPERATOR_PID" || fail "the operator died in the storm"
kill -0 "$MP_ROUTER_PID" || fail "the router died in the storm"
# The reviews of the scrapes that left did reach the API server (the storm's tokens were never cached).
more_reviews() { local n; n=$(token_reviews); echo "$n"; [ "$n" -gt "$tr0" ]; }
wait_for 30 more_reviews

log "the link back to normal: both binaries still serve a valid scraper, and exit cleanly"
for name in operator router; do curl -fsS -X DELETE "$MP_TOXI_API/proxies/$name/toxics/slow" >/dev/null; done
for p in "${ports[@]}"; do wait_for 60 serves "$p"; done
kill -0 "$MP_OPERATOR_PID" || fail "the operator died after the storm"
kill -0 "$MP_ROUTER_PID" || fail "the router died after the storm"
stop_router
stop_operator

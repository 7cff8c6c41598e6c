# Secure metrics against the real API server, the way a Prometheus in the cluster meets them: HTTPS with a
# self-signed certificate valid for the Pod's names, a ServiceAccount bound to metrics-reader gets 200, no
# token 401, a ServiceAccount without the binding 403; a burst of scrapes costs one TokenReview; with the API
# server down or hanging a new caller gets 503 and the operator lives on; a certificate given by flags is served.
install_crds
install_operator_rbac

# Two scrapers, as ServiceAccounts with tokens from the API server (TokenRequest): one bound to metrics-reader.
kubectl_admin create namespace monitoring >/dev/null
kubectl_admin -n monitoring create serviceaccount prometheus >/dev/null
kubectl_admin -n monitoring create serviceaccount intruder >/dev/null
kubectl_admin create clusterrolebinding prometheus-metrics --clusterrole=modelpool-operator-metrics-reader \
	--serviceaccount=monitoring:prometheus >/dev/null
token() { kubectl_admin -n monitoring create token "$1"; }
reader=$(token prometheus)
intruder=$(token intruder)

# POD_IP as the Deployment's downward API sets it; the secure default, as the manifests run it.
POD_IP=127.0.0.1 start_operator --metrics-secure=true
wait_for 60 operator_port metrics
port=$(operator_port metrics)
health=$(operator_port health)
grep -q 'metrics over HTTPS with a self-signed certificate' "$MP_STATE_DIR/operator.log" ||
	fail "the self-signed certificate is not logged"

# code [CURL_ARGS...]: the HTTP status of a scrape (000: no HTTP answer).
code() { curl -sk -o /dev/null -w '%{http_code}' "$@" "https://127.0.0.1:$port/metrics" || true; }
bearer() { echo "Authorization: Bearer $1"; }

log "the health probes stay plain HTTP; /metrics is not served in clear"
expect_eq "/healthz over HTTP" ok "$(curl -fsS "http://127.0.0.1:$health/healthz")"
expect_eq "plain HTTP to the metrics port" 000 \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics" || true)"

log "the self-signed certificate: X.509, valid now, for the Pod's names; a client that trusts it verifies it"
openssl s_client -connect "127.0.0.1:$port" -servername localhost </dev/null 2>/dev/null |
	openssl x509 >"$MP_STATE_DIR/served.crt" || fail "no certificate served"
openssl x509 -in "$MP_STATE_DIR/served.crt" -noout -checkend 0 >/dev/null || fail "certificate not valid now"
san=$(openssl x509 -in "$MP_STATE_DIR/served.crt" -noout -ext subjectAltName)
echo "$san" >&2
host=$(hostname)
for name in "DNS:$host" DNS:localhost "IP Address:127.0.0.1"; do
	grep -qF "$name" <<<"$san" || fail "the certificate lacks $name"
done
# No -k: the chain and the host name are verified, by the Pod's host name and by IP.
expect_eq "scrape verified by host name" 200 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$MP_STATE_DIR/served.crt" \
	--resolve "$host:$port:127.0.0.1" -H "$(bearer "$reader")" "https://$host:$port/metrics")"
expect_eq "scrape verified by IP" 200 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$MP_STATE_DIR/served.crt" \
	-H "$(bearer "$reader")" "https://127.0.0.1:$port/metrics")"
# The control: a name the certificate does not carry must fail verification.
expect_fail 'SSL|certificate' curl -sS -o /dev/null --cacert "$MP_STATE_DIR/served.crt" \
	--resolve "not-this-pod:$port:127.0.0.1" "https://not-this-pod:$port/metrics"

log "401 without a valid token, 403 without the binding, 200 with it"
expect_eq "no token" 401 "$(code)"
expect_eq "a Basic credential" 401 "$(code -H 'Authorization: Basic YWRtaW46YWRtaW4=')"
expect_eq "a made-up token" 401 "$(code -H "$(bearer not-a-token)")"
expect_eq "a token whose user lacks metrics-reader" 403 "$(code -H "$(bearer "$intruder")")"
expect_eq "a token bound to metrics-reader" 200 "$(code -H "$(bearer "$reader")")"
curl -sk -D "$MP_STATE_DIR/401.headers" -o /dev/null "https://127.0.0.1:$port/metrics" || true
grep -qi '^WWW-Authenticate: Bearer' "$MP_STATE_DIR/401.headers" || fail "a 401 without WWW-Authenticate: Bearer"
curl -fsSk -H "$(bearer "$reader")" "https://127.0.0.1:$port/metrics" | grep_all '^modelpool_api_requests_total{' ||
	fail "the allowed scrape has no metrics"
expect_eq "POST /metrics" 405 "$(code -X POST -H "$(bearer "$reader")")"

log "a burst of scrapes with a new token costs one TokenReview and one SubjectAccessReview"
# Counted by the API server itself (its apiserver_request_total), not by the operator.
reviews() {
	kubectl_admin get --raw /metrics |
		awk -v r="$1" '/^apiserver_request_total\{/ && index($0, "resource=\"" r "\"") {s += $NF} END {print s + 0}'
}
tr0=$(reviews tokenreviews)
sar0=$(reviews subjectaccessreviews)
fresh=$(token prometheus)
pids=()
for i in $(seq 1 20); do
	code -H "$(bearer "$fresh")" >"$MP_STATE_DIR/burst.$i" &
	pids+=($!)
done
wait "${pids[@]}"
for i in $(seq 1 20); do expect_eq "burst scrape $i" 200 "$(cat "$MP_STATE_DIR/burst.$i")"; done
for i in $(seq 1 5); do expect_eq "scrape $i after the burst" 200 "$(code -H "$(bearer "$fresh")")"; done
more_than() { local n; n=$(reviews "$1"); echo "$n"; [ "$n" -gt "$2" ]; }
wait_for 30 more_than tokenreviews "$tr0"
expect_eq "TokenReviews for 25 scrapes of one token" $((tr0 + 1)) "$(reviews tokenreviews)"
expect_eq "SubjectAccessReviews for them" $((sar0 + 1)) "$(reviews subjectaccessreviews)"

log "the API server down: a caller not cached gets 503, never 200, and the operator keeps running"
unknown=$(token prometheus)
stop_apiserver KILL
expect_eq "scrape while the API server is down" 503 "$(code -H "$(bearer "$unknown")")"
expect_eq "a made-up token while the API server is down" 503 "$(code -H "$(bearer also-not-a-token)")"
expect_eq "no token needs no API server" 401 "$(code)"
kill -0 "$MP_OPERATOR_PID" || fail "the operator died with the API server"
grep -q 'metrics scrape refused: access could not be checked' "$MP_STATE_DIR/operator.log" ||
	fail "the 503 is not logged"
start_apiserver
log "the API server hanging (SIGSTOP): the review times out, 503, and the operator keeps running"
hung=$(token prometheus)
kill -STOP "$MP_APISERVER_PID"
got=$(code --max-time 60 -H "$(bearer "$hung")")
kill -CONT "$MP_APISERVER_PID"
expect_eq "scrape while the API server hangs" 503 "$got"
kill -0 "$MP_OPERATOR_PID" || fail "the operator died while the API server hung"
# Not cached: the same token is allowed as soon as the API server answers again.
scrape_ok() { local c; c=$(code -H "$(bearer "$unknown")"); echo "$c"; [ "$c" == 200 ]; }
wait_for 60 scrape_ok

log "SIGTERM while a scrape waits on its review (the API server frozen): no answer, and the operator exits 0"
waiting=$(token prometheus)
kill -STOP "$MP_APISERVER_PID"
curl -sk -o /dev/null -w '%{http_code}' -H "$(bearer "$waiting")" "https://127.0.0.1:$port/metrics" \
	>"$MP_STATE_DIR/waiting.code" &
curl_pid=$!
# The review is on its way once the frozen API server has unread bytes (nothing else talks to it now: no
# pools, no leader election, idle watches only send server to client).
apiserver_port=${MP_APISERVER_URL##*:}
review_sent() { ss -Htn state established "( sport = :$apiserver_port )" | awk '$1 > 0 {f = 1} END {exit !f}'; }
wait_for 30 review_sent
stop_operator
wait "$curl_pid" || true
kill -CONT "$MP_APISERVER_PID"
expect_eq "the waiting scrape's answer (the connection closed)" 000 "$(cat "$MP_STATE_DIR/waiting.code")"

log "a certificate given by flags (--metrics-cert-path, kubebuilder's file names) is served as it is"
pki=$MP_STATE_DIR/metrics-pki
mkdir -p "$pki"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" \
	-days 1 -subj /CN=metrics-test-ca 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/tls.key" \
	-subj /CN=metrics.test 2>/dev/null |
	openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial 7 -days 1 -out "$pki/tls.crt" \
		-extfile <(echo "subjectAltName=DNS:modelpool-operator-metrics-service.modelpool-system.svc") 2>/dev/null
MP_OPERATOR_LOG=given start_operator --metrics-secure=true --metrics-cert-path "$pki"
wait_for 60 operator_port metrics operator-given.log
port=$(operator_port metrics operator-given.log)
svc=modelpool-operator-metrics-service.modelpool-system.svc
expect_eq "scrape verified against the given CA" 200 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" \
	--resolve "$svc:$port:127.0.0.1" -H "$(bearer "$reader")" "https://$svc:$port/metrics")"
stop_operator

log "a key that does not match the certificate stops the start with status 2, naming the file"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/other.key" 2>/dev/null
expect_fail "other.key does not match the certificate" "$MP_BUILD_DIR/modelpool-operator" \
	--kubeconfig "$MP_OPERATOR_KUBECONFIG" --metrics-bind-address 127.0.0.1:0 \
	--health-probe-bind-address 127.0.0.1:0 --metrics-cert-path "$pki" --metrics-cert-key other.key
rc=0
"$MP_BUILD_DIR/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" --metrics-bind-address 127.0.0.1:0 \
	--health-probe-bind-address 127.0.0.1:0 --metrics-cert-path "$pki/missing" >/dev/null 2>&1 || rc=$?
expect_eq "exit status with a missing certificate" 2 "$rc"

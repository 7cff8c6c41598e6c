# What the operator does when the API server refuses it: without its RBAC (403 Forbidden) and with a
# credential the API server does not accept (401 Unauthorized) it keeps running and keeps trying with
# a growing backoff, each failed list an error line with the reason and the wait before the next try;
# /healthz stays 200 and /readyz answers 503 naming the list it waits for, in the API server's words.
# Granted its rights, it syncs and warms the pool without a restart. (docs/operations.md "When the API server
# refuses the operator".)
install_crds_and_samples
start_sim

log "no RBAC for the operator's identity: 403 on every list"
start_operator
oplog=$MP_STATE_DIR/operator.log
pools=/apis/inference.llmkube.dev/v1alpha1/modelpools
# next_tries: the waits the modelpools list's error lines announce, in ms, one a line.
next_tries() {
	grep -F "list/watch failed, retrying" "$1" | grep -F "list $pools: " | sed -n 's/.*(next try in \([0-9]*\) ms).*/\1/p'
}
three_tries() { [ "$(next_tries "$oplog" | wc -l)" -ge 3 ]; }
wait_for 60 three_tries
grep -F "list $pools: " "$oplog" | grep -F "list/watch failed" | head -n 1 | grep_all 'reason=Forbidden' ||
	fail "the list's error line has no reason=Forbidden: $(grep -F "list $pools: " "$oplog" | head -n 1)"
# Backoff with jitter: step N waits [s, 2s) with s doubling from 0.8 s, so each wait exceeds the last.
mapfile -t t < <(next_tries "$oplog" | head -n 3)
[ "${t[0]}" -lt "${t[1]}" ] && [ "${t[1]}" -lt "${t[2]}" ] || fail "the waits do not grow: ${t[*]} ms"
kill -0 "$MP_OPERATOR_PID" || fail "the operator exited without its rights"

wait_for 60 operator_port health
health="http://127.0.0.1:$(operator_port health)"
expect_eq "/healthz without rights" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$health/healthz")"
expect_eq "/readyz without rights" 503 "$(curl -s -o /dev/null -w '%{http_code}' "$health/readyz")"
body=$(curl -s "$health/readyz")
grep -q "^not ready: waiting for the first list of .*modelpools.inference.llmkube.dev (last error: list $pools: .*forbidden" <<<"$body" ||
	fail "/readyz does not say what it waits for and why: $body"

log "the rights are granted: it syncs and warms the pool, no restart"
install_operator_rbac
wait_for 120 curl -fsS "$health/readyz"
wait_for 90 pool_is shared-gpu Ready llama-8b
kill -0 "$MP_OPERATOR_PID" || fail "the operator restarted"
stop_operator

log "a token the API server does not accept: 401 on every list"
bad=$MP_STATE_DIR/bad-token.kubeconfig
kubectl config --kubeconfig "$bad" set-cluster test --server "$MP_APISERVER_URL" --certificate-authority "$MP_CA_FILE" >/dev/null
kubectl config --kubeconfig "$bad" set-credentials nobody --token not-a-valid-token >/dev/null
kubectl config --kubeconfig "$bad" set-context test --cluster test --user nobody >/dev/null
kubectl config --kubeconfig "$bad" use-context test >/dev/null
MP_OPERATOR_LOG=bad MP_OPERATOR_KUBECONFIG=$bad start_operator
oplog=$MP_STATE_DIR/operator-bad.log
wait_for 60 grep -q 'list/watch failed, retrying.*reason=Unauthorized' "$oplog"
wait_for 60 operator_port health operator-bad.log
health="http://127.0.0.1:$(operator_port health operator-bad.log)"
expect_eq "/readyz with a bad token" 503 "$(curl -s -o /dev/null -w '%{http_code}' "$health/readyz")"
body=$(curl -s "$health/readyz")
grep -q "last error: list .*Unauthorized" <<<"$body" || fail "/readyz does not say Unauthorized: $body"
kill -0 "$MP_OPERATOR_PID" || fail "the operator exited on 401"
stop_operator

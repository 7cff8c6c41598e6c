# An operator started before the member controller's InferenceService CRD is installed says what is wrong:
# its log names the resource and the CustomResourceDefinition to check, /readyz answers 503 saying which
# list it waits for (with that error), and once the CRD is installed it syncs, turns ready and warms the pool.
apply_crd "$MP_SOURCE_DIR/crd/modelpools.inference.llmkube.dev.yaml"
install_operator_rbac
start_sim
start_operator

crd=inferenceservices.inference.llmkube.dev
log "the log names the missing resource and its CRD"
wait_for 60 grep -F "list /apis/inference.llmkube.dev/v1alpha1/inferenceservices: " "$MP_STATE_DIR/operator.log"
grep "list/watch failed" "$MP_STATE_DIR/operator.log" | grep -F "is the CustomResourceDefinition $crd installed?" ||
	fail "the list/watch error does not name the CRD $crd"

log "/readyz says what it waits for"
wait_for 60 operator_port health
url="http://127.0.0.1:$(operator_port health)/readyz"
expect_eq "/readyz code without the CRD" 503 "$(curl -s -o /dev/null -w '%{http_code}' "$url")"
body=$(curl -s "$url")
grep -F "not ready: waiting for the first list of $crd (last error: list /apis/" <<<"$body" ||
	fail "/readyz does not say it waits for $crd: $body"
grep -F "modelpools" <<<"$body" && fail "/readyz waits for modelpools, whose CRD is installed: $body"

log "with the CRD installed, the operator syncs and warms the pool without a restart"
apply_crd "$MP_SOURCE_DIR/test/crds/inferenceservices.inference.llmkube.dev.yaml"
kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/inferenceservices.yaml" >/dev/null
kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/modelpool.yaml" >/dev/null
wait_for 120 curl -fsS "$url"
expect_eq "/readyz once synced" ok "$(curl -fsS "$url")"
wait_for 90 pool_is shared-gpu Ready llama-8b
stop_operator

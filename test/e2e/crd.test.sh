#!/usr/bin/env bash
# End to end on a real kube-apiserver: the ModelPool CRD and the test InferenceService CRD install, accept every
# seed field with its defaults, reject each invalid spec with a message naming the fault (fixtures/crd/invalid-*,
# each stating the message it expects), serve the samples, the printer columns and the scale subresource.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=${MP_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
fx=$here/fixtures/crd
ns=default

# run-one.sh sources lib.sh (fail, expect_eq WHAT EXPECTED ACTUAL, wait_for, apply_crd); run by hand, with
# KUBECONFIG pointing at a disposable API server, the test sources it itself.
declare -F apply_crd >/dev/null || source "$here/lib.sh"
# The object the API server would store for FILE (defaults applied), printed with a jsonpath template.
dry_get() { kubectl create --dry-run=server -n "$ns" -f "$1" -o jsonpath="$2"; }
# First line of `kubectl get ARGS` with runs of spaces squeezed, e.g. "NAME POLICY RESIDENT PHASE AGE".
header() { kubectl get "$@" | head -n 1 | tr -s ' '; }
# The row of `kubectl get ARGS` (one object), squeezed the same way, without the Age that ends it.
row() { kubectl get "$@" --no-headers | tr -s ' ' | sed 's/ [^ ]*$//'; }

log "installing the CRDs"
apply_crd "$top/crd/modelpools.inference.llmkube.dev.yaml" "$top/test/crds/inferenceservices.inference.llmkube.dev.yaml"
# Established can be reported a moment before kubectl's discovery lists the new kinds.
wait_for 30 kubectl get mpool,isvc -n "$ns"

log "(a) every seed field is accepted, and the defaults are filled in"
kubectl create -n "$ns" -f "$fx/full.yaml"
expect_eq "full.yaml spec" "qwen-7b|2|llama-8b qwen-7b|gpu-node-1|NVIDIA-L4|1h30m|sticky" \
	"$(kubectl get mpool full -n "$ns" -o jsonpath='{.spec.default}|{.spec.gpu}|{.spec.members[*].inferenceServiceRef.name}|{.spec.nodeSelector.kubernetes\.io/hostname}|{.spec.nodeSelector.nvidia\.com/gpu\.product}|{.spec.swapBudget}|{.spec.swapPolicy}')"
kubectl patch mpool full -n "$ns" --subresource=status --type=merge --patch-file "$fx/status-full.yaml"
expect_eq "status-full.yaml status" \
	"Swapping|llama-8b|qwen-7b|1|llama-8b qwen-7b|Ready Stopped|true false|SlotAllocated SwapDeferred|Resident PodsBusy|1" \
	"$(kubectl get mpool full -n "$ns" -o jsonpath='{.status.phase}|{.status.residentMember}|{.status.pendingMember}|{.status.observedGeneration}|{.status.members[*].name}|{.status.members[*].phase}|{.status.members[*].resident}|{.status.conditions[*].type}|{.status.conditions[*].reason}|{.status.conditions[0].observedGeneration}')"

expect_eq "minimal.yaml defaults" "1|sticky|300s" \
	"$(dry_get "$fx/minimal.yaml" '{.spec.gpu}|{.spec.swapPolicy}|{.spec.swapBudget}')"
# The whole spec, so that a null kept as null (rather than dropped or defaulted) would show.
expect_eq "nulls.yaml spec" \
	'{"gpu":1,"members":[{"inferenceServiceRef":{"name":"llama-8b"}}],"swapBudget":"300s","swapPolicy":"sticky"}' \
	"$(dry_get "$fx/nulls.yaml" '{.spec}')"
expect_eq "isvc-minimal.yaml" "1|llamacpp|llama-8b|4096|8081|/v1/chat/completions" \
	"$(dry_get "$fx/isvc-minimal.yaml" '{.spec.replicas}|{.spec.runtime}|{.spec.modelRef}|{.spec.contextSize}|{.spec.endpoint.port}|{.spec.endpoint.path}')"
# Every form of Go duration the operator must parse passes the swapBudget rule (its regex guards duration()),
# down to its 1 ms resolution (1000000ns); below it is refused (fixtures/crd/invalid-swapbudget-500us.yaml).
for v in 300s 5m 1h30m 1.5h .5s 2h45m30.5s 1500ms 1500us 2000µs 1ms500us 1000000ns; do
	expect_eq "minimal.yaml with swapBudget $v" "$v" \
		"$(sed '$a\  swapBudget: "'"$v"'"' "$fx/minimal.yaml" | dry_get - '{.spec.swapBudget}')"
done

log "(b) each invalid manifest is rejected with a message naming the fault"
n=0
for f in "$fx"/invalid-*.yaml; do
	name=$(basename "$f" .yaml)
	mapfile -t want < <(sed -n 's/^# expect: //p' "$f")
	[ ${#want[@]} -gt 0 ] || fail "$name: the fixture has no '# expect:' line"
	if out=$(kubectl create --dry-run=server -n "$ns" -f "$f" 2>&1); then
		fail "$name was accepted: $out"
	fi
	for re in "${want[@]}"; do
		grep -Eq -- "$re" <<<"$out" || fail "$name: the API server's message does not match /$re/: $out"
	done
	log "  $name: $out"
	n=$((n + 1))
done
log "  $n invalid manifests rejected"

log "(c) the samples apply"
kubectl apply -f "$top/config/samples/inferenceservices.yaml" -f "$top/config/samples/modelpool.yaml"
expect_eq "sample pool" "llama-8b|llama-8b qwen-7b|300s|sticky|1" \
	"$(kubectl get mpool shared-gpu -n "$ns" -o jsonpath='{.spec.default}|{.spec.members[*].inferenceServiceRef.name}|{.spec.swapBudget}|{.spec.swapPolicy}|{.spec.gpu}')"
for m in $(kubectl get mpool shared-gpu -n "$ns" -o jsonpath='{.spec.members[*].inferenceServiceRef.name}'); do
	kubectl get isvc "$m" -n "$ns" >/dev/null || fail "sample pool member $m has no InferenceService in the samples"
done
expect_eq "sample members" "llama-8b=llamacpp/1 qwen-7b=llamacpp/0 " \
	"$(kubectl get isvc llama-8b qwen-7b -n "$ns" -o jsonpath='{range .items[*]}{.metadata.name}={.spec.runtime}/{.spec.replicas} {end}')"

log "(d) printer columns"
expect_eq "kubectl get mpool" "NAME POLICY RESIDENT PHASE AGE" "$(header mpool -n "$ns")"
expect_eq "kubectl get mpool -o wide" "NAME POLICY RESIDENT PHASE PENDING AGE" "$(header mpool -n "$ns" -o wide)"
expect_eq "kubectl get mpool full -o wide" "full sticky llama-8b Swapping qwen-7b" "$(row mpool full -n "$ns" -o wide)"
# kubectl prints an unset column as blanks, which the squeezing folds away: a cold pool shows only its policy.
expect_eq "kubectl get mpool shared-gpu" "shared-gpu sticky" "$(row mpool shared-gpu -n "$ns")"
expect_eq "kubectl get isvc" "NAME RUNTIME REPLICAS PHASE AGE" "$(header isvc -n "$ns")"
expect_eq "kubectl get isvc qwen-7b" "qwen-7b llamacpp 0" "$(row isvc qwen-7b -n "$ns")"

log "(e) kubectl scale on InferenceService"
kubectl scale isvc qwen-7b -n "$ns" --replicas=1
expect_eq "qwen-7b spec.replicas after scale" "1" "$(kubectl get isvc qwen-7b -n "$ns" -o jsonpath='{.spec.replicas}')"
scale=$(kubectl get --raw "/apis/inference.llmkube.dev/v1alpha1/namespaces/$ns/inferenceservices/qwen-7b/scale")
grep -q '"kind":"Scale"' <<<"$scale" || fail "the scale subresource did not answer with a Scale: $scale"
grep -q '"spec":{"replicas":1}' <<<"$scale" || fail "the Scale of qwen-7b does not say 1 replica: $scale"
kubectl scale isvc qwen-7b -n "$ns" --current-replicas=1 --replicas=0
expect_eq "qwen-7b spec.replicas after scaling back" "0" "$(kubectl get isvc qwen-7b -n "$ns" -o jsonpath='{.spec.replicas}')"

kubectl delete mpool full shared-gpu -n "$ns"
kubectl delete isvc llama-8b qwen-7b -n "$ns"
log "PASS"

#!/usr/bin/env bash
# End to end on a real kube-apiserver: `kubectl apply -k config/default` installs the CRD, namespace, RBAC and
# Deployment as the API server stores them, the Pod template passes the restricted Pod Security Standard, and
# the operator's identity can do exactly what config/rbac grants it (each verb it uses) and nothing it must not.
# Then the same for the router's own overlay, config/router, and the router's identity.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=${MP_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
sys=modelpool-system

# run-one.sh sources lib.sh (fail, expect_eq, expect_fail, wait_for, kubectl_admin, kubectl_operator); run by
# hand, with KUBECONFIG and MP_OPERATOR_KUBECONFIG set for a disposable API server, the test sources it itself.
# shellcheck source-path=SCRIPTDIR source=lib.sh
declare -F kubectl_operator >/dev/null || source "$here/lib.sh"

# can VERB RESOURCE [ARGS...] / cannot ...: what the server answers the identity $who (operator, then router)
# about itself (SelfSubjectAccessReview). Resources are fully qualified so no discovery guess picks the group; bare
# `events` and `pods` are the core group. A subresource goes in --subresource: `can-i patch modelpools/status`
# would ask about a modelpool *named* "status". Warnings count as a wrong answer: an unknown resource or a
# namespace on a cluster-scoped one would make a "no" prove nothing.
who=operator
can() {
	local out
	out=$("kubectl_$who" auth can-i "$@" 2>&1) || fail "$who cannot: $* ($out)"
	expect_eq "$who can-i $*" yes "$out"
}
cannot() {
	local out
	if out=$("kubectl_$who" auth can-i "$@" 2>&1); then
		fail "$who can, but must not: $* ($out)"
	fi
	# `no` is the answer; anything else (an error) would prove nothing.
	expect_eq "$who can-i $*" no "$out"
}
# granted ROLE...: every "group/resource verb" the roles (as the API server stores them; "-n NS role/NAME" for a
# namespaced one) grant, one a line, sorted. RBAC wildcards would show as "*" and fail the comparison below.
granted() {
	while [ $# -gt 0 ]; do
		if [ "$1" = -n ]; then
			kubectl_admin -n "$2" get "$3" -o json
			shift 3
		else
			kubectl_admin get "$1" -o json
			shift
		fi
	done | jq -r '.rules[] | .apiGroups[] as $g | .resources[] as $r | .verbs[] as $v | "\($g)/\($r) \($v)"' | LC_ALL=C sort
}
# uses_all SCOPE LIST: can-i for each "group/resource verb" line of LIST (SCOPE: -A, or -n NS).
uses_all() {
	local scope=$1 gr verb res sub
	while read -r gr verb; do
		[ -n "$gr" ] || continue
		res=${gr#*/}
		sub=""
		[[ "$res" == */* ]] && sub="--subresource=${res#*/}" res=${res%%/*}
		[ -n "${gr%%/*}" ] && res="$res.${gr%%/*}"
		# shellcheck disable=SC2086 # scope is "-A" or "-n NS"
		can "$verb" "$res" $sub $scope
	done <<<"$2"
}
# uses "GROUP/RESOURCE VERB..."...: a "group/resource verb" line for each verb, in the order given (as
# granted prints them and uses_all reads them).
uses() {
	local item verb
	for item; do
		for verb in ${item#* }; do echo "${item%% *} $verb"; done
	done
}
# forbidden CMD...: the identity's real request must be refused by RBAC (not fail for another reason).
forbidden() { expect_fail 'Forbidden|forbidden' "kubectl_$who" "$@"; }
# config_objects K / config_namespaces K: the objects of config/K as rendered ($MP_STATE_DIR/K.yaml), as
# sorted "Kind/name" words on one line / the namespaces they name, each once, on one line.
config_objects() {
	kubectl_admin create --dry-run=client -f "$MP_STATE_DIR/$1.yaml" -o 'jsonpath={.kind}/{.metadata.name}{"\n"}' |
		LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'
}
config_namespaces() {
	kubectl_admin create --dry-run=client -f "$MP_STATE_DIR/$1.yaml" -o 'jsonpath={.metadata.namespace}{"\n"}' |
		grep -v '^$' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# dget KIND NAME JSONPATH: one field of an object in modelpool-system.
dget() { kubectl_admin -n "$sys" get "$1" "$2" -o "jsonpath=$3"; }
# ports_of DEPLOYMENT / probes_of DEPLOYMENT: its container's ports ("name:port ...") / its liveness and
# readiness probes ("path:port path:port").
ports_of() {
	dget deployment "$1" "{range .spec.template.spec.containers[0].ports[*]}{.name}:{.containerPort} {end}" | sed 's/ $//'
}
probes_of() {
	local p='{.spec.template.spec.containers[0]'
	dget deployment "$1" "$p.livenessProbe.httpGet.path}:$p.livenessProbe.httpGet.port} $p.readinessProbe.httpGet.path}:$p.readinessProbe.httpGet.port}"
}

log "the kustomizations render, and config/default holds exactly the expected objects"
for k in crd rbac manager default router; do
	kubectl kustomize "$top/config/$k" >"$MP_STATE_DIR/$k.yaml" || fail "kubectl kustomize config/$k"
done
expect_eq "objects in config/default" \
	"ClusterRole/modelpool-operator ClusterRole/modelpool-operator-metrics-reader ClusterRoleBinding/modelpool-operator CustomResourceDefinition/modelpools.inference.llmkube.dev Deployment/modelpool-operator Namespace/modelpool-system Role/modelpool-operator-fence-acks Role/modelpool-operator-leader-election RoleBinding/modelpool-operator-fence-acks RoleBinding/modelpool-operator-leader-election Service/modelpool-operator-metrics-service ServiceAccount/modelpool-operator" \
	"$(config_objects default)"
# Namespaced objects all land in modelpool-system; the CRD and cluster RBAC carry no namespace.
expect_eq "namespaces in config/default" "$sys" "$(config_namespaces default)"
# config/crd is the top-level CRD, whole (the CRD file is the one copy; kustomize only drops comments).
expect_eq "config/crd == crd/modelpools.inference.llmkube.dev.yaml" \
	"$(kubectl_admin create --dry-run=client -o json -f "$top/crd/modelpools.inference.llmkube.dev.yaml")" \
	"$(kubectl_admin create --dry-run=client -o json -f "$MP_STATE_DIR/crd.yaml")"

log "an overlay's kustomize images: replaces the image of the operator's Deployment and of the router's"
overlay=$MP_STATE_DIR/overlay
mkdir -p "$overlay"
# kustomize refuses absolute resource paths; a relative one may climb out of the overlay's root.
cat >"$overlay/kustomization.yaml" <<EOF
resources:
  - $(realpath --relative-to="$overlay" "$top/config/default")
  - $(realpath --relative-to="$overlay" "$top/config/router")
images:
  - name: modelpool-operator
    newName: modelpool-operator-test
    newTag: v9.9.9
EOF
kubectl kustomize "$overlay" >"$MP_STATE_DIR/overlay.yaml"
# Only the Deployments have a Pod template, so the other objects print nothing.
expect_eq "overlay images" "modelpool-operator-test:v9.9.9 modelpool-operator-test:v9.9.9" \
	"$(kubectl_admin create --dry-run=client -f "$MP_STATE_DIR/overlay.yaml" \
		-o 'jsonpath={.spec.template.spec.containers[*].image}{"\n"}' | grep -v '^$' | paste -sd ' ' -)"

log "server dry run on a cold cluster: cluster-scoped objects pass; namespaced ones fail only for the missing namespace"
# A server dry run creates nothing, so objects for a namespace that the same apply would create are refused
# (NotFound) by design. Any other error here would be a real fault in a manifest.
out=$(kubectl_admin apply -k "$top/config/default" --dry-run=server 2>&1) && fail "dry run on a cold cluster unexpectedly passed"$'\n'"$out"
grep -v -e '(server dry run)$' -e "namespaces \"$sys\" not found" <<<"$out" && fail "unexpected dry-run output above"
expect_fail "NotFound" kubectl_admin get namespace "$sys"
expect_fail "NotFound" kubectl_admin get crd modelpools.inference.llmkube.dev

log "server dry run with the namespace present: succeeds, with no warning (strict field validation, Pod Security)"
kubectl_admin create --save-config -f "$top/config/manager/namespace.yaml" >/dev/null
out=$(kubectl_admin apply -k "$top/config/default" --dry-run=server 2>&1) || fail "server dry run failed:"$'\n'"$out"
echo "$out" >&2
grep -qi 'warning' <<<"$out" && fail "server dry run warned"
expect_eq "objects the dry run would touch" 12 "$(grep -c '(server dry run)$' <<<"$out")"
expect_fail "NotFound" kubectl_admin get crd modelpools.inference.llmkube.dev
expect_fail "NotFound" kubectl_admin -n "$sys" get deployment modelpool-operator

log "the real apply creates everything; applying again changes nothing"
out=$(kubectl_admin apply -k "$top/config/default" 2>&1) || fail "kubectl apply -k config/default failed:"$'\n'"$out"
echo "$out" >&2
grep -qi 'warning' <<<"$out" && fail "apply warned"
kubectl_admin wait --for=condition=Established --timeout=60s crd/modelpools.inference.llmkube.dev >/dev/null
wait_for 60 kubectl_admin get modelpools --all-namespaces
out=$(kubectl_admin apply -k "$top/config/default" 2>&1)
expect_eq "objects unchanged by a second apply" 12 "$(grep -c ' unchanged$' <<<"$out")"
kubectl_admin -n "$sys" get serviceaccount/modelpool-operator role/modelpool-operator-leader-election \
	rolebinding/modelpool-operator-leader-election role/modelpool-operator-fence-acks \
	rolebinding/modelpool-operator-fence-acks deployment/modelpool-operator >/dev/null
kubectl_admin get clusterrole/modelpool-operator clusterrolebinding/modelpool-operator >/dev/null

log "the Deployment as the API server stored it"
d=deployment
c='{.spec.template.spec.containers[0]'
expect_eq "replicas" 2 "$(dget $d modelpool-operator '{.spec.replicas}')"
expect_eq "serviceAccountName" modelpool-operator "$(dget $d modelpool-operator '{.spec.template.spec.serviceAccountName}')"
expect_eq "automountServiceAccountToken" true "$(dget $d modelpool-operator '{.spec.template.spec.automountServiceAccountToken}')"
expect_eq "terminationGracePeriodSeconds" 30 "$(dget $d modelpool-operator '{.spec.template.spec.terminationGracePeriodSeconds}')"
expect_eq "image" "modelpool-operator:latest/IfNotPresent" "$(dget $d modelpool-operator "$c.image}/$c.imagePullPolicy}")"
expect_eq "args" "--leader-elect --metrics-bind-address=:8443 --metrics-secure=true --health-probe-bind-address=:8081" \
	"$(dget $d modelpool-operator "$c.args[*]}")"
expect_eq "ports" "https:8443 health:8081" "$(ports_of modelpool-operator)"
expect_eq "probes" "/healthz:health /readyz:health" "$(probes_of modelpool-operator)"
expect_eq "resources" "10m/16Mi//64Mi" \
	"$(dget $d modelpool-operator "$c.resources.requests.cpu}/$c.resources.requests.memory}/$c.resources.limits.cpu}/$c.resources.limits.memory}")"
expect_eq "pod securityContext" "true/65532/RuntimeDefault" \
	"$(dget $d modelpool-operator '{.spec.template.spec.securityContext.runAsNonRoot}/{.spec.template.spec.securityContext.runAsUser}/{.spec.template.spec.securityContext.seccompProfile.type}')"
expect_eq "container securityContext" "false/true/ALL" \
	"$(dget $d modelpool-operator "$c.securityContext.allowPrivilegeEscalation}/$c.securityContext.readOnlyRootFilesystem}/$c.securityContext.capabilities.drop[*]}")"
expect_eq "POD_NAMESPACE" "metadata.namespace" \
	"$(dget $d modelpool-operator "$c.env[?(@.name==\"POD_NAMESPACE\")].valueFrom.fieldRef.fieldPath}")"
expect_eq "POD_IP (a name of the self-signed metrics certificate)" "status.podIP" \
	"$(dget $d modelpool-operator "$c.env[?(@.name==\"POD_IP\")].valueFrom.fieldRef.fieldPath}")"

log "the metrics Service: HTTPS on 8443, selecting the Deployment's Pods"
expect_eq "metrics Service port" "https/8443/https/TCP" \
	"$(dget service modelpool-operator-metrics-service '{range .spec.ports[*]}{.name}/{.port}/{.targetPort}/{.protocol}{end}')"
expect_eq "metrics Service selector = the Pod template's labels" \
	"$(dget $d modelpool-operator '{.spec.template.metadata.labels}')" \
	"$(dget service modelpool-operator-metrics-service '{.spec.selector}')"
expect_eq "metrics-reader ClusterRole" '[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]' \
	"$(kubectl_admin get clusterrole modelpool-operator-metrics-reader -o 'jsonpath={.rules}')"

log "a Pod from the template is admitted under the namespace's enforced restricted Pod Security Standard"
# No kubelet or controller-manager here, so the Deployment never makes Pods; create one from its template
# (server dry run) to run Pod Security admission, which enforces on Pods only.
pod_from_template() { # [JQ_FILTER]: the template of Deployment $tmpl (default the operator's) as a Pod, edited.
	kubectl_admin -n "$sys" get $d "${tmpl:-modelpool-operator}" -o json |
		jq --arg ns "$sys" '{apiVersion: "v1", kind: "Pod",
			metadata: (.spec.template.metadata + {name: "template-check", namespace: $ns}),
			spec: .spec.template.spec}' | jq "${1:-.}"
}
pod_from_template | kubectl_admin create --dry-run=server -f - >/dev/null ||
	fail "a Pod from the Deployment's template is refused in $sys"
# The control: the same Pod with privilege escalation allowed must be refused, or the check above proved nothing.
pod_from_template '.spec.containers[0].securityContext.allowPrivilegeEscalation = true' >"$MP_STATE_DIR/bad-pod.json"
expect_fail 'violates PodSecurity "restricted' kubectl_admin create --dry-run=server -f "$MP_STATE_DIR/bad-pod.json"

log "the operator's roles grant exactly the verbs the operator issues, and the identity can do each"
# The members' kind, which its own controller installs in a real cluster: without it kubectl cannot map
# inferenceservices.inference.llmkube.dev to a group and would ask about a resource nobody grants.
apply_crd "$top/test/crds/inferenceservices.inference.llmkube.dev.yaml"
g=inference.llmkube.dev
# What the operator's code issues, read off the API server's audit log of its e2e runs (every request of its
# identity with its user agent, modelpool-operator/*): watches of pools, members and Pods (list, watch), a
# list of a pool's Pods right before a scale-up, merge patches of pool status and member replicas, the JSON
# patch that clears a request made through a pool, Events (create), the Lease (get, create, update), and the
# reviews of secure metrics. A verb granted beyond these, or one of these not granted, fails here.
operator_uses=$(uses '/events create' '/pods list watch' 'authentication.k8s.io/tokenreviews create' \
	'authorization.k8s.io/subjectaccessreviews create' "$g/inferenceservices list patch watch" \
	"$g/modelpools list patch watch" "$g/modelpools/status patch")
lease_uses=$(uses 'coordination.k8s.io/leases create get update')
# The router replicas' Leases (--fence-acks): watched, and listed once more before a swap's fence ends early.
router_lease_uses=$(uses 'coordination.k8s.io/leases list watch')
expect_eq "the operator's ClusterRole grants" "$operator_uses" "$(granted clusterrole/modelpool-operator)"
expect_eq "the operator's leader-election Role grants" "$lease_uses" "$(granted -n "$sys" role/modelpool-operator-leader-election)"
expect_eq "the operator's fence-acks Role grants" "$router_lease_uses" "$(granted -n "$sys" role/modelpool-operator-fence-acks)"
uses_all -A "$(grep -v '^/events' <<<"$operator_uses")"
can create events -n default
uses_all "-n $sys" "$lease_uses"
uses_all "-n $sys" "$router_lease_uses"

log "and cannot do what it must not"
cannot delete pods -A
cannot create pods -n default
cannot patch pods -n default
cannot update pods -n default
cannot delete pods -n default --subresource=eviction
cannot create pods -n default --subresource=eviction
cannot get pods -n default --subresource=log
cannot create pods -n default --subresource=exec
cannot update inferenceservices.$g --subresource=status -A
cannot patch inferenceservices.$g --subresource=status -A
for v in get patch update; do cannot "$v" inferenceservices.$g --subresource=scale -A; done
for v in get update; do cannot "$v" modelpools.$g --subresource=status -A; done
for v in get update; do cannot "$v" modelpools.$g -A; done
cannot get inferenceservices.$g -A
cannot get pods -A
cannot patch events -n default
cannot create events.events.k8s.io -n default
cannot update inferenceservices.$g -A
cannot create inferenceservices.$g -n default
cannot delete inferenceservices.$g -n default
cannot delete modelpools.$g -A
cannot create modelpools.$g -n default
cannot update modelpools.$g -n default
cannot get secrets -A
cannot get secrets -n "$sys"
cannot list configmaps -A
cannot delete events -n default
cannot list leases.coordination.k8s.io -A
cannot watch leases.coordination.k8s.io -A
cannot get leases.coordination.k8s.io -n default
cannot list leases.coordination.k8s.io -n default
cannot create leases.coordination.k8s.io -n default
cannot delete leases.coordination.k8s.io -n "$sys"
cannot patch leases.coordination.k8s.io -n "$sys"
cannot create serviceaccounts --subresource=token -n "$sys"
cannot escalate clusterroles.rbac.authorization.k8s.io -A
cannot update clusterroles.rbac.authorization.k8s.io -A
cannot impersonate serviceaccounts -A
# The operator reviews scrapers; it may not read its own metrics endpoint's path for itself.
cannot get /metrics

log "real requests with the operator identity: allowed ones go through, the rest are Forbidden"
# A pool with one member, by admin.
kubectl_admin -n default apply -f - >/dev/null <<'EOF'
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: rbac-member
spec:
  modelRef: rbac-member
  replicas: 0
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: ModelPool
metadata:
  name: rbac-pool
spec:
  members:
    - inferenceServiceRef:
        name: rbac-member
EOF
expect_eq "pools the operator lists" "default/rbac-pool" \
	"$(kubectl_operator get modelpools -A -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{end}')"
# The operator's writes as it sends them, with curl: kubectl patch reads the object first, a get the operator
# has no right to (and never does).
kcfg() { kubectl config view --kubeconfig "$MP_OPERATOR_KUBECONFIG" --raw -o "jsonpath={.users[0].user.$1}"; }
# operator_patch WHAT PATH TYPE BODY: a PATCH of PATH (under /apis/$g/v1alpha1/namespaces/default/) with the
# operator's identity; fails the test unless it answers 200.
operator_patch() {
	expect_eq "$1" 200 "$(curl -sS -o "$MP_STATE_DIR/patch.out" -w '%{http_code}' --cacert "$MP_CA_FILE" \
		--cert "$(kcfg client-certificate)" --key "$(kcfg client-key)" -X PATCH -H "Content-Type: $3" \
		--data-binary "$4" "$MP_APISERVER_URL/apis/$g/v1alpha1/namespaces/default/$2")"
}
operator_patch "status patch by the operator" modelpools/rbac-pool/status application/merge-patch+json \
	'{"status":{"phase":"Pending"}}'
expect_eq "status written by the operator" Pending "$(kubectl_admin -n default get modelpool rbac-pool -o 'jsonpath={.status.phase}')"
# patch on pools is granted for one JSON patch (removing a request made through the pool, after testing
# its value); RBAC cannot narrow it to an annotation, so the code is what keeps the spec untouched.
# (Made by a router or a user: annotate reads the pool first, a get the operator has no right to.)
kubectl_admin -n default annotate modelpool rbac-pool modelpool-operator.dev/request=rbac-member >/dev/null
operator_patch "request cleared by the operator" modelpools/rbac-pool application/json-patch+json \
	'[{"op":"test","path":"/metadata/annotations/modelpool-operator.dev~1request","value":"rbac-member"},{"op":"remove","path":"/metadata/annotations/modelpool-operator.dev~1request"}]'
expect_eq "request annotation after the operator's patch" "" \
	"$(kubectl_admin -n default get modelpool rbac-pool -o 'jsonpath={.metadata.annotations.modelpool-operator\.dev/request}')"
forbidden -n default delete modelpool rbac-pool
# Replicas the way the operator sets them: a merge patch on the member with a resourceVersion precondition
# (the version from its watch cache: a list here); not through the scale subresource, nor by a get.
rv=$(kubectl_operator -n default get inferenceservices -o 'jsonpath={.items[?(@.metadata.name=="rbac-member")].metadata.resourceVersion}')
operator_patch "replicas patch by the operator" inferenceservices/rbac-member application/merge-patch+json \
	"{\"metadata\":{\"resourceVersion\":\"$rv\"},\"spec\":{\"replicas\":1}}"
expect_eq "replicas after the operator's patch" 1 "$(kubectl_admin -n default get isvc rbac-member -o 'jsonpath={.spec.replicas}')"
forbidden -n default scale inferenceservice rbac-member --replicas=0
forbidden -n default get inferenceservice rbac-member
operator_patch "second replicas patch" inferenceservices/rbac-member application/merge-patch+json '{"spec":{"replicas":0}}'
expect_eq "replicas after the operator's second patch" 0 "$(kubectl_admin -n default get isvc rbac-member -o 'jsonpath={.spec.replicas}')"
forbidden -n default patch inferenceservice rbac-member --subresource=status --type=merge -p '{"status":{"phase":"Ready"}}'
forbidden -n default delete inferenceservice rbac-member
out=$(kubectl_operator get pods -A -o name 2>&1) || fail "operator cannot list pods: $out"
forbidden -n default run rbac-pod --image=busybox --restart=Never
# An Event on the pool, in the pool's namespace, the way the operator posts them.
kubectl_operator -n default create -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Event
metadata:
  name: rbac-pool.manifests-test
involvedObject:
  apiVersion: inference.llmkube.dev/v1alpha1
  kind: ModelPool
  name: rbac-pool
  namespace: default
reason: ManifestsTest
message: posted by the operator's identity
type: Normal
source:
  component: modelpool-operator
EOF
forbidden get secrets -A
forbidden -n "$sys" get secrets
# The leader-election Lease: create, read, renew in modelpool-system; nowhere else, and never delete.
lease() {
	cat <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: modelpool-operator-manifests-test
  namespace: $1
spec:
  holderIdentity: $2
  leaseDurationSeconds: 15
EOF
}
lease "$sys" replica-a | kubectl_operator create -f - >/dev/null
lease "$sys" replica-b | kubectl_operator replace -f - >/dev/null
expect_eq "lease holder after the operator's update" replica-b \
	"$(kubectl_operator -n "$sys" get lease modelpool-operator-manifests-test -o 'jsonpath={.spec.holderIdentity}')"
forbidden -n "$sys" delete lease modelpool-operator-manifests-test
lease default replica-a >"$MP_STATE_DIR/lease-default.yaml"
forbidden create -f "$MP_STATE_DIR/lease-default.yaml"

log "config/router: its own overlay, exactly the expected objects, all in $sys, and no Namespace"
# Not in config/default: installing only the operator must stay possible (checked above: config/default's
# objects), and deleting the router must not take the operator's namespace along.
expect_eq "objects in config/router" \
	"ClusterRole/modelpool-router ClusterRoleBinding/modelpool-router Deployment/modelpool-router PodDisruptionBudget/modelpool-router Role/modelpool-router-registration RoleBinding/modelpool-router-registration Service/modelpool-router Service/modelpool-router-metrics-service ServiceAccount/modelpool-router" \
	"$(config_objects router)"
expect_eq "namespaces in config/router" "$sys" "$(config_namespaces router)"

log "config/router: server dry run passes with no warning, then the real apply; applying again changes nothing"
out=$(kubectl_admin apply -k "$top/config/router" --dry-run=server 2>&1) || fail "server dry run of config/router failed:"$'\n'"$out"
echo "$out" >&2
grep -qi 'warning' <<<"$out" && fail "server dry run of config/router warned"
expect_eq "objects the router's dry run would touch" 9 "$(grep -c '(server dry run)$' <<<"$out")"
expect_fail "NotFound" kubectl_admin -n "$sys" get deployment modelpool-router
out=$(kubectl_admin apply -k "$top/config/router" 2>&1) || fail "kubectl apply -k config/router failed:"$'\n'"$out"
grep -qi 'warning' <<<"$out" && fail "apply of config/router warned:"$'\n'"$out"
pdb_rv=$(dget pdb modelpool-router '{.metadata.resourceVersion}')
out=$(kubectl_admin apply -k "$top/config/router" 2>&1)
# kubectl's client-side apply always sends a PodDisruptionBudget's selector (its patch strategy is
# "replace") and so says "configured"; the server changes nothing, as the resourceVersion shows.
expect_eq "router objects changed by a second apply" "poddisruptionbudget.policy/modelpool-router configured" \
	"$(grep -v ' unchanged$' <<<"$out")"
expect_eq "router objects unchanged by a second apply" 8 "$(grep -c ' unchanged$' <<<"$out")"
expect_eq "the PodDisruptionBudget's resourceVersion after the second apply" "$pdb_rv" \
	"$(dget pdb modelpool-router '{.metadata.resourceVersion}')"

log "the router's Deployment as the API server stored it"
r=modelpool-router
expect_eq "replicas" 2 "$(dget $d $r '{.spec.replicas}')"
expect_eq "serviceAccountName" $r "$(dget $d $r '{.spec.template.spec.serviceAccountName}')"
expect_eq "terminationGracePeriodSeconds (covers the 25 s drain)" 30 "$(dget $d $r '{.spec.template.spec.terminationGracePeriodSeconds}')"
expect_eq "image (the operator's)" "modelpool-operator:latest/IfNotPresent" "$(dget $d $r "$c.image}/$c.imagePullPolicy}")"
expect_eq "command" "/usr/local/bin/modelpool-router" "$(dget $d $r "$c.command[*]}")"
expect_eq "args" "--bind-address=:8080 --metrics-bind-address=:8443 --metrics-secure=true --health-probe-bind-address=:8081 --max-connections-per-client=256 --header-timeout=10s --router-lease-namespace=modelpool-system" \
	"$(dget $d $r "$c.args[*]}")"
expect_eq "ports" "http:8080 https:8443 health:8081" "$(ports_of $r)"
expect_eq "probes" "/healthz:health /readyz:health" "$(probes_of $r)"
expect_eq "env" "POD_NAME=metadata.name POD_NAMESPACE=metadata.namespace POD_IP=status.podIP" \
	"$(dget $d $r "{range .spec.template.spec.containers[0].env[*]}{.name}={.valueFrom.fieldRef.fieldPath} {end}" | sed 's/ $//')"
# The same lock-down as the operator's container, field for field.
for f in '{.spec.template.spec.securityContext}' "$c.securityContext}" '{.spec.template.spec.automountServiceAccountToken}'; do
	expect_eq "router's $f = operator's" "$(dget $d modelpool-operator "$f")" "$(dget $d $r "$f")"
done

log "the router's Services: port 80 to http, metrics on 8443; each selects the router's Pods, and no Service mixes router and operator"
expect_eq "router Service port" "http/80/http/TCP" \
	"$(dget service $r '{range .spec.ports[*]}{.name}/{.port}/{.targetPort}/{.protocol}{end}')"
expect_eq "router metrics Service port" "https/8443/https/TCP" \
	"$(dget service $r-metrics-service '{range .spec.ports[*]}{.name}/{.port}/{.targetPort}/{.protocol}{end}')"
for svc in $r $r-metrics-service; do
	expect_eq "$svc selector = the router's Pod labels" "$(dget $d $r '{.spec.template.metadata.labels}')" \
		"$(dget service $svc '{.spec.selector}')"
done
[ "$(dget $d $r '{.spec.template.metadata.labels}')" != "$(dget service modelpool-operator-metrics-service '{.spec.selector}')" ] ||
	fail "the operator's metrics Service selects the router's Pods"
expect_eq "PodDisruptionBudget selector = the router's Pod labels" "$(dget $d $r '{.spec.template.metadata.labels}')" \
	"$(dget pdb $r '{.spec.selector.matchLabels}')"

log "a Pod from the router's template is admitted under the restricted Pod Security Standard"
tmpl=$r pod_from_template | kubectl_admin create --dry-run=server -f - >/dev/null ||
	fail "a Pod from the router's template is refused in $sys"
tmpl=$r pod_from_template '.spec.containers[0].securityContext.capabilities.drop = []' >"$MP_STATE_DIR/bad-router-pod.json"
expect_fail 'violates PodSecurity "restricted' kubectl_admin create --dry-run=server -f "$MP_STATE_DIR/bad-router-pod.json"

log "the router's ClusterRole grants exactly the verbs the router issues, and the identity can do each"
who=router
wait_for 60 kubectl_router auth can-i patch modelpools.$g -A
# What the router's code issues, read off the audit log of its e2e runs (user agent modelpool-router/*):
# watches of pools, members and Pods, the drain fence's get of a pool, the get of a member Pod before a new
# connection to it carries a request, the merge patch of a pool's request
# annotation, and the reviews of secure metrics.
router_uses=$(uses '/pods get list watch' 'authentication.k8s.io/tokenreviews create' \
	'authorization.k8s.io/subjectaccessreviews create' "$g/inferenceservices list watch" "$g/modelpools get list patch watch")
expect_eq "the router's ClusterRole grants" "$router_uses" "$(granted clusterrole/modelpool-router)"
uses_all -A "$router_uses"
# Its registration: a Lease of its own in the operator's namespace (created, read after a conflict, renewed
# with the acknowledgements, deleted at shutdown), nowhere else, and never listed.
registration_uses=$(uses 'coordination.k8s.io/leases create delete get patch')
expect_eq "the router's registration Role grants" "$registration_uses" "$(granted -n "$sys" role/modelpool-router-registration)"
uses_all "-n $sys" "$registration_uses"

log "and nothing more: no write on members, pool status or Pods, no delete, no Events, no Secrets"
for v in get create update patch delete deletecollection; do cannot "$v" inferenceservices.$g -n default; done
for v in get update patch; do cannot "$v" inferenceservices.$g --subresource=scale -A; done
for v in update patch; do cannot "$v" inferenceservices.$g --subresource=status -A; done
for v in create update delete deletecollection; do cannot "$v" modelpools.$g -n default; done
for v in update patch; do cannot "$v" modelpools.$g --subresource=status -A; done
for v in create update patch delete; do cannot "$v" pods -n default; done
cannot create pods -n default --subresource=eviction
cannot get pods -n default --subresource=log
cannot create pods -n default --subresource=exec
cannot create pods -n default --subresource=portforward
for v in create patch; do
	cannot "$v" events -n default
	cannot "$v" events.events.k8s.io -n default
done
cannot get secrets -A
cannot list configmaps -A
cannot list services -A
cannot list endpointslices.discovery.k8s.io -A
for v in get create patch delete; do cannot "$v" leases.coordination.k8s.io -n default; done
for v in list watch update; do cannot "$v" leases.coordination.k8s.io -n "$sys"; done
cannot create serviceaccounts --subresource=token -n "$sys"
cannot impersonate serviceaccounts -A
cannot delete namespaces -A
cannot get /metrics

log "real requests with the router identity: the request annotation goes through, member writes are Forbidden"
out=$(kubectl_router get pods -A -o name 2>&1) || fail "router cannot list pods: $out"
expect_eq "pools the router lists" "default/rbac-pool" \
	"$(kubectl_router get modelpools -A -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{end}')"
# The router's one write: a merge patch of the request annotation.
kubectl_router -n default patch modelpool rbac-pool --type=merge \
	-p '{"metadata":{"annotations":{"modelpool-operator.dev/request":"rbac-member"}}}' >/dev/null
expect_eq "request annotation written by the router" rbac-member \
	"$(kubectl_admin -n default get modelpool rbac-pool -o 'jsonpath={.metadata.annotations.modelpool-operator\.dev/request}')"
forbidden -n default patch modelpool rbac-pool --subresource=status --type=merge -p '{"status":{"pendingMember":"rbac-member"}}'
forbidden -n default scale inferenceservice rbac-member --replicas=1
forbidden -n default patch inferenceservice rbac-member --type=merge -p '{"spec":{"replicas":1}}'
forbidden -n default delete modelpool rbac-pool
expect_eq "member replicas after the router's attempts" 0 "$(kubectl_admin -n default get isvc rbac-member -o 'jsonpath={.spec.replicas}')"

log "install_router_rbac (what the router's e2e tests use) grants the same rights as config/router"
kubectl_admin delete -k "$top/config/router" --wait >/dev/null
wait_for 60 bash -c '! kubectl --kubeconfig "$MP_ROUTER_KUBECONFIG" auth can-i list pods -A'
kubectl_admin get namespace "$sys" >/dev/null || fail "deleting config/router took the operator's namespace"
install_router_rbac
can patch modelpools.$g -A
cannot patch inferenceservices.$g -A
expect_fail "NotFound" kubectl_admin -n "$sys" get deployment modelpool-router

log "modelpool-router run with exactly these rights syncs its caches (ready) and exits 0 on SIGTERM"
start_router --home-namespace default
wait_for 60 router_ready
stop_router
grep -qi forbidden "$MP_STATE_DIR/router.log" && fail "the router was refused something:"$'\n'"$(grep -i forbidden "$MP_STATE_DIR/router.log")"

log "manifests: all checks passed"

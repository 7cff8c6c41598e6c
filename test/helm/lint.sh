#!/usr/bin/env bash
# ctest helm.lint: the chart without a cluster. helm lint clean (router off and on); the default render holds
# exactly the expected objects; each example of the chart README's values table renders, changes the render, and (for
# the values that change what the operator or the router may do or how it runs) does what the table says;
# wrong values are refused by name; the chart's CRD and appVersion are the repository's.
# Usage: MP_SOURCE_DIR=<repo> MP_BUILD_DIR=<build> bash test/helm/lint.sh
set -euo pipefail
# shellcheck source=standalone.sh
source "$(dirname "${BASH_SOURCE[0]}")/standalone.sh" lint

log "helm $("$MP_HELM" version --short): lint --strict is clean"
out=$(helm lint --strict "$chart" 2>&1) || fail "helm lint --strict:"$'\n'"$out"
grep -E '^\[(WARNING|ERROR)\]' <<<"$out" && fail "helm lint warned:"$'\n'"$out"
out=$(helm lint --strict "$chart" --set router.enabled=true 2>&1) || fail "helm lint --strict with the router:"$'\n'"$out"
grep -E '^\[(WARNING|ERROR)\]' <<<"$out" && fail "helm lint with the router warned:"$'\n'"$out"

log "the chart's CRD is crd/ byte for byte; appVersion is the binary's version"
cmp "$MP_SOURCE_DIR/crd/modelpools.inference.llmkube.dev.yaml" "$chart/crds/modelpools.inference.llmkube.dev.yaml" ||
	fail "charts/modelpool-operator/crds/ differs from crd/: cp crd/modelpools.inference.llmkube.dev.yaml charts/modelpool-operator/crds/"
app_version=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["appVersion"])' "$chart/Chart.yaml")
binary_version=$("${MP_BUILD_DIR:?}/modelpool-operator" --version | awk '{print $2}')
expect_eq "Chart.yaml appVersion (the binary says $binary_version)" "$binary_version" "$app_version"

log "default values: the expected objects, the image pinned to appVersion"
render "$s/default.yaml"
expect_eq "objects" "ClusterRole/modelpool-operator ClusterRole/modelpool-operator-metrics-reader ClusterRoleBinding/modelpool-operator CustomResourceDefinition/modelpools.inference.llmkube.dev Deployment/modelpool-operator Role/modelpool-operator-fence-acks Role/modelpool-operator-leader-election RoleBinding/modelpool-operator-fence-acks RoleBinding/modelpool-operator-leader-election Service/modelpool-operator-metrics-service ServiceAccount/modelpool-operator" \
	"$(check kinds "$s/default.yaml" | paste -sd ' ' -)"
d=Deployment/modelpool-operator
c=spec.template.spec.containers[0]
expect_eq "image" "modelpool-operator:$app_version" "$(check get "$s/default.yaml" $d $c.image)"
expect_eq "args" '["--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081"]' \
	"$(check get "$s/default.yaml" $d $c.args)"

log "the chart README's values table matches values.yaml; each example renders and changes the render"
# render_example N LINE ARGS...: example N rendered, unlike the defaults, and LINE kept beside it.
render_example() {
	render "$s/example-$1.yaml" "${@:3}"
	cmp -s "$s/default.yaml" "$s/example-$1.yaml" && fail "example '$2' renders the same objects as the defaults"
	echo "$2" >"$s/example-$1.txt"
}
each_example render_example
[ "$examples" -gt 20 ] || fail "only $examples examples in the chart README's values table"
echo "$examples examples rendered" >&2

# example KEY: the render of the chart README example that sets KEY first.
example() {
	local f
	for f in "$s"/example-*.txt; do
		if [[ "$(cut -f1 "$f" | cut -d= -f1)" == "$1" ]]; then
			echo "${f%.txt}.yaml"
			return 0
		fi
	done
	fail "no chart README example sets $1 first"
}
args_of() { check get "$1" $d $c.args; }

log "watchNamespace: a Role and RoleBinding in that namespace replace the ClusterRole; --namespace is passed"
f=$(example watchNamespace)
expect_eq "objects" "ClusterRole/modelpool-operator-metrics-auth ClusterRole/modelpool-operator-metrics-reader ClusterRoleBinding/modelpool-operator-metrics-auth CustomResourceDefinition/modelpools.inference.llmkube.dev Deployment/modelpool-operator Role/modelpool-operator Role/modelpool-operator-fence-acks Role/modelpool-operator-leader-election RoleBinding/modelpool-operator RoleBinding/modelpool-operator-fence-acks RoleBinding/modelpool-operator-leader-election Service/modelpool-operator-metrics-service ServiceAccount/modelpool-operator" \
	"$(check kinds "$f" | paste -sd ' ' -)"
expect_eq "Role namespace" team-a "$(check get "$f" Role/modelpool-operator metadata.namespace)"
expect_eq "RoleBinding namespace" team-a "$(check get "$f" RoleBinding/modelpool-operator metadata.namespace)"
expect_eq "RoleBinding subject" '[{"kind": "ServiceAccount", "name": "modelpool-operator", "namespace": "modelpool-system"}]' \
	"$(check get "$f" RoleBinding/modelpool-operator subjects)"
# The reviews of secure metrics are cluster-scoped: a ClusterRole of their own, not the Role.
expect_eq "the Role's and metrics-auth's rules are the ClusterRole's" "$(check get "$s/default.yaml" ClusterRole/modelpool-operator rules)" \
	"$(python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2]), sort_keys=True))' \
		"$(check get "$f" Role/modelpool-operator rules)" "$(check get "$f" ClusterRole/modelpool-operator-metrics-auth rules)")"
expect_eq "metrics-auth binds the ServiceAccount" modelpool-system/modelpool-operator \
	"$(check get "$f" ClusterRoleBinding/modelpool-operator-metrics-auth 'subjects[0].namespace')/$(check get "$f" ClusterRoleBinding/modelpool-operator-metrics-auth 'subjects[0].name')"
grep -q -- '"--namespace=team-a"' <<<"$(args_of "$f")" || fail "no --namespace=team-a in $(args_of "$f")"

log "leaderElection.enabled=false: no --leader-elect and no leader-election rights (the router Leases' stay)"
f=$(example leaderElection.enabled)
expect_eq "args" '["--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081"]' "$(args_of "$f")"
check kinds "$f" | grep_all leader-election && fail "leader-election RBAC rendered with leader election off"
check kinds "$f" | grep_all Role/modelpool-operator-fence-acks || fail "fence-acks RBAC not rendered with leader election off"
expect_eq "leaderElection.id" '["--leader-elect", "--leader-election-id=modelpool-operator-b", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081"]' \
	"$(args_of "$(example leaderElection.id)")"

log "logging, ports, metrics off, extra args: the flags the operator gets"
expect_eq "logging.level" "--log-level=1" "$(args_of "$(example logging.level)" | grep -o -- '--log-level=[0-9]*')"
expect_eq "logging.format" "--log-format=json" "$(args_of "$(example logging.format)" | grep -o -- '--log-format=[a-z]*')"
f=$(example metrics.port)
expect_eq "metrics.port flag" "--metrics-bind-address=:9443" "$(args_of "$f" | grep -o -- '--metrics-bind-address=[^"]*')"
expect_eq "metrics.port port" 9443 "$(check get "$f" $d $c.ports[0].containerPort)"
expect_eq "the Service targets it by name" https/https \
	"$(check get "$f" $d $c.ports[0].name)/$(check get "$f" Service/modelpool-operator-metrics-service spec.ports[0].targetPort)"
f=$(example metrics.secure)
expect_eq "metrics.secure=false: flags" "--metrics-bind-address=:8443 --metrics-secure=false" \
	"$(args_of "$f" | grep -o -- '--metrics-[a-z-]*=[^"]*' | paste -sd ' ' -)"
check kinds "$f" | grep_all metrics-reader && fail "metrics-reader rendered with plain HTTP metrics"
check get "$f" ClusterRole/modelpool-operator rules | grep_all tokenreviews && fail "review rights with plain HTTP metrics"
expect_eq "metrics.secure=false: port name" http "$(check get "$f" $d $c.ports[0].name)"
f=$(example metrics.certSecret)
expect_eq "metrics.certSecret: flag" "--metrics-cert-path=/etc/modelpool-operator/metrics-certs" \
	"$(args_of "$f" | grep -o -- '--metrics-cert-path=[^"]*')"
expect_eq "metrics.certSecret: mounted read-only" "/etc/modelpool-operator/metrics-certs/true/metrics-server-cert" \
	"$(check get "$f" $d $c.volumeMounts[0].mountPath)/$(check get "$f" $d $c.volumeMounts[0].readOnly)/$(check get "$f" $d spec.template.spec.volumes[0].secret.secretName)"
f=$(example health.port)
expect_eq "health.port flag" "--health-probe-bind-address=:9091" "$(args_of "$f" | grep -o -- '--health-probe-bind-address=[^"]*')"
expect_eq "health.port port (probes use its name)" "health:9091 health/health" \
	"$(check get "$f" $d $c.ports[1].name):$(check get "$f" $d $c.ports[1].containerPort) $(check get "$f" $d $c.livenessProbe.httpGet.port)/$(check get "$f" $d $c.readinessProbe.httpGet.port)"
f=$(example metrics.enabled)
expect_eq "metrics off: flags" "--metrics-bind-address=0" "$(args_of "$f" | grep -o -- '--metrics-[a-z-]*=[^"]*' | paste -sd ' ' -)"
check kinds "$f" | grep -Eq 'metrics-(reader|service)' && fail "metrics objects rendered with metrics off"
expect_eq "metrics off: ports" '[{"containerPort": 8081, "name": "health", "protocol": "TCP"}]' "$(check get "$f" $d $c.ports)"
expect_eq "extraArgs come last" '"--leader-election-namespace=modelpool-system"' \
	"$(args_of "$(example extraArgs)" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)[-1]))')"
f=$(example metrics.podAnnotations)
expect_eq "scrape annotations" 'true/https/8443//metrics' \
	"$(for a in scrape scheme port path; do check get "$f" $d "spec.template.metadata.annotations.prometheus\\.io/$a"; done | paste -sd / -)"

log "serviceMonitor: a ServiceMonitor and the Service it selects; none where the kind is not served"
f=$(example serviceMonitor.enabled)
expect_eq "objects added" "ServiceMonitor/modelpool-operator" \
	"$(comm -13 <(check kinds "$s/default.yaml") <(check kinds "$f") | paste -sd ' ' -)"
sm_sel=$(check get "$f" ServiceMonitor/modelpool-operator spec.selector.matchLabels)
svc_labels=$(check get "$f" Service/modelpool-operator-metrics-service metadata.labels)
python3 -c 'import json, sys; sel, labels = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.exit(0 if all(labels.get(k) == v for k, v in sel.items()) else "ServiceMonitor selector %s does not select the Service (%s)" % (sel, labels))' "$sm_sel" "$svc_labels"
expect_eq "the ServiceMonitor scrapes HTTPS with Prometheus's token" "https/https//var/run/secrets/kubernetes.io/serviceaccount/token/true" \
	"$(for p in port scheme bearerTokenFile tlsConfig.insecureSkipVerify; do check get "$f" ServiceMonitor/modelpool-operator "spec.endpoints[0].$p"; done | paste -sd / -)"
helm template modelpool-operator "$chart" -n modelpool-system --set serviceMonitor.enabled=true >"$s/sm-unserved.yaml"
expect_eq "no ServiceMonitor where the kind is not served" "$(check kinds "$s/default.yaml" | grep -v CustomResourceDefinition)" \
	"$(check kinds "$s/sm-unserved.yaml")"

log "rbac.create=false and serviceAccount.create=false: none of those objects, the named account used"
expect_eq "rbac.create=false" "CustomResourceDefinition/modelpools.inference.llmkube.dev Deployment/modelpool-operator Service/modelpool-operator-metrics-service ServiceAccount/modelpool-operator" \
	"$(check kinds "$(example rbac.create)" | paste -sd ' ' -)"
f=$(example serviceAccount.create)
check kinds "$f" | grep_all ServiceAccount/ && fail "serviceAccount.create=false rendered a ServiceAccount"
expect_eq "serviceAccountName" existing-sa "$(check get "$f" $d spec.template.spec.serviceAccountName)"
expect_eq "binding subject" existing-sa "$(check get "$f" ClusterRoleBinding/modelpool-operator subjects[0].name)"

log "a release name without the chart's name prefixes every object; with it, names stay config/default's"
helm template team-b "$chart" -n ops >"$s/team-b.yaml"
expect_eq "objects of release team-b" "ClusterRole/team-b-modelpool-operator ClusterRole/team-b-modelpool-operator-metrics-reader ClusterRoleBinding/team-b-modelpool-operator Deployment/team-b-modelpool-operator Role/team-b-modelpool-operator-fence-acks Role/team-b-modelpool-operator-leader-election RoleBinding/team-b-modelpool-operator-fence-acks RoleBinding/team-b-modelpool-operator-leader-election Service/team-b-modelpool-operator-metrics-service ServiceAccount/team-b-modelpool-operator" \
	"$(check kinds "$s/team-b.yaml" | paste -sd ' ' -)"

log "router.enabled: the router's objects, its own ServiceAccount, rights and flags; the operator's unchanged"
f=$(example router.enabled)
expect_eq "objects added" "ClusterRole/modelpool-router ClusterRoleBinding/modelpool-router Deployment/modelpool-router PodDisruptionBudget/modelpool-router Role/modelpool-router-registration RoleBinding/modelpool-router-registration Service/modelpool-router Service/modelpool-router-metrics-service ServiceAccount/modelpool-router" \
	"$(comm -13 <(check kinds "$s/default.yaml") <(check kinds "$f") | paste -sd ' ' -)"
for o in $(check kinds "$s/default.yaml"); do
	expect_eq "$o with the router on" "$(check get "$s/default.yaml" "$o" .)" "$(check get "$f" "$o" .)"
done
rd=Deployment/modelpool-router
expect_eq "router image = the operator's" "$(check get "$s/default.yaml" $d $c.image)" "$(check get "$f" $rd $c.image)"
expect_eq "router command" '["/usr/local/bin/modelpool-router"]' "$(check get "$f" $rd $c.command)"
expect_eq "router args" '["--bind-address=:8080", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081", "--max-connections-per-client=256", "--header-timeout=10s", "--router-lease-namespace=modelpool-system"]' \
	"$(check get "$f" $rd $c.args)"
expect_eq "router ServiceAccount" modelpool-router "$(check get "$f" $rd spec.template.spec.serviceAccountName)"
expect_eq "router binding subject" '[{"kind": "ServiceAccount", "name": "modelpool-router", "namespace": "modelpool-system"}]' \
	"$(check get "$f" ClusterRoleBinding/modelpool-router subjects)"
expect_eq "router rules: read pools, members, Pods; patch pools; reviews" \
	'inference.llmkube.dev/modelpools:get,list,watch,patch inference.llmkube.dev/inferenceservices:list,watch /pods:get,list,watch authentication.k8s.io/tokenreviews:create authorization.k8s.io/subjectaccessreviews:create' \
	"$(check get "$f" ClusterRole/modelpool-router rules | jq -r 'map("\(.apiGroups | join(","))/\(.resources | join(",")):\(.verbs | join(","))") | join(" ")')"
expect_eq "router Service: port 80 to http, selecting the router's Pods" "http/80/http $(check get "$f" $rd spec.selector.matchLabels)" \
	"$(check get "$f" Service/modelpool-router 'spec.ports[0].name')/$(check get "$f" Service/modelpool-router 'spec.ports[0].port')/$(check get "$f" Service/modelpool-router 'spec.ports[0].targetPort') $(check get "$f" Service/modelpool-router spec.selector)"
[ "$(check get "$f" $rd spec.selector.matchLabels)" != "$(check get "$f" $d spec.selector.matchLabels)" ] ||
	fail "the router's and the operator's Deployments select the same Pods"
expect_eq "router.replicas" 3 "$(check get "$(example router.replicas)" $rd spec.replicas)"
expect_eq "router.service.port" 8000 "$(check get "$(example router.service.port)" Service/modelpool-router 'spec.ports[0].port')"
expect_eq "router.resources" '{"limits": {"memory": "1Gi"}, "requests": {"cpu": "200m", "memory": "64Mi"}}' \
	"$(check get "$(example router.resources)" $rd $c.resources)"
expect_eq "router.extraArgs come last" '"--resident-grace=30s"' \
	"$(check get "$(example router.extraArgs)" $rd $c.args | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)[-1]))')"
grep -q -- '"--home-namespace=team-a"' <<<"$(check get "$(example router.homeNamespace)" $rd $c.args)" ||
	fail "no --home-namespace=team-a for the router"
expect_eq "router connection limits" "--max-connections=2000 --max-connections-per-client=0 --header-timeout=30s" \
	"$(check get "$(example router.maxConnections)" $rd $c.args | grep -o -- '--max-connections=[0-9]*') $(check get "$(example router.maxConnectionsPerClient)" $rd $c.args | grep -o -- '--max-connections-per-client=[0-9]*') $(check get "$(example router.headerTimeout)" $rd $c.args | grep -o -- '--header-timeout=[0-9a-z]*')"
f=$(example drainFence)
expect_eq "drainFence: the operator's and the router's, the same" "--drain-fence=5s --drain-fence=5s" \
	"$(args_of "$f" | grep -o -- '--drain-fence=[0-9a-z]*') $(check get "$f" $rd $c.args | grep -o -- '--drain-fence=[0-9a-z]*')"
expect_eq "fenceAcks=false: the operator's flag" "--fence-acks=false" "$(args_of "$(example fenceAcks)" | grep -o -- '--fence-acks=[a-z]*')"
args_of "$s/default.yaml" | grep -q -- '--fence-acks' && fail "the default renders a --fence-acks flag (true is the operator's default)"
render "$s/router-ns.yaml" --set router.enabled=true --set watchNamespace=team-a
expect_eq "router Role namespace" team-a "$(check get "$s/router-ns.yaml" Role/modelpool-router metadata.namespace)"
expect_eq "the router's Role and metrics-auth rules are its ClusterRole's" "$(check get "$f" ClusterRole/modelpool-router rules)" \
	"$(python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2]), sort_keys=True))' \
		"$(check get "$s/router-ns.yaml" Role/modelpool-router rules)" "$(check get "$s/router-ns.yaml" ClusterRole/modelpool-router-metrics-auth rules)")"
check kinds "$s/router-ns.yaml" | grep_all -x ClusterRole/modelpool-router && fail "a router ClusterRole with watchNamespace"
grep -q -- '"--namespace=team-a"' <<<"$(check get "$s/router-ns.yaml" $rd $c.args)" || fail "no --namespace=team-a for the router"
render "$s/router-plain.yaml" --set router.enabled=true --set metrics.secure=false
check get "$s/router-plain.yaml" ClusterRole/modelpool-router rules | grep_all tokenreviews && fail "router review rights with plain HTTP metrics"
expect_eq "router metrics port name with metrics.secure=false" http "$(check get "$s/router-plain.yaml" $rd "$c.ports[1].name")"
helm template team-b "$chart" -n ops --set router.enabled=true >"$s/team-b-router.yaml"
expect_eq "router objects of release team-b" "ClusterRole/team-b-modelpool-router ClusterRoleBinding/team-b-modelpool-router Deployment/team-b-modelpool-router PodDisruptionBudget/team-b-modelpool-router Role/team-b-modelpool-router-registration RoleBinding/team-b-modelpool-router-registration Service/team-b-modelpool-router Service/team-b-modelpool-router-metrics-service ServiceAccount/team-b-modelpool-router" \
	"$(check kinds "$s/team-b-router.yaml" | grep router | paste -sd ' ' -)"

log "wrong values are refused with the value's name"
bad() { # PATTERN ARGS...: helm template with ARGS must fail with PATTERN in its message.
	local pattern=$1
	shift
	expect_fail "$pattern" helm template modelpool-operator "$chart" -n modelpool-system "$@"
}
bad "/logging/format" --set logging.format=xml
bad "/logging/level" --set logging.level=5
bad "/replicaCount" --set replicaCount=-1
bad "/metrics/port" --set metrics.port=0
bad "/watchNamespace" --set watchNamespace=Team_A
bad "/image/pullPolicy" --set image.pullPolicy=Sometimes
bad "additional properties 'replicas' not allowed" --set replicas=3
bad "/extraArgs" --set-json 'extraArgs=[1]'
bad "/drainFence" --set drainFence=2
bad "replicaCount > 1 needs leaderElection.enabled" --set leaderElection.enabled=false
bad "metrics.port and health.port must differ" --set metrics.port=8081
bad "/metrics/certSecret" --set metrics.certSecret=Not_A_Name
bad "serviceAccount.name is required" --set serviceAccount.create=false
bad "/router/replicas" --set router.enabled=true --set router.replicas=-1
bad "/router/maxConnections" --set router.enabled=true --set router.maxConnections=-1
bad "/router/headerTimeout" --set router.enabled=true --set router.headerTimeout=10
bad "/router/service/port" --set router.service.port=0
bad "additional properties 'port' not allowed" --set router.port=9080
bad "must not be 8080, the router's API port" --set router.enabled=true --set metrics.port=8080
bad "/router/homeNamespace" --set router.homeNamespace=Team_A
bad "router.homeNamespace must be watchNamespace" --set router.enabled=true --set watchNamespace=a --set router.homeNamespace=b

log "helm.lint: all checks passed"

# Helpers for the chart tests (test/helm/*.sh), sourced after test/e2e/lib.sh (fail, expect_eq, expect_fail):
# the helm binary built by test/controlplane/build-helm.sh, a private helm home, rendering and reading back.
# Needs MP_SOURCE_DIR and a scratch dir in MP_STATE_DIR.

chart=$MP_SOURCE_DIR/charts/modelpool-operator
check() { python3 "$MP_SOURCE_DIR/test/helm/chart_check.py" "$@"; }

# helm_setup: MP_HELM (built once, cached beside the control plane) and helm's own dirs in the state dir,
# so parallel tests never share a repository cache or a registry config.
helm_setup() {
	[ -n "${MP_HELM:-}" ] || MP_HELM=$(bash "$MP_SOURCE_DIR/test/controlplane/build-helm.sh")
	export MP_HELM HELM_CACHE_HOME=$MP_STATE_DIR/helm/cache HELM_CONFIG_HOME=$MP_STATE_DIR/helm/config \
		HELM_DATA_HOME=$MP_STATE_DIR/helm/data
	mkdir -p "$HELM_CACHE_HOME" "$HELM_CONFIG_HOME" "$HELM_DATA_HOME"
}
helm() { "$MP_HELM" "$@"; }

# render OUT [--set-json K=V]...: `helm template` as release modelpool-operator in modelpool-system, CRDs
# included, on a cluster that serves ServiceMonitor (so serviceMonitor.* render); fails the test on an error.
render() {
	local out=$1
	shift
	helm template modelpool-operator "$chart" -n modelpool-system --include-crds \
		--api-versions monitoring.coreos.com/v1/ServiceMonitor "$@" >"$out" ||
		fail "helm template $* failed"
}

# set_json_args LINE: one line of `chart_check.py docs` (tab-separated K=JSON) as --set-json arguments.
set_json_args() {
	local item
	local -a items
	IFS=$'\t' read -r -a items <<<"$1"
	for item in "${items[@]}"; do printf '%s\0%s\0' --set-json "$item"; done
}

# each_example CMD...: for each example of the chart README's values table (chart_check.py docs, kept in
# $MP_STATE_DIR/examples.txt), in order, runs CMD... N LINE ARGS..., N counting from 1, LINE the example
# and ARGS its --set-json arguments; then sets examples to how many there were.
each_example() {
	local line n=0
	local -a args
	check docs "$chart/values.yaml" "$chart/README.md" >"$MP_STATE_DIR/examples.txt"
	while IFS= read -r line; do
		mapfile -d '' args < <(set_json_args "$line")
		n=$((n + 1))
		"$@" "$n" "$line" "${args[@]}"
	done <"$MP_STATE_DIR/examples.txt"
	examples=$n
}

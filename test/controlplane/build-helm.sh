#!/usr/bin/env bash
# Builds the helm CLI for the chart tests from the published helm.sh/helm/v3 module pinned in helm/, into
# the same cache root as the control plane (build.sh), keyed by that pin, and prints the binary's path.
# A second run with the same pin reuses the binary. Go is used for test tools alone; the product is C.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$here/helm
helm_version=$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")
[ -n "$helm_version" ] || { echo "build-helm.sh: no helm.sh/helm/v3 pin in $mod/go.mod" >&2; exit 1; }
client_go=$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")
[ -n "$client_go" ] || { echo "build-helm.sh: no k8s.io/client-go in $mod/go.mod" >&2; exit 1; }

key=$(cat "$mod/go.mod" "$mod/go.sum" "$0" | sha256sum | cut -c1-16)
cache_root=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}
out="$cache_root/helm/$helm_version-$key"

if [ ! -x "$out/helm" ]; then
	export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
	mkdir -p "$out"
	echo "build-helm.sh: building helm $helm_version into $out (a few minutes on 2 cores)" >&2
	start=$SECONDS
	# The ldflags helm's own Makefile sets: the version (else `helm version` says v3.NN with no patch) and
	# the Kubernetes version that lint and template assume, taken from the client-go it is built with
	# (v0.37.x -> 1.37), as the Makefile derives it.
	minor=$(echo "$client_go" | cut -d. -f2)
	v=helm.sh/helm/v3
	(cd "$mod" && go build -trimpath -o "$out/helm.tmp" -ldflags "-s -w \
		-X $v/internal/version.version=$helm_version -X $v/internal/version.metadata= \
		-X $v/internal/version.gitTreeState=clean \
		-X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$minor \
		-X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$minor" \
		helm.sh/helm/v3/cmd/helm)
	mv "$out/helm.tmp" "$out/helm"
	echo "build-helm.sh: helm built in $((SECONDS - start)) s" >&2
fi
echo "$out/helm"

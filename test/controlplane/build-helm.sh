#!/usr/bin/env bash
# Builds the helm CLI for the chart tests from the published helm.sh/helm/v3 module pinned in helm/ into the
# tools' cache (go-tool.sh: keyed by that pin and the recipe), and prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=go-tool.sh
source "$here/go-tool.sh"

version=$(go_tool_pin "$here/helm/go.mod" helm.sh/helm/v3)
client_go=$(go_tool_pin "$here/helm/go.mod" k8s.io/client-go)
# The ldflags helm's own Makefile sets: the version (else `helm version` says v3.NN with no patch) and the
# Kubernetes version that lint and template assume, taken from the client-go it is built with (v0.37.x ->
# 1.37), as the Makefile derives it.
minor=$(echo "$client_go" | cut -d. -f2)
v=helm.sh/helm/v3
out=$(go_tools helm "$version" "helm|$here/helm|$v/cmd/helm|-X $v/internal/version.version=$version \
-X $v/internal/version.metadata= -X $v/internal/version.gitTreeState=clean \
-X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$minor \
-X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$minor")
echo "$out/helm"

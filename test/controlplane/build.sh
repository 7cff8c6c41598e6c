#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd) from the published Go modules pinned in apiserver/
# and etcd/ into the tools' cache (go-tool.sh: keyed by those pins and the recipe), and prints that folder.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=go-tool.sh
source "$here/go-tool.sh"

k8s_version=$(go_tool_pin "$here/apiserver/go.mod" k8s.io/kubernetes)
minor=$(echo "$k8s_version" | cut -d. -f2)
vpkg=k8s.io/component-base/version
go_tools controlplane "$k8s_version" \
	"etcd|$here/etcd|go.etcd.io/etcd/server/v3|" \
	"kube-apiserver|$here/apiserver|k8s.io/kubernetes/cmd/kube-apiserver|-X $vpkg.gitVersion=$k8s_version \
-X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"

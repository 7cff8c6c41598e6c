#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd) from the published Go modules pinned in
# apiserver/ and etcd/, into a cache folder keyed by those pins, and prints that folder.
# A second run with the same pins reuses the binaries. Go is used for this alone; the product is C.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/apiserver/go.mod")
[ -n "$k8s_version" ] || { echo "build.sh: no k8s.io/kubernetes pin in $here/apiserver/go.mod" >&2; exit 1; }

key=$(cat "$here"/apiserver/go.mod "$here"/apiserver/go.sum "$here"/etcd/go.mod "$here"/etcd/go.sum "$0" |
	sha256sum | cut -c1-16)
cache_root=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}
out="$cache_root/controlplane/$k8s_version-$key"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

build() { # build NAME MODULE_DIR PACKAGE LDFLAGS
	local name=$1 dir=$2 pkg=$3 ldflags=$4
	[ -x "$out/$name" ] && return 0
	mkdir -p "$out"
	echo "build.sh: building $name ($pkg) into $out" >&2
	local start=$SECONDS
	(cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg")
	mv "$out/$name.tmp" "$out/$name"
	echo "build.sh: $name built in $((SECONDS - start)) s" >&2
}

minor=$(echo "$k8s_version" | cut -d. -f2)
vpkg=k8s.io/component-base/version
build etcd "$here/etcd" go.etcd.io/etcd/server/v3 ""
build kube-apiserver "$here/apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
	"-X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
echo "$out"

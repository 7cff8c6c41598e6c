#!/usr/bin/env bash
# Builds toxiproxy's server for the chaos run (test/chaos) from the published github.com/Shopify/toxiproxy/v2
# module pinned in toxiproxy/, into the same cache root as the control plane (build.sh), keyed by that pin,
# and prints the binary's path. A second run with the same pin reuses the binary. Go is for test tools alone.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$here/toxiproxy
version=$(awk '$1 == "github.com/Shopify/toxiproxy/v2" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")
[ -n "$version" ] || { echo "build-toxiproxy.sh: no toxiproxy pin in $mod/go.mod" >&2; exit 1; }

key=$(cat "$mod/go.mod" "$mod/go.sum" "$0" | sha256sum | cut -c1-16)
cache_root=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}
out="$cache_root/toxiproxy/$version-$key"

if [ ! -x "$out/toxiproxy-server" ]; then
	export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
	mkdir -p "$out"
	echo "build-toxiproxy.sh: building toxiproxy $version into $out" >&2
	start=$SECONDS
	# The version ldflag toxiproxy's own Makefile sets (else /version answers "git").
	(cd "$mod" && go build -trimpath -o "$out/toxiproxy-server.tmp" \
		-ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$version" \
		github.com/Shopify/toxiproxy/v2/cmd/server)
	mv "$out/toxiproxy-server.tmp" "$out/toxiproxy-server"
	echo "build-toxiproxy.sh: toxiproxy built in $((SECONDS - start)) s" >&2
fi
echo "$out/toxiproxy-server"

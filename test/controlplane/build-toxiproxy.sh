#!/usr/bin/env bash
# Builds toxiproxy's server for the fault tests (test/chaos, the e2e tests behind a proxy) from the published
# github.com/Shopify/toxiproxy/v2 module pinned in toxiproxy/ into the tools' cache (go-tool.sh: keyed by that
# pin and the recipe), and prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=go-tool.sh
source "$here/go-tool.sh"

m=github.com/Shopify/toxiproxy/v2
version=$(go_tool_pin "$here/toxiproxy/go.mod" "$m")
# The version ldflag toxiproxy's own Makefile sets (else /version answers "git").
out=$(go_tools toxiproxy "$version" "toxiproxy-server|$here/toxiproxy|$m/cmd/server|-X $m.Version=$version")
echo "$out/toxiproxy-server"

#!/usr/bin/env bash
# Installs the Debian packages that building and testing modelpool-operator needs, and checks the
# tools that do not come from Debian here (Go, for the test control plane and helm; kubectl).
# Idempotent: packages already installed are not touched, so a second run does no network I/O.
set -euo pipefail

packages=(
	build-essential cmake pkg-config
	libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev libcmocka-dev libmicrohttpd-dev
	clang libclang-rt-14-dev clang-format valgrind
	openssl curl ca-certificates procps python3 python3-yaml python3-venv jq
	# The image test (test/image): rootful podman with runc, and debootstrap for its Debian base images.
	podman runc debootstrap
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

fail=0
if ! command -v go >/dev/null; then
	echo "bootstrap: 'go' (1.26 or newer) is needed to build the test control plane and helm and is not on PATH" >&2
	fail=1
fi
if ! command -v kubectl >/dev/null; then
	echo "bootstrap: 'kubectl' (1.33 or newer) is needed by the demo and the end-to-end tests and is not on PATH" >&2
	fail=1
fi
exit $fail

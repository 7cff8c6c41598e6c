#!/usr/bin/env bash
# ctest image.build: builds the operator's image from the Dockerfile with podman (scripts/image-build.sh; base
# images from debootstrap, cached) and checks it without an API server: it runs as the non-root user the
# Deployment expects, --help and --version work, every shared library resolves inside it (every symbol too,
# LD_BIND_NOW), the router's binary is at the command config/router runs and starts too, the test tree and
# compilers stayed in the build stage, and its OCI labels and EXPOSEd ports match the project.
# Skipped (77) when podman cannot build or run containers here.
# Usage: bash test/image/build.sh BUILD_DIR (the tag is derived from it; test/image/run.sh runs the same image)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh
source "$here/common.sh"

fail() {
	echo "FAIL: $*" >&2
	exit 1
}
expect_eq() { [ "$2" == "$3" ] || fail "$1: expected '$2', got '$3'"; }

tag=$(image_tag "${1:?usage: build.sh BUILD_DIR}")
version=$(sed -n 's/^project(modelpool-operator VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
image_require_tools

start=$SECONDS
"${image_sudo[@]}" bash "$top/scripts/image-build.sh" --bases
# A container that runs nothing of ours: when even that fails, this machine cannot run containers.
out=$(image_podman run --rm "${image_podman_opts[@]}" --network none debian:bookworm-slim true 2>&1) ||
	image_skip "podman cannot run a container here: $out"
"${image_sudo[@]}" bash "$top/scripts/image-build.sh" "$tag" >/dev/null
echo "image-build: $tag built in $((SECONDS - start)) s" >&2

inspect() { image_podman image inspect --format "$1" "$tag"; }
# run [PODMAN OPTIONS...] -- [ARGS...]: the image locked down as in the Deployment, with no network.
run() {
	local opts=()
	while [ "$1" != -- ]; do opts+=("$1") && shift; done
	shift
	image_podman run --rm "${image_podman_opts[@]}" --network none --read-only --read-only-tmpfs=false \
		--cap-drop all --security-opt no-new-privileges "${opts[@]}" "$tag" "$@"
}

echo "--- size: $(inspect '{{.Size}}') bytes" >&2

echo "--- runs as the Deployment's non-root user" >&2
uid=$(sed -n 's/^ *runAsUser: *\([0-9]*\).*/\1/p' "$top/config/manager/manager.yaml")
gid=$(sed -n 's/^ *runAsGroup: *\([0-9]*\).*/\1/p' "$top/config/manager/manager.yaml")
[ -n "$uid" ] && [ "$uid" != 0 ] || fail "config/manager/manager.yaml has no non-root runAsUser"
expect_eq "image USER" "$uid:$gid" "$(inspect '{{.Config.User}}')"
expect_eq "id inside" "$uid $gid" "$(run --entrypoint /usr/bin/id -- -u) $(run --entrypoint /usr/bin/id -- -g)"

echo "--- --help and --version" >&2
help=$(run -- --help) || fail "--help failed: $help"
grep -q -- '--kubeconfig PATH' <<<"$help" || fail "--help does not list --kubeconfig:"$'\n'"$help"
expect_eq "--version (every symbol bound at start)" "modelpool-operator $version" \
	"$(run -e LD_BIND_NOW=1 -- --version)"
expect_fail_out=$(run -- --no-such-flag 2>&1) && fail "--no-such-flag succeeded: $expect_fail_out"

echo "--- modelpool-router, at the command config/router's Deployment runs" >&2
router_cmd=$(awk '/^ *command:/ { on = 1; next } on && /^ *- / { sub(/^ *- */, ""); print; exit }' \
	"$top/config/router/deployment.yaml")
[ -n "$router_cmd" ] || fail "no command in config/router/deployment.yaml"
expect_eq "router --version (every symbol bound at start)" "modelpool-router $version" \
	"$(run -e LD_BIND_NOW=1 --entrypoint "$router_cmd" -- --version)"

echo "--- every shared library resolves inside the image" >&2
for bin in /usr/local/bin/modelpool-operator "$router_cmd"; do
	libs=$(run --entrypoint /usr/bin/ldd -- "$bin") || fail "ldd $bin failed inside: $libs"
	echo "$bin:"$'\n'"$libs" >&2
	! grep -q 'not found' <<<"$libs" || fail "libraries of $bin missing in the image (above)"
	grep -q 'libmicrohttpd' <<<"$libs" || fail "ldd lists no libmicrohttpd for $bin: is this ours?"
done

echo "--- the build stage's tools and the test tree stayed out" >&2
for f in /usr/bin/gcc /usr/bin/cmake /src /build; do
	run --entrypoint /usr/bin/test -- ! -e "$f" || fail "$f is in the runtime image"
done
run --entrypoint /bin/sh -- -c '! ls /usr/lib/*/libcmocka* 2>/dev/null' || fail "cmocka is in the runtime image"

echo "--- OCI labels and EXPOSEd ports" >&2
label() { inspect "{{index .Config.Labels \"org.opencontainers.image.$1\"}}"; }
expect_eq "label version" "$version" "$(label version)"
expect_eq "label licenses" "Apache-2.0" "$(label licenses)"
grep -q 'Apache License' "$top/LICENSE" || fail "LICENSE is not the Apache license the label says"
expect_eq "label revision" "$(git -C "$top" rev-parse HEAD 2>/dev/null || true)" "$(label revision)"
expect_eq "label source" "$(git -C "$top" remote get-url origin 2>/dev/null || true)" "$(label source)"
want_ports=$(sed -n 's/^ *containerPort: *\([0-9]*\).*/\1\/tcp/p' "$top/config/manager/manager.yaml" \
	"$top/config/router/deployment.yaml" | sort -u | paste -sd ' ')
got_ports=$(inspect '{{range $p, $v := .Config.ExposedPorts}}{{$p}}{{"\n"}}{{end}}' | sed '/^$/d' | sort | paste -sd ' ')
expect_eq "EXPOSE (both Deployments' containerPorts)" "$want_ports" "$got_ports"
echo "image.build: all checks passed" >&2

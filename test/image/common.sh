# Shared by the image tests (sourced): the tag a build dir's tests use, how podman runs the image, and the
# skip (exit 77, ctest's SKIP_RETURN_CODE) when this machine cannot build or run containers.

# The image tests skip, never pass, when they cannot run: ctest shows them as Skipped with this message.
image_skip() {
	echo "SKIP: $*" >&2
	exit 77
}

# One tag per build dir, so two checkouts testing at once never run each other's image.
image_tag() { echo "localhost/modelpool-operator-test:$(printf '%s' "$1" | sha256sum | cut -c1-12)"; }

# As scripts/image-build.sh builds: runc (crun cannot set its rlimits in some VMs) with explicit limits.
image_podman_opts=(--runtime runc --ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

# image_sudo: empty as root, "sudo -n" where that works; skips otherwise (rootful podman, debootstrap).
image_root() {
	if [ "$(id -u)" -eq 0 ]; then
		image_sudo=()
	elif sudo -n true 2>/dev/null; then
		image_sudo=(sudo -n)
	else
		image_skip "needs root or password-less sudo (rootful podman, debootstrap)"
	fi
}
image_podman() { "${image_sudo[@]}" podman "$@"; }

# image_require_tools: skips unless podman, runc and debootstrap are installed and podman answers.
image_require_tools() {
	local t out
	image_root
	for t in podman runc debootstrap; do
		command -v "$t" >/dev/null || image_skip "'$t' is not installed (scripts/bootstrap.sh installs it)"
	done
	out=$(image_podman info 2>&1 >/dev/null) || image_skip "podman cannot run here: $out"
}

# bench/lib.sh: the set-up the benchmarks that run a control plane share. Sourced with $src (the source tree)
# and $bench_name set: sources the control plane's start.sh and the e2e helpers, makes a state folder
# ($dir, the control plane's in $state), and on exit stops $bench_child (the load or flood client of the
# moment, if any), every PID in pids[] and the control plane, then removes $dir (BENCH_KEEP=1 keeps it).
# As run-one.sh: the machine's kubectl can be a dispatcher that runs an old bundled client; the newest is used.

# shellcheck source=../test/controlplane/start.sh
source "$src/test/controlplane/start.sh"
# shellcheck source=../test/e2e/lib.sh
source "$src/test/e2e/lib.sh"

dir=$(mktemp -d "${TMPDIR:-/tmp}/mp-bench-$bench_name.XXXXXX")
state=$dir/cp pids=() bench_child=""
bench_cleanup() {
	local p
	[ -z "$bench_child" ] || kill -TERM "$bench_child" 2>/dev/null || true
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ ! -f "$state/env" ] || bash "$src/test/controlplane/stop.sh" "$state" || true
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$dir"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$dir/bin"
kubectl_bin=$(ls -1 "$(readlink -f "$(command -v kubectl)")".1.* 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$kubectl_bin" ]; then
	ln -s "$kubectl_bin" "$dir/bin/kubectl"
	export PATH=$dir/bin:$PATH
fi

# bench_control_plane: starts the control plane in $state, makes it this shell's (KUBECONFIG, HOME, the
# kubectl cache inside it), and installs both CRDs and the operator's RBAC.
bench_control_plane() {
	say "control plane in $state"
	cp_start "$state"
	# shellcheck disable=SC1091
	source "$state/env"
	export MP_STATE_DIR=$state HOME=$state/home KUBECACHEDIR=$state/home/.kube/cache
	mkdir -p "$KUBECACHEDIR"
	install_crds
	install_operator_rbac
}

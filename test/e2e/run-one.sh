#!/usr/bin/env bash
# The ctest entry for one end-to-end test: starts a fresh control plane in a temp state dir, runs the test
# script under bash -euo pipefail with lib.sh sourced, always stops everything, exits with the test's status.
# Usage: MP_SOURCE_DIR=<repo> MP_BUILD_DIR=<build> bash test/e2e/run-one.sh /abs/path/NAME.test.sh
set -euo pipefail

script=${1:?usage: run-one.sh /abs/path/NAME.test.sh}
[ -f "$script" ] || { echo "run-one.sh: no test script $script" >&2; exit 2; }
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
export MP_SOURCE_DIR=${MP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export MP_BUILD_DIR=${MP_BUILD_DIR:?run-one.sh: MP_BUILD_DIR must name the build dir}

# Cached after the first build; it must run before HOME moves below (the cache lives under HOME).
MP_CONTROLPLANE_BIN=$(bash "$MP_SOURCE_DIR/test/controlplane/build.sh")
export MP_CONTROLPLANE_BIN
# The fault proxy, for the tests that put one between a component and the API server (cached the same way).
MP_TOXIPROXY=${MP_TOXIPROXY:-$(bash "$MP_SOURCE_DIR/test/controlplane/build-toxiproxy.sh")}
export MP_TOXIPROXY

# The run's own loopback block (test/README.md, "Two runs at once"): the simulator's Pods listen in
# 127.N.0.0/16 (start_sim passes --ip-block N), N a block no other run holds (a lock on a file that this
# script and everything it starts keep open until they exit) and where nothing listens now, so an address
# of this run's Pods never answers for another run's. Blocks 1..15 stay the benchmarks' (bench/*.sh).
ip_block_in_use() { grep -qE "^ *[0-9]+: [0-9A-F]{4}$(printf %02X "$1")7F:" /proc/net/tcp; }
take_ip_block() {
	local dir=/tmp/modelpool-test-ip-blocks first=16 count=239 i n start
	mkdir -p "$dir"
	start=$((RANDOM % count))
	for ((i = 0; i < count; i++)); do
		n=$((first + (start + i) % count))
		exec {ip_block_fd}>"$dir/$n.lock"
		if flock -n "$ip_block_fd" && ! ip_block_in_use "$n"; then
			export MP_SIM_IP_BLOCK=$n
			echo "run-one.sh: the simulator's Pods in 127.$n.0.0/16" >&2
			return 0
		fi
		exec {ip_block_fd}>&-
	done
	echo "run-one.sh: every loopback block 127.$first-$((first + count - 1)).0.0/16 is held by another run" >&2
	return 1
}
take_ip_block

state=$(mktemp -d "${TMPDIR:-/tmp}/mp-e2e.$(basename "$script" .test.sh).XXXXXX")
export MP_STATE_DIR=$state
test_pid=""

# The test runs in its own process group (setsid), so anything it left running (a watch, an operator) is
# found and stopped here even after it was re-parented.
stop_test_group() {
	[ -n "$test_pid" ] || return 0
	kill -TERM -- "-$test_pid" 2>/dev/null || return 0
	local deadline=$((SECONDS + 10))
	while pgrep -g "$test_pid" >/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			kill -KILL -- "-$test_pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_test_group
	# A sanitizer report from any program the test ran (ASan, UBSan, LeakSanitizer at exit: the group
	# was stopped with SIGTERM above, so each program ran its exit path) fails the test, passed or not.
	local f report='ERROR: (AddressSanitizer|LeakSanitizer)|\.[ch]:[0-9]+:[0-9]+: runtime error:'
	for f in "$state"/*.log; do
		case $f in */kube-apiserver.log | */etcd.log | */toxiproxy.log) continue ;; esac
		grep -qE "$report" "$f" 2>/dev/null || continue
		echo "----- sanitizer report in $f -----" >&2
		grep -m 1 -A 40 -E "$report" "$f" >&2
		[ "$rc" -ne 0 ] || rc=1
	done
	# Logs before stopping, so their tails show the failure rather than the shutdown.
	if [ "$rc" -ne 0 ]; then
		echo "run-one.sh: $(basename "$script") failed (status $rc); MP_KEEP_STATE=1 keeps $state" >&2
		for f in "$state"/operator*.log "$state"/router*.log "$state/sim.log" "$state/slot-check.log" \
			"$state/kube-apiserver.log" "$state/etcd.log"; do
			[ -f "$f" ] || continue
			echo "----- last 60 lines of $f -----" >&2
			tail -n 60 "$f" >&2
		done
	fi
	bash "$MP_SOURCE_DIR/test/controlplane/stop.sh" "$state" || rc=1
	# etcd preallocates a 64 MB WAL: keep the state dir only when asked to.
	[ -n "${MP_KEEP_STATE:-}" ] || rm -rf "$state"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Sourced, so etcd and kube-apiserver stay our children: a ctest timeout SIGKILLs the test's process tree
# and would miss daemons re-parented to init.
# shellcheck source=../controlplane/start.sh
source "$MP_SOURCE_DIR/test/controlplane/start.sh"
cp_start "$state"
# shellcheck source=/dev/null
source "$state/env"

# A private HOME and kubectl cache: parallel runs never share discovery caches or config.
export HOME=$state/home KUBECACHEDIR=$state/home/.kube/cache
mkdir -p "$KUBECACHEDIR" "$state/bin"

# The machine's kubectl can be a dispatcher (gcloud's) that, for a server newer than its newest bundled
# client, runs its own older built-in one (1.32, outside the +/-1 skew). Put the newest bundled client
# first on PATH as `kubectl`; MP_KUBECTL names another one.
if [ -z "${MP_KUBECTL:-}" ]; then
	MP_KUBECTL=$(ls -1 "$(readlink -f "$(command -v kubectl)")".1.* 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -n "${MP_KUBECTL:-}" ]; then
	ln -s "$(command -v "$MP_KUBECTL")" "$state/bin/kubectl"
	export PATH=$state/bin:$PATH
fi

# Run in the background and wait, so a SIGTERM reaches the trap at once instead of after the test.
setsid bash -euo pipefail -c 'source "$0"; source "$1"' "$MP_SOURCE_DIR/test/e2e/lib.sh" "$script" &
test_pid=$!
wait "$test_pid"

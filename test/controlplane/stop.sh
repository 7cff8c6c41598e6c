#!/usr/bin/env bash
# Stops what start.sh started in the state dir $1: SIGTERM to each recorded pid (apiserver first, so it
# never runs without its etcd), waits until each has exited, SIGKILL after a deadline. Safe to run twice
# or on a half-started state dir; it leaves the state dir itself to the caller.
set -euo pipefail
state=${1:?usage: stop.sh STATE_DIR}
state=$(cd "$state" 2>/dev/null && pwd) || exit 0

# Ours: alive (a zombie has already exited) and started with this state dir on its command line, so a
# recycled pid is never signalled.
ours() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ] || return 1
	tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$state/"
}

status=0
for name in kube-apiserver etcd; do
	pidfile=$state/$name.pid
	[ -f "$pidfile" ] || continue
	pid=$(cat "$pidfile")
	if ours "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + 15)) killed=""
		while ours "$pid"; do
			if [ "$SECONDS" -ge "$deadline" ]; then
				[ -z "$killed" ] || { echo "stop.sh: $name ($pid) survives SIGKILL" >&2; status=1; break; }
				echo "stop.sh: $name ($pid) ignored SIGTERM for 15 s, sending SIGKILL" >&2
				kill -KILL "$pid" 2>/dev/null || true
				deadline=$((SECONDS + 5)) killed=1
			fi
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
done
exit $status

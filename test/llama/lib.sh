# Helpers for the real-server tests (test/llama/*.test.sh), sourced by each test after test/e2e/lib.sh;
# run.sh exports MP_LLAMA_SERVER and MP_LLAMA_MODEL.

# A long answer: the tiny model makes a token in well under a millisecond at first, then slower as its
# context fills (attention over all of it), so this many tokens keep the one slot busy for seconds (about
# 18 s on 2 shared cores): long past the operator's 2 s drain fence and its probe. The context holds them.
LLAMA_LONG_TOKENS=6000
LLAMA_CTX=8192

# start_sim_llama [ARGS...]: the member simulator with real llama-server Pods for llamacpp members, with
# the finalizer (a Pod is gone only once its process is), each server's log in $MP_STATE_DIR/llama/.
start_sim_llama() {
	mkdir -p "$MP_STATE_DIR/llama"
	start_sim --finalizer --llama-server "$MP_LLAMA_SERVER" --llama-model "$MP_LLAMA_MODEL" \
		--llama-log-dir "$MP_STATE_DIR/llama" --llama-ctx "$LLAMA_CTX" "$@"
}

# pod_url MEMBER [NS]: http://<podIP>:8080 of the member's one Running Pod that is not terminating.
pod_url() {
	local ip
	ip=$(kubectl_admin -n "${2:-default}" get pods -l "inference.llmkube.dev/service=$1" -o \
		'jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.deletionTimestamp}{"/"}{.status.podIP}{"\n"}{end}' |
		awk -F/ '$1 == "" && $2 != "" {print $2}')
	[ "$(wc -w <<<"$ip")" = 1 ] || return 1
	echo "http://$ip:8080"
}

# slots_busy URL: the server's /slots has a slot with is_processing true (the operator's idle probe).
slots_busy() { curl -fsS "$1/slots" | jq -e 'any(.[]; .is_processing == true)' >/dev/null; }

# llama_overlap NS MEMBER...: reads the simulator's process lines (sim.log) and fails, printing the line
# number and the processes, at the first moment two llama-server processes of these members ran at once
# (from started to exited); succeeds when that never happened (sim_log_overlap in test/e2e/lib.sh).
llama_overlap() {
	sim_log_overlap "llama-server processes ran" llama \
		'if ($4 == "state=started") hold[id] = 1; if ($4 == "state=exited") delete hold[id]' "$@"
}

# llama_line STATE MEMBER [NS]: the sim.log line number of the last process line of MEMBER in STATE
# (started, ready, exited); fails when there is none.
llama_line() {
	grep -n "^sim ${3:-default}/$2 llama=[^ ]* state=$1 " "$MP_STATE_DIR/sim.log" | tail -n 1 | cut -d: -f1 | grep .
}

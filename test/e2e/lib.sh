# Helpers for end-to-end test scripts; run-one.sh sources this before the test, with the control plane's
# env (KUBECONFIG, MP_OPERATOR_KUBECONFIG, MP_STATE_DIR, ...) exported. Tests assert outcomes and poll with
# deadlines; nothing here asserts how long something took.

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

log() { echo "--- $*" >&2; }

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
	[ "$2" == "$3" ] || fail "$1: expected '$2', got '$3'"
}

# expect_like WHAT VALUE PATTERN: VALUE must match the shell pattern PATTERN (as a case pattern: * and ?
# are wildcards, the rest literal); else the test fails with "WHAT: VALUE".
expect_like() {
	case $2 in
	$3) ;;
	*) fail "$1: $2" ;;
	esac
}

# expect_fail PATTERN CMD...: CMD must fail and its output (stdout+stderr) must match the grep -E PATTERN.
expect_fail() {
	local pattern=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "expected failure matching '$pattern', but it succeeded: $*"$'\n'"$out"
	fi
	grep -Eq -- "$pattern" <<<"$out" || fail "expected failure matching '$pattern' from: $*"$'\n'"$out"
}

# wait_for DEADLINE_S CMD...: runs CMD until it succeeds; fails the test, with CMD's last output, once
# DEADLINE_S seconds have passed. The deadline only bounds a hang; it is never the thing under test.
# CMD's arguments are expanded once, at the call: `wait_for 9 [ "$(f)" = 1 ]` tests one value of f
# over and over; poll a value with wait_eq.
wait_for() {
	local deadline=$((SECONDS + $1)) out
	shift
	until out=$("$@" 2>&1); do
		[ "$SECONDS" -lt "$deadline" ] || fail "gave up after waiting for: $*"$'\n'"last output: $out"
		sleep 0.2
	done
}

# wait_eq DEADLINE_S WANT CMD...: runs CMD anew until it succeeds and prints exactly WANT; fails the
# test, with CMD's last output, once DEADLINE_S seconds have passed.
wait_eq() {
	local deadline=$((SECONDS + $1)) want=$2 out
	shift 2
	until out=$("$@" 2>&1) && [ "$out" = "$want" ]; do
		[ "$SECONDS" -lt "$deadline" ] || fail "gave up after waiting for '$*' to print '$want'"$'\n'"last output: $out"
		sleep 0.2
	done
}

# PRODUCER | grep_all [GREP_FLAGS] PATTERN: grep -q that reads its input to the end. Under pipefail,
# `producer | grep -q` fails at random when grep exits on the first match while the producer still
# writes (SIGPIPE, or a Python BrokenPipeError: helm.dryrun failed so once in CI).
grep_all() { grep "$@" >/dev/null; }

kubectl_admin() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
kubectl_operator() { kubectl --kubeconfig "$MP_OPERATOR_KUBECONFIG" "$@"; }
kubectl_router() { kubectl --kubeconfig "$MP_ROUTER_KUBECONFIG" "$@"; }

# apply_crd FILE...: creates or updates CRDs as admin and waits until the API server serves them and
# discovery lists them (Established can come a moment earlier), so the next request for the kind does not
# race its registration. kubectl wait is itself retried: on a CRD just created, whose status has no
# conditions yet, it fails at once (".status.conditions accessor error: <nil> is of the type <nil>").
apply_crd() {
	local f name
	for f in "$@"; do
		kubectl_admin apply -f "$f" >/dev/null
		wait_for 60 kubectl_admin wait --for=condition=Established --timeout=30s -f "$f"
		for name in $(kubectl_admin get -f "$f" -o 'jsonpath={.metadata.name}{" "}'); do
			wait_for 60 kubectl_admin get "$name" --all-namespaces
		done
	done
}

# ---- the operator, the member simulator and the slot invariant checker ----

# install_operator_rbac: the operator's namespace, ServiceAccount and RBAC exactly as config/rbac ships
# them, so the operator runs here with the rights it has in a cluster and no more.
install_operator_rbac() {
	kubectl_admin create namespace modelpool-system --dry-run=client -o yaml | kubectl_admin apply -f - >/dev/null
	kubectl_admin apply -k "$MP_SOURCE_DIR/config/rbac" >/dev/null
	wait_for 60 kubectl_operator auth can-i patch modelpools.inference.llmkube.dev --subresource=status --all-namespaces
}

# system_namespace: the operator's namespace, where router replicas register (docs/router.md, "Acknowledged
# swaps"; a router forwards nothing until it has), as in a cluster where the operator is installed.
system_namespace() {
	kubectl_admin get namespace modelpool-system >/dev/null 2>&1 ||
		kubectl_admin create namespace modelpool-system --dry-run=client -o yaml | kubectl_admin apply -f - >/dev/null
}

# install_router_rbac: the router's ServiceAccount and RBAC exactly as config/router ships them (its
# kustomization less the Deployment and Services, which need an image and a kubelet), so the router runs
# here with the rights it has in a cluster and no more.
install_router_rbac() {
	local r=$MP_SOURCE_DIR/config/router
	system_namespace
	kubectl_admin apply -n modelpool-system -f "$r/service_account.yaml" -f "$r/role.yaml" -f "$r/role_binding.yaml" \
		-f "$r/lease_role.yaml" -f "$r/lease_role_binding.yaml" >/dev/null
	wait_for 60 kubectl_router auth can-i patch modelpools.inference.llmkube.dev --all-namespaces
	wait_for 60 kubectl_router auth can-i create leases.coordination.k8s.io -n modelpool-system
}

# install_crds: the ModelPool CRD and the test copy of the InferenceService CRD.
install_crds() {
	apply_crd "$MP_SOURCE_DIR/crd/modelpools.inference.llmkube.dev.yaml" \
		"$MP_SOURCE_DIR/test/crds/inferenceservices.inference.llmkube.dev.yaml"
}

# install_crds_and_samples: both CRDs, then the samples (a pool with two members in "default").
install_crds_and_samples() {
	install_crds
	kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/inferenceservices.yaml" >/dev/null
	kubectl_admin apply -f "$MP_SOURCE_DIR/config/samples/modelpool.yaml" >/dev/null
}

# start_sim [ARGS...]: the member simulator, as admin (it plays the member controller and the kubelet), its
# Pods on addresses in this run's own loopback block (MP_SIM_IP_BLOCK, which run-one.sh takes).
start_sim() {
	"$MP_BUILD_DIR/member-sim" --kubeconfig "$KUBECONFIG" --ip-block "${MP_SIM_IP_BLOCK:?run-one.sh sets it}" \
		"$@" >>"$MP_STATE_DIR/sim.log" 2>&1 &
	MP_SIM_PID=$!
}

# start_operator [ARGS...]: the operator with its own identity; its log is operator.log (or
# operator-$MP_OPERATOR_LOG.log when that is set, for a second instance). Its metrics and health
# servers listen on loopback ports the kernel picks (ARGS may override), so instances never collide;
# operator_port finds them. Metrics are plain HTTP here (scrape reads them with curl) unless ARGS say
# --metrics-secure=true; metrics-auth.test.sh covers the secure default. The router Leases are read in
# modelpool-system, as in a cluster (acknowledged swaps, docs/router.md; ARGS may name another namespace).
start_operator() {
	local logf="$MP_STATE_DIR/operator${MP_OPERATOR_LOG:+-$MP_OPERATOR_LOG}.log"
	"$MP_BUILD_DIR/modelpool-operator" --kubeconfig "$MP_OPERATOR_KUBECONFIG" -v 1 --metrics-secure=false \
		--metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
		--router-lease-namespace modelpool-system "$@" >>"$logf" 2>&1 &
	MP_OPERATOR_PID=$!
}

# operator_up [--samples] [--slot-check] [SIM ARGS...]: how most tests begin: the CRDs (and the
# samples), the operator's RBAC, slot-check, the member simulator with SIM ARGS, the operator.
operator_up() {
	local samples="" slot_check=""
	[ "${1:-}" = --samples ] && samples=1 && shift
	[ "${1:-}" = --slot-check ] && slot_check=1 && shift
	if [ -n "$samples" ]; then install_crds_and_samples; else install_crds; fi
	install_operator_rbac
	[ -z "$slot_check" ] || start_slot_check
	start_sim "$@"
	start_operator
}

# operator_port metrics|health [LOG]: the port of the operator's server, from the last "started" line
# of its log (operator.log by default).
operator_port() {
	local p
	p=$(grep ' started ' "$MP_STATE_DIR/${2:-operator.log}" | tail -n 1 | grep -o " $1_port=[0-9]*" | cut -d= -f2)
	[ -n "$p" ] && [ "$p" != 0 ] && echo "$p"
}

# scrape [LOG]: the operator's /metrics text.
scrape() {
	local port
	port=$(operator_port metrics "${1:-operator.log}") || return 1
	curl -fsS "http://127.0.0.1:$port/metrics"
}

# metric_value SERIES [LOG]: the value of one series, exactly as written (name{labels}); fails when
# the series is absent.
metric_value() {
	scrape "${2:-operator.log}" | awk -v s="$1" '$1 == s {print $2; found=1} END {exit !found}'
}

# stop_operator: SIGTERM, and the operator must exit 0 on its own (graceful shutdown).
stop_operator() {
	local rc=0
	kill -TERM "$MP_OPERATOR_PID"
	wait "$MP_OPERATOR_PID" || rc=$?
	expect_eq "operator exit status after SIGTERM" 0 "$rc"
}

# router_setup [SIM ARGS...]: what a router test stands on: both CRDs, the operator's and the router's RBAC,
# slot-check watching, the simulator (with SIM ARGS) and the operator.
router_setup() {
	install_crds
	install_operator_rbac
	install_router_rbac
	start_slot_check
	start_sim "$@"
	start_operator
}

# start_router [ARGS...]: modelpool-router with its own identity (MP_ROUTER_KUBECONFIG, rights as
# config/router grants them; install_router_rbac first); log router.log (router-$MP_ROUTER_LOG.log for a
# second instance). All three servers on loopback ports the kernel picks; router_port finds them.
start_router() {
	local logf="$MP_STATE_DIR/router${MP_ROUTER_LOG:+-$MP_ROUTER_LOG}.log"
	system_namespace
	"$MP_BUILD_DIR/modelpool-router" --kubeconfig "${MP_ROUTER_KUBECONFIG:-$KUBECONFIG}" -v 1 \
		--metrics-secure=false --bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 \
		--health-probe-bind-address 127.0.0.1:0 "$@" >>"$logf" 2>&1 &
	MP_ROUTER_PID=$!
}

# router_up ARGS...: start_router ARGS, then waits until it is ready (30 s).
router_up() {
	start_router "$@"
	wait_for 30 router_ready
}

# router_port api|metrics|health [LOG]: the port of one of the router's servers, from its log.
router_port() {
	local key=$1 p
	[ "$key" = api ] && key=""
	p=$(grep ' started ' "$MP_STATE_DIR/${2:-router.log}" | tail -n 1 | grep -o " ${key:+${key}_}port=[0-9]*" | cut -d= -f2)
	[ -n "$p" ] && [ "$p" != 0 ] && echo "$p"
}

# router_ready [LOG]: the router's /readyz answers 200.
router_ready() {
	local port
	port=$(router_port health "${1:-router.log}") || return 1
	curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null
}

# router_metric SERIES [LOG]: one series of the router's /metrics (plain HTTP in the tests), exactly as
# written; fails when it is absent.
router_metric() {
	curl -fsS "http://127.0.0.1:$(router_port metrics "${2:-router.log}")/metrics" |
		awk -v s="$1" '$1 == s {print $2; found=1} END {exit !found}'
}

# router_post PATH BODY [CURL ARGS...]: POSTs the JSON BODY to the router's API port (the latest
# router.log's); prints the status code. The answer's body goes to $MP_STATE_DIR/${MP_REPLY:-body},
# its headers to $MP_STATE_DIR/headers.
router_post() {
	local path=$1 body=$2
	shift 2
	curl -sS -o "$MP_STATE_DIR/${MP_REPLY:-body}" -D "$MP_STATE_DIR/headers" -w '%{http_code}' -X POST \
		-H 'Content-Type: application/json' --data-binary "$body" "$@" "http://127.0.0.1:$(router_port api)$path"
}
# router_chat MODEL [CURL ARGS...]: a chat completion for MODEL (no messages), as router_post.
router_chat() {
	local model=$1
	shift
	router_post /v1/chat/completions "{\"model\":\"$model\",\"messages\":[]}" "$@"
}
# reply_field FILTER [FILE]: a field of the last answer through the router (jq -r FILTER, over
# $MP_STATE_DIR/body unless FILE): reply_field .model, reply_field .error.code.
reply_field() { jq -r "$1" "${2:-$MP_STATE_DIR/body}"; }

# activations: the router's requests through the pool so far (router.log).
activations() { grep -c '"requested member through the pool"' "$MP_STATE_DIR/router.log" || true; }

# stop_router: SIGTERM, and the router must exit 0 on its own.
stop_router() {
	local rc=0
	kill -TERM "$MP_ROUTER_PID"
	wait "$MP_ROUTER_PID" || rc=$?
	expect_eq "router exit status after SIGTERM" 0 "$rc"
}

# free_port: a loopback port that is free now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# unused_port: a TCP port that nothing on this machine uses in any state (/proc/net/tcp, tcp6), below the
# ephemeral range (as test/controlplane/start.sh picks its ports): for a server that binds every interface.
unused_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		grep -qi ":$(printf %04X "$p") " /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$p"; return; }
	done
}

# start_toxiproxy: the fault proxy ($MP_TOXIPROXY, which run-one.sh finds) on a free loopback port; its
# control API in MP_TOXI_API (exported), its pid in MP_TOXI_PID and toxiproxy.pid, its log toxiproxy.log.
start_toxiproxy() {
	local port
	port=$(free_port)
	LOG_LEVEL=warn "$MP_TOXIPROXY" -host 127.0.0.1 -port "$port" >>"$MP_STATE_DIR/toxiproxy.log" 2>&1 &
	MP_TOXI_PID=$!
	echo "$MP_TOXI_PID" >"$MP_STATE_DIR/toxiproxy.pid"
	export MP_TOXI_API=http://127.0.0.1:$port
	wait_for 30 curl -fsS "$MP_TOXI_API/version"
}

# toxi_proxy NAME: a proxy NAME to the API server on a free loopback port; its definition (JSON) in
# MP_TOXI_DEF and its port in MP_TOXI_PORT.
toxi_proxy() {
	MP_TOXI_PORT=$(free_port)
	MP_TOXI_DEF="{\"name\":\"$1\",\"listen\":\"127.0.0.1:$MP_TOXI_PORT\",\"upstream\":\"${MP_APISERVER_URL#https://}\"}"
	curl -fsS -X POST "$MP_TOXI_API/proxies" -d "$MP_TOXI_DEF" >/dev/null
}

# start_slot_check / stop_slot_check: watches the whole test for two Pods of a pool (of two members or of
# one) holding the slot (Running, terminating or not) or two members reporting Ready at once; stop fails
# the test on any violation.
start_slot_check() {
	"$MP_BUILD_DIR/slot-check" "$KUBECONFIG" >"$MP_STATE_DIR/slot-check.log" 2>&1 &
	MP_SLOT_CHECK_PID=$!
	wait_for 60 grep -q "slot-check: synced" "$MP_STATE_DIR/slot-check.log"
}
stop_slot_check() {
	local rc=0
	kill -TERM "$MP_SLOT_CHECK_PID"
	wait "$MP_SLOT_CHECK_PID" || rc=$?
	cat "$MP_STATE_DIR/slot-check.log" >&2
	expect_eq "slot-check exit status (0: no violation seen)" 0 "$rc"
}

# sim_log_overlap WHAT KIND HOLD NS MEMBER...: reads the simulator's KIND lines of these members (sim.log, in
# the order things happened: "sim NS/MEMBER KIND=ID ..."), where the awk statement HOLD sets hold[id] while
# ID holds the slot and deletes it after; fails, printing the line number and the IDs, at the first moment
# two held it at once ("two WHAT:"); succeeds when that never happened.
sim_log_overlap() {
	local what=$1 kind=$2 hold=$3 ns=$4
	shift 4
	awk -v ns="$ns" -v members="$*" -v kind="$kind" -v what="$what" '
		BEGIN { n = split(members, ms, " "); for (i = 1; i <= n; i++) want[ns "/" ms[i]] = 1 }
		$1 == "sim" && ($2 in want) && index($3, kind "=") == 1 {
			id = substr($3, length(kind) + 2)
			'"$hold"'
			c = 0; s = ""
			for (p in hold) { c++; s = s " " p }
			if (c > 1) { print "sim.log line " NR ": two " what ":" s; bad = 1; exit }
		}
		END { exit bad }' "$MP_STATE_DIR/sim.log"
}

# sim_overlap NS MEMBER...: fails, printing the line number and the Pods, at the first moment two Pods of
# these members held the GPU at once (ip= set: from Running until Gone, terminating or not); succeeds when
# that never happened.
sim_overlap() {
	sim_log_overlap "Pods held the GPU" pod 'if (substr($5, 4) != "-") hold[id] = 1; else delete hold[id]' "$@"
}

# sim_deleted_busy NS MEMBER: the Pods of MEMBER the simulator saw deleted while the member was annotated
# busy (a busy model unloaded), one per line; empty when none was.
sim_deleted_busy() {
	grep "^sim $1/$2 pod=[^ ]* state=Terminating .* busy=true\$" "$MP_STATE_DIR/sim.log" || true
}

# pool_get POOL JSONPATH [NS]: one field of a ModelPool's status or spec.
pool_get() { kubectl_admin -n "${3:-default}" get modelpool "$1" -o "jsonpath=$2"; }
isvc_get() { kubectl_admin -n "${3:-default}" get inferenceservice "$1" -o "jsonpath=$2"; }

# pool_field POOL FIELD[/FIELD...] [NS]: status fields by name, joined by '/' (pool_field pool
# phase/residentMember prints "Ready/m-a").
pool_field() {
	local path="" f
	for f in ${2//\// }; do path+="${path:+/}{.status.$f}"; done
	pool_get "$1" "$path" "${3:-default}"
}

# member_replicas MEMBER [NS]: the InferenceService's spec.replicas.
member_replicas() { isvc_get "$1" '{.spec.replicas}' "${2:-default}"; }

# member_phase_is MEMBER PHASE [NS]: succeeds when the InferenceService's status.phase is PHASE.
member_phase_is() { [ "$(isvc_get "$1" '{.status.phase}' "${3:-default}")" == "$2" ]; }

# replicas_are MEMBER N [NS]: succeeds when the InferenceService's spec.replicas is N.
replicas_are() {
	local got
	got=$(isvc_get "$1" '{.spec.replicas}' "${3:-default}")
	echo "$got"
	[ "$got" == "$2" ]
}

# observed_current POOL [NS]: succeeds when status.observedGeneration equals metadata.generation.
observed_current() {
	local got
	got=$(pool_get "$1" '{.metadata.generation}/{.status.observedGeneration}' "${2:-default}")
	echo "$got"
	[ "${got%/*}" == "${got#*/}" ]
}

# pool_is POOL PHASE RESIDENT [NS]: succeeds when the pool shows that phase and resident member.
pool_is() {
	local got
	got="$(pool_field "$1" phase/residentMember "${4:-default}")"
	echo "$got"
	[ "$got" == "$2/$3" ]
}

# pool_condition POOL TYPE [NS]: "Status/Reason" of one condition.
pool_condition() {
	pool_get "$1" "{.status.conditions[?(@.type==\"$2\")].status}/{.status.conditions[?(@.type==\"$2\")].reason}" "${3:-default}"
}
condition_is() {
	local got
	got=$(pool_condition "$1" "$2" "${4:-default}")
	echo "$got"
	[ "$got" == "$3" ]
}

# live_pods MEMBER [NS]: names of the member's Pods that are not Succeeded or Failed (terminating
# ones included: they still hold the GPU).
live_pods() {
	kubectl_admin -n "${2:-default}" get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.phase}{"\n"}{end}' |
		awk '$2 != "Succeeded" && $2 != "Failed" {print $1}'
}
no_live_pods() { [ -z "$(live_pods "$@")" ]; }

# kill_operator: SIGKILL, as a crash or an OOM kill would: no release, no reconcile finished.
kill_operator() {
	kill -KILL "$MP_OPERATOR_PID"
	wait "$MP_OPERATOR_PID" || true
}

# pending_is POOL MEMBER [NS]: succeeds when status.pendingMember is MEMBER ("" for none).
pending_is() {
	local got
	got=$(pool_field "$1" pendingMember "${3:-default}")
	echo "pending=$got"
	[ "$got" == "$2" ]
}

# pool_members POOL [NS]: status.members[] as "name:phase:resident ..." (one space between entries).
pool_members() {
	pool_get "$1" '{range .status.members[*]}{.name}:{.phase}:{.resident}{" "}{end}' "${2:-default}" | sed 's/ $//'
}

# pool_conditions POOL [NS]: every condition as "Type=Status/Reason", sorted, one space between.
pool_conditions() {
	pool_get "$1" '{range .status.conditions[*]}{.type}={.status}/{.reason}{"\n"}{end}' "${2:-default}" |
		sort | paste -sd ' ' -
}

# condition_since POOL TYPE [NS]: one condition's lastTransitionTime.
condition_since() {
	pool_get "$1" "{.status.conditions[?(@.type==\"$2\")].lastTransitionTime}" "${3:-default}"
}

# condition_message POOL TYPE [NS]: one condition's message.
condition_message() {
	pool_get "$1" "{.status.conditions[?(@.type==\"$2\")].message}" "${3:-default}"
}

# expect_condition_message POOL TYPE NS WHAT PATTERN: the message of the pool's condition TYPE matches the
# shell pattern PATTERN (expect_like); else the test fails with "WHAT: MESSAGE".
expect_condition_message() {
	local msg
	msg=$(condition_message "$1" "$2" "$3")
	expect_like "$4" "$msg" "$5"
}

# pool_events POOL [NS]: the pool's Events as "Type/Reason" lines, oldest first.
pool_events() {
	kubectl_admin -n "${2:-default}" get events --field-selector "involvedObject.kind=ModelPool,involvedObject.name=$1" \
		--sort-by=.metadata.creationTimestamp -o 'jsonpath={range .items[*]}{.type}/{.reason}{"\n"}{end}'
}
# event_messages POOL REASON [NS]: the messages of the pool's Events with that reason.
event_messages() {
	kubectl_admin -n "${3:-default}" get events --field-selector "involvedObject.name=$1,reason=$2" \
		-o 'jsonpath={.items[*].message}'
}
# event_count POOL TYPE/REASON [NS]: how many such Events the pool has.
event_count() { pool_events "$1" "${3:-default}" | grep -cx "$2" || true; }
# events_more POOL TYPE/REASON N [NS]: succeeds once the pool has more than N such Events (for
# wait_for: an Event is posted after the status write it describes, and asynchronously).
events_more() {
	local got
	got=$(event_count "$1" "$2" "${4:-default}")
	echo "$got $2 events"
	[ "$got" -gt "$3" ]
}

# replan_barrier POOL [NS]: a spec change (swapBudget, to a value it has not had) and a wait until
# status.observedGeneration shows it: once it returns, the operator has planned the pool at least
# once after everything the test saw before the call. It makes "X did not happen" checkable
# without sleeping.
replan_barrier() {
	local ns=${2:-default} gen
	gen=$(pool_get "$1" '{.metadata.generation}' "$ns")
	kubectl_admin -n "$ns" patch modelpool "$1" --type=merge \
		-p "{\"spec\":{\"swapBudget\":\"$((300 + gen))s\"}}" >/dev/null
	wait_for 60 observed_current "$1" "$ns"
}

# scale_lines POOL [NS]: how many replica changes the operator logged for POOL (all its logs).
scale_lines() {
	cat "$MP_STATE_DIR"/operator*.log 2>/dev/null | grep -c " scale pool=${2:-default}/$1 " || true
}

# create_members NS NAME...: InferenceServices at 0 replicas (llamacpp, port 8080: each Pod of the
# simulator has its own loopback address, in this run's own block, so they never collide).
create_members() {
	local ns=$1 name
	shift
	kubectl_admin create namespace "$ns" --dry-run=client -o yaml | kubectl_admin apply -f - >/dev/null
	for name in "$@"; do
		kubectl_admin -n "$ns" apply -f - >/dev/null <<-YAML
			apiVersion: inference.llmkube.dev/v1alpha1
			kind: InferenceService
			metadata: {name: $name}
			spec: {modelRef: $name, runtime: llamacpp, replicas: 0, endpoint: {port: 8080}}
		YAML
	done
}

# create_pool NS POOL DEFAULT MEMBER...: a ModelPool over those members; DEFAULT "" for none;
# MP_POOL_BUDGET (a Go duration) sets its swapBudget.
create_pool() {
	local ns=$1 pool=$2 dflt=$3 name members=""
	shift 3
	for name in "$@"; do
		members+="    - inferenceServiceRef: {name: $name}"$'\n'
	done
	kubectl_admin -n "$ns" apply -f - >/dev/null <<-YAML
		apiVersion: inference.llmkube.dev/v1alpha1
		kind: ModelPool
		metadata:
		  name: $pool
		spec:
		${dflt:+  default: $dflt}
		${MP_POOL_BUDGET:+  swapBudget: $MP_POOL_BUDGET}
		  members:
		$members
	YAML
}

# pool_ready NS POOL DEFAULT MEMBERS...: the members (replicas 0) and a pool over them with that
# default (MP_POOL_BUDGET its swapBudget when set), waited for until Ready with DEFAULT resident.
pool_ready() {
	local ns=$1 pool=$2 dflt=$3
	shift 3
	create_members "$ns" "$@"
	create_pool "$ns" "$pool" "$dflt" "$@"
	wait_for 60 pool_is "$pool" Ready "$dflt" "$ns"
}

# expect_sole_resident POOL MEMBER [NS]: the end state of a swap: pool Ready with MEMBER resident and
# nothing pending, MEMBER at 1 replica, every other member at 0 with no live Pod.
expect_sole_resident() {
	local pool=$1 want=$2 ns=${3:-default} name
	expect_eq "phase/resident of $pool" "Ready/$want" "$(pool_get "$pool" '{.status.phase}/{.status.residentMember}' "$ns")"
	expect_eq "pendingMember of $pool" "" "$(pool_get "$pool" '{.status.pendingMember}' "$ns")"
	for name in $(pool_get "$pool" '{range .spec.members[*]}{.inferenceServiceRef.name}{" "}{end}' "$ns"); do
		if [ "$name" == "$want" ]; then
			expect_eq "replicas of the resident $name" 1 "$(isvc_get "$name" '{.spec.replicas}' "$ns")"
			[ -n "$(live_pods "$name" "$ns")" ] || fail "the resident $name has no live Pod"
		else
			expect_eq "replicas of $name (not resident)" 0 "$(isvc_get "$name" '{.spec.replicas}' "$ns")"
			no_live_pods "$name" "$ns" || fail "$name is not resident but has live Pods: $(live_pods "$name" "$ns")"
		fi
	done
}

# ---- kube-apiserver restarts ----

# _proc_running PID: some thread of PID has not exited. A zombie leader is not enough: a Go server's other
# threads can still be tearing down, and its sockets (its listening port) close only with the last one.
_proc_running() {
	local t s
	for t in /proc/"$1"/task/*/stat; do
		s=$(cat "$t" 2>/dev/null) || continue
		s=${s##*) }
		case ${s%% *} in Z | X) ;; *) return 0 ;; esac
	done
	return 1
}

# stop_apiserver [SIGNAL]: stops the kube-apiserver MP_APISERVER_PID and waits until it has exited, after
# noting its argv, environment and working directory for start_apiserver. SIGKILL by default: a crash ends
# every watch at once with a transport error; TERM is a graceful stop, which holds open watches up to the
# server's 60 s shutdown timeout before it ends them.
stop_apiserver() {
	local sig=${1:-KILL} pid=$MP_APISERVER_PID deadline
	[ -r "/proc/$pid/cmdline" ] || fail "stop_apiserver: no process $pid"
	mapfile -d '' -t _mp_apiserver_argv <"/proc/$pid/cmdline"
	mapfile -d '' -t _mp_apiserver_env <"/proc/$pid/environ"
	_mp_apiserver_cwd=$(readlink "/proc/$pid/cwd")
	[[ "${_mp_apiserver_argv[0]:-}" == */kube-apiserver ]] ||
		fail "stop_apiserver: pid $pid is not a kube-apiserver: ${_mp_apiserver_argv[*]}"
	kill -"$sig" "$pid"
	# Usually not our child (run-one.sh started it), so `wait` cannot be used: poll /proc.
	deadline=$((SECONDS + 90))
	while _proc_running "$pid"; do
		[ "$SECONDS" -lt "$deadline" ] || fail "stop_apiserver: kube-apiserver $pid runs 90 s after SIG$sig"
		sleep 0.1
	done
	log "kube-apiserver $pid stopped (SIG$sig)"
}

# start_apiserver: starts the kube-apiserver stop_apiserver stopped, with the same argv, environment,
# working directory and log file, so it serves on the same port with the same certificates and etcd. The
# new pid goes to MP_APISERVER_PID and the state dir's pid file, where run-one.sh's cleanup (stop.sh) finds
# it. Returns once /readyz answers.
start_apiserver() {
	local deadline out
	[ "${#_mp_apiserver_argv[@]}" -gt 0 ] || fail "start_apiserver: no stop_apiserver before"
	(cd "$_mp_apiserver_cwd" && exec env -i "${_mp_apiserver_env[@]}" "${_mp_apiserver_argv[@]}") \
		</dev/null >>"$MP_STATE_DIR/kube-apiserver.log" 2>&1 &
	MP_APISERVER_PID=$!
	# Out of the job table: bash would otherwise print "Killed" when a later stop_apiserver kills it.
	disown "$MP_APISERVER_PID"
	export MP_APISERVER_PID
	echo "$MP_APISERVER_PID" >"$MP_STATE_DIR/kube-apiserver.pid"
	# Not wait_for: a server that died (its port taken, say) must fail now, not after the deadline.
	deadline=$((SECONDS + 120))
	until out=$(kubectl_admin get --raw /readyz 2>&1); do
		_proc_running "$MP_APISERVER_PID" || fail "start_apiserver: kube-apiserver exited; see kube-apiserver.log"
		[ "$SECONDS" -lt "$deadline" ] || fail "start_apiserver: not ready after 120 s; last answer: $out"
		sleep 0.2
	done
	log "kube-apiserver ready again as pid $MP_APISERVER_PID"
}

# restart_apiserver [SIGNAL]: stop_apiserver SIGNAL, then start_apiserver.
restart_apiserver() {
	stop_apiserver "$@"
	start_apiserver
}

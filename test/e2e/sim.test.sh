#!/usr/bin/env bash
# End to end on a real kube-apiserver: the member simulator (test/sim) plays the InferenceService controller and
# the kubelet as the other e2e tests assume, as harshly as the ReplicaSet behind a real member: scaling creates
# spec.replicas labelled Pods with generated names (at once, even while older ones still terminate) and removes
# the newest extra one first, the status follows (Creating, Ready, Stopped as soon as no Pod is ready), each Pod
# serves its idle probe on its own podIP as the annotations ask (answers, errors, refusals, hangs), failures and
# evictions are reported, a Pod held by the finalizer is seen terminating, and a restarted simulator adopts it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=${MP_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
declare -F apply_crd >/dev/null || source "$here/lib.sh"

sim=${MP_BUILD_DIR:?}/member-sim
[ -x "$sim" ] || fail "no simulator at $sim (build the member-sim target)"
ns=sim-e2e
# Not "out": lib.sh's wait_for has a local of that name, which the EXIT trap would see when wait_for fails.
sim_out=$MP_STATE_DIR/sim-e2e.out
sim_err=$MP_STATE_DIR/sim-e2e.err
sim_pid=""

show_sim_logs() {
	local rc=$?
	[ "$rc" -eq 0 ] && return 0
	echo "----- simulator stdout -----" >&2
	cat "$sim_out" >&2 2>/dev/null || true
	echo "----- last 60 lines of the simulator's stderr -----" >&2
	tail -n 60 "$sim_err" >&2 2>/dev/null || true
}
trap show_sim_logs EXIT

k() { kubectl_admin -n "$ns" "$@"; }
isvc() { k get isvc "$1" -o "jsonpath=$2"; }
phase_is() { [ "$(isvc "$1" '{.status.phase}')" == "$2" ]; }
pods_of() { k get pods -l "inference.llmkube.dev/service=$1" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}'; }
no_pods() { [ -z "$(pods_of "$1")" ]; }
pod() { k get pod "$1" -o "jsonpath=$2"; }
no_pods_but() { [ "$(pods_of "$1")" == "$2" ]; } # no_pods_but MEMBER POD: POD is its only Pod
has() { [ -n "$(pod "$1" "{$2}")" ]; } # has POD FIELD: the field is set (read anew on each call)
# The member's one Pod in phase $2 (Running by default), or failure.
pod_in_phase() {
	k get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.phase}{"\n"}{end}' |
		awk -v want="${2:-Running}" '$2 == want {print $1; n++} END {exit n == 1 ? 0 : 1}'
}
get() { curl -sS --max-time 5 "$@"; }
# refused URL: the connection is refused (curl exit 7), not answered with an error.
refused() {
	local rc=0
	curl -sS --max-time 5 -o /dev/null "$1" 2>/dev/null || rc=$?
	[ "$rc" -eq 7 ]
}

start() {
	"$sim" --kubeconfig "$KUBECONFIG" --ip-block "$MP_SIM_IP_BLOCK" --namespace "$ns" --finalizer --load-ms 200 -v \
		"$@" >>"$sim_out" 2>>"$sim_err" &
	sim_pid=$!
}
# stop: SIGTERM, and the simulator must exit 0 on its own.
stop() {
	local rc=0
	kill -TERM "$sim_pid"
	wait "$sim_pid" || rc=$?
	expect_eq "simulator exit status after SIGTERM" 0 "$rc"
}

log "bad flags: a clear message and exit status 2"
for bad in --no-such-flag "--load-ms=soon" "--terminate-ms=-1" "--namespace=" "--ip-block=0" "--ip-block=255"; do
	rc=0
	msg=$("$sim" "$bad" 2>&1) || rc=$?
	expect_eq "exit status for $bad" 2 "$rc"
	grep -q "member-sim: " <<<"$msg" || fail "no message naming the fault for $bad: $msg"
done
"$sim" --help | grep_all -- "--finalizer" || fail "--help does not list the flags"

apply_crd "$top/test/crds/inferenceservices.inference.llmkube.dev.yaml"
kubectl_admin create namespace "$ns" >/dev/null
pa=$(unused_port)
pb=$(unused_port)
pc=$(unused_port)
k apply -f - >/dev/null <<EOF
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: alpha}
spec: {runtime: llamacpp, replicas: 0, endpoint: {port: $pa}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: beta}
spec: {runtime: vllm, replicas: 0, containerPort: $pb}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: gamma
  annotations: {inference.llmkube.dev/idle-endpoint: /idle}
spec: {runtime: generic, replicas: 0, endpoint: {port: $pc}}
EOF
# The run's own block (run-one.sh): every Pod address is in 127.B.0.0/16, the first one 127.B.0.2.
blk=$MP_SIM_IP_BLOCK first_ip=127.$MP_SIM_IP_BLOCK.0.2
# Another process already listening on the first address at alpha's port: the simulator must pick another.
squatter=""
if command -v python3 >/dev/null; then
	python3 -m http.server --bind "$first_ip" "$pa" >/dev/null 2>&1 &
	squatter=$!
	wait_for 30 get -o /dev/null "http://$first_ip:$pa/"
fi
start

log "members at 0 replicas are Stopped, without Pods"
for m in alpha beta gamma; do
	wait_for 60 phase_is "$m" Stopped
	expect_eq "$m status.replicas" 0 "$(isvc "$m" '{.status.replicas}')"
	no_pods "$m" || fail "$m has Pods at 0 replicas: $(pods_of "$m")"
done

log "scale alpha to 1: one labelled Pod, Running with a loopback podIP, status Ready, /slots idle"
k scale isvc alpha --replicas=1 >/dev/null
wait_for 60 phase_is alpha Ready
expect_eq "alpha status.replicas" 1 "$(isvc alpha '{.status.replicas}')"
a=$(pod_in_phase alpha) || fail "alpha has not exactly one Running Pod: $(pods_of alpha)"
[[ $a =~ ^alpha-[a-z]{5}$ ]] || fail "Pod name $a is not alpha-<5 lowercase letters>"
expect_eq "alpha Pod labels" "alpha/alpha" \
	"$(pod "$a" '{.metadata.labels.app}/{.metadata.labels.inference\.llmkube\.dev/service}')"
expect_eq "alpha Pod container" "server/sim" "$(pod "$a" '{.spec.containers[0].name}/{.spec.containers[0].image}')"
expect_eq "alpha Pod finalizer" "sim.modelpool.test/hold" "$(pod "$a" '{.metadata.finalizers[*]}')"
expect_eq "alpha Pod readiness" "True/true/" \
	"$(pod "$a" '{.status.conditions[?(@.type=="Ready")].status}/{.status.containerStatuses[0].ready}/{.status.containerStatuses[0].state.running.startedAt}' | sed 's/[0-9TZ:-]*$//')"
ipa=$(pod "$a" '{.status.podIP}')
[[ $ipa =~ ^127\.$blk\.0\.[0-9]+$ ]] || fail "alpha podIP '$ipa' is not a loopback address in this run's 127.$blk.0.0/16"
ipa_first=$ipa
if [ -n "$squatter" ]; then
	[ "$ipa" != "$first_ip" ] || fail "alpha was given $first_ip although another process listens there on $pa"
	kill "$squatter"
fi
expect_eq "alpha /slots idle" '[{"id":0,"is_processing":false}]' "$(get "http://$ipa:$pa/slots")"
expect_eq "alpha /metrics (not its runtime's)" 404 "$(get -o /dev/null -w '%{http_code}' "http://$ipa:$pa/metrics")"

log "annotations change the answer at once: busy, error, refuse"
k annotate isvc alpha sim.modelpool.test/busy=true >/dev/null
expect_eq "alpha /slots busy" '[{"id":0,"is_processing":true}]' "$(get "http://$ipa:$pa/slots")"
k annotate isvc alpha sim.modelpool.test/busy=false --overwrite >/dev/null
expect_eq "alpha /slots idle again" '[{"id":0,"is_processing":false}]' "$(get "http://$ipa:$pa/slots")"
k annotate isvc alpha sim.modelpool.test/probe=error >/dev/null
expect_eq "alpha /slots with probe=error" 500 "$(get -o /dev/null -w '%{http_code}' "http://$ipa:$pa/slots")"
k annotate isvc alpha sim.modelpool.test/probe=refuse --overwrite >/dev/null
wait_for 30 refused "http://$ipa:$pa/slots"
k annotate isvc alpha sim.modelpool.test/probe- >/dev/null
wait_for 30 get -o /dev/null "http://$ipa:$pa/slots"
n=$(get "http://$ipa:$pa/sim/requests")
[ "$n" -ge 5 ] || fail "alpha counted $n requests, expected at least 5"

log "probe=hang: the connection is accepted and the request never answered, until the annotation goes"
k annotate isvc alpha sim.modelpool.test/probe=hang >/dev/null
# hangs URL: the request times out (curl exit 28), it is not refused (7) or answered.
hangs() {
	local rc=0
	curl -sS --max-time 1 -o /dev/null "$1" 2>/dev/null || rc=$?
	echo "curl exit $rc"
	[ "$rc" -eq 28 ]
}
wait_for 30 hangs "http://$ipa:$pa/slots"
held=$(grep -c "request held.*pod=$a path=/slots" "$sim_err" || true)
[ "$held" -ge 1 ] || fail "the simulator did not log the held request"
get --max-time 60 "http://$ipa:$pa/slots" >"$MP_STATE_DIR/held.out" 2>&1 &
held_curl=$!
more_held() { [ "$(grep -c "request held.*pod=$a path=/slots" "$sim_err")" -gt "$held" ]; }
wait_for 30 more_held
k annotate isvc alpha sim.modelpool.test/probe- >/dev/null
wait "$held_curl" || fail "the held request failed once released: $(cat "$MP_STATE_DIR/held.out")"
expect_eq "the held request's answer once released" '[{"id":0,"is_processing":false}]' "$(cat "$MP_STATE_DIR/held.out")"

log "beta (vllm, containerPort) and gamma (generic idle-endpoint) each get their own address"
k scale isvc/beta isvc/gamma --replicas=1 >/dev/null
wait_for 60 phase_is beta Ready
wait_for 60 phase_is gamma Ready
b=$(pod_in_phase beta) || fail "beta has not exactly one Running Pod"
g=$(pod_in_phase gamma) || fail "gamma has not exactly one Running Pod"
ipb=$(pod "$b" '{.status.podIP}')
ipg=$(pod "$g" '{.status.podIP}')
for ip in "$ipb" "$ipg"; do
	[[ $ip =~ ^127\.$blk\.0\.[0-9]+$ ]] || fail "podIP '$ip' is not in this run's 127.$blk.0.0/16"
done
[ "$ipa" != "$ipb" ] && [ "$ipa" != "$ipg" ] && [ "$ipb" != "$ipg" ] || fail "addresses not distinct: $ipa $ipb $ipg"
get "http://$ipb:$pb/metrics" | grep -Eq '^vllm:num_requests_running(\{[^}]*\})? 0$' ||
	fail "beta /metrics idle: $(get "http://$ipb:$pb/metrics")"
k annotate isvc beta sim.modelpool.test/busy=true >/dev/null
get "http://$ipb:$pb/metrics" | grep -Eq '^vllm:num_requests_running(\{[^}]*\})? 1$' ||
	fail "beta /metrics busy: $(get "http://$ipb:$pb/metrics")"
expect_eq "gamma /idle idle" 200 "$(get -o /dev/null -w '%{http_code}' "http://$ipg:$pc/idle")"
k annotate isvc gamma sim.modelpool.test/busy=true >/dev/null
expect_eq "gamma /idle busy" 503 "$(get -o /dev/null -w '%{http_code}' "http://$ipg:$pc/idle")"

log "scale alpha to 0, Pod held by the finalizer: seen terminating, not serving, status Stopped at once"
k annotate isvc alpha sim.modelpool.test/terminate-ms=600000 >/dev/null
k scale isvc alpha --replicas=0 >/dev/null
wait_for 60 has "$a" .metadata.deletionTimestamp
wait_for 30 refused "http://$ipa:$pa/slots"
wait_for 30 grep -q "^sim $ns/alpha pod=$a state=Terminating ip=$ipa busy=false\$" "$sim_out"
wait_for 60 phase_is alpha Stopped
expect_eq "alpha status.replicas while its Pod terminates" 0 "$(isvc alpha '{.status.replicas}')"
has "$a" .metadata.deletionTimestamp || fail "alpha's Pod is no longer there: the test held nothing"

log "alpha back to 1 while its old Pod terminates: a new Pod at once, beside it, on another address"
k scale isvc alpha --replicas=1 >/dev/null
wait_for 60 phase_is alpha Ready
a2=$(k get pods -l inference.llmkube.dev/service=alpha \
	-o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
	awk '$2 == "Running" && $3 == "" {print $1}')
[ -n "$a2" ] && [ "$a2" != "$a" ] || fail "alpha has no new Running Pod: $(pods_of alpha)"
has "$a" .metadata.deletionTimestamp || fail "alpha's old Pod went before the new one ran"
ipa2=$(pod "$a2" '{.status.podIP}')
[ "$ipa2" != "$ipa" ] || fail "the new Pod took the address $ipa its terminating predecessor still holds"
expect_eq "alpha new Pod /slots" '[{"id":0,"is_processing":false}]' "$(get "http://$ipa2:$pa/slots")"
grep -q "^sim $ns/alpha phase=Ready ready=1 holding=2\$" "$sim_out" || fail "no line with two alpha Pods holding the GPU"
log "released: the Pods go, then nothing is left"
k scale isvc alpha --replicas=0 >/dev/null
k annotate isvc alpha sim.modelpool.test/terminate-ms=0 --overwrite >/dev/null
wait_for 60 no_pods alpha
wait_for 60 phase_is alpha Stopped
expect_eq "alpha status.replicas" 0 "$(isvc alpha '{.status.replicas}')"

log "replicas 2: two Pods, each Running on its own address; back to 1 deletes the newest"
k annotate isvc beta sim.modelpool.test/busy- >/dev/null
k scale isvc beta --replicas=2 >/dev/null
two_ready() { [ "$(isvc beta '{.status.phase}/{.status.replicas}')" == Ready/2 ]; }
wait_for 60 two_ready
running_b=$(k get pods -l inference.llmkube.dev/service=beta \
	-o 'jsonpath={range .items[*]}{.metadata.creationTimestamp}{" "}{.metadata.name}{" "}{.status.phase}{" "}{.status.podIP}{"\n"}{end}' |
	awk '$3 == "Running"' | sort)
expect_eq "beta Running Pods" 2 "$(wc -l <<<"$running_b")"
grep -q " $b " <<<"$running_b" || fail "beta's first Pod $b is not one of them: $running_b"
b2=$(awk -v b="$b" '$2 != b {print $2}' <<<"$running_b")
ipb2=$(awk -v b="$b" '$2 != b {print $4}' <<<"$running_b")
[ "$ipb2" != "$ipb" ] || fail "beta's two Pods share the address $ipb"
for ip in "$ipb" "$ipb2"; do
	get "http://$ip:$pb/metrics" | grep -Eq '^vllm:num_requests_running(\{[^}]*\})? 0$' ||
		fail "beta's Pod at $ip does not serve: $(get "http://$ip:$pb/metrics")"
done
k scale isvc beta --replicas=1 >/dev/null
wait_for 60 no_pods_but beta "$b"
expect_eq "beta after scaling to 1" Ready/1 "$(isvc beta '{.status.phase}/{.status.replicas}')"
wait_for 30 refused "http://$ipb2:$pb/metrics"
k scale isvc beta --replicas=0 >/dev/null
wait_for 60 no_pods beta

log "fail: the Pod goes Failed instead of Running, status Failed"
k annotate isvc alpha sim.modelpool.test/fail=true sim.modelpool.test/terminate-ms- >/dev/null
k scale isvc alpha --replicas=1 >/dev/null
wait_for 60 phase_is alpha Failed
f=$(pod_in_phase alpha Failed) || fail "alpha has no Failed Pod: $(pods_of alpha)"
expect_eq "alpha Pods while failed" "$f" "$(pods_of alpha)"
expect_eq "failed Pod podIP" "" "$(pod "$f" '{.status.podIP}')"
k annotate isvc alpha sim.modelpool.test/fail- >/dev/null
wait_for 60 phase_is alpha Ready
k scale isvc alpha --replicas=0 >/dev/null
wait_for 60 no_pods alpha
wait_for 60 phase_is alpha Stopped

log "evict: the running Pod is left Failed (Evicted), status Failed, no new Pod"
k scale isvc beta --replicas=1 >/dev/null
wait_for 60 phase_is beta Ready
b=$(pod_in_phase beta) || fail "beta has not exactly one Running Pod"
ipb=$(pod "$b" '{.status.podIP}')
k annotate isvc beta sim.modelpool.test/evict=true >/dev/null
wait_for 60 phase_is beta Failed
expect_eq "evicted Pod" "Failed/Evicted/false" \
	"$(pod "$b" '{.status.phase}/{.status.reason}/{.status.containerStatuses[0].ready}')"
expect_eq "beta Pods after the eviction" "$b" "$(pods_of beta)"
wait_for 30 refused "http://$ipb:$pb/metrics"
k scale isvc beta --replicas=0 >/dev/null
wait_for 60 no_pods beta
k annotate isvc beta sim.modelpool.test/evict- >/dev/null

log "waiting-for-gpu: the Pod stays Pending, status WaitingForGPU, until the annotation goes"
k annotate isvc alpha sim.modelpool.test/waiting-for-gpu=true >/dev/null
k scale isvc alpha --replicas=1 >/dev/null
wait_for 60 phase_is alpha WaitingForGPU
w=$(pods_of alpha)
expect_eq "alpha Pod while waiting for a GPU" "Pending/" "$(pod "$w" '{.status.phase}/{.status.podIP}')"
k annotate isvc alpha sim.modelpool.test/waiting-for-gpu- >/dev/null
wait_for 60 phase_is alpha Ready
expect_eq "alpha Pod after the wait" "$w" "$(pod_in_phase alpha)"
ipa=$(pod "$w" '{.status.podIP}')
get -o /dev/null "http://$ipa:$pa/slots" || fail "alpha does not serve after the wait"

log "restart: the simulator exits 0 on SIGTERM and a new one adopts the running Pods"
stop
grep -q "^sim $ns/alpha requests=" "$sim_out" || fail "no request counts at exit"
refused "http://$ipa:$pa/slots" || fail "alpha still served after the simulator exited"
start
wait_for 60 get -o /dev/null "http://$ipa:$pa/slots"
expect_eq "alpha Pod after the restart" "$w" "$(pod_in_phase alpha)"
expect_eq "alpha phase after the restart" Ready "$(isvc alpha '{.status.phase}')"
log "a Running Pod that lost its podIP gets one again"
stop
k patch pod "$g" --subresource=status --type=merge -p '{"status":{"podIP":null,"podIPs":null}}' >/dev/null
expect_eq "gamma podIP removed" "" "$(pod "$g" '{.status.podIP}')"
start
wait_for 60 has "$g" .status.podIP
wait_for 30 get -o /dev/null "http://$(pod "$g" '{.status.podIP}'):$pc/idle"

log "the state lines tell the story in order"
expect_eq "alpha's first Pod, line by line" \
	"Pending - Running $ipa_first Terminating $ipa_first Gone -" \
	"$(sed -n "s/^sim $ns\/alpha pod=$a state=\([A-Za-z]*\) ip=\([0-9.-]*\) busy=.*/\1 \2/p" "$sim_out" | uniq | paste -sd ' ' -)"
grep -q "^sim $ns/beta pod=$b state=Failed ip=- busy=false\$" "$sim_out" || fail "no line for beta's eviction"
grep -q "^sim $ns/beta phase=Failed ready=0 holding=0\$" "$sim_out" || fail "no member line for beta Failed"
# alpha reported Stopped while its first Pod still held the GPU, before that Pod was gone.
stopped=$(grep -n "^sim $ns/alpha phase=Stopped ready=0 holding=1\$" "$sim_out" | head -n 1 | cut -d: -f1)
gone=$(grep -n "^sim $ns/alpha pod=$a state=Gone " "$sim_out" | head -n 1 | cut -d: -f1)
[ -n "$stopped" ] && [ -n "$gone" ] && [ "$stopped" -lt "$gone" ] ||
	fail "alpha was not Stopped while $a still held the GPU:"$'\n'"$(grep "^sim $ns/alpha " "$sim_out")"

log "scale everything to 0 and stop"
k scale isvc/alpha isvc/beta isvc/gamma --replicas=0 >/dev/null
for m in alpha beta gamma; do
	wait_for 60 no_pods "$m"
	wait_for 60 phase_is "$m" Stopped
done
stop

# Issue 19: the operator agrees with the real member controller where a user meets it on day one.
#  1. The probe port: a member with spec.containerPort 9090 beside the endpoint.port 8080 that the
#     CRD fills in listens on 9090 (as its Deployment does); its swap out completes, never
#     IdleCheckFailed on 8080.
#  2. A cold pool over members created the usual way (replicas unset, so 1): one serves, two wait
#     for the GPU. The pool keeps the one that serves, holds the waiting ones at 0, and never swaps
#     away from it (no SwapStarted to the waiting ones, its Pod never deleted).
#  3. A user scaling the loading target to 0 cancels the swap: the operator does not write 1 back,
#     and says so (a SwapCancelled Warning); a later request swaps as usual.
#  4. Every API request of the operator names it (User-Agent): managedFields show it as the manager
#     of the members' replicas.
ns=member-ctl
operator_up --slot-check --finalizer --terminate-ms 200 --load-ms 300


log "(1) m-a listens on containerPort 9090, its endpoint.port is the CRD's 8080"
create_members "$ns" m-a m-b
kubectl_admin -n "$ns" patch isvc m-a --type=merge -p '{"spec":{"containerPort":9090}}' >/dev/null
expect_eq "m-a's ports" "9090/8080" "$(isvc_get m-a '{.spec.containerPort}/{.spec.endpoint.port}' "$ns")"
create_pool "$ns" pool m-a m-a m-b
wait_for 60 pool_is pool Ready m-a "$ns"
port=$(kubectl_admin -n "$ns" get pods -l inference.llmkube.dev/service=m-a \
	-o 'jsonpath={.items[0].spec.containers[0].ports[0].containerPort}')
expect_eq "the port m-a's Pod declares" 9090 "$port"
kubectl_admin -n "$ns" scale isvc m-b --replicas=1 >/dev/null
wait_for 60 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"
[ "$(event_count pool Warning/SwapDeferred "$ns")" == 0 ] ||
	fail "m-a's idle probe failed: $(pool_events pool "$ns" | tr '\n' ' ')"

log "(4) the operator is the manager of the replicas it wrote"
managers=$(isvc_get m-a '{range .metadata.managedFields[*]}{.manager}{" "}{end}' "$ns")
grep -qw modelpool-operator <<<"$managers" || fail "managedFields of m-a name no modelpool-operator: $managers"

log "(2) a cold pool over members with default replicas: c-b serves, c-a and c-c wait for the GPU"
# Created waiting (annotated from the start): annotated afterwards, a Pod could load before it was read.
for name in c-a c-b c-c; do
	waiting=true
	[ "$name" = c-b ] && waiting=false
	kubectl_admin -n "$ns" apply -f - >/dev/null <<-YAML
		apiVersion: inference.llmkube.dev/v1alpha1
		kind: InferenceService
		metadata:
		  name: $name
		  annotations: {sim.modelpool.test/waiting-for-gpu: "$waiting"}
		spec: {modelRef: $name, runtime: llamacpp}
	YAML
done
wait_for 60 member_phase_is c-b Ready "$ns"
wait_for 60 member_phase_is c-a WaitingForGPU "$ns"
wait_for 60 member_phase_is c-c WaitingForGPU "$ns"
serving=$(live_pods c-b "$ns")
create_pool "$ns" cold c-a c-a c-b c-c
wait_for 60 pool_is cold Ready c-b "$ns"
wait_for 30 replicas_are c-a 0 "$ns"
wait_for 30 replicas_are c-c 0 "$ns"
replan_barrier cold "$ns"
expect_sole_resident cold c-b "$ns"
expect_eq "c-b's Pod (never restarted)" "$serving" "$(live_pods c-b "$ns")"
expect_eq "c-b's replicas (the CRD's default)" 1 "$(member_replicas c-b "$ns")"
! grep 'scale pool=.*member=c-b ' "$MP_STATE_DIR/operator.log" || fail "the operator scaled c-b"
started=$(pool_events cold "$ns" | grep -c SwapStarted || true)
[ "$started" -le 1 ] || fail "the cold pool swapped $started times: $(pool_events cold "$ns" | tr '\n' ' ')"
expect_eq "status members releasing" "" "$(pool_get cold '{.status.members[?(@.releasing==true)].name}' "$ns")"

log "(3) the loading target scaled to 0 by its user: the swap is cancelled, not fought"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc m-a --replicas=1 >/dev/null
wait_for 60 condition_is pool Swapping True/Loading "$ns"
ups=$(grep -c 'member=m-a replicas=1' "$MP_STATE_DIR/operator.log" || true)
kubectl_admin -n "$ns" scale isvc m-a --replicas=0 >/dev/null
wait_for 60 pool_is pool Ready m-a "$ns"
wait_for 30 events_more pool Warning/SwapCancelled 0 "$ns"
replan_barrier pool "$ns"
expect_eq "m-a's replicas after the cancel" 0 "$(member_replicas m-a "$ns")"
wait_for 30 no_live_pods m-a "$ns"
expect_eq "m-b's replicas after the cancel" 0 "$(member_replicas m-b "$ns")"
expect_eq "SwapCancelled Warnings" 1 "$(event_count pool Warning/SwapCancelled "$ns")"
expect_eq "the operator's scale-ups of m-a since its user's 0" "$ups" \
	"$(grep -c 'member=m-a replicas=1' "$MP_STATE_DIR/operator.log" || true)"

log "a request after the cancel swaps as usual"
kubectl_admin -n "$ns" scale isvc m-b --replicas=1 >/dev/null
wait_for 60 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"

stop_operator
stop_slot_check

# Issue 28, the operator's half of acknowledged swaps (include/api/fence.h, "Operator"): with the router Leases
# of modelpool-system watched (--router-lease-namespace; --fence-acks is the default), a swap's resident is
# probed before its drain fence is over once every router Lease acknowledges the swap, and not while one does
# not. Routers are stood in for by Leases made with kubectl as admin, as a router keeps its own: router-a
# acknowledges each swap once it sees it pending; router-b, added for the second swap, acknowledges nothing
# and has not expired, so that swap waits its whole fence (a lagging router still holds the operator to F),
# until it says it fronts another namespace's pools only (API_FRONTS_ANNOTATION), when router-a's
# acknowledgement is enough; with no router Lease at all the fence runs its course too (nothing says routers
# stopped). The fence is
# long (15 s) so an acknowledgement written after the swap is seen pending always lands inside it. Checked: modelpool_drain_fence_total{outcome} after
# each swap, the operator's log, slot-check clean, and the operator's rights (config/rbac) enough to watch.
sys=modelpool-system
install_crds_and_samples
install_operator_rbac
start_slot_check
start_sim
start_operator --drain-fence 15s --router-lease-namespace "$sys"

# router_lease NAME: a router replica's Lease, as the router keeps it (label, a 10 s registration).
router_lease() {
	kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: $1
  namespace: $sys
  labels:
    modelpool-operator.dev/router: $1
spec:
  holderIdentity: $1
  leaseDurationSeconds: 10
EOF
}
# ack NAME MEMBER: the router NAME acknowledges the swap away from MEMBER (the pool's resident).
ack() {
	kubectl_admin -n "$sys" annotate lease "$1" "modelpool-operator.dev/fenced=default/shared-gpu=$2" --overwrite >/dev/null
}
fences() { metric_value "modelpool_drain_fence_total{outcome=\"$1\"}"; }
# swap_to MEMBER ACKERS...: requests MEMBER through the pool; once the pool shows it pending, each router
# named acknowledges the swap away from the resident; waits until MEMBER is resident.
swap_to() {
	local member=$1 resident r
	shift
	resident=$(pool_field shared-gpu residentMember)
	kubectl_admin annotate modelpool shared-gpu "modelpool-operator.dev/request=$member" --overwrite >/dev/null
	wait_for 30 pending_is shared-gpu "$member"
	for r in "$@"; do ack "$r" "$resident"; done
	wait_for 90 pool_is shared-gpu Ready "$member"
}

log "router-a registered; the sample pool warms llama-8b (nothing unloaded: no fence counted)"
router_lease router-a
wait_for 90 pool_is shared-gpu Ready llama-8b
wait_for 30 metric_value 'modelpool_drain_fence_total{outcome="waited"}'
expect_eq "fences after the warm-up" "0 0" "$(fences acknowledged) $(fences waited)"

log "a swap router-a acknowledges: the fence ends early"
swap_to qwen-7b router-a
expect_eq "fences after an acknowledged swap (acknowledged, waited)" "1 0" "$(fences acknowledged) $(fences waited)"
expect_eq "confirmations logged" 1 \
	"$(grep -c 'every router acknowledged the swap: its drain fence ends now' "$MP_STATE_DIR/operator.log")"

log "router-b registers and acknowledges nothing: the next swap waits its whole fence"
router_lease router-b
swap_to llama-8b router-a
expect_eq "fences after a swap router-b held (acknowledged, waited)" "1 1" "$(fences acknowledged) $(fences waited)"
expect_eq "confirmations logged" 1 \
	"$(grep -c 'every router acknowledged the swap: its drain fence ends now' "$MP_STATE_DIR/operator.log")"

log "router-b now fronts team-b's pools only (--namespace team-b): it does not count for this pool's swaps"
kubectl_admin -n "$sys" annotate lease router-b modelpool-operator.dev/fronts-namespace=team-b >/dev/null
swap_to qwen-7b router-a
expect_eq "fences after a swap a router of another namespace did not acknowledge (acknowledged, waited)" "2 1" \
	"$(fences acknowledged) $(fences waited)"

log "no router Lease at all: nothing says the routers stopped (one registered elsewhere would be unseen), the fence runs"
kubectl_admin -n "$sys" delete lease router-a router-b >/dev/null
swap_to llama-8b
expect_eq "fences after a swap with no router (acknowledged, waited)" "2 2" "$(fences acknowledged) $(fences waited)"

grep -q 'router Leases failed' "$MP_STATE_DIR/operator.log" &&
	fail "the operator could not watch the router Leases:"$'\n'"$(grep 'router Leases failed' "$MP_STATE_DIR/operator.log")"
sim_deleted_busy default llama-8b | grep -q . && fail "a busy llama-8b Pod was deleted"
stop_operator
stop_slot_check

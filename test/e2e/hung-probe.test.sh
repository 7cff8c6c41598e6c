# Issue 12 rule 6: one slow member never delays another pool. Pool A's incumbent hangs its idle
# probe (simulator annotation probe: hang: the connection is accepted, no answer comes), and the
# operator waits up to --probe-timeout 600s for it. A swap requested in A, then one in B: B
# completes (Ready, the new member resident) while A is still waiting on that probe (Swapping, no
# IdleCheckFailed yet). Released, the held probe is answered idle and A completes too.
# slot-check watches throughout.
ns=hung-probe
install_crds
install_operator_rbac
start_slot_check
start_sim --finalizer --load-ms 300
start_operator --probe-timeout 600s

create_members "$ns" a-1 a-2 b-1 b-2
create_pool "$ns" pool-a a-1 a-1 a-2
create_pool "$ns" pool-b b-1 b-1 b-2
wait_for 60 pool_is pool-a Ready a-1 "$ns"
wait_for 60 pool_is pool-b Ready b-1 "$ns"

held() { grep -cE "request held\"? member=$ns/a-1 " "$MP_STATE_DIR/sim.log" || true; }
probe_held() {
	local got
	got=$(held)
	echo "$got held probes of a-1"
	[ "$got" -gt 0 ]
}

log "a-1's idle probe hangs; a-2 is requested: the operator's probe of a-1 is held"
kubectl_admin -n "$ns" annotate isvc a-1 sim.modelpool.test/probe=hang --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc a-2 --replicas=1 >/dev/null
wait_for 30 pending_is pool-a a-2 "$ns"
wait_for 30 probe_held

log "b-2 is requested while a-1's probe hangs: pool-b completes its swap"
kubectl_admin -n "$ns" scale isvc b-2 --replicas=1 >/dev/null
wait_for 60 pool_is pool-b Ready b-2 "$ns"
expect_sole_resident pool-b b-2 "$ns"

log "meanwhile pool-a still waits on the probe: Swapping, a-1 resident, no IdleCheckFailed"
expect_eq "pool-a phase/resident/pending" Swapping/a-1/a-2 \
	"$(pool_field pool-a phase/residentMember/pendingMember "$ns")"
deferred=$(pool_condition pool-a SwapDeferred "$ns")
[ "$deferred" != True/IdleCheckFailed ] || fail "pool-a gave up on the probe: SwapDeferred $deferred"
expect_eq "Warning SwapDeferred Events of pool-a" 0 "$(event_count pool-a Warning/SwapDeferred "$ns")"
expect_eq "a-1 replicas" 1 "$(member_replicas a-1 "$ns")"
expect_eq "a-2 replicas" 0 "$(member_replicas a-2 "$ns")"
[ -n "$(live_pods a-1 "$ns")" ] || fail "a-1 lost its Pod while its probe was held"

log "the hang is released: the held probe is answered idle, and pool-a completes too"
kubectl_admin -n "$ns" annotate isvc a-1 sim.modelpool.test/probe- >/dev/null
wait_for 60 pool_is pool-a Ready a-2 "$ns"
expect_sole_resident pool-a a-2 "$ns"

stop_operator
stop_slot_check

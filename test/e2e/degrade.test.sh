# A pool that references a member which does not exist is Degraded with MembersValid=False naming
# it, and changes no replica (a valid cold pool with a default would warm it); creating the member
# makes the pool recover by itself, with no stale condition left. The same for a warm pool whose
# spec gains a missing member and for a member deleted under a warm pool.
ns=degrade
operator_up --slot-check --load-ms 300

# no_stale_conditions POOL RESIDENT: exactly the four conditions of a settled pool, and no message
# still naming a missing member.
no_stale_conditions() {
	expect_eq "conditions of $1" \
		"MembersValid=True/Valid SlotAllocated=True/Resident SwapDeferred=False/NotDeferred Swapping=False/NotSwapping" \
		"$(pool_conditions "$1" "$ns")"
	expect_eq "SlotAllocated message" "$2 holds the slot" "$(condition_message "$1" SlotAllocated "$ns")"
	local msgs
	msgs=$(pool_get "$1" '{range .status.conditions[*]}{.message}{"\n"}{end}' "$ns")
	! grep -q "not found" <<<"$msgs" || fail "a condition still names a missing member:"$'\n'"$msgs"
}
members_valid_names() {
	local got
	got=$(condition_message pool MembersValid "$ns")
	echo "$got"
	grep -q "InferenceService $1 not found in namespace $ns" <<<"$got"
}

log "a cold pool with a default and a missing member: Degraded, nothing warmed"
create_members "$ns" m-a m-b
create_pool "$ns" pool m-a m-a m-b m-missing
wait_for 60 pool_is pool Degraded "" "$ns"
wait_for 30 condition_is pool MembersValid False/MissingMembers "$ns"
members_valid_names m-missing >/dev/null || fail "MembersValid does not name m-missing: $(condition_message pool MembersValid "$ns")"
wait_for 30 events_more pool Warning/MissingMembers 0 "$ns"
replan_barrier pool "$ns"
expect_eq "phase after a re-plan" Degraded "$(pool_field pool phase "$ns")"
expect_eq "replicas m-a/m-b" 0/0 "$(member_replicas m-a "$ns")/$(member_replicas m-b "$ns")"
expect_eq "pendingMember of an invalid cold pool" "" "$(pool_field pool pendingMember "$ns")"
expect_eq "replica changes while Degraded" 0 "$(scale_lines pool "$ns")"
expect_eq "members[]" "m-a:Stopped:false m-b:Stopped:false m-missing::false" "$(pool_members pool "$ns")"
kubectl_admin -n "$ns" get modelpools | tee /dev/stderr | grep -Eq '^pool +sticky +Degraded' ||
	fail "kubectl get modelpools does not show the pool Degraded"
kubectl_admin -n "$ns" describe modelpool pool | grep_all "m-missing not found" ||
	fail "kubectl describe does not say which member is missing"

log "the member is created: the pool recovers by itself and warms its default"
create_members "$ns" m-missing
wait_for 30 condition_is pool MembersValid True/Valid "$ns"
wait_for 90 pool_is pool Ready m-a "$ns"
expect_sole_resident pool m-a "$ns"
no_stale_conditions pool m-a

log "a warm pool's spec gains a missing member: Degraded, the resident kept, nothing scaled"
scales=$(scale_lines pool "$ns")
[ "$scales" -gt 0 ] || fail "the warm-up logged no scale line: does scale_lines still match the log format?"
kubectl_admin -n "$ns" patch modelpool pool --type=json \
	-p '[{"op":"add","path":"/spec/members/-","value":{"inferenceServiceRef":{"name":"m-ghost"}}}]' >/dev/null
wait_for 30 observed_current pool "$ns"
expect_eq "phase/resident" Degraded/m-a "$(pool_field pool phase/residentMember "$ns")"
expect_eq "MembersValid" False/MissingMembers "$(pool_condition pool MembersValid "$ns")"
members_valid_names m-ghost >/dev/null || fail "MembersValid does not name m-ghost: $(condition_message pool MembersValid "$ns")"
expect_eq "m-a replicas" 1 "$(member_replicas m-a "$ns")"
expect_eq "replica changes while Degraded" "$scales" "$(scale_lines pool "$ns")"

log "m-ghost is dropped from the spec again: Ready, no stale condition"
kubectl_admin -n "$ns" patch modelpool pool --type=json -p '[{"op":"remove","path":"/spec/members/3"}]' >/dev/null
wait_for 30 observed_current pool "$ns"
wait_for 30 pool_is pool Ready m-a "$ns"
expect_sole_resident pool m-a "$ns"
no_stale_conditions pool m-a

log "a member is deleted under the warm pool, then created again"
kubectl_admin -n "$ns" delete isvc m-b >/dev/null
wait_for 30 condition_is pool MembersValid False/MissingMembers "$ns"
members_valid_names m-b >/dev/null || fail "MembersValid does not name m-b: $(condition_message pool MembersValid "$ns")"
expect_eq "phase/resident" Degraded/m-a "$(pool_field pool phase/residentMember "$ns")"
create_members "$ns" m-b
wait_for 30 pool_is pool Ready m-a "$ns"
wait_for 30 condition_is pool MembersValid True/Valid "$ns"
expect_sole_resident pool m-a "$ns"
no_stale_conditions pool m-a
expect_eq "replica changes after warming m-a" "$scales" "$(scale_lines pool "$ns")"

stop_operator
stop_slot_check

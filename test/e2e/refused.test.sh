# Issue 12 rule 5: a replica write the API server refuses for a reason other than a failed
# precondition is reported. A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) forbids
# changing spec.replicas of the resident m-a; a request for m-b needs m-a scaled to 0. The pool
# gets SwapDeferred=True/WriteRefused naming m-a with the policy's message, and one Warning Event
# WriteRefused for the episode however often the write is retried; m-b stays held at 0. Once the
# policy is deleted the swap completes. slot-check watches throughout.
ns=refused
msg="replicas of m-a are frozen by policy freeze-m-a"
operator_up --slot-check --finalizer --load-ms 1000

pool_ready "$ns" pool m-a m-a m-b

log "a ValidatingAdmissionPolicy forbids changing m-a's replicas"
kubectl_admin apply -f - >/dev/null <<-YAML
	apiVersion: admissionregistration.k8s.io/v1
	kind: ValidatingAdmissionPolicy
	metadata:
	  name: freeze-m-a
	spec:
	  failurePolicy: Fail
	  matchConstraints:
	    resourceRules:
	      - apiGroups: [inference.llmkube.dev]
	        apiVersions: ["*"]
	        operations: [UPDATE]
	        resources: [inferenceservices, inferenceservices/scale]
	  matchConditions:
	    - name: m-a-only
	      expression: 'request.namespace == "$ns" && request.name == "m-a"'
	  validations:
	    - expression: 'object.spec.replicas == oldObject.spec.replicas'
	      message: "$msg"
	---
	apiVersion: admissionregistration.k8s.io/v1
	kind: ValidatingAdmissionPolicyBinding
	metadata:
	  name: freeze-m-a
	spec:
	  policyName: freeze-m-a
	  validationActions: [Deny]
YAML
# The API server enforces a new policy a moment after it is created: wait until a dry run is denied.
expect_denied() {
	expect_fail "$msg" kubectl_admin -n "$ns" patch isvc m-a --type=merge -p '{"spec":{"replicas":0}}' --dry-run=server
}
wait_for 60 expect_denied

log "m-b is requested: m-a cannot be scaled down, and the pool says why"
kubectl_admin -n "$ns" scale isvc m-b --replicas=1 >/dev/null
wait_for 60 condition_is pool SwapDeferred True/WriteRefused "$ns"
got=$(condition_message pool SwapDeferred "$ns")
grep -qw m-a <<<"$got" || fail "SwapDeferred does not name m-a: $got"
grep -qF "$msg" <<<"$got" || fail "SwapDeferred does not carry the policy's message: $got"
wait_for 30 events_more pool Warning/WriteRefused 0 "$ns"
event_messages pool WriteRefused "$ns" | grep_all -F "$msg" || fail "the WriteRefused Event does not carry the policy's message"
expect_eq "pending" m-b "$(pool_field pool pendingMember "$ns")"
expect_eq "m-a replicas" 1 "$(member_replicas m-a "$ns")"
wait_for 30 replicas_are m-b 0 "$ns"
# Retried (with backoff) while the policy stands, but reported once: wait for two more refused
# PATCHes (the operator's own request counter), then count the Events.
refused_patches() {
	scrape | awk '$1 ~ /^modelpool_api_requests_total\{verb="PATCH",code="[^2]/ {s += $2} END {print s + 0}'
}
seen=$(refused_patches)
[ "$seen" -gt 0 ] || fail "no refused PATCH counted in /metrics"
more_refusals() {
	local got
	got=$(refused_patches)
	echo "$got refused PATCHes, $seen before"
	[ "$got" -ge $((seen + 2)) ]
}
wait_for 60 more_refusals
replan_barrier pool "$ns"
expect_eq "Warning WriteRefused Events for one episode" 1 "$(event_count pool Warning/WriteRefused "$ns")"
expect_eq "SwapDeferred while refused" True/WriteRefused "$(pool_condition pool SwapDeferred "$ns")"

log "the policy is deleted: the swap completes"
kubectl_admin delete validatingadmissionpolicybinding freeze-m-a >/dev/null
kubectl_admin delete validatingadmissionpolicy freeze-m-a >/dev/null
wait_for 90 pool_is pool Ready m-b "$ns"
expect_sole_resident pool m-b "$ns"
wait_for 30 condition_is pool SwapDeferred False/NotDeferred "$ns"
expect_eq "Warning WriteRefused Events" 1 "$(event_count pool Warning/WriteRefused "$ns")"

stop_operator
stop_slot_check

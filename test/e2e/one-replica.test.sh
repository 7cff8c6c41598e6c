# Issue 12 rule 2: a pooled member never runs more than one replica. (1) The resident of a warm pool
# scaled to 2 by a user, and (2) a member already at 2 replicas adopted by a cold pool, are brought
# back to 1, and the pool says so: a condition message naming the member and its replicas, and one
# Warning Event TooManyReplicas. The member controller (the simulator, as a ReplicaSet) starts the
# second Pod at once; it loads slowly here (load-ms) so that scaling back to 1 removes it before it
# runs, and slot-check, watching the whole test, sees no two Pods holding a slot.
ns=one-replica
operator_up --slot-check --finalizer --load-ms 300

create_members "$ns" m-a m-b m-c m-d
create_pool "$ns" pool m-a m-a m-b
wait_for 60 pool_is pool Ready m-a "$ns"
expect_sole_resident pool m-a "$ns"

pods_of() {
	kubectl_admin -n "$ns" get pods -l "inference.llmkube.dev/service=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name}{" "}{end}' | sed 's/ $//'
}
pods_are() {
	local got
	got=$(pods_of "$1")
	echo "$got"
	[ "$got" == "$2" ]
}
# watch_conditions POOL: from now on, every version of POOL written to the API server, in
# watch-POOL.json: a raw watch from the list's current resourceVersion, so no version written after
# this call is missed (the pool need not exist yet). The message saying "too many replicas" may be
# replaced as soon as the member is back at 1. Prints the watch's pid.
watch_conditions() {
	local rv
	rv=$(kubectl_admin -n "$ns" get modelpools -o 'jsonpath={.metadata.resourceVersion}')
	kubectl_admin get --raw "/apis/inference.llmkube.dev/v1alpha1/namespaces/$ns/modelpools?watch=true&resourceVersion=$rv&fieldSelector=metadata.name%3D$1" \
		>"$MP_STATE_DIR/watch-$1.json" 2>&1 &
	echo $!
}
# conditions_seen POOL: every version of its conditions the watch saw, as "Type|Reason|Message".
conditions_seen() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    for c in ((ev.get("object") or {}).get("status") or {}).get("conditions") or []:
        print("%s|%s|%s" % (c.get("type"), c.get("reason"), c.get("message")))
' "$MP_STATE_DIR/watch-$1.json"
}
# said_too_many POOL MEMBER REPLICAS: some version of SlotAllocated or SwapDeferred named the member
# and its replicas.
said_too_many() {
	local lines
	lines=$(conditions_seen "$1" | grep -E '^(SlotAllocated|SwapDeferred)\|' | grep -w -- "$2" | grep -w -- "$3" || true)
	echo "${lines:-no condition named $2 with $3 replicas}"
	[ -n "$lines" ]
}

log "(1) the resident m-a is scaled to 2 by a user: back to 1, its first Pod kept, the pool says so"
first=$(pods_of m-a)
watcher=$(watch_conditions pool)
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc m-a --replicas=2 >/dev/null
wait_for 30 replicas_are m-a 1 "$ns"
wait_for 30 pods_are m-a "$first"
wait_for 30 events_more pool Warning/TooManyReplicas 0 "$ns"
wait_for 30 said_too_many pool m-a 2
kill "$watcher"
replan_barrier pool "$ns"
expect_eq "Warning TooManyReplicas Events for one episode" 1 "$(event_count pool Warning/TooManyReplicas "$ns")"
event_messages pool TooManyReplicas "$ns" | grep_all -w m-a || fail "the TooManyReplicas Event does not name m-a"
expect_sole_resident pool m-a "$ns"
kubectl_admin -n "$ns" annotate isvc m-a sim.modelpool.test/load-ms- >/dev/null

log "(2) m-c runs 2 replicas before any pool claims it; a cold pool adopts it and brings it to 1"
kubectl_admin -n "$ns" scale isvc m-c --replicas=1 >/dev/null
wait_for 60 member_phase_is m-c Ready "$ns"
first=$(pods_of m-c)
kubectl_admin -n "$ns" annotate isvc m-c sim.modelpool.test/load-ms=600000 --overwrite >/dev/null
kubectl_admin -n "$ns" scale isvc m-c --replicas=2 >/dev/null
two_pods() { [ "$(pods_of m-c | wc -w)" -eq 2 ]; }
wait_for 30 two_pods
watcher=$(watch_conditions cold)
create_pool "$ns" cold "" m-c m-d
wait_for 30 replicas_are m-c 1 "$ns"
wait_for 30 pods_are m-c "$first"
wait_for 60 pool_is cold Ready m-c "$ns"
wait_for 30 events_more cold Warning/TooManyReplicas 0 "$ns"
wait_for 30 said_too_many cold m-c 2
kill "$watcher"
replan_barrier cold "$ns"
expect_eq "Warning TooManyReplicas Events of the cold pool" 1 "$(event_count cold Warning/TooManyReplicas "$ns")"
expect_sole_resident cold m-c "$ns"

stop_operator
stop_slot_check

#!/usr/bin/env bash
# Our API client and informer (through test/tools/informer-dump) on the real kube-apiserver and etcd: a paged
# LIST, watch events, a watch resumed across an apiserver crash, and a 410 (a key deleted in etcd and etcd
# compacted while the apiserver was down) healed by exactly one relist. Run by run-one.sh (lib.sh sourced).

dump=${MP_BUILD_DIR:?}/informer-dump
[ -x "$dump" ] || fail "no informer-dump at $dump (build the informer-dump target)"
ns=e2e-informer
total=120 page=50
# Not "out": lib.sh's wait_for has a local of that name, which would shadow ours inside it.
dump_out=$MP_STATE_DIR/informer-dump.out
dump_err=$MP_STATE_DIR/informer-dump.err
dump_pid="" sel_pid=""

# On failure, the dump's own lines are the evidence; a dump left SIGSTOPped would ignore the group's
# SIGTERM, so it is continued first.
on_exit() {
	local rc=$?
	if [ -n "$dump_pid" ]; then
		kill -CONT "$dump_pid" 2>/dev/null || true
		kill -TERM "$dump_pid" 2>/dev/null || true
	fi
	[ -z "$sel_pid" ] || kill -TERM "$sel_pid" 2>/dev/null || true
	[ "$rc" -eq 0 ] && return 0
	echo "----- informer-dump stdout (STATS lines left out) -----" >&2
	grep -v '^STATS ' "$dump_out" >&2 2>/dev/null || true
	echo "----- last STATS line -----" >&2
	grep '^STATS ' "$dump_out" 2>/dev/null | tail -n 1 >&2 || true
	echo "----- last 40 lines of informer-dump stderr -----" >&2
	tail -n 40 "$dump_err" >&2 2>/dev/null || true
}
trap on_exit EXIT

k() { kubectl_admin -n "$ns" "$@"; }

# since MARK: the dump's lines after line MARK (marks come from `lines`), i.e. one phase of the test.
lines() { wc -l <"$dump_out"; }
since() { tail -n "+$(($1 + 1))" "$dump_out"; }
# count MARK REGEX: how many of the phase's lines match the grep -E REGEX.
count() { since "$1" | grep -Ec -- "$2" || true; }
# dstat NAME: NAME's value in the latest STATS line (it follows every callback and every counter change).
dstat() { grep '^STATS ' "$dump_out" | tail -n 1 | grep -o " $1=[0-9]*" | cut -d= -f2; }
stat_is() {
	local got
	got=$(dstat "$1")
	echo "$1=$got"
	[ "$got" == "$2" ]
}
seen() { since "$1" | grep -Eq -- "$2"; }
# at_least N MARK REGEX: the phase has N or more matching lines (for wait_for, which re-runs it).
at_least() { [ "$(count "$2" "$3")" -ge "$1" ]; }

# etcd's v3 JSON gateway: keys and values are base64, 64-bit numbers are strings.
etcd_post() { curl -sS --max-time 10 -X POST "$MP_ETCD_URL/v3/$1" -d "$2"; }
b64() { printf '%s' "$1" | base64 -w0; }
json_field() { grep -o "\"$1\":\"[0-9]*\"" | head -n 1 | cut -d'"' -f4; }

log "setup: $total ConfigMaps in $ns (every 10th labelled picked=yes) before any informer starts"
kubectl_admin create namespace "$ns" >/dev/null
{
	echo '{"apiVersion": "v1", "kind": "List", "items": ['
	for i in $(seq 0 $((total - 1))); do
		labels=""
		[ $((i % 10)) -ne 0 ] || labels=', "labels": {"picked": "yes"}'
		printf '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%03d"%s}, "data": {"i": "%d"}}' \
			"$i" "$labels" "$i"
		[ "$i" -eq $((total - 1)) ] || echo ','
	done
	echo ']}'
} | k create -f - >/dev/null
expect_eq "ConfigMaps in $ns" "$total" "$(k get configmaps -o name | grep -c '^configmap/cm-')"
# The premise of the pagination check: the server really splits this LIST at $page items.
first_page=$(kubectl_admin get --raw "/api/v1/namespaces/$ns/configmaps?limit=$page")
grep -q '"continue":"[^"]' <<<"$first_page" || fail "a LIST with limit=$page has no continue token: $first_page"

log "(1) LIST in pages of $page: exactly the $total objects, one list, then SYNCED"
"$dump" --kubeconfig "$KUBECONFIG" --resource configmaps --namespace "$ns" --page-size "$page" \
	>"$dump_out" 2>"$dump_err" &
dump_pid=$!
wait_for 120 grep -qx SYNCED "$dump_out"
synced_at=$(grep -nx SYNCED "$dump_out" | head -n 1 | cut -d: -f1)
expect_eq "ADD lines before SYNCED" "$total" "$(head -n "$synced_at" "$dump_out" | grep -c '^ADD ')"
expect_eq "ADD lines for $ns before SYNCED" "$total" "$(head -n "$synced_at" "$dump_out" | grep -c "^ADD $ns/cm-[0-9]\{3\} rv=[0-9]\+$")"
expect_eq "distinct keys added" \
	"$(seq -f "$ns/cm-%03g" 0 $((total - 1)) | sort)" \
	"$(head -n "$synced_at" "$dump_out" | awk '$1 == "ADD" {print $2}' | sort -u)"
# The STATS line printed right after SYNCED.
expect_eq "STATS after SYNCED" "STATS lists=1 relists=0 restarts=0 events=0 errors=0" \
	"$(sed -n "$((synced_at + 1))p" "$dump_out" | grep -o '^STATS lists=[0-9]* relists=[0-9]* restarts=[0-9]* events=[0-9]* errors=[0-9]*')"
expect_eq "UPD/DEL/ERR lines so far" 0 "$(count 0 '^(UPD|DEL|ERR) ')"

log "(1b) a label selector, in pages of 5: only the $((total / 10)) labelled objects"
sel_out=$MP_STATE_DIR/informer-dump-selector.out
"$dump" --kubeconfig "$KUBECONFIG" --resource configmaps --namespace "$ns" --page-size 5 \
	--label-selector picked=yes >"$sel_out" 2>"$MP_STATE_DIR/informer-dump-selector.err" &
sel_pid=$!
wait_for 120 grep -qx SYNCED "$sel_out"
expect_eq "labelled keys added" "$(seq -f "$ns/cm-%03g" 0 10 $((total - 1)) | sort)" \
	"$(awk '$1 == "ADD" {print $2}' "$sel_out" | sort)"
kill -TERM "$sel_pid"
rc=0
wait "$sel_pid" || rc=$?
sel_pid=""
expect_eq "selector informer-dump exit status after SIGTERM" 0 "$rc"

log "(2) watch: create, patch and delete one ConfigMap"
mark=$(lines)
rv=$(k create configmap watched --from-literal=k=v1 -o 'jsonpath={.metadata.resourceVersion}')
wait_for 60 seen "$mark" "^ADD $ns/watched rv=$rv\$"
rv=$(k patch configmap watched --type merge -p '{"data": {"k": "v2"}}' -o 'jsonpath={.metadata.resourceVersion}')
wait_for 60 seen "$mark" "^UPD $ns/watched rv=$rv\$"
k delete configmap watched >/dev/null
wait_for 60 seen "$mark" "^DEL $ns/watched\$"
expect_eq "ADD lines in the watch phase" 1 "$(count "$mark" '^ADD ')"
expect_eq "UPD lines in the watch phase" 1 "$(count "$mark" '^UPD ')"
expect_eq "DEL lines in the watch phase" 1 "$(count "$mark" '^DEL ')"
expect_eq "ERR lines in the watch phase" 0 "$(count "$mark" '^ERR ')"
expect_eq "lists after the watch phase" 1 "$(dstat lists)"
expect_eq "relists after the watch phase" 0 "$(dstat relists)"

log "(3) resume: the apiserver crashes; an object created while the watch is down arrives after it is back"
mark=$(lines)
restarts0=$(dstat restarts) relists0=$(dstat relists)
stop_apiserver KILL
# The cut watch and at least one refused retry: the informer is backing off against a dead server.
wait_for 60 at_least 2 "$mark" '^ERR 0 -$'
# Frozen while the apiserver starts, the dump cannot re-watch before the object exists, and never sees a
# half-started server: it must get the object from the resumed watch.
kill -STOP "$dump_pid"
start_apiserver
rv=$(k create configmap while-down -o 'jsonpath={.metadata.resourceVersion}')
kill -CONT "$dump_pid"
wait_for 120 seen "$mark" "^ADD $ns/while-down rv=$rv\$"
restarts1=$(dstat restarts) relists1=$(dstat relists)
[ "$restarts1" -gt "$restarts0" ] || fail "watch restarts did not grow across the restart: $restarts0 -> $restarts1"
if [ "$relists1" == "$relists0" ]; then
	log "resumed from its resourceVersion without a relist (watch restarts $restarts0 -> $restarts1)"
else
	# Allowed only as client-go allows it: the new apiserver's watch cache starts past our version.
	seen "$mark" '^ERR 410 (Expired|Gone)$' ||
		fail "relisted across the restart ($relists0 -> $relists1) without a 410"
	expect_eq "relists across the restart (after a 410)" $((relists0 + 1)) "$relists1"
	log "the restart expired our resourceVersion: one 410 and one relist"
fi
expect_eq "ADD lines in the resume phase" 1 "$(count "$mark" '^ADD ')"
expect_eq "UPD/DEL lines in the resume phase" 0 "$(count "$mark" '^(UPD|DEL) ')"

log "(4) 410: with the apiserver down, one ConfigMap is deleted in etcd and etcd is compacted"
mark=$(lines)
relists0=$(dstat relists) lists0=$(dstat lists)
victim=cm-007
stop_apiserver KILL
resp=$(etcd_post kv/deleterange "{\"key\": \"$(b64 "/registry/configmaps/$ns/$victim")\"}")
expect_eq "keys deleted in etcd ($resp)" 1 "$(json_field deleted <<<"$resp")"
rev=$(json_field revision <<<"$resp") || fail "no revision in etcd's answer: $resp"
resp=$(etcd_post kv/compaction "{\"revision\": \"$rev\", \"physical\": true}")
json_field revision <<<"$resp" >/dev/null || fail "etcd compaction at $rev failed: $resp"
# Proof that the history before the delete is gone.
resp=$(etcd_post kv/range "{\"key\": \"$(b64 "/registry/configmaps/$ns/cm-000")\", \"revision\": \"$((rev - 1))\"}")
grep -q 'compacted' <<<"$resp" || fail "etcd still reads revision $((rev - 1)) after compacting at $rev: $resp"
# Frozen while the apiserver starts, so its first watch meets a ready server with our stale version:
# a 410, not a startup error.
kill -STOP "$dump_pid"
start_apiserver
kill -CONT "$dump_pid"
wait_for 120 seen "$mark" "^DEL $ns/$victim\$"
wait_for 120 stat_is relists $((relists0 + 1))
seen "$mark" '^ERR 410 (Expired|Gone)$' || fail "no 410 reported before the relist"
expect_eq "lists after the 410" $((lists0 + 1)) "$(dstat lists)"
expect_eq "DEL lines in the 410 phase" 1 "$(count "$mark" '^DEL ')"
expect_eq "ADD/UPD lines in the 410 phase (the other objects did not change)" 0 "$(count "$mark" '^(ADD|UPD) ')"

log "after the relist the watch goes on"
mark=$(lines)
rv=$(k create configmap after-relist -o 'jsonpath={.metadata.resourceVersion}')
wait_for 60 seen "$mark" "^ADD $ns/after-relist rv=$rv\$"
expect_eq "relists after the last event" $((relists0 + 1)) "$(dstat relists)"

log "SIGTERM: informer-dump frees everything (the sanitizer build checks for leaks) and exits 0"
kill -TERM "$dump_pid"
rc=0
wait "$dump_pid" || rc=$?
dump_pid=""
expect_eq "informer-dump exit status after SIGTERM" 0 "$rc"
if grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$dump_err" >&2; then
	fail "sanitizer report in informer-dump's stderr"
fi
log "ok"

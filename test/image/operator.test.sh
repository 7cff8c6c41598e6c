# The operator's image as the Deployment runs it, against the test control plane (sourced by
# test/e2e/run-one.sh after lib.sh; test/image/run.sh names the image in MP_IMAGE): host network, read-only root
# filesystem with no tmpfs, every capability dropped, no-new-privileges, the Deployment's memory limit, its
# args (leader election) and environment. Inside those limits it must sync its caches, serve /readyz, carry out
# a swap with the member simulator (deferring while the incumbent is busy: the idle probe reaches the
# simulator's Pods from the container) with no two members on the slot, and exit 0 on SIGTERM.
source "$MP_SOURCE_DIR/test/image/common.sh"
image_root
: "${MP_IMAGE:?operator.test.sh: MP_IMAGE must name the image (test/image/run.sh sets it)}"

manifest=$MP_SOURCE_DIR/config/manager/manager.yaml
# The Deployment's memory limit (resources.limits.memory, in Mi), its non-root user and its args, with the
# two listen addresses moved to loopback ports the kernel picks (the host network is shared with parallel
# tests; the "started" log line names the ports).
limit_mi=$(awk '/limits:/ { l = 1 } l && $1 == "memory:" { sub(/Mi$/, "", $2); print $2; exit }' "$manifest")
[[ "$limit_mi" =~ ^[0-9]+$ ]] || fail "no memory limit in Mi found in $manifest"
uid=$(sed -n 's/^ *runAsUser: *\([0-9]*\).*/\1/p' "$manifest")
mapfile -t args < <(awk '/^ *args:/ { on = 1; next } on && /^ *- / { sub(/^ *- */, ""); print; next } { on = 0 }' "$manifest" |
	sed -E 's/^(--(metrics|health-probe)-bind-address)=.*/\1=127.0.0.1:0/')
printf '%s\n' "${args[@]}" | grep_all -- '^--health-probe-bind-address=127.0.0.1:0$' ||
	fail "no --health-probe-bind-address in the args of $manifest: ${args[*]}"

install_crds_and_samples
install_operator_rbac
start_slot_check

# What a Pod of the Deployment gets: a kubeconfig (the embedded form: one file, readable by its user) in
# place of the ServiceAccount token, mounted read-only.
mkdir -m 0755 "$MP_STATE_DIR/container"
install -m 0644 "$MP_OPERATOR_KUBECONFIG_EMBEDDED" "$MP_STATE_DIR/container/kubeconfig"
name=mp-image-test-$$
trap 'image_podman rm -f -t 0 "$name" >/dev/null 2>&1 || true' EXIT
log "starting $MP_IMAGE as $name (memory limit ${limit_mi}Mi, args ${args[*]})"
# --read-only-tmpfs=false: Kubernetes' readOnlyRootFilesystem mounts no tmpfs either.
image_podman run --rm --name "$name" "${image_podman_opts[@]}" --network host \
	--read-only --read-only-tmpfs=false --cap-drop all --security-opt no-new-privileges \
	--memory "${limit_mi}m" --memory-swap "${limit_mi}m" \
	-e POD_NAME="$name" -e POD_NAMESPACE=modelpool-system -e POD_IP=127.0.0.1 \
	-v "$MP_STATE_DIR/container:/etc/modelpool:ro" \
	"$MP_IMAGE" --kubeconfig /etc/modelpool/kubeconfig -v 1 "${args[@]}" \
	>>"$MP_STATE_DIR/operator.log" 2>&1 &
MP_OPERATOR_PID=$!

log "the container's process has the limits it was given"
container_pid() {
	local p
	p=$(image_podman inspect --format '{{.State.Pid}}' "$name" 2>/dev/null) && [ "${p:-0}" -gt 0 ] && echo "$p"
}
wait_for 60 container_pid
pid=$(container_pid)
status=$(cat "/proc/$pid/status")
expect_eq "Uid (real, effective, saved, fs)" "$uid $uid $uid $uid" "$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' <<<"$status")"
expect_eq "effective capabilities" 0000000000000000 "$(awk '$1 == "CapEff:" { print $2 }' <<<"$status")"
expect_eq "bounding capabilities" 0000000000000000 "$(awk '$1 == "CapBnd:" { print $2 }' <<<"$status")"
expect_eq "NoNewPrivs" 1 "$(awk '$1 == "NoNewPrivs:" { print $2 }' <<<"$status")"
root_opts=$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | tail -n 1)
grep -qE '(^|,)ro(,|$)' <<<"$root_opts" || fail "the root filesystem is mounted '$root_opts', not read-only"
# The memory cgroup's limit (cgroup v1: memory.limit_in_bytes; v2: memory.max).
cg=$(awk -F: '$2 == "memory" || $2 == "" { print $3; exit }' "/proc/$pid/cgroup")
if [ -f "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes" ]; then
	memfile=/sys/fs/cgroup/memory$cg/memory.limit_in_bytes
else
	memfile=/sys/fs/cgroup$cg/memory.max
fi
expect_eq "memory limit ($memfile)" $((limit_mi * 1024 * 1024)) "$(cat "$memfile")"

log "it syncs its caches, serves /readyz and leads"
wait_for 60 grep -q "caches synced" "$MP_STATE_DIR/operator.log"
wait_for 60 operator_port health
health=$(operator_port health)
wait_for 60 curl -fsS "http://127.0.0.1:$health/readyz"
expect_eq "/readyz" ok "$(curl -fsS "http://127.0.0.1:$health/readyz")"
wait_for 60 kubectl_admin -n modelpool-system get lease modelpool-operator
expect_eq "lease holder" "$name" \
	"$(kubectl_admin -n modelpool-system get lease modelpool-operator -o 'jsonpath={.spec.holderIdentity}' | cut -c1-${#name})"

# The simulator only now: llama-8b is not serving yet, so the operator warms it (a swap) rather than
# adopting it, whichever of the two would have started first.
log "the pool warms its default member"
start_sim --load-ms 300
wait_for 90 pool_is shared-gpu Ready llama-8b
wait_for 30 events_more shared-gpu Normal/SwapCompleted 0

log "a swap, deferred while the incumbent is busy"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=true --overwrite >/dev/null
kubectl_admin scale isvc qwen-7b --replicas=1 >/dev/null
wait_for 60 condition_is shared-gpu SwapDeferred True/PodsBusy
expect_eq "incumbent replicas while busy" 1 "$(isvc_get llama-8b '{.spec.replicas}')"
kubectl_admin annotate isvc llama-8b sim.modelpool.test/busy=false --overwrite >/dev/null
wait_for 90 pool_is shared-gpu Ready qwen-7b
expect_sole_resident shared-gpu qwen-7b
wait_for 30 events_more shared-gpu Normal/SwapCompleted 1
expect_eq "SwapCompleted events (the warm-up and the swap)" 2 "$(event_count shared-gpu Normal/SwapCompleted)"

# Whatever the Deployment's args make of it (plain HTTP, or HTTPS with a self-signed certificate made at
# start), the metrics server answers from inside the locked-down container.
metrics_code() {
	local port code
	port=$(operator_port metrics) || return 1
	code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/metrics") || true
	[ "$code" != 000 ] || code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics") || true
	echo "$code"
	[ "$code" != 000 ]
}
wait_for 30 metrics_code
log "the metrics server answers: HTTP $(metrics_code)"
if [ -f "${memfile%/*}/memory.max_usage_in_bytes" ]; then
	log "peak memory charged to the container's cgroup: $(($(cat "${memfile%/*}/memory.max_usage_in_bytes") / 1024)) KiB"
fi

# SIGTERM as the kubelet sends it: to the container's process (podman kill), not to the podman client.
log "SIGTERM: the operator exits 0 on its own"
image_podman kill --signal TERM "$name" >/dev/null
rc=0
wait "$MP_OPERATOR_PID" || rc=$?
expect_eq "the container's exit status after SIGTERM" 0 "$rc"
grep -q ' stopped' "$MP_STATE_DIR/operator.log" || fail "no 'stopped' line: the operator did not shut down by itself"
stop_slot_check

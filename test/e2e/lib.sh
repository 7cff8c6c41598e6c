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
wait_for() {
	local deadline=$((SECONDS + $1)) out
	shift
	until out=$("$@" 2>&1); do
		[ "$SECONDS" -lt "$deadline" ] || fail "gave up after waiting for: $*"$'\n'"last output: $out"
		sleep 0.2
	done
}

kubectl_admin() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
kubectl_operator() { kubectl --kubeconfig "$MP_OPERATOR_KUBECONFIG" "$@"; }

# apply_crd FILE...: creates or updates CRDs as admin and waits until the API server serves them and
# discovery lists them (Established can come a moment earlier), so the next request for the kind does not
# race its registration.
apply_crd() {
	local f name
	for f in "$@"; do
		kubectl_admin apply -f "$f" >/dev/null
		kubectl_admin wait --for=condition=Established --timeout=60s -f "$f" >/dev/null
		for name in $(kubectl_admin get -f "$f" -o 'jsonpath={.metadata.name}{" "}'); do
			wait_for 60 kubectl_admin get "$name" --all-namespaces
		done
	done
}

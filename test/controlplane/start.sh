#!/usr/bin/env bash
# Starts a throwaway control plane (etcd + kube-apiserver, loopback only, ports picked at run time) in a
# state dir: a fresh CA and certs, kubeconfigs for three identities, $state/env; stop.sh ends it.
# Run it (`bash start.sh [STATE]` prints STATE) or source it and call `cp_start STATE`: sourced, the daemons
# stay children of the caller, so a ctest timeout (SIGKILL of the test's process tree) takes them too.
#
# Identities (client certificates, CN = user, O = groups):
#   admin     CN=modelpool-e2e-admin, O=system:masters                          -> $state/admin.kubeconfig
#   operator  CN=system:serviceaccount:modelpool-system:modelpool-operator,
#             O=system:serviceaccounts, O=system:serviceaccounts:modelpool-system -> $state/operator.kubeconfig
#   router    CN=system:serviceaccount:modelpool-system:modelpool-router, the same groups -> $state/router.kubeconfig
# The operator and the router carry their production ServiceAccounts' user names and groups, so RBAC that
# binds ServiceAccount modelpool-system/modelpool-operator (or modelpool-router) applies to them unchanged;
# they have no rights until granted (test/e2e/lib.sh install_operator_rbac, install_router_rbac).
# MP_APISERVER_EXTRA_ARGS (words split on blanks) are appended to kube-apiserver's flags (the
# benchmarks turn on an audit log with them). MP_APISERVER_AUDIT_POLICY names an audit policy file: the
# API server then writes its audit log to STATE/audit.log (the chaos run reads who wrote what, when).

cp_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

_cp_err() { echo "start.sh: $*" >&2; }

# Alive and not a zombie: a sourced caller may not have reaped a dead daemon yet.
_cp_alive() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ]
}

# A port nobody on this machine uses in any state (listening, connected, TIME_WAIT). Picked below the
# ephemeral range so an outgoing connection cannot grab it between the check and the bind; a parallel run
# can still race us to it, which the callers detect ("address already in use") and retry.
_cp_pick_port() {
	local p i
	for i in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		grep -qi ":$(printf %04X "$p") " /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$p"; return 0; }
	done
	_cp_err "no free port found"
	return 1
}

_cp_tail() {
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "----- last 40 lines of $f -----" >&2
		tail -n 40 "$f" >&2
	done
}

# _cp_cert PKI NAME SUBJECT EXTENSIONS...: EC key and a cert signed by the test CA.
_cp_cert() {
	local pki=$1 name=$2 subj=$3
	shift 3
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/$name.key" \
		-subj "$subj" 2>>"$pki/openssl.log" |
		openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
			-days 3650 -out "$pki/$name.crt" -extfile <(printf '%s\n' "basicConstraints=critical,CA:FALSE" \
			"keyUsage=critical,digitalSignature,keyEncipherment" "$@") 2>>"$pki/openssl.log"
}

_cp_pki() {
	local pki=$1
	mkdir -p "$pki" && chmod 700 "$pki" || return 1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/ca.key" \
		-out "$pki/ca.crt" -days 3650 -subj "/CN=modelpool-e2e-ca" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		2>>"$pki/openssl.log" &&
		_cp_cert "$pki" apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth" \
			"subjectAltName=IP:127.0.0.1,DNS:localhost" &&
		_cp_cert "$pki" admin "/O=system:masters/CN=modelpool-e2e-admin" "extendedKeyUsage=clientAuth" &&
		_cp_cert "$pki" operator "/O=system:serviceaccounts/O=system:serviceaccounts:modelpool-system/CN=system:serviceaccount:modelpool-system:modelpool-operator" \
			"extendedKeyUsage=clientAuth" &&
		_cp_cert "$pki" router "/O=system:serviceaccounts/O=system:serviceaccounts:modelpool-system/CN=system:serviceaccount:modelpool-system:modelpool-router" \
			"extendedKeyUsage=clientAuth" &&
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/sa.key" 2>>"$pki/openssl.log" &&
		openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>>"$pki/openssl.log"
}

# _cp_kubeconfig FILE SERVER PKI USER [embedded]: file-path form (certificate-authority, client-certificate,
# client-key); with "embedded", the same identity in the embedded form (*-data, base64), so a client's
# parser can be tested on both.
_cp_kubeconfig() {
	local file=$1 server=$2 pki=$3 user=$4 ca crt key
	if [ "${5:-}" = embedded ]; then
		ca="certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")"
		crt="client-certificate-data: $(base64 -w0 <"$pki/$user.crt")"
		key="client-key-data: $(base64 -w0 <"$pki/$user.key")"
	else
		ca="certificate-authority: $pki/ca.crt"
		crt="client-certificate: $pki/$user.crt"
		key="client-key: $pki/$user.key"
	fi
	cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: modelpool-e2e
  cluster:
    server: $server
    $ca
users:
- name: $user
  user:
    $crt
    $key
contexts:
- name: $user@modelpool-e2e
  context:
    cluster: modelpool-e2e
    user: $user
current-context: $user@modelpool-e2e
EOF
}

# _cp_wait PID DEADLINE CHECK...: polls CHECK until it passes (0), the process dies (2) or the deadline (3).
_cp_wait() {
	local pid=$1 deadline=$2
	shift 2
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		_cp_alive "$pid" || return 2
		[ "$SECONDS" -lt "$deadline" ] || return 3
		sleep 0.2
	done
}

# Readiness checks; they read etcd_port, apiserver_port and pki from cp_start's locals (dynamic scope).
# etcd's /health is 200 once it has a leader; the apiserver's /readyz waits for its bootstrap (RBAC roles).
_cp_etcd_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$etcd_port/health"; }
_cp_apiserver_ready() {
	curl -fsS --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
		"https://127.0.0.1:$apiserver_port/readyz"
}

# _cp_launch NAME LOG PIDFILE DEADLINE CHECK_URL_FN CMD...: starts a daemon on ports CMD's caller picked;
# returns 0 when ready, 10 when it died on a port clash (caller retries with new ports), 1 otherwise.
_cp_launch() {
	local name=$1 log=$2 pidfile=$3 deadline=$4 check=$5 pid rc=0
	shift 5
	"$@" </dev/null >"$log" 2>&1 &
	pid=$!
	echo "$pid" >"$pidfile"
	_cp_wait "$pid" "$deadline" "$check" || rc=$?
	case $rc in
	0) return 0 ;;
	2)
		wait "$pid" 2>/dev/null || true
		grep -q 'address already in use' "$log" && return 10
		_cp_err "$name exited before it was ready"
		;;
	*)
		_cp_err "$name not ready before the deadline (${MP_CP_TIMEOUT:-180}s)"
		;;
	esac
	_cp_tail "$log"
	return 1
}

# cp_start STATE: starts etcd and kube-apiserver in STATE, waits for readiness, writes STATE/env.
# On failure it stops whatever it started and returns non-zero.
cp_start() {
	local state=$1 bin pki deadline etcd_port apiserver_port etcd_url apiserver_url attempt rc
	local t0=$SECONDS
	mkdir -p "$state" && state=$(cd "$state" && pwd) || return 1
	bin=${MP_CONTROLPLANE_BIN:-}
	[ -n "$bin" ] || bin=$(bash "$cp_here/build.sh") || { _cp_err "build.sh failed"; return 1; }
	[ -x "$bin/etcd" ] && [ -x "$bin/kube-apiserver" ] || { _cp_err "no etcd/kube-apiserver in $bin"; return 1; }
	pki=$state/pki
	_cp_pki "$pki" || { _cp_err "certificate generation failed"; _cp_tail "$pki/openssl.log"; return 1; }
	# One deadline for the whole start; generous because 2 cores may also be compiling or running tests.
	deadline=$((SECONDS + ${MP_CP_TIMEOUT:-180}))

	for attempt in 1 2 3 4 5; do
		etcd_port=$(_cp_pick_port) || return 1
		rm -rf "$state/etcd"
		# The peer listener is never dialled (one member); port 0 lets the kernel pick it, so only the client
		# port can clash. The advertised peer URL is metadata that must only match --initial-cluster.
		rc=0
		_cp_launch etcd "$state/etcd.log" "$state/etcd.pid" "$deadline" _cp_etcd_ready \
			"$bin/etcd" --name=e2e --data-dir="$state/etcd" --unsafe-no-fsync \
			--listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
			--listen-peer-urls=http://127.0.0.1:0 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
			--initial-cluster=e2e=http://127.0.0.1:2380 --log-level=warn || rc=$?
		[ "$rc" -eq 10 ] || break
		_cp_err "etcd port $etcd_port taken, retrying"
	done
	[ "$rc" -eq 0 ] || { bash "$cp_here/stop.sh" "$state"; return 1; }
	etcd_url=http://127.0.0.1:$etcd_port

	for attempt in 1 2 3 4 5; do
		apiserver_port=$(_cp_pick_port) || { bash "$cp_here/stop.sh" "$state"; return 1; }
		rc=0
		_cp_launch kube-apiserver "$state/kube-apiserver.log" "$state/kube-apiserver.pid" "$deadline" \
			_cp_apiserver_ready \
			"$bin/kube-apiserver" --etcd-servers="$etcd_url" \
			--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$apiserver_port" \
			--cert-dir="$pki" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
			--client-ca-file="$pki/ca.crt" \
			--service-account-issuer=https://kubernetes.default.svc.cluster.local \
			--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
			--service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC --allow-privileged=true \
			--disable-admission-plugins=ServiceAccount --endpoint-reconciler-type=none \
			${MP_APISERVER_AUDIT_POLICY:+--audit-policy-file="$MP_APISERVER_AUDIT_POLICY"} \
			${MP_APISERVER_AUDIT_POLICY:+--audit-log-path="$state/audit.log" --audit-log-maxsize=0} \
			${MP_APISERVER_EXTRA_ARGS:-} || rc=$?
		[ "$rc" -eq 10 ] || break
		_cp_err "kube-apiserver port $apiserver_port taken, retrying"
	done
	[ "$rc" -eq 0 ] || { _cp_tail "$state/etcd.log"; bash "$cp_here/stop.sh" "$state"; return 1; }
	apiserver_url=https://127.0.0.1:$apiserver_port

	_cp_kubeconfig "$state/admin.kubeconfig" "$apiserver_url" "$pki" admin
	_cp_kubeconfig "$state/operator.kubeconfig" "$apiserver_url" "$pki" operator
	_cp_kubeconfig "$state/operator-embedded.kubeconfig" "$apiserver_url" "$pki" operator embedded
	_cp_kubeconfig "$state/router.kubeconfig" "$apiserver_url" "$pki" router
	{
		printf 'export KUBECONFIG=%q\n' "$state/admin.kubeconfig"
		printf 'export MP_OPERATOR_KUBECONFIG=%q\n' "$state/operator.kubeconfig"
		printf 'export MP_OPERATOR_KUBECONFIG_EMBEDDED=%q\n' "$state/operator-embedded.kubeconfig"
		printf 'export MP_OPERATOR_USER=%q\n' "system:serviceaccount:modelpool-system:modelpool-operator"
		printf 'export MP_OPERATOR_SA_NAMESPACE=modelpool-system MP_OPERATOR_SA_NAME=modelpool-operator\n'
		printf 'export MP_ROUTER_KUBECONFIG=%q\n' "$state/router.kubeconfig"
		printf 'export MP_ROUTER_USER=%q\n' "system:serviceaccount:modelpool-system:modelpool-router"
		printf 'export MP_APISERVER_URL=%q\n' "$apiserver_url"
		printf 'export MP_CA_FILE=%q\n' "$pki/ca.crt"
		printf 'export MP_ETCD_URL=%q\n' "$etcd_url"
		printf 'export MP_ETCD_PID=%q\n' "$(cat "$state/etcd.pid")"
		printf 'export MP_APISERVER_PID=%q\n' "$(cat "$state/kube-apiserver.pid")"
		printf 'export MP_CONTROLPLANE_BIN=%q\n' "$bin"
	} >"$state/env"
	echo "start.sh: control plane ready in $((SECONDS - t0)) s at $apiserver_url (state $state)" >&2
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	state=${1:-$(mktemp -d "${TMPDIR:-/tmp}/mp-cp.XXXXXX")}
	cp_start "$state" || exit 1
	echo "$state"
fi

#!/usr/bin/env bash
# The chaos run's entry (ctest chaos.short, or by hand for the long mode): a control plane with an audit
# log and a low request limit without priority and fairness (so the API server answers 429), then
# chaos.test.sh under test/e2e/run-one.sh. MP_CHAOS_MODE=long (or the first argument `long`) is the
# benchmark machine's run; MP_CHAOS_SEED replays a schedule. Needs MP_BUILD_DIR (a build of this tree).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "${1:-}" != long ] || export MP_CHAOS_MODE=long
export MP_APISERVER_AUDIT_POLICY=$here/audit-policy.yaml
export MP_APISERVER_EXTRA_ARGS="--enable-priority-and-fairness=false --max-requests-inflight=${MP_CHAOS_INFLIGHT:-12} --max-mutating-requests-inflight=${MP_CHAOS_MUTATING_INFLIGHT:-6}"
# Built here (cached), before run-one.sh moves HOME.
MP_TOXIPROXY=$(bash "$here/../controlplane/build-toxiproxy.sh")
export MP_TOXIPROXY
exec bash "$here/../e2e/run-one.sh" "$here/chaos.test.sh"

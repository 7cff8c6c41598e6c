# The start of a chart test that needs no cluster (lint.sh, drift.sh), sourced with the test's name:
# MP_SOURCE_DIR (default: this checkout), a scratch MP_STATE_DIR removed on exit (also in $s), then
# test/e2e/lib.sh and lib.sh, and helm_setup.
# Usage: source test/helm/standalone.sh NAME
export MP_SOURCE_DIR=${MP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
MP_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mp-helm-$1.XXXXXX")
export MP_STATE_DIR
trap 'rm -rf "$MP_STATE_DIR"' EXIT
# shellcheck source=../e2e/lib.sh
source "$MP_SOURCE_DIR/test/e2e/lib.sh"
# shellcheck source=lib.sh
source "$MP_SOURCE_DIR/test/helm/lib.sh"
helm_setup
s=$MP_STATE_DIR

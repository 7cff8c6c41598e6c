#!/usr/bin/env bash
# The ctest entry for a chart test against the test control plane: finds (or builds) helm while HOME is
# still the real one (its cache lives under HOME), then runs the test like any e2e test (test/e2e/run-one.sh).
# Usage: MP_SOURCE_DIR=<repo> MP_BUILD_DIR=<build> bash test/helm/run-one.sh /abs/path/NAME.test.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MP_HELM=$(bash "$here/../controlplane/build-helm.sh")
export MP_HELM
exec bash "$here/../e2e/run-one.sh" "$@"

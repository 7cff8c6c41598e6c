#!/usr/bin/env bash
# The test command: installs what is missing, builds the test control plane (cached), builds the
# operator with ASan+UBSan and -Werror, and runs every test through ctest (unit, CLI, end to end).
# Extra arguments go to ctest, e.g. `scripts/test.sh -L unit` or `-R e2e.swap`.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MP_BUILD_DIR:-$top/build/sanitize}

bash "$top/scripts/bootstrap.sh"
bash "$top/test/controlplane/build.sh" >/dev/null
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DMP_SANITIZE=ON -DMP_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure --no-tests=error "$@"

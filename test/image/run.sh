#!/usr/bin/env bash
# ctest image.run: the image test/image/build.sh built, run against a fresh test control plane by
# test/e2e/run-one.sh (test/image/operator.test.sh). Skipped (77) before any control plane starts when podman
# cannot run or the image is missing because image.build was skipped.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
: "${MP_BUILD_DIR:?run.sh: MP_BUILD_DIR must name the build dir}"
image_require_tools
MP_IMAGE=$(image_tag "$MP_BUILD_DIR")
image_podman image exists "$MP_IMAGE" || image_skip "no image $MP_IMAGE: image.build did not build it (skipped?)"
export MP_IMAGE
exec bash "$here/../e2e/run-one.sh" "$here/operator.test.sh"

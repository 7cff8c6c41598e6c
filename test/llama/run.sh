#!/usr/bin/env bash
# ctest llama.NAME: one real-server test (test/llama/NAME.test.sh) under test/e2e/run-one.sh, with
# MP_LLAMA_SERVER and MP_LLAMA_MODEL (the tiny model) exported. Both come from the cache (build.sh,
# model.sh; the llama.build test makes them first); skipped (77, with the reason) before any control
# plane starts where llama-server cannot be built here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=${1:?usage: run.sh /abs/path/NAME.test.sh}
# Before run-one.sh moves HOME (the cache lives under it).
MP_LLAMA_MODEL=$(bash "$here/model.sh" tiny)
MP_LLAMA_SERVER=$(bash "$here/build.sh")
export MP_LLAMA_MODEL MP_LLAMA_SERVER
exec bash "$here/../e2e/run-one.sh" "$script"

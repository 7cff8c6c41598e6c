#!/usr/bin/env bash
# bench/llama.sh: what the operator and the router cost around a real llama.cpp server (issue 29), against a
# real kube-apiserver + etcd on loopback, member-sim running real llama-server Pods (test/llama) with the
# big random-weight model (test/llama/model.sh big, about 340 MB, so a load takes a real while):
#  1. the server's own load time: llama-server started by hand, until /health answers 200;
#  2. swaps between two members through the pool (the router's request annotation): from the request to the
#     pool Ready with the target, less the target server's own load (its start to its /health 200, from the
#     simulator's log): the swap's overhead;
#  3. the router's added latency: chat completions (max_tokens 1, keep-alive) to the resident's Pod directly
#     and through modelpool-router, alternating.
# Writes $BENCH_OUT/llama-results.md (bench/ by default) with the machine and the commit.
# Environment: BENCH_BUILD (build/bench), BENCH_OUT (bench/), BENCH_LOADS (5), BENCH_SWAPS (6),
# BENCH_REQUESTS (200 per target). Heavy: run nothing else alongside.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
build=${BENCH_BUILD:-$src/build/bench}
export BENCH_OUT=${BENCH_OUT:-$here} BENCH_LOADS=${BENCH_LOADS:-5} BENCH_SWAPS=${BENCH_SWAPS:-6}
export BENCH_REQUESTS=${BENCH_REQUESTS:-200}
export MP_SOURCE_DIR=$src MP_BUILD_DIR=$build
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$src" diff --quiet HEAD -- src include test 2>/dev/null || commit+="+changes"
export BENCH_COMMIT=$commit
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 --target modelpool-operator modelpool-router member-sim slot-check >/dev/null
MP_LLAMA_SERVER=$(bash "$src/test/llama/build.sh")
MP_LLAMA_MODEL=$(bash "$src/test/llama/model.sh" big)
export MP_LLAMA_SERVER MP_LLAMA_MODEL
exec bash "$src/test/e2e/run-one.sh" "$here/llama.bench.sh"

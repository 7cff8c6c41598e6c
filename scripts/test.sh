#!/usr/bin/env bash
# The test command: installs what is missing, builds the test control plane, helm, toxiproxy and llama.cpp's
# llama-server with its tiny test model (all cached), then
#  1. builds with ASan+UBSan and -Werror and runs every ctest test (unit, CLI, end to end, Helm chart,
#     the container image: skipped, with the reason printed, where podman cannot run);
#  2. runs the unit tests under valgrind (a plain build), where a leak or bad read is a failure;
#  3. builds the libFuzzer targets with clang and runs each for MP_FUZZ_SECONDS (default 30), from its seed
#     corpus in test/fuzz/corpus/<fuzzer>/ where there is one.
# With arguments, only step 1 runs and the arguments go to ctest (e.g. `-L unit`, `-R e2e.swap`).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${MP_BUILD_ROOT:-$top/build}
jobs=$(nproc)

step() { echo "=== test.sh: $*" >&2; }

bash "$top/scripts/bootstrap.sh"
step "test control plane, helm and toxiproxy (built once, then cached)"
bash "$top/test/controlplane/build.sh" >/dev/null
bash "$top/test/controlplane/build-helm.sh" >/dev/null
bash "$top/test/controlplane/build-toxiproxy.sh" >/dev/null
# The real model server of the llamacpp tests: about 10 minutes on 2 cores when not cached, never -j more
# than MP_LLAMA_JOBS (2), niced. Where it cannot be built here, its tests are skipped (77) and say why.
start=$SECONDS
llama_rc=0
bash "$top/test/llama/model.sh" tiny >/dev/null || llama_rc=$?
case $llama_rc in
0) step "llama-server and its test model ready in $((SECONDS - start)) s" ;;
77) step "llama-server cannot be built here: the llamacpp tests will be skipped" ;;
*) exit "$llama_rc" ;;
esac

step "sanitizer build and ctest"
cmake -S "$top" -B "$out/sanitize" -DCMAKE_BUILD_TYPE=Debug -DMP_SANITIZE=ON -DMP_WERROR=ON >/dev/null
cmake --build "$out/sanitize" -j"$jobs"
rc=0
(cd "$out/sanitize" && ctest --output-on-failure --no-tests=error "$@") || rc=$?
# ctest lists a skipped test without its reason: show the SKIP line each one printed (test/image does).
awk '/^"[^"]*" start time:/ { name = $1 } /^SKIP: / { print "=== test.sh: skipped " name ": " substr($0, 7) }' \
	"$out/sanitize/Testing/Temporary/LastTest.log" >&2 2>/dev/null || true
[ "$rc" -eq 0 ] || exit "$rc"
[ $# -eq 0 ] || exit 0

step "unit tests under valgrind"
cmake -S "$top" -B "$out/valgrind" -DCMAKE_BUILD_TYPE=Debug -DMP_WERROR=ON >/dev/null
cmake --build "$out/valgrind" -j"$jobs"
# The tests the tree has (not every test_* in a reused build dir: one since removed stays there).
for src in "$top"/test/unit/test_*.c; do
	t=$out/valgrind/$(basename "$src" .c)
	valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
		--show-leak-kinds=definite,indirect "$t" >"$t.valgrind.log" 2>&1 ||
		{ cat "$t.valgrind.log" >&2; echo "valgrind: $(basename "$t") failed" >&2; exit 1; }
	echo "valgrind: $(basename "$t") clean"
done

step "fuzzers, ${MP_FUZZ_SECONDS:-30} s each"
CC=clang cmake -S "$top" -B "$out/fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMP_FUZZ=ON >/dev/null
cmake --build "$out/fuzz" -j"$jobs"
for src in "$top"/test/fuzz/fuzz_*.c; do # likewise the fuzzers the tree has
	f=$out/fuzz/$(basename "$src" .c)
	mkdir -p "$f.corpus"
	# A checked-in seed corpus (test/fuzz/corpus/<fuzzer>/), where there is one, is read beside the
	# build's own corpus; new inputs go to the build's.
	seeds=$top/test/fuzz/corpus/$(basename "$f")
	[ -d "$seeds" ] || seeds=
	"$f" -max_total_time="${MP_FUZZ_SECONDS:-30}" -print_final_stats=1 "$f.corpus" ${seeds:+"$seeds"} 2>"$f.log" ||
		{ tail -n 40 "$f.log" >&2; echo "fuzz: $(basename "$f") found a crash" >&2; exit 1; }
	echo "fuzz: $(basename "$f") clean ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$f.log" | grep -o '[0-9]*$' || echo '?') runs)"
done
step "all passed"

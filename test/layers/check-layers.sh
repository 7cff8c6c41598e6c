#!/bin/bash
# The include graph of src/ and include/, folder to folder, held to the layering below: a folder may
# include only folders of lower layers (never one of its own layer, never one above). Prints the
# graph ("from -> to  count"); exits 1 naming each arrow that breaks the layering or a folder with
# no layer. Usage: check-layers.sh [SOURCE_DIR] (default: this checkout).
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"

# The layers, lowest first (docs/layers.md says why each folder sits where it does).
LAYERS='
0 log
1 util
2 loop
3 kube httpd metrics
4 informer leader
5 api
6 pool router
7 app
8 main router-main
'

# "from to" for each project include: the folder under src/ or include/ (src/main.c and
# src/router-main.c are folders of their own); a bare "x.h" is the including file's own folder.
edges=$(find src include -name '*.[ch]' | sort | while read -r f; do
  d=${f#*/}
  case $f in src/main.c) d=main ;; src/router-main.c) d=router-main ;; *) d=${d%%/*} ;; esac
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
    case $inc in */*) t=${inc%%/*} ;; *) t=$d ;; esac
    if [ "$t" != "$d" ]; then echo "$d $t $f $inc"; fi
  done
done)

awk -v layers="$LAYERS" '
BEGIN {
  n = split(layers, lines, "\n")
  for (i = 1; i <= n; i++) {
    k = split(lines[i], w, " ")
    for (j = 2; j <= k; j++) layer[w[j]] = w[1]
  }
  bad = 0
}
NF == 4 {
  count[$1 " -> " $2]++
  for (side = 1; side <= 2; side++)
    if (!($side in layer) && !seen[$side]++) {
      printf "NO LAYER: folder %s (%s) is not in the layering of test/layers/check-layers.sh\n", $side, $3
      bad = 1
    }
  if (($1 in layer) && ($2 in layer) && layer[$2] + 0 >= layer[$1] + 0) {
    printf "%s: %s (layer %s) includes %s (layer %s): %s includes \"%s\"\n",
           (layer[$2] + 0 > layer[$1] + 0 ? "UPWARD" : "SIDEWAYS"), $1, layer[$1], $2, layer[$2], $3, $4
    bad = 1
  }
}
END {
  for (e in count) printf "%s  %d\n", e, count[e] | "sort"
  close("sort")
  exit bad
}' <<<"$edges"

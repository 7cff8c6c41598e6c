# Sourced by build.sh, build-helm.sh and build-toxiproxy.sh: builds test tools from the published Go modules
# pinned in this folder's <tool>/go.mod into a cache folder keyed by the pins and the recipe, reused after.
# Go is used for test tools alone; the product is C.

# go_tool_pin GO_MOD MODULE: the version GO_MOD requires of MODULE (fails, saying so, when it has none).
go_tool_pin() {
	local v
	v=$(awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$1")
	[ -n "$v" ] || { echo "${0##*/}: no $2 pin in $1" >&2; return 1; }
	echo "$v"
}

# What every tool is built with: static, reproducible paths, the pinned modules as they are, stripped.
go_tool_env=(GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly)
go_tool_flags=(-trimpath)
go_tool_ldflags="-s -w"

# Errors are checked here, not left to set -e: a caller's $(go_tools ...) runs without it.
# go_tools TOOL VERSION SPEC...: builds each SPEC, "NAME|MODULE_DIR|PACKAGE|LDFLAGS" (after go_tool_ldflags),
# unless built before, into <cache>/TOOL/VERSION-KEY/NAME, and prints that folder. The cache root is
# $MODELPOOL_CACHE, else ~/.cache/modelpool-operator. KEY: the recipe, that is each SPEC's module files
# (go.mod, go.sum), NAME, PACKAGE and LDFLAGS, and the flags above (not the folders' paths nor any
# script's text: moving or commenting a script rebuilds nothing).
go_tools() {
	local tool=$1 version=$2 spec name dir pkg ldflags key out start lock
	shift 2
	key=$({
		for spec in "$@"; do
			IFS='|' read -r name dir pkg ldflags <<<"$spec"
			cat "$dir/go.mod" "$dir/go.sum"
			echo "$name $pkg $ldflags"
		done
		echo "${go_tool_env[*]} ${go_tool_flags[*]} $go_tool_ldflags"
	} | sha256sum | cut -c1-16) || return 1
	out=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}/$tool/$version-$key
	mkdir -p "$out" || return 1
	# Two runs on one machine (CI beside a developer, two build dirs) build into the same folder: the
	# second waits for the first's build here, then finds the tools built.
	exec {lock}>"$out/.build.lock" || return 1
	flock "$lock" || return 1
	for spec in "$@"; do
		IFS='|' read -r name dir pkg ldflags <<<"$spec"
		[ ! -x "$out/$name" ] || continue
		echo "${0##*/}: building $name $version ($pkg) into $out (minutes on 2 cores)" >&2
		start=$SECONDS
		(cd "$dir" && env "${go_tool_env[@]}" go build "${go_tool_flags[@]}" -ldflags "$go_tool_ldflags $ldflags" \
			-o "$out/$name.tmp" "$pkg") || return 1
		mv "$out/$name.tmp" "$out/$name" || return 1
		echo "${0##*/}: $name built in $((SECONDS - start)) s" >&2
	done
	exec {lock}>&-
	echo "$out"
}

#!/usr/bin/env bash
# Checks the Dockerfile without a Docker engine: repeats its build stage here (same sources, same cmake RUN),
# stages the binary where the runtime stage's COPY puts it, then proves with ldd + dpkg -S that every shared
# library it loads comes from a package the runtime stage has (its apt-get install list, their dependencies,
# or the slim base). Fails naming each library whose package is missing. Usage: scripts/image-check.sh [Dockerfile]
#
# Valid only on the Debian release the Dockerfile's stages are based on (checked below): package names and
# library sonames differ between releases. Set IMAGE_CHECK_KEEP=1 to keep the temp dir.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dockerfile=$(realpath "${1:-$top/Dockerfile}")
ctx=$(dirname "$dockerfile") # the build context: `docker build .` next to the Dockerfile

die() {
	echo "image-check: $*" >&2
	exit 1
}
say() { echo "image-check: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/image-check.XXXXXX")
cleanup() {
	if [ -n "${IMAGE_CHECK_KEEP:-}" ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ---- the Dockerfile, as logical instructions: "STAGE<TAB>INSTRUCTION ARGS" ----
# Continuation lines are joined and comment/blank lines dropped, as Docker does; STAGE counts FROMs from 1.
awk '
	/^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
	{
		line = line $0
		if (sub(/\\[[:space:]]*$/, "", line)) { line = line " "; next }
		gsub(/[[:space:]]+/, " ", line); sub(/^ /, "", line)
		if (toupper(line) ~ /^FROM /) stage++
		print stage "\t" line
		line = ""
	}' "$dockerfile" >"$tmp/instructions"

# instr STAGE KEYWORD: that stage's instructions of that kind, arguments only, one a line.
instr() { awk -F'\t' -v s="$1" -v k="$2" '$1 == s && toupper(substr($2, 1, length(k) + 1)) == k " " {
	print substr($2, length(k) + 2) }' "$tmp/instructions"; }
# apt_installs STAGE: the package names of every `apt-get install` in the stage's RUNs.
apt_installs() { instr "$1" RUN | tr ' ' '\n' | awk '
	$0 == "&&" || $0 == ";" || $0 == "||" || $0 == "|" { on = 0; next }
	on && $0 !~ /^-/ { print }
	prev == "apt-get" && $0 == "install" { on = 1 }
	{ prev = $0 }'; }

stages=$(cut -f1 "$tmp/instructions" | sort -n | tail -n 1)
[ -n "$stages" ] || die "$dockerfile: no FROM"
runtime=$stages # the last stage is the image
copy_from=$(instr "$runtime" COPY | grep -- '^--from=' || true)
if [ -z "$copy_from" ] || [ "$(wc -l <<<"$copy_from")" -ne 1 ]; then
	die "expected exactly one COPY --from in the runtime stage, got: ${copy_from:-none}"
fi
read -r from_flag copy_src copy_dest <<<"$copy_from"
build_name=${from_flag#--from=}
build=$(awk -F'\t' -v n="$build_name" 'toupper($2) ~ /^FROM / { k = split($2, w, " ");
	if (k >= 4 && toupper(w[k - 1]) == "AS" && w[k] == n) print $1 }' "$tmp/instructions")
[ -n "$build" ] || die "no stage named '$build_name' (the runtime stage copies from it)"
entrypoint=$(instr "$runtime" ENTRYPOINT | sed -n 's/^\[ *"\([^"]*\)".*/\1/p')
[ -n "$entrypoint" ] || die "the runtime stage has no exec-form ENTRYPOINT"

# ---- same Debian release here as in both stages ----
. /etc/os-release
for s in "$build" "$runtime"; do
	image=$(instr "$s" FROM | cut -d' ' -f1)
	case "$image" in
	debian:"${VERSION_CODENAME}" | debian:"${VERSION_CODENAME}"-*) ;;
	*) die "stage $s is based on $image, but this machine is ${ID} ${VERSION_CODENAME}: the package mapping would not hold" ;;
	esac
done
say "Dockerfile: build stage '$build_name' (stage $build), runtime stage $runtime, ${ID} ${VERSION_CODENAME} like this machine"

# ---- the build stage's packages must be here, or this build is not the image's ----
mapfile -t build_pkgs < <(apt_installs "$build")
missing=()
for p in "${build_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] || die "build-stage packages not installed here: ${missing[*]} (apt-get install them)"
# Configuring needs every package CMakeLists.txt requires (mp_require), and this machine has them all, so the
# replay below would not notice one the build stage lacks: compare the lists instead.
mapfile -t cmake_pkgs < <(sed -n 's/^[[:space:]]*mp_require([A-Za-z0-9_]* [^ ]* \([^ )]*\)).*/\1/p' "$ctx/CMakeLists.txt")
[ "${#cmake_pkgs[@]}" -gt 0 ] || die "no mp_require(...) found in $ctx/CMakeLists.txt"
for p in "${cmake_pkgs[@]}"; do
	printf '%s\n' "${build_pkgs[@]}" | grep -qx -- "$p" ||
		die "CMakeLists.txt requires the Debian package $p, but the build stage does not install it"
done

# ---- the build stage, replayed: its COPYs into a private root, then its cmake RUN ----
# Paths inside the build stage map to $tmp/build-root; WORKDIR is the last one the stage sets.
broot=$tmp/build-root
workdir=$(instr "$build" WORKDIR | tail -n 1)
workdir=${workdir:-/}
mkdir -p "$broot$workdir"
while read -r -a args; do
	[ "${#args[@]}" -ge 2 ] || continue
	case "${args[0]}" in --*) die "unsupported COPY flag in the build stage: ${args[0]}" ;; esac
	dest=${args[-1]}
	[ "${dest#/}" != "$dest" ] || dest=$workdir/$dest
	unset 'args[-1]'
	for src in "${args[@]}"; do
		[ -e "$ctx/$src" ] || die "COPY $src: not in the build context $ctx"
		# COPY of a directory copies its contents to DEST; a file goes into DEST/ or becomes DEST.
		if [ -d "$ctx/$src" ]; then
			mkdir -p "$broot$dest" && cp -a "$ctx/$src/." "$broot$dest/"
		elif [ "${dest%/}" != "$dest" ] || [ "$dest" == "$workdir/./" ] || [ "${dest##*/}" == "." ]; then
			mkdir -p "$broot$dest" && cp -a "$ctx/$src" "$broot$dest/"
		else
			mkdir -p "$(dirname "$broot$dest")" && cp -a "$ctx/$src" "$broot$dest"
		fi
	done
done < <(instr "$build" COPY | grep -v -- '^--from=')

# The RUN that builds (cmake in command position) runs verbatim but for its absolute paths: the build dir the runtime
# stage copies from (/build) and the WORKDIR move under the private root.
build_run=$(instr "$build" RUN | grep -E '(^|&& |; |\|\| )cmake ') || die "no cmake RUN in the build stage"
[ "$(wc -l <<<"$build_run")" -eq 1 ] || die "more than one cmake RUN in the build stage"
out_dir=/${copy_src#/}
out_dir=/$(cut -d/ -f2 <<<"$out_dir") # /build/modelpool-operator -> /build
rewrite() { sed -E "s#(^|[[:space:]=\"'])$1([/[:space:]\"']|\$)#\1$2\2#g"; }
cmd=$(rewrite "$out_dir" "$broot$out_dir" <<<"$build_run")
[ "$workdir" == / ] || cmd=$(rewrite "$workdir" "$broot$workdir" <<<"$cmd")
say "build stage: $cmd"
(cd "$broot$workdir" && bash -euo pipefail -c "$cmd") >"$tmp/build.log" 2>&1 ||
	{ tail -n 40 "$tmp/build.log" >&2; die "the build stage's RUN failed (log above)"; }

# ---- the runtime stage's COPY --from, into a staging root ----
stage=$tmp/stage
dest=$copy_dest
[ "${dest%/}" == "$dest" ] || dest=$dest$(basename "$copy_src")
[ -f "$broot$copy_src" ] || die "COPY --from=$build_name $copy_src: the build stage did not produce it"
install -D -m 0755 "$broot$copy_src" "$stage$dest"
[ -x "$stage$entrypoint" ] || die "ENTRYPOINT $entrypoint: nothing executable there after the COPY"
"$stage$entrypoint" --version >/dev/null || die "$entrypoint --version failed"
say "staged $dest (ENTRYPOINT $entrypoint)"

# ---- what the runtime stage has: its install list, their dependencies, and the slim base ----
# closure PKG...: the packages and everything they Depend/Pre-Depend on (recommends are not installed:
# --no-install-recommends). Alternatives and virtual-package providers are all counted, a slight
# over-approximation; dependencies are what apt installs whatever the list says.
closure() {
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
		--no-enhances "$@" | grep -v '^[[:space:]<]' | sort -u
}
mapfile -t runtime_pkgs < <(apt_installs "$runtime")
[ "${#runtime_pkgs[@]}" -gt 0 ] || die "no apt-get install in the runtime stage"
closure "${runtime_pkgs[@]}" >"$tmp/runtime.pkgs"
# The slim image is a minbase debootstrap: the required-priority packages and apt, with their dependencies.
# Their list is taken from this machine's dpkg database, which holds every required package.
mapfile -t base_pkgs < <(dpkg-query -W -f='${Package} ${Priority} ${Essential}\n' |
	awk '$2 == "required" || $3 == "yes" {print $1}')
closure apt "${base_pkgs[@]}" >"$tmp/base.pkgs"

# ---- each library the binary loads, its package, and where the image gets that package ----
# pkg_of PATH: the package that ships PATH. dpkg records the path a package was built with, so with a
# merged /usr the file may be listed under /lib or /usr/lib, and under the symlink's name or its target's.
pkg_of() {
	local p c
	for p in "$1" "$(readlink -f "$1")"; do
		for c in "$p" "/usr${p}" "${p#/usr}"; do
			dpkg -S "$c" 2>/dev/null | head -n 1 | sed 's/: .*//; s/:[a-z0-9_]*//g; s/, /\n/g' && return 0
		done
	done
	return 1
}
ldd "$stage$dest" >"$tmp/ldd" || die "ldd failed on $dest"
if grep -q 'not found' "$tmp/ldd"; then
	grep 'not found' "$tmp/ldd" >&2
	die "libraries not found even here (above)"
fi
bad=()
printf '%-28s %-22s %s\n' LIBRARY PACKAGE "IN THE IMAGE VIA" >&2
# "name => /path (addr)" for libraries, "/path (addr)" for the loader; the vDSO has no file.
while read -r lib path; do
	if ! pkgs=$(pkg_of "$path"); then
		printf '%-28s %-22s %s\n' "$lib" "?" "MISSING: $path belongs to no Debian package" >&2
		bad+=("$lib ($path: no package)")
		continue
	fi
	via=""
	for p in $pkgs; do
		if printf '%s\n' "${runtime_pkgs[@]}" | grep -qx -- "$p"; then
			via="runtime install list"
		elif grep -qx -- "$p" "$tmp/runtime.pkgs"; then
			via="dependency of the install list"
		elif grep -qx -- "$p" "$tmp/base.pkgs"; then
			via="base image (required)"
		fi
		[ -z "$via" ] || break
	done
	printf '%-28s %-22s %s\n' "$lib" "$(tr '\n' ' ' <<<"$pkgs")" "${via:-MISSING}" >&2
	[ -n "$via" ] || bad+=("$lib (package $(tr '\n' ' ' <<<"$pkgs" | sed 's/ $//'))")
done < <(awk '$2 == "=>" { print $1, $3; next } $1 ~ /^\// { n = split($1, a, "/"); print a[n], $1 }' "$tmp/ldd")

if [ "${#bad[@]}" -gt 0 ]; then
	say "the runtime stage lacks the package of:"
	printf '  %s\n' "${bad[@]}" >&2
	die "add the package(s) to the runtime stage's apt-get install in $dockerfile"
fi
say "OK: every shared library of $dest comes from a package the runtime stage installs"

#!/usr/bin/env bash
# Builds the operator's container image from the Dockerfile as it is, with Debian's podman (runc), on a machine
# with no Docker engine and no container registry: the Debian base images its FROM lines name are made with
# debootstrap from the mirror apt already uses, cached by release, and imported under those names.
#
# Usage: scripts/image-build.sh [TAG...]   builds and tags the image (default: modelpool-operator:VERSION and
#                                          modelpool-operator:latest, the name the Deployment uses); prints its ID
#        scripts/image-build.sh --bases    only makes and imports the base images
# Needs root (rootful podman, debootstrap).
# Cache: $MODELPOOL_CACHE (default ~/.cache/modelpool-operator)/images/RELEASE/{minbase,slim}.tar; delete a
# release's folder to make its base images again (they are not refreshed by themselves).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${MODELPOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelpool-operator}/images
# crun cannot set its rlimits in some VMs; runc can, given explicit limits. (test/image/common.sh runs the
# image with the same options.)
podman_opts=(--runtime runc --ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

say() { echo "image-build: $*" >&2; }
die() {
	say "$*"
	exit 1
}

version=$(sed -n 's/^project(modelpool-operator VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
[ -n "$version" ] || die "no project VERSION in $top/CMakeLists.txt"
bases_only=""
if [ "${1:-}" == --bases ]; then
	bases_only=1
	shift
fi
tags=("$@")
[ "${#tags[@]}" -gt 0 ] || tags=("modelpool-operator:$version" modelpool-operator:latest)

[ "$(id -u)" -eq 0 ] || die "needs root (rootful podman and debootstrap); run it with sudo"
for tool in podman runc debootstrap; do
	command -v "$tool" >/dev/null || die "'$tool' is not installed (scripts/bootstrap.sh installs it)"
done

# apt_suites: "URI SUITE" for every binary-package source apt uses here (one-line sources.list entries and
# deb822 .sources files), one a line.
apt_suites() {
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i + 1) }'
	cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
		function flush() { if (u != "" && deb) for (k = 1; k <= n; k++) print u, s[k]; u = ""; n = 0; deb = 0 }
		/^[[:space:]]*$/ { flush(); next }
		tolower($1) == "types:" { for (k = 2; k <= NF; k++) if ($k == "deb") deb = 1 }
		tolower($1) == "uris:" { u = $2 }
		tolower($1) == "suites:" { n = 0; for (k = 2; k <= NF; k++) s[++n] = $k }
		END { flush() }'
}

# apt_uri SUITE [ANY]: the URI apt fetches SUITE from here; with ANY, the first non-security URI otherwise.
apt_uri() {
	apt_suites | awk -v r="$1" -v any="${2:-}" '$2 == r { print $1; found = 1; exit }
		any && first == "" && $1 !~ /security/ { first = $1 } END { if (!found && first != "") print first }'
}

# make_base RELEASE: the minbase and slim root filesystems of RELEASE as tarballs in the cache.
make_base() {
	local release=$1 dir=$cache/$1 mirror root suite uri sources=""
	# Made again when this recipe changes (the functions that make them), not otherwise.
	local recipe
	recipe=$(declare -f make_base apt_suites apt_uri | sha256sum | cut -c1-16)
	if [ -f "$dir/minbase.tar" ] && [ -f "$dir/slim.tar" ] && [ "$(cat "$dir/recipe" 2>/dev/null)" == "$recipe" ]; then
		return 0
	fi
	mirror=$(apt_uri "$release" any)
	[ -n "$mirror" ] || die "no Debian mirror found in apt's sources to debootstrap $release from"
	mkdir -p "$dir"
	root=$(mktemp -d "$dir/root.XXXXXX")
	say "debootstrap --variant=minbase $release from apt's mirror (cached in $dir)"
	local start=$SECONDS
	debootstrap --variant=minbase "$release" "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$dir/debootstrap.log" >&2; rm -rf "$root"; die "debootstrap $release failed (log above)"; }
	# apt's sources as the official images have them: the release, and its -updates and -security suites
	# where apt here uses them (so the image's packages get the fixes this machine gets).
	for suite in "$release" "$release-updates" "$release-security"; do
		uri=$(apt_uri "$suite")
		[ "$suite" == "$release" ] && uri=$mirror
		[ -n "$uri" ] || continue
		sources+="Types: deb"$'\n'"URIs: $uri"$'\n'"Suites: $suite"$'\n'"Components: main"$'\n'
		sources+="Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"$'\n\n'
	done
	rm -f "$root/etc/apt/sources.list"
	printf '%s' "$sources" >"$root/etc/apt/sources.list.d/debian.sources"
	# What the official images also drop: the package cache and lists (the Dockerfile runs apt-get update).
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
	tar -C "$root" --numeric-owner -cf "$dir/minbase.tar.tmp" .
	# Slim, as the official -slim images: no documentation, manual pages or translations, now or when
	# packages are installed later (a dpkg path-exclude), copyright files kept.
	cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<-'EOF'
		path-exclude /usr/share/doc/*
		path-include /usr/share/doc/*/copyright
		path-exclude /usr/share/groff/*
		path-exclude /usr/share/info/*
		path-exclude /usr/share/linda/*
		path-exclude /usr/share/lintian/overrides/*
		path-exclude /usr/share/locale/*
		path-exclude /usr/share/man/*
	EOF
	find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	rm -rf "$root"/usr/share/{groff,info,linda,lintian/overrides,locale,man}/*
	tar -C "$root" --numeric-owner -cf "$dir/slim.tar.tmp" .
	rm -rf "$root"
	mv "$dir/minbase.tar.tmp" "$dir/minbase.tar"
	mv "$dir/slim.tar.tmp" "$dir/slim.tar"
	rm -f "$dir"/*.id # imported from the tarballs before these: import again
	echo "$recipe" >"$dir/recipe"
	say "base root filesystems of $release made in $((SECONDS - start)) s"
}

# import_base NAME: makes the podman image NAME (debian:RELEASE or debian:RELEASE-slim) from the cache, unless
# podman already holds the one imported from it (its ID is noted next to the tarball), never one from elsewhere.
import_base() {
	local name=$1 release flavour
	case "$name" in
	debian:*-slim) release=${name#debian:} release=${release%-slim} flavour=slim ;;
	debian:*) release=${name#debian:} flavour=minbase ;;
	*) die "FROM $name: only debian:RELEASE and debian:RELEASE-slim can be made here" ;;
	esac
	[[ "$release" =~ ^[a-z]+$ ]] || die "FROM $name: '$release' is not a Debian release code name"
	local id_file=$cache/$release/$flavour.id
	if [ -f "$id_file" ] && [ "$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null)" == "$(cat "$id_file")" ]; then
		return 0
	fi
	make_base "$release"
	say "importing $name"
	podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' "$cache/$release/$flavour.tar" "$name" >/dev/null
	podman image inspect --format '{{.Id}}' "$name" >"$id_file"
}

# The base images: every FROM's image that is not an earlier stage's name.
mapfile -t froms < <(awk 'toupper($1) == "FROM" { i = 2; while ($i ~ /^--/) i++; print $i }' "$top/Dockerfile" | sort -u)
[ "${#froms[@]}" -gt 0 ] || die "no FROM in $top/Dockerfile"
stages=$(awk 'toupper($1) == "FROM" && toupper($(NF - 1)) == "AS" { print $NF }' "$top/Dockerfile")
# One builder of the cache and the base images at a time (two checkouts' tests may run at once).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
for f in "${froms[@]}"; do
	grep -qxF -- "$f" <<<"$stages" || import_base "$f"
done
exec 9>&-
[ -z "$bases_only" ] || exit 0

source_url=$(git -C "$top" remote get-url origin 2>/dev/null || true)
revision=$(git -C "$top" rev-parse HEAD 2>/dev/null || true)
# The labels that change from build to build are also given with --label: podman (buildah 1.28) reuses a
# cached LABEL step whose build args changed, and would keep the previous build's revision.
label_args=()
for kv in "version=$version" "source=$source_url" "revision=$revision"; do
	label_args+=(--label "org.opencontainers.image.$kv")
done
tag_args=()
for t in "${tags[@]}"; do tag_args+=(-t "$t"); done
say "podman build ${tag_args[*]}"
# --pull=never: the bases are the ones imported above, never a registry's. --network host: the build's
# apt-get reaches the mirror as this machine does, with no bridge or firewall rules to set up.
podman build "${podman_opts[@]}" --network host --layers --pull=never \
	--build-arg "VERSION=$version" --build-arg "SOURCE=$source_url" --build-arg "REVISION=$revision" \
	"${label_args[@]}" "${tag_args[@]}" -f "$top/Dockerfile" "$top" >&2
podman image inspect --format '{{.Id}}' "${tags[0]}"

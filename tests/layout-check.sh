#!/bin/sh
# layout-check.sh - the folders of host/ depend on each other in one
# direction only (docs/design.md, "Source layout"). Fails on an arrow that
# points up or sideways between folders:
#   - an #include "F/..." in host/G/ where F is not below G, or of another
#     folder's private header (*_internal.h), or a host header named
#     without its folder;
#   - a symbol that an object of host/G/ needs and an object of another
#     folder F defines, where F is not below G (nm over the built objects).
# Run by make check (LH_SRCDIR and LH_BUILDDIR set); by hand:
#   LH_SRCDIR=.. LH_BUILDDIR=. sh ../tests/layout-check.sh
set -u

src=${LH_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${LH_BUILDDIR:-.}

# The order: a folder may use the folders of a lower level, never one of
# its own level or above. proto/ is the generated protobuf-c code.
level() {
	case $1 in
	proto | base) echo 0 ;;
	etcd | http | abi) echo 1 ;;
	election | worker) echo 2 ;;
	runtime | control) echo 3 ;;
	daemon | ctl) echo 4 ;;
	*) echo -1 ;;
	esac
}
folders="base etcd http abi election worker runtime control daemon ctl"

bad=0
complain() {
	echo "layout-check: $*" >&2
	bad=1
}

# allowed F G: may a file of folder G use folder F?
allowed() {
	[ "$1" = "$2" ] && return 0
	lf=$(level "$1")
	lg=$(level "$2")
	[ "$lf" -ge 0 ] && [ "$lf" -lt "$lg" ]
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/layout-check.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# ---- includes ----
for g in $folders; do
	[ -d "$src/host/$g" ] || { complain "no folder host/$g"; continue; }
	for f in "$src/host/$g"/*.[ch]; do
		sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
			while read -r inc; do
				case $inc in
				config.h | lh_install_dirs.h | lh_worker_paths.h | leasehold/plugin.h) continue ;;
				*/*) ;;
				*)
					echo "host/$g/${f##*/}: #include \"$inc\" does not name its folder"
					continue
					;;
				esac
				to=${inc%%/*}
				if [ "$(level "$to")" -lt 0 ]; then
					echo "host/$g/${f##*/}: #include \"$inc\": no such folder"
				elif ! allowed "$to" "$g"; then
					echo "host/$g/${f##*/}: #include \"$inc\": $g may not use $to"
				elif [ "$to" != "$g" ]; then
					case $inc in *_internal.h)
						echo "host/$g/${f##*/}: #include \"$inc\": another folder's private header" ;;
					esac
				fi
			done
	done
done >"$tmp/inc"
if [ -s "$tmp/inc" ]; then
	sed 's/^/layout-check: /' "$tmp/inc" >&2
	bad=1
fi

# ---- symbols ----
if ! command -v nm >/dev/null 2>&1; then
	[ "$bad" -ne 0 ] && exit 1
	echo "layout-check: the includes point down; no nm here to check the symbols: skipped" >&2
	exit 77
fi
: >"$tmp/nm"
n_obj=0
for g in proto $folders; do
	dir=host/$g
	[ "$g" = proto ] && dir=proto
	for o in "$build/$dir"/*.o "$build/$dir"/.libs/*.o; do
		[ -f "$o" ] || continue
		n_obj=$((n_obj + 1))
		# "U symbol folder object" or "D symbol folder"
		nm -P "$o" | awk -v g="$g" -v o="${o##*/}" '
			$2 == "U" { print "U", $1, g, o; next }
			$2 ~ /^[A-TV-Z]$/ { print "D", $1, g }' >>"$tmp/nm"
	done
done
if [ "$n_obj" -eq 0 ]; then
	echo "layout-check: no objects under $build/host: build the tree first" >&2
	exit 99
fi
awk '$1 == "D" { def[$2] = def[$2] " " $3; next }
	$1 == "U" { u[++n] = $2 " " $3 " " $4 }
	END { for (i = 1; i <= n; i++) { split(u[i], f, " "); if (f[1] in def) print f[2], f[3], f[1], def[f[1]] } }' "$tmp/nm" |
	while read -r g o sym fs; do
		for f in $fs; do
			allowed "$f" "$g" ||
				echo "host/$g/$o needs $sym, defined in $f/: $g may not use $f"
		done
	done >"$tmp/sym"
if [ -s "$tmp/sym" ]; then
	sed 's/^/layout-check: /' "$tmp/sym" >&2
	bad=1
fi

if [ "$bad" -ne 0 ]; then
	echo "layout-check: FAIL (the order is in tests/layout-check.sh and docs/design.md)" >&2
	exit 1
fi
echo "layout-check: $n_obj objects, every include and symbol of host/ points down"
exit 0

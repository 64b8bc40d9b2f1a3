#!/bin/sh
# installcheck.sh - `make installcheck` (run by `make distcheck`): what
# `make install` put in place is what a user needs and nothing else.
# With DESTDIR, the installed tree is also copied elsewhere and used from
# there: the example plugin built from its installed source with the copy's
# leasehold-plugin.pc, and tested with the copy's leasehold-plugin-test on
# two hosts (so the daemon finds leasehold-worker relative to itself).
# In (environment): the installation directories, DESTDIR prepended; CC;
# ETCD (the etcd to run; without one the test kit's run is skipped).
set -u
rc=0
bad() { echo "installcheck: $*"; rc=1; }

for f in "$bindir/leasehold" "$bindir/leaseholdctl" "$bindir/leasehold-plugin-test" \
	"$pkglibexecdir/leasehold-worker"; do
	[ -x "$f" ] || bad "$f is missing"
done
for f in "$includedir/leasehold/plugin.h" "$pcdir/leasehold-plugin.pc" \
	"$mandir/man8/leasehold.8" "$mandir/man1/leaseholdctl.1" "$mandir/man7/leasehold-plugin.7" \
	"$mandir/man1/leasehold-plugin-test.1" "$docdir/examples/reconciler.lhtest" \
	"$docdir/README.md" "$docdir/LICENSE" "$docdir/docs/operations.md" \
	"$docdir/examples/reconciler.c" "$docdir/examples/reconciler-1.1.0.so"; do
	[ -f "$f" ] || bad "$f is missing"
done
[ -d "$plugindir" ] || bad "the plugin directory $plugindir is missing"
# leaseholdctl's completion scripts, the installed leaseholdctl's own
for f in "$bashcompletiondir/leaseholdctl" "$zshcompletiondir/_leaseholdctl"; do
	[ -f "$f" ] || bad "$f is missing"
done
got=$(PATH="$bindir:$PATH" bash -c '. "$1" && COMP_WORDS=(leaseholdctl pl) COMP_CWORD=1 &&
	COMP_LINE="leaseholdctl pl" COMP_POINT=15 && _leaseholdctl && echo "${COMPREPLY[*]}"' \
	sh "$bashcompletiondir/leaseholdctl")
[ "$got" = plugins ] || bad "$bashcompletiondir/leaseholdctl completes 'pl' to '$got', not plugins"
# the example configuration, valid for the installed daemon
"$bindir/leasehold" --config "$docdir/examples/leasehold.conf" --check-config >/dev/null ||
	bad "the installed daemon refuses $docdir/examples/leasehold.conf"
# nothing of the build or the tests: our directories hold exactly this
[ ! -e "$pkglibdir" ] || bad "$pkglibdir exists (libtool archives or plugins installed as libraries)"
listing() { (cd "$1" 2>/dev/null && find . -type f | LC_ALL=C sort | tr '\n' ' '); }
want='./leasehold-worker '
[ "$(listing "$pkglibexecdir")" = "$want" ] || bad "$pkglibexecdir holds: $(listing "$pkglibexecdir")"
want='./LICENSE ./README.md ./docs/configuration.md ./docs/design.md ./docs/install.md ./docs/leaseholdctl-access.md ./docs/leaseholdctl-leadership.md ./docs/leaseholdctl-output.md ./docs/leaseholdctl-rollouts.md ./docs/leaseholdctl.md ./docs/observability.md ./docs/operations.md ./docs/plugin-guide.md ./docs/running.md ./docs/troubleshooting.md ./examples/leasehold.conf ./examples/reconciler-1.0.0.so ./examples/reconciler-1.1.0.so ./examples/reconciler.c ./examples/reconciler.lhtest '
[ "$(listing "$docdir")" = "$want" ] || bad "$docdir holds: $(listing "$docdir")"
# one plugin directory: the daemon's default is the .pc's plugindir
# (DESTDIR is not part of either)
pc=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=plugindir leasehold-plugin) ||
	bad "pkg-config cannot read $pcdir/leasehold-plugin.pc"
"$bindir/leasehold" --help | grep -qF "(default $pc)" ||
	bad "leasehold's default --plugin-dir is not the .pc's plugindir '$pc'"
[ "${DESTDIR:-}$pc" = "$plugindir" ] || bad "the .pc's plugindir '$pc' is not $plugindir"
# the .pc names the headers relative to itself: right where it lies
inc=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=includedir leasehold-plugin)
[ -f "$inc/leasehold/plugin.h" ] || bad "the .pc's includedir '$inc' has no leasehold/plugin.h"
[ $rc -eq 0 ] && echo "installcheck: the installation is complete and holds nothing else"
[ -n "${DESTDIR:-}" ] || exit $rc

# A DESTDIR install, moved: the SDK, the runner and the daemon from the copy
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lh-installcheck-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -a "$DESTDIR" "$tmp/moved" || bad "cannot copy $DESTDIR"
moved() { printf '%s' "$tmp/moved${1#"$DESTDIR"}"; }
mpc=$(moved "$pcdir")
for sysroot in "" "$tmp/moved"; do
	cflags=$(PKG_CONFIG_PATH="$mpc" PKG_CONFIG_SYSROOT_DIR="$sysroot" pkg-config --cflags leasehold-plugin) ||
		bad "pkg-config cannot read the moved $mpc/leasehold-plugin.pc"
	inc=${cflags#-I}
	inc=${inc%% *}
	[ -f "$inc/leasehold/plugin.h" ] ||
		bad "moved tree, PKG_CONFIG_SYSROOT_DIR='$sysroot': --cflags '$cflags' names no leasehold/plugin.h"
done
# what a plugin author does: build the example (both releases) with the .pc,
# export nothing but the descriptor, and test it with the installed kit
mdoc=$(moved "$docdir")
for v in 0 1; do
	# shellcheck disable=SC2086 # cflags is a list of flags
	${CC:-cc} $(PKG_CONFIG_PATH="$mpc" pkg-config --cflags leasehold-plugin) -shared -fPIC \
		-fvisibility=hidden -DLH_EXAMPLE_RELEASE_MINOR=$v -o "$tmp/reconciler-1.$v.0.so" \
		"$mdoc/examples/reconciler.c" ||
		bad "the example does not build with the moved leasehold-plugin.pc"
done
[ $rc -eq 0 ] || exit $rc
worker=${pkglibexecdir#"$DESTDIR"}/leasehold-worker
[ -x "$worker" ] && echo "installcheck: note: $worker exists, so the daemon's lookup beside itself is not what runs"
"$(moved "$bindir")/leasehold-plugin-test" --hosts 2 "$tmp/reconciler-1.0.0.so" \
	"$mdoc/examples/reconciler.lhtest" > "$tmp/kit.log" 2>&1
kit=$?
case $kit in
0) echo "installcheck: the moved installation's leasehold-plugin-test passed the example's script" ;;
77) echo "installcheck: skipped the test kit run: $(tail -n 1 "$tmp/kit.log")" ;;
*) cat "$tmp/kit.log"; bad "the moved installation's leasehold-plugin-test exited $kit" ;;
esac
exit $rc

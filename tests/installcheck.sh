#!/bin/sh
# installcheck.sh - `make installcheck` (run by `make distcheck`): what
# `make install` put in place is what a user needs and nothing else.
# In (environment): the installation directories, DESTDIR prepended.
set -u
rc=0
bad() { echo "installcheck: $*"; rc=1; }

for f in "$bindir/leasehold" "$bindir/leaseholdctl" "$pkglibexecdir/leasehold-worker"; do
	[ -x "$f" ] || bad "$f is missing"
done
for f in "$includedir/leasehold/plugin.h" "$pcdir/leasehold-plugin.pc" \
	"$mandir/man8/leasehold.8" "$mandir/man1/leaseholdctl.1" "$mandir/man7/leasehold-plugin.7" \
	"$docdir/README.md" "$docdir/LICENSE" "$docdir/docs/operations.md" \
	"$docdir/examples/reconciler.c" "$docdir/examples/reconciler-1.1.0.so"; do
	[ -f "$f" ] || bad "$f is missing"
done
[ -d "$plugindir" ] || bad "the plugin directory $plugindir is missing"
# the example configuration, valid for the installed daemon
"$bindir/leasehold" --config "$docdir/examples/leasehold.conf" --check-config >/dev/null ||
	bad "the installed daemon refuses $docdir/examples/leasehold.conf"
# nothing of the build or the tests: our directories hold exactly this
[ ! -e "$pkglibdir" ] || bad "$pkglibdir exists (libtool archives or plugins installed as libraries)"
listing() { (cd "$1" 2>/dev/null && find . -type f | LC_ALL=C sort | tr '\n' ' '); }
want='./leasehold-worker '
[ "$(listing "$pkglibexecdir")" = "$want" ] || bad "$pkglibexecdir holds: $(listing "$pkglibexecdir")"
want='./LICENSE ./README.md ./docs/configuration.md ./docs/design.md ./docs/install.md ./docs/leaseholdctl.md ./docs/observability.md ./docs/operations.md ./docs/plugin-guide.md ./docs/running.md ./docs/troubleshooting.md ./examples/leasehold.conf ./examples/reconciler-1.0.0.so ./examples/reconciler-1.1.0.so ./examples/reconciler.c '
[ "$(listing "$docdir")" = "$want" ] || bad "$docdir holds: $(listing "$docdir")"
# one plugin directory: the daemon's default is the .pc's plugindir
# (DESTDIR is not part of either)
pc=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=plugindir leasehold-plugin) ||
	bad "pkg-config cannot read $pcdir/leasehold-plugin.pc"
"$bindir/leasehold" --help | grep -qF "(default $pc)" ||
	bad "leasehold's default --plugin-dir is not the .pc's plugindir '$pc'"
[ "${DESTDIR:-}$pc" = "$plugindir" ] || bad "the .pc's plugindir '$pc' is not $plugindir"
[ $rc -eq 0 ] && echo "installcheck: the installation is complete and holds nothing else"
exit $rc

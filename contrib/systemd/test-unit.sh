#!/bin/sh
# contrib/systemd/test-unit.sh - the systemd unit of this build (contrib/systemd/
# leasehold.service, made by `make` with this build's paths) passes
# `systemd-analyze verify` without a single complaint about it: an unknown
# or misspelt directive, a bad value, an ExecStart that is not executable.
# The same check on a copy with a misspelt directive must complain (so
# this test can fail). Also prints systemd-analyze's offline security
# exposure score. Skipped (77) without systemd-analyze (Debian: systemd).
set -u
b=${LH_BUILDDIR:-.}
unit=$b/contrib/systemd/leasehold.service
if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "SKIP: systemd-analyze not found (Debian package: systemd)"
	exit 77
fi
[ -f "$unit" ] || { echo "FAIL: $unit not made"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# the installed paths do not exist in a build tree: point the unit at the
# programs built here (verify checks that ExecStart is executable)
sed -e "s|^ExecStart=[^ ]*/leasehold |ExecStart=$(cd "$b" && pwd)/leasehold |" "$unit" \
	> "$tmp/leasehold.service"
grep -q "^ExecStart=$(cd "$b" && pwd)/leasehold " "$tmp/leasehold.service" ||
	{ echo "FAIL: no ExecStart line to point at the build"; exit 1; }

# verify prints problems and still exits 0: any line naming the unit fails
check() { # $1: unit file; prints what verify said about it
	systemd-analyze verify --man=no "$1" >"$tmp/out" 2>&1
	rc=$?
	grep -F "$(basename "$1")" "$tmp/out"
	[ $rc -eq 0 ] || { cat "$tmp/out"; echo "systemd-analyze verify exited $rc"; }
}
said=$(check "$tmp/leasehold.service")
if [ -n "$said" ]; then
	echo "FAIL: systemd-analyze verify complains about the unit:"
	echo "$said"
	exit 1
fi
echo "ok - systemd-analyze verify: no complaint"

mkdir "$tmp/bad"
sed -e 's/^ProtectSystem=/ProtectSytem=/' "$tmp/leasehold.service" > "$tmp/bad/leasehold.service"
said=$(check "$tmp/bad/leasehold.service")
case $said in
*ProtectSytem*) echo "ok - a misspelt directive is reported" ;;
*) echo "FAIL: a misspelt directive went unnoticed: $said"; exit 1 ;;
esac

# what the daemon relies on is there
for want in Type=notify 'ExecReload=/bin/kill -HUP $MAINPID' WatchdogSec= \
	RuntimeDirectory=leasehold NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes \
	'--runtime-dir /tmp/leasehold'; do
	grep -qF -- "$want" "$unit" || { echo "FAIL: the unit lacks $want"; exit 1; }
done
systemd-analyze security --offline=yes "$tmp/leasehold.service" >"$tmp/sec" 2>&1 &&
	grep -i "overall exposure" "$tmp/sec"
exit 0

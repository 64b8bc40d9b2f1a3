#!/bin/sh
# test-example.sh - the example configuration file (contrib/config/
# leasehold.conf, shipped as /etc/leasehold/leasehold.conf by the Debian
# package) stays valid: as shipped (all commented out) and with every
# commented-out setting switched on, `leasehold --check-config` accepts it.
set -eu
b=${LH_BUILDDIR:-.}
src=${LH_SRCDIR:-.}
example=$src/contrib/config/leasehold.conf
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lh-conf-example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$b/leasehold" --config "$example" --check-config >"$tmp/out"
echo "ok - the example as shipped is valid"
# the settings after the header, uncommented
sed -n '/^# --- etcd/,$p' "$example" | grep -v '^# ---' | sed 's/^# //' >"$tmp/all.conf"
LEASEHOLD_ETCD_PASSWORD=x "$b/leasehold" --config "$tmp/all.conf" --check-config >"$tmp/out" || {
	echo "FAIL: the example with every setting on is refused"; exit 1; }
for key in etcd node-id plugin-dir callback-timeout plugin-isolation control http log-level; do
	grep -q "^$key: " "$tmp/out" || { echo "FAIL: $key is not in the effective settings"; cat "$tmp/out"; exit 1; }
done
echo "ok - the example with every setting on is valid"

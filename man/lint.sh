#!/bin/sh
# lint.sh - the man pages pass `mandoc -T lint` without a message (any level,
# style included). Skips (77) where mandoc is not installed.
srcdir=${LH_SRCDIR:-$(dirname "$0")/..}
if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc is not installed (Debian: apt-get install mandoc)"
	exit 77
fi
rc=0
for page in leasehold.8 leaseholdctl.1 leasehold-plugin.7 leasehold-plugin-test.1; do
	out=$(mandoc -T lint "$srcdir/man/$page" 2>&1) || rc=1
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		rc=1
	fi
	echo "man/$page: checked"
done
exit $rc

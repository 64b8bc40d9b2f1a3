#!/bin/sh
# contrib/prometheus/test-rules.sh - the Prometheus rules of
# contrib/prometheus/ load (`promtool check rules`) and pass their unit
# tests (`promtool test rules`: every alert firing on series written for
# it, and not firing on healthy ones). Also: every alert has a test, every
# runbook names a section of docs/troubleshooting.md, and a copy of the
# rules with one alert weakened fails the tests (so this test can fail).
# Skipped (77) without promtool (Debian: prometheus; ./quickstart
# installs it).
set -u
src=${LH_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$src/contrib/prometheus
if ! command -v promtool >/dev/null 2>&1; then
	echo "SKIP: promtool not found (Debian package: prometheus; ./quickstart installs it)"
	exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

promtool check rules "$dir/leasehold.rules.yml" || fail=1
(cd "$dir" && promtool test rules leasehold.rules.test.yml) || fail=1

alerts=$(sed -n 's/^ *- alert: *//p' "$dir/leasehold.rules.yml")
[ -n "$alerts" ] || { echo "FAIL: no alert found in leasehold.rules.yml"; fail=1; }
for a in $alerts; do
	grep -q "alertname: $a\$" "$dir/leasehold.rules.test.yml" ||
		{ echo "FAIL: alert $a has no test"; fail=1; }
	anchor=$(echo "$a" | tr 'A-Z' 'a-z')
	grep -q "#$anchor\"" "$dir/leasehold.rules.yml" ||
		{ echo "FAIL: alert $a has no runbook docs/troubleshooting.md#$anchor"; fail=1; }
	grep -q "^### $a\$" "$src/docs/troubleshooting.md" ||
		{ echo "FAIL: docs/troubleshooting.md has no section ### $a"; fail=1; }
done

# the same tests on rules where LeaseholdNoLeader waits 10 minutes must fail
sed '/alert: LeaseholdNoLeader/,/for:/s/for: 1m/for: 10m/' "$dir/leasehold.rules.yml" \
	> "$tmp/leasehold.rules.yml"
cp "$dir/leasehold.rules.test.yml" "$tmp/"
cmp -s "$dir/leasehold.rules.yml" "$tmp/leasehold.rules.yml" &&
	{ echo "FAIL: could not weaken LeaseholdNoLeader"; fail=1; }
if (cd "$tmp" && promtool test rules leasehold.rules.test.yml) >"$tmp/out" 2>&1; then
	echo "FAIL: the tests pass on rules with LeaseholdNoLeader weakened"
	fail=1
fi
[ $fail = 0 ] && echo "PASS: $(echo "$alerts" | wc -w) alerts tested"
exit $fail

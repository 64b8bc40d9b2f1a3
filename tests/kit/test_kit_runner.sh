#!/bin/sh
# test_kit_runner.sh - leasehold-plugin-test as a plugin author runs it, on
# the example plugin as built here: its own script (plugin/example/
# reconciler.lhtest) on two hosts passes; a wrong expectation fails (exit 1)
# saying what was expected and what was found; a bad script is refused
# before anything starts (exit 2, with its line); without etcd the run is
# skipped (exit 77).
# In (environment, from make check): LH_BUILDDIR, LH_SRCDIR, ETCD.
set -u
b=${LH_BUILDDIR:?run through make check}
s=${LH_SRCDIR:?run through make check}
kit="$b/leasehold-plugin-test"
plugin="$b/plugins/reconciler-1.0.0.so"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lh-kit-XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. the example's script passes on two hosts
"$kit" --hosts 2 "$plugin" "$s/plugin/example/reconciler.lhtest" > "$tmp/pass.out" 2>&1
rc=$?
cat "$tmp/pass.out"
[ $rc -eq 0 ] || fail "the example's script exited $rc"
grep -q '^ok line .*: failover' "$tmp/pass.out" || fail "no failover step passed"
echo "ok - the example's script passes on two hosts"

# 2. a wrong expectation fails with what was expected and found
printf 'put desired/a alpha\nwait-key out/a value=alpha\ntimeout 2s\nwait-key out/a value=omega\n' \
	> "$tmp/wrong.lhtest"
"$kit" "$plugin" "$tmp/wrong.lhtest" > "$tmp/wrong.out" 2> "$tmp/wrong.err"
rc=$?
cat "$tmp/wrong.out"
[ $rc -eq 1 ] || fail "a wrong expectation exited $rc, not 1"
grep -qF 'FAIL line 4: wait-key: /leasehold/reconciler/data/out/a: expected "value=omega", found "value=alpha" after 2000 ms' \
	"$tmp/wrong.out" || fail "the failure does not say what was expected and found"
echo "ok - a wrong expectation fails and says what it found"

# 3. a bad script: refused with its line, nothing started
printf 'wait-leader\nput desired/a\n' > "$tmp/bad.lhtest"
"$kit" "$plugin" "$tmp/bad.lhtest" > "$tmp/bad.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a bad script exited $rc, not 2"
grep -qF 'bad.lhtest: line 2: put needs a VALUE' "$tmp/bad.out" || fail "no line in: $(cat "$tmp/bad.out")"
grep -q '^etcd ' "$tmp/bad.out" && fail "a bad script started etcd"
printf 'reload missing-9.9.9.so\n' > "$tmp/missing.lhtest"
"$kit" "$plugin" "$tmp/missing.lhtest" > "$tmp/missing.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a script reloading a missing file exited $rc, not 2"
grep -qF 'line 1: cannot read' "$tmp/missing.out" || fail "$(cat "$tmp/missing.out")"
echo "ok - a bad script is refused before anything starts"

# 4. no etcd: skipped, with the reason
"$kit" --etcd /nonexistent/etcd "$plugin" "$s/plugin/example/reconciler.lhtest" > "$tmp/skip.out" 2>&1
rc=$?
[ $rc -eq 77 ] || fail "without etcd the runner exited $rc, not 77"
grep -qF 'skipped: no etcd to run (/nonexistent/etcd' "$tmp/skip.out" || fail "$(cat "$tmp/skip.out")"
echo "ok - without etcd the run is skipped"
exit 0

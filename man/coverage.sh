#!/bin/sh
# coverage.sh - every long option `leasehold --help` lists is in leasehold(8);
# every command and long option `leaseholdctl --help` lists is in
# leaseholdctl(1), and every command's usage line in docs/leaseholdctl*.md. Pages are roff: "--plugin-dir" is written "\-\-plugin\-dir".
srcdir=${LH_SRCDIR:-$(dirname "$0")/..}
builddir=${LH_BUILDDIR:-.}
rc=0

# in_page PAGE WORD - WORD (with '-' as roff's '\-') occurs in PAGE
in_page() {
	pat=$(printf '%s' "$2" | sed 's/-/\\-/g')
	grep -qF -- "$pat" "$srcdir/man/$1"
}

for flag in $("$builddir/leasehold" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	in_page leasehold.8 "$flag" || { echo "leasehold.8 lacks $flag (leasehold --help)"; rc=1; }
done
help=$("$builddir/leaseholdctl" --help) || { echo "leaseholdctl --help failed"; exit 1; }
for flag in $(printf '%s\n' "$help" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	in_page leaseholdctl.1 "$flag" || { echo "leaseholdctl.1 lacks $flag (leaseholdctl --help)"; rc=1; }
done
# the command lines: between "Commands:" and the next blank line, the
# synopsis in a 30-column field after two spaces; the command is its words
# before the first argument or option
cmds=$(printf '%s\n' "$help" | sed -n '/^Commands:/,/^$/p' | sed '1d;/^$/d' |
	awk '{ n = split(substr($0, 3, 30), w, " "); c = w[1]
	       for (i = 2; i <= n && w[i] ~ /^[a-z][a-z-]*$/; i++) c = c " " w[i]
	       print c }')
[ -n "$cmds" ] || { echo "no commands found in leaseholdctl --help"; exit 1; }
printf '%s\n' "$cmds" | {
	r=0
	while read -r cmd; do
		in_page leaseholdctl.1 ".B $cmd" || { echo "leaseholdctl.1 lacks command '$cmd'"; r=1; }
	done
	exit $r
} || rc=1
# leasehold-plugin-test(1): its flags, and every statement of its script
# language (the KIT_OPS table of tests/kit/kit_script.h)
for flag in $("$builddir/leasehold-plugin-test" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	in_page leasehold-plugin-test.1 "$flag" ||
		{ echo "leasehold-plugin-test.1 lacks $flag (leasehold-plugin-test --help)"; rc=1; }
done
for st in $(sed -n 's/^[[:space:]]*X([A-Z_]*, "\([a-z-]*\)".*/\1/p' "$srcdir/tests/kit/kit_script.h"); do
	in_page leasehold-plugin-test.1 ".B $st" || in_page leasehold-plugin-test.1 ".BI $st" ||
		{ echo "leasehold-plugin-test.1 lacks statement '$st'"; rc=1; }
done
# the leaseholdctl reference (docs/leaseholdctl*.md) shows each command's
# usage exactly as `leaseholdctl help COMMAND` prints it (after the
# connection options), so the two cannot drift
printf '%s\n' "$cmds" | {
	r=0
	while read -r cmd; do
		# shellcheck disable=SC2086 # the command's words are separate arguments
		usage=$("$builddir/leaseholdctl" help $cmd | sed -n '1s/^Usage: leaseholdctl \[--control URL\] //p')
		[ -n "$usage" ] || { echo "leaseholdctl help $cmd prints no usage line"; r=1; continue; }
		cat "$srcdir"/docs/leaseholdctl*.md | grep '^leaseholdctl ' | grep -qF -- "$usage" ||
			{ echo "docs/leaseholdctl*.md lack the usage '$usage' (leaseholdctl help $cmd)"; r=1; }
	done
	exit $r
} || rc=1
[ $rc -eq 0 ] && echo "every flag and command of --help is in the man pages, every usage in docs/leaseholdctl*.md"
exit $rc

#!/bin/sh
# test_controller40_doc.sh - the plugin guide's controller stays honest:
# tests/plugins/controller40.c (the file the e2e test builds and runs) is
# at most 40 lines, every line counted, and the code block that
# docs/plugin-guide.md shows after naming the file is that file, byte for
# byte.
# In (environment, from make check): LH_SRCDIR.
set -u
s=${LH_SRCDIR:?run through make check}
f="$s/tests/plugins/controller40.c"
g="$s/docs/plugin-guide.md"
fail() { echo "FAIL: $*"; exit 1; }

[ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f does not end in a newline"
n=$(wc -l < "$f")
[ "$n" -le 40 ] || fail "$f has $n lines, more than 40"
echo "ok - $f has $n lines"

tmp=$(mktemp "${TMPDIR:-/tmp}/lh-c40-XXXXXX") || exit 99
trap 'rm -f "$tmp"' EXIT
# the first ```c block after the guide's first line naming the file
awk 'index($0, "tests/plugins/controller40.c") { named = 1 }
     named && !inside && $0 == "```c" { inside = 1; next }
     inside && $0 == "```" { exit }
     inside { print }' "$g" > "$tmp"
[ -s "$tmp" ] || fail "$g has no \`\`\`c block after naming tests/plugins/controller40.c"
if ! cmp -s "$f" "$tmp"; then
	diff -u "$f" "$tmp"
	fail "the guide's block differs from $f"
fi
echo "ok - the guide's block is $f"

#!/bin/sh
# contrib/systemd/test-syscalls.sh - the unit's SystemCallFilter= lets the
# daemon work: a real daemon (real etcd; one plugin on a thread, two in
# leasehold-worker processes, one of them writing to stderr itself, so the
# relay runs too) is traced with strace -f through start, readiness, a
# reload (SIGHUP) and a graceful shutdown, and every system call it and its
# children made must pass the unit's SystemCallFilter= (@system-service
# minus @privileged) as this machine's systemd-analyze expands the groups,
# and every socket's address family its RestrictAddressFamilies=. Skipped (77) without strace or
# systemd-analyze.
set -u
b=${LH_BUILDDIR:-.}
b=$(cd "$b" && pwd)
for tool in strace systemd-analyze curl; do
	command -v $tool >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
[ -n "${ETCD:-}" ] || { echo "SKIP: no etcd chosen (run through make check)"; exit 77; }
tmp=$(mktemp -d) || exit 99
etcd_pid= strace_pid=
cleanup() {
	[ -n "$strace_pid" ] && kill -KILL "$strace_pid" 2>/dev/null
	[ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$tmp/daemon.log" 2>/dev/null; exit 1; }

# wait_for CMD... - run CMD until it succeeds, at most 60 s
wait_for() {
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 300 ] || return 1
		sleep 0.2 # polling: nothing to wait on from a shell
	done
}

# (the HTTP endpoint too: its default port may be taken on a shared machine)
set -- $("$b/tests/lh-freeport" 3)
cport=$1 pport=$2 hport=$3
"$ETCD" --data-dir "$tmp/etcd" --name t \
	--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "t=http://127.0.0.1:$pport" >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
wait_for curl -sf "http://127.0.0.1:$cport/health" || fail "etcd did not start"

mkdir -m 0755 "$tmp/plugins" && mkdir -m 0700 "$tmp/run" || exit 99
install -m 0644 "$b/plugin/example/.libs/reconciler-1.0.0.so" "$tmp/plugins/reconciler.so"
install -m 0644 "$b/tests/plugins/.libs/good.so" "$tmp/plugins/good.so"
install -m 0644 "$b/tests/plugins/.libs/noisy.so" "$tmp/plugins/noisy.so"
ctl="ipc://$tmp/run/control.sock"
# (sanitizer builds: LeakSanitizer cannot run under ptrace; the other tests
# look for leaks)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -qq -o "$tmp/trace" "$b/leasehold" --etcd "http://127.0.0.1:$cport" \
	--plugin-dir "$tmp/plugins" --runtime-dir "$tmp/run" --control "$ctl" --ttl 5 \
	--http "127.0.0.1:$hport" \
	--isolation thread --plugin-isolation good=process --plugin-isolation noisy=process \
	--worker "$b/leasehold-worker" --log-format json >"$tmp/daemon.log" 2>&1 &
strace_pid=$!
# the daemon is strace's child: signals go to it, not to strace
# (a /proc file has no size: read it)
has_child() { [ -n "$(cat "/proc/$strace_pid/task/$strace_pid/children")" ]; }
wait_for has_child || fail "no daemon under strace"
daemon=$(cut -d' ' -f1 "/proc/$strace_pid/task/$strace_pid/children")
for p in reconciler good noisy; do
	"$b/leaseholdctl" --control "$ctl" wait-ready $p --timeout 60 >/dev/null ||
		fail "$p did not become ready"
done
grep -q 'noisy says hello on stderr' "$tmp/daemon.log" || fail "the relay did not run"
kill -HUP "$daemon"
wait_for grep -q 'SIGHUP: rescanning' "$tmp/daemon.log" || fail "no reload"
"$b/leaseholdctl" --control "$ctl" plugins >/dev/null || fail "no answer after the reload"
kill -TERM "$daemon"
wait "$strace_pid"
rc=$?
strace_pid=
[ $rc -eq 0 ] || fail "the daemon exited $rc"
grep -q '"message":"bye"' "$tmp/daemon.log" || fail "no clean shutdown"

# the system calls made, by name
sed -n 's/^[0-9][0-9]* *\([a-z_0-9][a-z_0-9]*\)(.*/\1/p' "$tmp/trace" | sort -u >"$tmp/used"
# expand a systemd-analyze syscall group, recursively
expand() {
	systemd-analyze syscall-filter "$1" | sed -n '2,$p' | sed -e 's/^ *//' -e '/^#/d' -e '/^$/d' |
		while read -r s; do
			case $s in
			@*) expand "$s" ;;
			*) echo "$s" ;;
			esac
		done
}
# the unit's filter: SystemCallFilter= lines allow, ~ lines deny
unit=$b/contrib/systemd/leasehold.service
allow=$(sed -n 's/^SystemCallFilter=\([^~].*\)/\1/p' "$unit")
deny=$(sed -n 's/^SystemCallFilter=~//p' "$unit")
[ -n "$allow" ] || fail "no SystemCallFilter= allow list in $unit"
: >"$tmp/service"
: >"$tmp/privileged"
for g in $allow; do expand "$g" >>"$tmp/service"; done
for g in $deny; do expand "$g" >>"$tmp/privileged"; done
sort -u -o "$tmp/service" "$tmp/service"
sort -u -o "$tmp/privileged" "$tmp/privileged"
comm -23 "$tmp/service" "$tmp/privileged" >"$tmp/allowed"
bad=$(comm -23 "$tmp/used" "$tmp/allowed")
echo "$(wc -l <"$tmp/used") distinct system calls, $(wc -l <"$tmp/allowed") allowed by the unit"
[ -n "$bad" ] && fail "system calls the unit's filter ($allow ~$deny) refuses: $(echo $bad)"
# and the address families of the sockets it made
families=$(sed -n 's/^[0-9][0-9]* *socket(\(AF_[A-Z0-9]*\).*/\1/p' "$tmp/trace" | sort -u)
unit_families=$(sed -n 's/^RestrictAddressFamilies=//p' "$unit")
for f in $families; do
	case " $unit_families " in
	*" $f "*) ;;
	*) fail "socket family $f is not in RestrictAddressFamilies=$unit_families" ;;
	esac
done
echo "socket families used: $(echo $families)"
[ "$(wc -l <"$tmp/used")" -gt 20 ] || fail "too few system calls traced: is strace working?"
echo "ok - every system call is allowed by SystemCallFilter=$allow ~$deny"
exit 0

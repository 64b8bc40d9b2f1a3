#!/bin/sh
# deb-check.sh WORK SRC - `make deb-check`: build the Debian packages from
# SRC (a copy of the distribution files in the scratch directory WORK), install
# them, run the packaged daemon with the packaged example plugin on a
# throwaway etcd, check that `leaseholdctl wait-ready reconciler` succeeds,
# and purge the packages again.
# In: ETCD (tests/etcd-select.sh), LH_FREEPORT (tests/lh-freeport),
#     LH_DEBS (where to copy the built packages), LH_KEEP_TMP (keep WORK).
# Needs root (or passwordless sudo) for apt-get/dpkg; installs debhelper,
# dpkg-dev and the build dependencies when they are missing.
set -eu
work=$1 src=$2
say() { echo "deb-check: $*"; }
fail() { echo "deb-check: FAILED: $*" >&2; exit 1; }

sudo=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
		fail "needs root or passwordless sudo (dpkg -i, apt-get)"
	sudo="sudo -n"
fi
if dpkg-query -W -f='${Status}\n' leasehold leasehold-dev 2>/dev/null | grep -q ' installed$'; then
	fail "leasehold or leasehold-dev is installed on this machine already; deb-check would replace and purge it"
fi

daemon_pid= etcd_pid= installed=
cleanup() {
	rc=$?
	[ -n "$daemon_pid" ] && kill -KILL "$daemon_pid" 2>/dev/null
	[ -n "$etcd_pid" ] && kill -KILL "$etcd_pid" 2>/dev/null
	[ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
	[ -n "$etcd_pid" ] && wait "$etcd_pid" 2>/dev/null
	if [ -n "$installed" ]; then
		say "purging leasehold leasehold-dev"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q leasehold leasehold-dev \
			>"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; rc=1; }
	fi
	if [ $rc -ne 0 ]; then
		for f in build.log install.log etcd.log leasehold.log; do
			[ -s "$work/$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$work/$f"; }
		done >&2
	fi
	if [ -n "${LH_KEEP_TMP:-}" ] || [ $rc -ne 0 ]; then
		echo "deb-check: kept $work" >&2
	else
		rm -rf "$work"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_for DESC SECONDS CMD... - run CMD every 50 ms until it succeeds
wait_for() {
	desc=$1 secs=$2
	shift 2
	tries=$((secs * 20))
	until "$@" >/dev/null 2>&1; do
		tries=$((tries - 1))
		[ $tries -gt 0 ] || fail "$desc: not within $secs s"
		sleep 0.05
	done
}

# 1. the tools to build packages, and the build dependencies
tools=
command -v dpkg-buildpackage >/dev/null 2>&1 || tools="$tools dpkg-dev"
command -v dh >/dev/null 2>&1 || tools="$tools debhelper"
deps=$(cd "$src" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p' |
	sed 's/([^)]*)//g') || true
if [ -n "$tools$deps" ]; then
	say "installing the Debian packaging tools and build dependencies:$tools $deps"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		$tools $deps >"$work/tools.log" 2>&1 || { cat "$work/tools.log" >&2; fail "apt-get install"; }
fi

# 2. build the binary packages (out of the source tree: $src is a copy)
say "building the packages in $src (dpkg-buildpackage -us -uc -b)"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
	fail "dpkg-buildpackage (see build.log)"
set -- "$work"/leasehold_*.deb "$work"/leasehold-dev_*.deb
for deb; do [ -f "$deb" ] || fail "no $deb was built"; done
say "built $(cd "$work" && echo leasehold_*.deb leasehold-dev_*.deb)"
if [ -n "${LH_DEBS:-}" ]; then
	mkdir -p "$LH_DEBS" && cp "$@" "$LH_DEBS"/
fi

# 3. install them (apt-get resolves the run-time dependencies)
installed=yes
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
	>"$work/install.log" 2>&1 || fail "apt-get install of the packages (see install.log)"
say "installed; checking the installed files"
for f in /usr/bin/leasehold /usr/bin/leaseholdctl /usr/libexec/leasehold/leasehold-worker; do
	[ -x "$f" ] || fail "$f is missing"
done
examples=/usr/share/doc/leasehold/examples
[ -f "$examples/reconciler-1.1.0.so" ] && [ -f "$examples/reconciler.c" ] ||
	fail "the example plugin is not in $examples"
for page in leasehold leaseholdctl leasehold-plugin; do
	man -w "$page" >/dev/null 2>&1 || fail "no man page $page"
done
if dpkg -L leasehold leasehold-dev | grep -E '\.la$|/tests?/'; then
	fail "the packages contain libtool archives or test files (above)"
fi
plugindir=$(pkg-config --variable=plugindir leasehold-plugin)
[ "$plugindir" = /etc/leasehold/plugins.d ] || fail "pkg-config plugindir is '$plugindir'"
[ -d "$plugindir" ] || fail "$plugindir does not exist"
leasehold --help | grep -qF "(default $plugindir)" || fail "leasehold's default --plugin-dir is not $plugindir"
# the unit is installed, neither enabled nor started; the example
# configuration is the conffile /etc/leasehold/leasehold.conf and is valid
[ -f /lib/systemd/system/leasehold.service ] || fail "no /lib/systemd/system/leasehold.service"
[ ! -e /etc/systemd/system/multi-user.target.wants/leasehold.service ] ||
	fail "the package enabled leasehold.service"
dpkg-query -W -f='${Conffiles}\n' leasehold | grep -q ' /etc/leasehold/leasehold.conf ' ||
	fail "/etc/leasehold/leasehold.conf is not a conffile of the package"
leasehold --check-config >/dev/null || fail "leasehold --check-config refuses the shipped configuration"
# the SDK as installed builds the example's source
cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags leasehold-plugin) \
	-o "$work/reconciler-built.so" "$examples/reconciler.c" || fail "the example does not build against leasehold-dev"

# 4. a throwaway etcd on free loopback ports
ports=$("$LH_FREEPORT" 2) || fail "no free ports"
cport=$(echo "$ports" | sed -n 1p) pport=$(echo "$ports" | sed -n 2p)
etcd_url=http://127.0.0.1:$cport
say "starting etcd ($ETCD) at $etcd_url"
"$ETCD" --name deb-check --data-dir "$work/etcd" \
	--listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "deb-check=http://127.0.0.1:$pport" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
wait_for "etcd healthy" 30 curl -fsS "$etcd_url/health"

# 5. the packaged daemon with the packaged example plugin (process isolation,
#    the default: the packaged leasehold-worker runs the plugin)
mkdir -m 0755 "$work/plugins"
cp "$examples/reconciler-1.1.0.so" "$work/plugins/.reconciler.so"
mv "$work/plugins/.reconciler.so" "$work/plugins/reconciler.so"
# configured by a file, as an operator does (leaseholdctl finds the control
# socket from the same file)
conf=$work/leasehold.conf
cat >"$conf" <<EOC
etcd: [$etcd_url]
node-id: deb-check
prefix: /deb-check
plugin-dir: $work/plugins
runtime-dir: $work/run
control: ipc://$work/control.sock
EOC
say "starting /usr/bin/leasehold --config $conf with $examples/reconciler-1.1.0.so"
/usr/bin/leasehold --config "$conf" >"$work/leasehold.log" 2>&1 &
daemon_pid=$!
wait_for "the control socket" 30 leaseholdctl --config "$conf" version
leaseholdctl --config "$conf" wait-ready reconciler --timeout 60 ||
	fail "leaseholdctl wait-ready reconciler exited $?"
say "leaseholdctl wait-ready reconciler: ready"
leaseholdctl --config "$conf" plugins
worker=
for child in $(pgrep -P "$daemon_pid"); do
	[ "$(readlink "/proc/$child/exe" 2>/dev/null)" = /usr/libexec/leasehold/leasehold-worker ] && worker=$child
done
[ -n "$worker" ] || fail "no /usr/libexec/leasehold/leasehold-worker child of the daemon"
say "the plugin runs in /usr/libexec/leasehold/leasehold-worker (pid $worker)"

# 6. a graceful stop
kill -TERM "$daemon_pid"
status=0
wait "$daemon_pid" || status=$?
daemon_pid=
[ $status -eq 0 ] || fail "leasehold exited $status on SIGTERM"
kill -TERM "$etcd_pid"
wait "$etcd_pid" || true
etcd_pid=
say "PASS: the packaged daemon ran the packaged example plugin"

#!/bin/bash
# dashboard-cost.sh BUILDDIR [SECONDS] - run by `make bench-dashboard`:
# what the dashboard costs an idle host. One etcd on loopback, one real
# leasehold leading the example plugin (--ttl 10, --reconcile-interval 1h),
# its CPU (utime+stime from /proc/PID/stat) over a window of SECONDS
# (default 60) in three cases: nobody on the HTTP endpoint; a long-poll
# client on /api/v1/events (what an open page does while nothing changes);
# headless Chromium showing the page (when installed). Prints a table with
# the ratios to the first case.
set -eu
build=$(cd "$1" && pwd)
secs=${2:-60}
etcd=${ETCD:-$build/etcd-3.5/usr/bin/etcd}
[ -x "$etcd" ] || etcd=$(command -v etcd)
work=$(mktemp -d /tmp/lh-dashcost-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
ep=$(free_port) pp=$(free_port) hp=$(free_port)
"$etcd" --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$ep" \
	--advertise-client-urls "http://127.0.0.1:$ep" --listen-peer-urls "http://127.0.0.1:$pp" \
	--initial-advertise-peer-urls "http://127.0.0.1:$pp" \
	--initial-cluster "default=http://127.0.0.1:$pp" >"$work/etcd.log" 2>&1 &
pids+=($!)
curl -sf --retry 60 --retry-all-errors --retry-delay 1 -o /dev/null "http://127.0.0.1:$ep/health"
mkdir -p "$work/plugins" "$work/rt"
cp "$build/plugin/example/.libs/reconciler-1.0.0.so" "$work/plugins/reconciler.so"
"$build/leasehold" --etcd "http://127.0.0.1:$ep" --node-id n1 --plugin-dir "$work/plugins" \
	--runtime-dir "$work/rt" --control "ipc://$work/ctl.sock" --http "127.0.0.1:$hp" \
	--ttl 10 --reconcile-interval 1h >"$work/leasehold.log" 2>&1 &
lh=$!
pids+=($lh)
curl -sf --retry 60 --retry-all-errors --retry-delay 1 -o /dev/null \
	"http://127.0.0.1:$hp/leader/reconciler"

ticks() { awk '{print $14 + $15}' "/proc/$lh/stat"; }
window() { # the CPU seconds of the window
	local t0 t1
	t0=$(ticks)
	sleep "$secs" # the measurement window itself
	t1=$(ticks)
	awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d / hz }'
}

base=$(window)
(g=0; while :; do
	g=$(curl -s "http://127.0.0.1:$hp/api/v1/events?since=$g" | tr -dc 0-9)
	[ -n "$g" ] || g=0
done) &
poller=$!
poll=$(window)
kill "$poller"; wait "$poller" 2>/dev/null || true
browser=-
chromium=${LH_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$chromium" ]; then
	"$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$work/chromium" \
		--remote-debugging-port=0 "http://127.0.0.1:$hp/" >"$work/chromium.log" 2>&1 &
	pids+=($!)
	browser=$(window)
fi
ratio() { awk -v a="$1" -v b="$base" 'BEGIN { if (a == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
echo "| case (idle host, 1 plugin leading, ${secs} s window) | CPU s | ratio |"
echo "| --- | --- | --- |"
echo "| nobody on the HTTP endpoint | $base | 1.00 |"
echo "| a long-poll client on /api/v1/events | $poll | $(ratio "$poll") |"
echo "| headless Chromium showing the page | $browser | $(ratio "$browser") |"

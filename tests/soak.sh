#!/usr/bin/env bash
# soak.sh BUILD_DIR - `make soak`: three leasehold hosts under steady churn
# for SOAK_SECONDS (default 3600), sampling each daemon's resources every
# SOAK_SAMPLE seconds (default 10). Fails when any resource of any daemon,
# after the first SOAK_WARMUP seconds (default 300), grows past its bound
# over what it reached during the warm-up:
#   RSS      the warm-up's maximum + 20% + 4 MiB
#   fds      the warm-up's maximum + 16
#   threads  the warm-up's maximum + 4
#   etcd     TCP connections to etcd: the warm-up's maximum + 4
# The churn, one step every SOAK_STEP seconds (default 2), in turn: input
# puts and deletes (watch traffic, every step), a hot reload (a host's
# plugin file replaced by the other of two releases: 1.2.0 <-> 1.1.0 on the
# host, never the last 1.2.0 host), a worker SIGKILLed (process isolation),
# a switchover, a cluster configuration change.
# Writes the samples to SOAK_OUT (default soak-samples.tsv in the current
# dir) and prints start/end/max per resource and host. Everything it starts
# is stopped at the end (also on error or Ctrl-C); its temp dir is removed
# unless LH_KEEP_TMP is set.
set -euo pipefail

build=$(cd "${1:?usage: soak.sh BUILD_DIR}" && pwd)
LH_BUILDDIR=$build
. "$(dirname "$0")/etcd-select.sh"
etcd_select_check soak
seconds=${SOAK_SECONDS:-3600} warmup=${SOAK_WARMUP:-300}
sample_every=${SOAK_SAMPLE:-10} step_every=${SOAK_STEP:-2}
out=${SOAK_OUT:-$PWD/soak-samples.tsv}
ctl="$build/leaseholdctl"
if ldd "$build/.libs/leasehold" "$build/leasehold" 2>/dev/null | grep -q libasan; then
  # ASan keeps freed memory in a quarantine of up to 256 MiB: RSS grows
  # for a long while with no leak at all
  echo "soak: $build is a sanitizer build; its RSS figures mean nothing (soak a build configured without --enable-sanitizers)" >&2
fi
work=$(mktemp -d /tmp/leasehold-soak.XXXXXX)
pids=()
hostpid=()

cleanup() {
  local rc=$?
  local i
  # the hosts first (they resign and revoke through etcd), etcd last
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  if [ $rc -ne 0 ]; then for n in 1 2 3; do tail -n 30 "$work/h$n.log" >&2 || true; done; fi
  [ -n "${LH_KEEP_TMP:-}" ] && echo "soak: kept $work" >&2 || rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# wait_for DESC SECONDS CMD... - run CMD every 50 ms until it succeeds
wait_for() {
  local desc=$1 secs=$2; shift 2
  local deadline=$(( $(now_ms) + secs * 1000 ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(now_ms)" -ge "$deadline" ]; then echo "soak: timed out waiting for: $desc" >&2; return 1; fi
    sleep 0.05
  done
}

read -r cport pport < <("$build/tests/lh-freeport" 2 | paste -sd' ')
etcd_url="http://127.0.0.1:$cport"
"$ETCD" --name soak --data-dir "$work/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
  --initial-cluster "soak=http://127.0.0.1:$pport" \
  --auto-compaction-mode revision --auto-compaction-retention 10000 >"$work/etcd.log" 2>&1 &
pids+=($!)
wait_for "etcd healthy" 20 curl -fsS "$etcd_url/health"

release=() # host -> release its plugin file has
install_plugin() { # host release
  local h=$1 rel=$2
  cp "$build/plugins/reconciler-$rel.so" "$work/h$h/plugins/.reconciler.so.tmp"
  mv -f "$work/h$h/plugins/.reconciler.so.tmp" "$work/h$h/plugins/reconciler.so"
  release[h]=$rel
}
start_host() { # n
  local n=$1
  "$build/leasehold" --etcd "$etcd_url" --node-id "node$n" --plugin-dir "$work/h$n/plugins" \
    --runtime-dir "$work/h$n/run" --control "ipc://$work/h$n/ctl.sock" --http none \
    --isolation process --ttl 5 --reconcile-wait 100ms --reconcile-interval 1s >"$work/h$n.log" 2>&1 &
  pids+=($!)
  hostpid[n]=$!
}
ctl_on() { local n=$1; shift; timeout 30 "$ctl" --control "ipc://$work/h$n/ctl.sock" "$@"; }
status_is() { ctl_on 1 status reconciler | grep -q "^status: *$1 $2"; }

for n in 1 2 3; do mkdir -p "$work/h$n/plugins"; install_plugin "$n" 1.2.0; start_host "$n"; done
wait_for "status DONE 1.2.0" 60 status_is DONE 1.2.0

data=/leasehold/reconciler/data
b64() { printf %s "$1" | base64 | tr -d '\n'; }
etcd_post() { curl -fsS -m 10 "$etcd_url/v3/kv/$1" -d "$2" >/dev/null || echo "soak: etcd $1 failed" >&2; }

# sample N T: one line per host: t, host, rss_kib, fds, threads, etcd connections, workers
sample() {
  local t=$1 n pid rss thr fds conns workers
  for n in 1 2 3; do
    pid=${hostpid[n]}
    [ -d "/proc/$pid" ] || { echo "soak: node$n (pid $pid) is gone" >&2; return 1; }
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    thr=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    conns=$(ss -Htnp state established "( dport = :$cport )" 2>/dev/null | grep -c "pid=$pid," || true)
    workers=$(pgrep -c -P "$pid" leasehold-work || true)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "node$n" "$rss" "$fds" "$thr" "$conns" "$workers" >>"$out"
  done
}

# one step of churn; k counts steps
churn() {
  local k=$1 n pids_w
  local i=$((k % 50))
  etcd_post put "{\"key\":\"$(b64 "$data/desired/k$i")\",\"value\":\"$(b64 "v$k")\"}"
  if [ $((k % 7)) -eq 3 ]; then
    etcd_post deleterange "{\"key\":\"$(b64 "$data/desired/k$(((i + 25) % 50))")\"}"
  fi
  case $((k % 4)) in
  0) # hot reload: flip one host between 1.2.0 and 1.1.0, keeping a 1.2.0 host
    n=$(( (k / 4) % 3 + 1 ))
    if [ "${release[n]}" = 1.2.0 ]; then
      local others=0 m
      for m in 1 2 3; do
        if [ "$m" != "$n" ] && [ "${release[m]}" = 1.2.0 ]; then others=$((others + 1)); fi
      done
      if [ $others -ge 1 ]; then install_plugin "$n" 1.1.0; fi
    else
      install_plugin "$n" 1.2.0
    fi ;;
  1) # a worker crash
    n=$(( (k / 4) % 3 + 1 ))
    pids_w=$(pgrep -P "${hostpid[n]}" leasehold-work || true)
    if [ -n "$pids_w" ]; then kill -KILL $pids_w 2>/dev/null || true; fi ;;
  2) ctl_on $(( (k / 4) % 3 + 1 )) switchover reconciler --timeout 5s >/dev/null 2>&1 || true ;;
  3) printf '{"label":"soak%d"}\n' $((k % 10)) >"$work/config.json"
     ctl_on 1 config set reconciler "$work/config.json" >/dev/null 2>&1 || true ;;
  esac
  return 0
}

printf 't\thost\trss_kib\tfds\tthreads\tetcd_conns\tworkers\n' >"$out"
start=$(now_ms) next_sample=0 k=0
echo "soak: ${seconds}s, warm-up ${warmup}s, a sample every ${sample_every}s into $out"
while :; do
  t=$(( ($(now_ms) - start) / 1000 ))
  [ "$t" -ge "$seconds" ] && break
  if [ "$t" -ge "$next_sample" ]; then sample "$t"; next_sample=$((next_sample + sample_every)); fi
  churn "$k"; k=$((k + 1))
  sleep "$step_every"
done
sample "$t"
echo "soak: $k churn steps"

# the verdict: per host and resource, start / warm-up max / end / max after warm-up
awk -F'\t' -v w="$warmup" '
  NR == 1 { for (i = 3; i <= 6; i++) name[i] = $i; next }
  { h = $2; hosts[h] = 1
    for (i = 3; i <= 6; i++) {
      v = $i + 0
      if (!((h, i) in first)) first[h, i] = v
      last[h, i] = v
      if ($1 + 0 < w) { if (v > wmax[h, i]) wmax[h, i] = v }
      else { seen_after = 1; if (v > amax[h, i]) amax[h, i] = v }
    } }
  END {
    if (!seen_after) { print "soak: no sample after the warm-up (run longer than SOAK_WARMUP)"; exit 1 }
    bad = 0
    printf "%-6s %-10s %8s %8s %8s %8s %8s\n", "host", "resource", "start", "warmup", "end", "max", "bound"
    for (h in hosts) for (i = 3; i <= 6; i++) {
      b = wmax[h, i]
      if (i == 3) b = int(b * 1.2 + 4096); else if (i == 4) b += 16; else b += 4
      printf "%-6s %-10s %8d %8d %8d %8d %8d%s\n", h, name[i], first[h, i], wmax[h, i], last[h, i],
             amax[h, i], b, (amax[h, i] > b ? "  GREW" : "")
      if (amax[h, i] > b) bad = 1
    }
    exit bad
  }' "$out" || { echo "soak: a resource grew past its bound (see above)" >&2; exit 1; }
echo "soak: nothing grew past its bound"

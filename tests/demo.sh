#!/usr/bin/env bash
# demo.sh BUILD_DIR - the rolling-upgrade demo behind `./quickstart demo`.
#
# Starts a throwaway etcd on free loopback ports and three leasehold hosts
# running reconciler.so 1.0.0, then rolls the cluster to 1.1.0 (an
# incompatible change) by hot reload, one host at a time; at every step an
# input is changed and the output written for it is shown (1.0.0 keeps
# reconciling until the last 1.0.0 node upgraded, then 1.1.0 takes over),
# with the plugin table. Then the cluster view (one row per node), a
# switchover to a chosen node, and an input changed right after SIGTERM of
# the leader, acted on by the new leader. Everything it starts is stopped at
# the end (also on error or Ctrl-C), and its temp dir is removed.
set -euo pipefail

build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd)
# the etcd `make check` would use: $ETCD, else $ETCD_SERIES, else 3.5 when
# ./quickstart has unpacked it into the build dir, else the system's
LH_BUILDDIR=$build
. "$(dirname "$0")/etcd-select.sh"
etcd_select_check demo
etcd_bin=$ETCD
ctl="$build/leaseholdctl"
work=$(mktemp -d /tmp/leasehold-demo.XXXXXX)
pids=()
hostpid=() # node number -> its leasehold's pid

cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# wait_for DESC SECONDS CMD... - run CMD every 50 ms until it succeeds
wait_for() {
  local desc=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s%N) + secs * 1000000000 ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s%N)" -ge "$deadline" ]; then
      echo "demo: timed out waiting for: $desc" >&2
      for n in 1 2 3 4; do [ -f "$work/h$n.log" ] && tail -n 20 "$work/h$n.log" >&2; done
      return 1
    fi
    sleep 0.05
  done
}

read -r cport pport < <("$build/tests/lh-freeport" 2 | paste -sd' ')
etcd_url="http://127.0.0.1:$cport"
say "starting a throwaway etcd at $etcd_url"
"$etcd_bin" --name demo --data-dir "$work/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
  --initial-cluster "demo=http://127.0.0.1:$pport" >"$work/etcd.log" 2>&1 &
pids+=($!)
wait_for "etcd healthy" 20 curl -fsS "$etcd_url/health"

install_plugin() { # host release: write to a temp name, then rename into place
  local h=$1 rel=$2
  cp "$build/plugins/reconciler-$rel.so" "$work/h$h/plugins/.reconciler.so.tmp"
  chmod 0644 "$work/h$h/plugins/.reconciler.so.tmp"
  mv -f "$work/h$h/plugins/.reconciler.so.tmp" "$work/h$h/plugins/reconciler.so"
}

start_host() { # n
  local n=$1
  mkdir -p "$work/h$n/plugins"
  "$build/leasehold" --etcd "$etcd_url" --node-id "node$n" --plugin-dir "$work/h$n/plugins" \
    --runtime-dir "$work/h$n/run" --control "ipc://$work/h$n/ctl.sock" --http none \
    --ttl 5 --reconcile-wait 500ms --reconcile-interval 30s >"$work/h$n.log" 2>&1 &
  pids+=($!)
  hostpid[n]=$!
}

ctl_on() { local n=$1; shift; "$ctl" --control "ipc://$work/h$n/ctl.sock" "$@"; }
table() { # host: its `leaseholdctl plugins` (the plugin, then every node's row)
  echo "\$ leaseholdctl plugins   # on node$1"
  ctl_on "$1" plugins
}
status_is() { # host state version
  ctl_on "$1" status reconciler | grep -q "^status: *$2 $3"
}
leading() { ctl_on "$1" status reconciler | grep -q '^state: *leading'; }
in_election() { ctl_on "$1" status reconciler | grep -Eq '^state: *(leading|campaigning)'; }
member_release() { # host release (as seen by host 1)
  ctl_on 1 members reconciler | grep -Eq "^\| node$1 +\| $2 "
}

# the example controller's input and output keys (the JSON gateway, no etcdctl needed)
data=/leasehold/reconciler/data
b64() { printf %s "$1" | base64 | tr -d '\n'; }
etcd_put() { curl -fsS "$etcd_url/v3/kv/put" -d "{\"key\":\"$(b64 "$1")\",\"value\":\"$(b64 "$2")\"}" >/dev/null; }
etcd_get() {
  curl -fsS "$etcd_url/v3/kv/range" -d "{\"key\":\"$(b64 "$1")\"}" |
    sed -n 's/.*"value":"\([^"]*\)".*/\1/p' | base64 -d
}
output_has() { etcd_get "$data/out/$1" | grep -qF "$2"; }
writer_of() { # output name: the node of the journal record its reconcile began with (the
  # latest at or before the output's revision: the plugin writes it first, then applies)
  local rev
  rev=$(curl -fsS "$etcd_url/v3/kv/range" -d "{\"key\":\"$(b64 "$data/out/$1")\"}" |
    sed -n 's/.*"mod_revision":"\([0-9]*\)".*/\1/p')
  curl -fsS "$etcd_url/v3/kv/range" -d "{\"key\":\"$(b64 "$data/journal/")\",\
\"range_end\":\"$(b64 "$data/journal0")\",\"max_mod_revision\":\"$rev\",\
\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\",\"limit\":\"1\"}" |
    sed -n 's/.*"value":"\([^"]*\)".*/\1/p' | base64 -d | sed -n 's/^node=\([^ ]*\) token=\([0-9]*\) release=\([^ ]*\).*/\1, release \3, fencing token \2/p'
}

say "three hosts with reconciler.so 1.0.0"
for n in 1 2 3; do mkdir -p "$work/h$n/plugins"; install_plugin "$n" 1.0.0; start_host "$n"; done
wait_for "status DONE 1.0.0" 30 status_is 1 DONE 1.0.0
table 1

leader_of() { for n in 1 2 3; do leading "$n" && { echo "$n"; return 0; }; done; return 1; }
old_leader=$(leader_of)
order=()
for n in 1 2 3; do [ "$n" != "$old_leader" ] && order+=("$n"); done
order+=("$old_leader")   # upgrade the leader last, as an operator would

step=1
for n in "${order[@]}"; do
  say "step $step: hot reload of reconciler.so 1.1.0 on node$n (rename into its plugin dir)"
  install_plugin "$n" 1.1.0
  wait_for "node$n runs 1.1.0" 20 member_release "$n" 1.1.0
  if [ "$step" -lt 3 ]; then
    # 1.1.0 cannot act while 1.0.0 members remain: the 1.0.0 leader keeps
    # leading and reconciling, the upgraded node stands by
    wait_for "node$old_leader still leads" 20 leading "$old_leader"
    echo "(1.0.0 keeps leading and reconciling while 1.0.0 members remain: status stays DONE 1.0.0)"
  else
    # the last 1.0.0 node upgraded: one handover to 1.1.0
    wait_for "status DONE 1.1.0" 30 status_is 1 DONE 1.1.0
    echo "(the last 1.0.0 node upgraded: one handover, 1.1.0 leads and writes its own format)"
  fi
  # the reconciler never stops: an input changed now is acted on at once
  # (by a watch, well within the 30 s reconcile interval)
  echo "\$ put $data/desired/rollout = step$step"
  etcd_put "$data/desired/rollout" "step$step"
  wait_for "out/rollout for step$step" 10 output_has rollout "step$step"
  echo "$data/out/rollout = $(etcd_get "$data/out/rollout")   (written by $(writer_of rollout))"
  table "$n"
  step=$((step + 1))
done

say "readiness after the incompatible change (min_compatible_release 1.1.0)"
echo "\$ leaseholdctl wait-ready reconciler   # on node1, release 1.1.0"
ctl_on 1 wait-ready reconciler --timeout 10 && echo "-> ready (exit 0)"
say "a late node4 still on 1.0.0 joins: it must not serve against the new state"
install_plugin_dir() { mkdir -p "$work/h4/plugins"; }
install_plugin_dir; install_plugin 4 1.0.0; start_host 4
wait_for "node4 registered" 20 member_release 4 1.0.0
echo "\$ leaseholdctl wait-ready reconciler --timeout 2   # on node4, release 1.0.0"
set +e
ctl_on 4 wait-ready reconciler --timeout 2; rc=$?
set -e
echo "-> exit $rc (not ready: the status requires >= 1.1.0)"
[ "$rc" -eq 1 ] || { echo "demo: expected wait-ready to time out on node4" >&2; exit 1; }
echo "\$ leaseholdctl plugins   # on node4"
ctl_on 4 plugins

say "the cluster view: every node's own state, from any node"
echo "\$ leaseholdctl members reconciler   # on node1"
ctl_on 1 members reconciler

leader=$(leader_of)
for n in 1 2 3; do [ "$n" != "$leader" ] && target=$n; done
say "switchover: node$leader hands over to node$target (gracefully, nothing stops)"
wait_for "node$target campaigns" 20 in_election "$target"
echo "\$ leaseholdctl switchover reconciler --to node$target --timeout 20s   # on node1"
ctl_on 1 switchover reconciler --to "node$target" --timeout 20s
wait_for "node$target leads" 20 leading "$target"
echo "\$ leaseholdctl history reconciler   # on node1: the term ended by the switchover"
ctl_on 1 history reconciler | head -n 5

say "an input changed right after SIGTERM of the leader (node$target)"
etcd_put "$data/desired/greeting" hello
wait_for "out/greeting for hello" 20 output_has greeting '"value":"hello"'
echo "$data/out/greeting = $(etcd_get "$data/out/greeting")   (written by $(writer_of greeting))"
echo "\$ kill -TERM <node$target>; put $data/desired/greeting = world   # at once"
kill -TERM "${hostpid[$target]}"
etcd_put "$data/desired/greeting" world
wait "${hostpid[$target]}" 2>/dev/null || true
wait_for "out/greeting for world" 30 output_has greeting '"value":"world"'
new_leader=$(leader_of)
echo "$data/out/greeting = $(etcd_get "$data/out/greeting")   (written by $(writer_of greeting); node$new_leader leads now)"
[ "$new_leader" != "$target" ] || { echo "demo: node$target still leads after SIGTERM" >&2; exit 1; }
echo "\$ leaseholdctl members reconciler   # on node$new_leader"
ctl_on "$new_leader" members reconciler

say "shutting down (SIGTERM: drain, resign, revoke)"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
echo "done: everything stopped, $work removed"

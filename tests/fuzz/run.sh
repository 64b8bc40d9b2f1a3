#!/usr/bin/env bash
# run.sh - build every fuzz target with libFuzzer + ASan + UBSan (clang) and
# run each for a bounded time. Exit 1 if any target crashed (or failed to
# build), 0 otherwise.
#
#   tests/fuzz/run.sh BUILDDIR [TARGET...]      (also: make fuzz)
#   tests/fuzz/run.sh BUILDDIR --gen-seeds      rewrite the binary seeds
#
# BUILDDIR is a configured and built leasehold build tree: the generated
# proto/*.pb-c.[ch] and config.h are taken from it. Targets: gateway records
# descriptor bus control http config grpc (default: all). Environment: FUZZ_SECONDS (default
# 20, per target), FUZZ_CC (default clang), FUZZ_JOBS (parallel fuzzing
# processes per target, default 1). Work files, the growing corpora and crash
# artifacts go to BUILDDIR/fuzz/; the seed corpora in the source tree are
# only read. A crash input lands in BUILDDIR/fuzz/artifacts/TARGET/: copy it
# to tests/fuzz/regressions/TARGET/ so make check replays it for ever.
set -euo pipefail

usage() { echo "usage: $0 BUILDDIR [--gen-seeds | TARGET...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
shift
secs=${FUZZ_SECONDS:-20}
cc=${FUZZ_CC:-clang}
jobs=${FUZZ_JOBS:-1}
out=$build/fuzz
mkdir -p "$out"

for f in config.h proto/leasehold.pb-c.c proto/bus.pb-c.c proto/control.pb-c.c proto/etcd_watch.pb-c.c; do
  [ -f "$build/$f" ] || { echo "run.sh: $build/$f missing: build the tree first (make)" >&2; exit 1; }
done
command -v "$cc" >/dev/null || { echo "run.sh: $cc not found (Debian: clang, libclang-rt-14-dev)" >&2; exit 1; }

pc() { pkg-config "$@" 2>/dev/null || true; }
inc=(-I"$build" -I"$src/host" -I"$src/plugin" -I"$src/tests" -I"$src/tests/lib" -I"$src/tests/kit"
     -I"$src/tests/plugins" -I"$src/tests/fuzz")
# shellcheck disable=SC2207
pkgcflags=($(pc --cflags json-c libcurl libprotobuf-c))
warn=(-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
fuzzflags=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
           -fno-sanitize-recover=undefined)
pb_libs=($(pc --libs libprotobuf-c)); [ ${#pb_libs[@]} -gt 0 ] || pb_libs=(-lprotobuf-c)
json_libs=($(pc --libs json-c)); [ ${#json_libs[@]} -gt 0 ] || json_libs=(-ljson-c)

# The seed generator: always compiled (so it cannot rot), run on request.
"$cc" "${warn[@]}" "${inc[@]}" "${pkgcflags[@]}" -o "$out/gen_seeds" "$src/tests/fuzz/gen_seeds.c" \
  "$build/proto/leasehold.pb-c.c" "$build/proto/bus.pb-c.c" "$build/proto/control.pb-c.c" \
  "$build/proto/etcd_watch.pb-c.c" "${pb_libs[@]}"
if [ "${1:-}" = "--gen-seeds" ]; then
  mkdir -p "$src"/tests/fuzz/corpus/{records,bus,control,grpc}
  "$out/gen_seeds" "$src/tests/fuzz/corpus"
  echo "run.sh: binary seeds rewritten under $src/tests/fuzz/corpus"
  exit 0
fi

all=(gateway grpc records descriptor bus control http config node_record plugin_config kit_script)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# sources and libraries of each target, and its -max_len
# the etcd JSON gateway codec, which several targets link
srcs_etcd_codec=("$src/host/etcd/etcd_json.c" "$src/host/etcd/etcd_json_request.c"
                 "$src/host/etcd/etcd_json_response.c" "$src/host/etcd/etcd_values.c")
srcs_gateway=("${srcs_etcd_codec[@]}")
libs_gateway=("${json_libs[@]}")
maxlen_gateway=16384
# the gRPC watch stream's codec, and the whole client for the targets that link it
srcs_grpc=("$src/host/etcd/etcd_grpc_watch.c" "$src/host/etcd/etcd_values.c" "$build/proto/etcd_watch.pb-c.c")
libs_grpc=("${pb_libs[@]}")
maxlen_grpc=16384
srcs_etcd_client=("$src/host/etcd/etcd.c" "$src/host/etcd/etcd_transport.c" "$src/host/etcd/etcd_auth.c"
                  "$src/host/etcd/etcd_call.c" "$src/host/etcd/etcd_watch.c" "$src/host/etcd/etcd_watch_stream.c"
                  "$src/host/etcd/etcd_grpc_watch.c" "$build/proto/etcd_watch.pb-c.c")
# roles_decode lives in election_roles.c, which links the etcd client;
curl_libs=($(pc --libs libcurl)); [ ${#curl_libs[@]} -gt 0 ] || curl_libs=(-lcurl)
# election_decode_* live in election_records.c (with the session it uses)
srcs_records=("$build/proto/leasehold.pb-c.c" "$src/host/election/election_roles.c" "${srcs_etcd_client[@]}"
              "${srcs_etcd_codec[@]}" "$src/host/base/loop.c" "$src/host/base/log.c"
              "$src/host/election/election_records.c" "$src/host/election/election_release_rule.c"
              "$src/host/election/election_pin.c" "$src/host/election/election_pin_request.c"
              "$src/host/etcd/etcd_session.c" "$src/host/base/release.c")
libs_records=("${pb_libs[@]}" "${json_libs[@]}" "${curl_libs[@]}")
maxlen_records=4096
# the loader with what it checks a descriptor with
srcs_abi_loader=("$src/host/abi/abi_loader.c" "$src/host/abi/abi_elf.c" "$src/host/abi/abi_config_schema.c"
                 "$src/host/base/duration.c")
srcs_descriptor=("${srcs_abi_loader[@]}" "$src/host/base/release.c")
libs_descriptor=("${json_libs[@]}" -ldl)
maxlen_descriptor=1024
srcs_control=("$src/host/control/control_codec.c" "$src/host/control/control_wire.c" "$src/host/base/release.c" "$build/proto/control.pb-c.c")
libs_control=("${pb_libs[@]}")
maxlen_control=8192
srcs_node_record=("$src/host/election/election_node_record.c" "${srcs_etcd_codec[@]}" "$src/host/base/release.c")
libs_node_record=("${json_libs[@]}")
maxlen_node_record=8192
srcs_plugin_config=("$src/host/abi/abi_config_doc.c" "${srcs_abi_loader[@]}" "$src/host/base/release.c")
libs_plugin_config=("${json_libs[@]}" -ldl)
maxlen_plugin_config=40000
srcs_http=("$src/host/http/http_head.c" "$src/host/http/http_query.c")
libs_http=()
maxlen_http=16384
srcs_kit_script=("$src/tests/kit/kit_script.c" "$src/host/base/duration.c" "$src/host/base/release.c")
libs_kit_script=("${json_libs[@]}")
maxlen_kit_script=8192
srcs_config=("$src/host/base/config_file.c")
libs_config=(-lyaml)
maxlen_config=8192
# (the etcd codec: the etcd error texts a failed txn carries to the plugin)
srcs_bus=("$src/host/runtime/runtime_instance.c" "$src/host/runtime/runtime_instance_queue.c"
          "$src/host/runtime/runtime_instance_txn.c" "$src/host/runtime/runtime_instance_recv.c"
          "$src/host/runtime/runtime_instance_timeout.c" "$src/host/runtime/runtime_instance_process.c"
          "$src/host/runtime/runtime_closer.c"
          "${srcs_abi_loader[@]}" "$src/host/abi/abi_key_rule.c" "$src/host/runtime/runtime_instance_shadow.c"
          "$src/host/runtime/runtime_instance_shadow_keys.c" "$src/host/runtime/runtime_instance_shadow_snapshot.c"
          "$src/host/runtime/runtime_instance_shadow_txn.c"
          "$src/host/base/loop.c" "$src/host/base/log.c"
          "$src/host/base/release.c" "$src/tests/plugins/fakehost.c" "$build/proto/bus.pb-c.c"
          "${srcs_etcd_codec[@]}" "$src/host/abi/abi_config_doc.c"
          "$src/host/runtime/runtime_instance_watch.c" "$src/host/runtime/runtime_watch.c" "$src/host/base/metrics.c"
          "$src/host/runtime/runtime_instance_keys.c" "$src/host/runtime/runtime_keyqueue.c"
          "${srcs_etcd_client[@]}")
# the worker half (process isolation)
srcs_bus+=("$src/host/worker/worker.c" "$src/host/worker/worker_api.c" "$src/host/abi/abi_bus.c"
          "$src/host/worker/worker_apply.c" "$src/host/worker/worker_config_api.c" "$src/host/worker/worker_keys.c"
          "$src/host/worker/worker_pool.c"
          "$src/host/worker/worker_crash_report.c")
libs_bus=(-lnng "${pb_libs[@]}" "${json_libs[@]}" -lcurl -lpthread -ldl)
maxlen_bus=4096

failed=()
failures=()
for t in "${targets[@]}"; do
  case " ${all[*]} " in *" $t "*) ;; *) echo "run.sh: unknown target $t" >&2; exit 2 ;; esac
  eval "tsrcs=(\"\${srcs_$t[@]}\")"
  eval "tlibs=(\"\${libs_$t[@]}\")"
  eval "maxlen=\$maxlen_$t"
  bin=$out/fuzz_$t
  echo "=== fuzz_$t: build"
  if ! "$cc" "${fuzzflags[@]}" "${warn[@]}" "${inc[@]}" "${pkgcflags[@]}" -o "$bin" \
       "$src/tests/fuzz/fuzz_$t.c" "${tsrcs[@]}" "${tlibs[@]}"; then
    echo "run.sh: fuzz_$t did not build" >&2
    failed+=("$t(build)")
    continue
  fi
  envs=()
  if [ "$t" = bus ]; then
    # the test plugin, built with the same compiler and sanitizers
    "$cc" -g -O1 -fPIC -shared -fsanitize=address,undefined -fno-sanitize-recover=undefined \
      "${warn[@]}" -I"$src/plugin" -I"$src/tests/plugins" -o "$out/recorder.so" \
      "$src/tests/plugins/recorder.c" -lpthread
    chmod 0755 "$out/recorder.so"
    envs=(LH_FUZZ_RECORDER="$out/recorder.so")
  fi
  work=$out/corpus/$t
  art=$out/artifacts/$t
  mkdir -p "$work" "$art"
  dirs=("$work" "$src/tests/fuzz/corpus/$t")
  [ -d "$src/tests/fuzz/regressions/$t" ] && dirs+=("$src/tests/fuzz/regressions/$t")
  echo "=== fuzz_$t: ${secs}s, -max_len=$maxlen, corpora: ${dirs[*]}"
  par=()
  [ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
  rc=0
  (cd "$out" && env "${envs[@]}" ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$bin" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
    "${par[@]}" -print_final_stats=1 -artifact_prefix="$art/" \
    "${dirs[@]}") > "$out/fuzz_$t.log" 2>&1 || rc=$?
  tail -n 15 "$out/fuzz_$t.log"
  if [ $rc -ne 0 ]; then
    echo "run.sh: fuzz_$t FAILED (exit $rc); log: $out/fuzz_$t.log; inputs: $art/" >&2
    failed+=("$t")
    failures+=("$t")
  else
    echo "=== fuzz_$t: ok"
  fi
done

# A CI log is often seen only by its tail: repeat, last, where each failed
# target stopped and the input that made it stop (base64, at most 4 KiB), so
# the failure can be replayed from the log alone:
#   base64 -d > in && BUILDDIR/fuzz/fuzz_TARGET in
for t in "${failures[@]}"; do
  echo "--- fuzz_$t: where it stopped" >&2
  grep -E '^(SUMMARY|==[0-9]+==ERROR)|runtime error|fuzz invariant failed| in (fuzz_|LLVMFuzzerTestOneInput|[a-z_]+ /)' \
    "$out/fuzz_$t.log" | grep -v ' in fuzzer::' | head -n 12 >&2 || true
  for a in "$out/artifacts/$t"/*; do
    [ -f "$a" ] || continue
    echo "--- fuzz_$t: input $(basename "$a") ($(wc -c < "$a") bytes), base64:" >&2
    head -c 4096 "$a" | base64 >&2
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run.sh: all targets ran ${secs}s without a crash: ${targets[*]}"

# plugins.sh - sourced (POSIX sh) by bench/bench.sh and bench/fleet.sh:
# cc_plugin builds a variant of bench/benchplugin.c the way plugin/plugin.am
# compiles the example (the project's warning flags, -fvisibility=hidden,
# only the descriptor exported).
# In: CC, CFLAGS (the project's plugin flags), src (the source tree), out
# (the directory the variants go to).

# cc_plugin FILE NAME MAJOR MINOR [MC_MAJOR [FLAGS]] - $out/FILE: plugin NAME
# of release MAJOR.MINOR.0, min_compatible MC_MAJOR.0.0 (default 1),
# descriptor flags FLAGS (default 0: a macro of plugin.h or a number);
# written to a temp name, then renamed
cc_plugin() {
	$CC $CFLAGS -fPIC -shared -I"$src/plugin" \
		-DBENCH_NAME="\"$2\"" -DBENCH_MAJOR="$3" -DBENCH_MINOR="$4" -DBENCH_PATCH=0 \
		-DBENCH_MC_MAJOR="${5:-1}" -DBENCH_MC_MINOR=0 -DBENCH_MC_PATCH=0 \
		-DBENCH_FLAGS="${6:-0}" \
		-o "$out/.$1.tmp" "$src/bench/benchplugin.c"
	chmod 0755 "$out/.$1.tmp"
	mv -f "$out/.$1.tmp" "$out/$1"
}

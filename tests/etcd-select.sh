# etcd-select.sh - sourced (POSIX sh) by the Makefile for every test and for
# the etcd-choice check, and by the demo and the soak: picks the etcd that
# `make check` (and `./quickstart demo`) runs against.
#
# In:  ETCD, ETCDCTL      given on make's command line, or empty
#      ETCD_SERIES        given on make's command line (3.4, 3.5), or empty
#      ETCD_SYSTEM, ETCDCTL_SYSTEM   what configure found on PATH
#      LH_BUILDDIR        the build dir; ./quickstart unpacks etcd X.Y into
#                         $LH_BUILDDIR/etcd-X.Y/usr/bin/
# Out: ETCD, ETCDCTL, ETCD_SERIES (the series asked for, or 3.5 when that was
#      the default pick), exported.
#
# ETCD wins; else ETCD_SERIES picks the unpacked etcd of that series, or the
# system's (whose version etcd_select_check verifies); else etcd 3.5 when it
# is unpacked, else the system's.
# Outside make (the demo, the soak: they set LH_BUILDDIR) the inputs come
# from the environment, and the etcd on PATH stands in for configure's.
ETCD=${ETCD:-} ETCDCTL=${ETCDCTL:-} ETCD_SERIES=${ETCD_SERIES:-}
ETCD_SYSTEM=${ETCD_SYSTEM-$(command -v etcd || echo /usr/bin/etcd)} ETCDCTL_SYSTEM=${ETCDCTL_SYSTEM:-}
if [ -z "$ETCD" ]; then
	if [ -z "$ETCD_SERIES" ] && [ -x "$LH_BUILDDIR/etcd-3.5/usr/bin/etcd" ]; then
		ETCD_SERIES=3.5
	fi
	if [ -n "$ETCD_SERIES" ] && [ -x "$LH_BUILDDIR/etcd-$ETCD_SERIES/usr/bin/etcd" ]; then
		ETCD=$LH_BUILDDIR/etcd-$ETCD_SERIES/usr/bin/etcd
	else
		ETCD=$ETCD_SYSTEM
	fi
fi
if [ -z "$ETCDCTL" ]; then
	# the etcdctl next to that etcd, else the system's
	case $ETCD in
	*/*) ETCDCTL=${ETCD%/*}/etcdctl ;;
	*) ETCDCTL= ;;
	esac
	[ -n "$ETCDCTL" ] && [ -x "$ETCDCTL" ] || ETCDCTL=$ETCDCTL_SYSTEM
fi
export ETCD ETCDCTL ETCD_SERIES

# etcd_select_check [WHO] - print which etcd this run uses ("WHO: etcd
# 3.5.16 (PATH)", WHO defaults to "make check"); fail (1) with a reason when it
# cannot be run or is not of the series asked for.
etcd_select_check() {
	etcd_select_who=${1:-make check}
	etcd_select_version=$("$ETCD" --version 2>/dev/null | sed -n 1p)
	case $etcd_select_version in
	"etcd Version: "*) ;;
	*)
		echo "$etcd_select_who: cannot run etcd '$ETCD' (Debian: apt-get install etcd-server," \
			"or ./quickstart test, which also fetches etcd 3.5)" >&2
		return 1
		;;
	esac
	case $ETCD_SERIES:$etcd_select_version in
	:* | *":etcd Version: $ETCD_SERIES".*) ;;
	*)
		echo "$etcd_select_who: ETCD_SERIES=$ETCD_SERIES, but $ETCD is" \
			"'${etcd_select_version#etcd Version: }' (./quickstart test unpacks etcd 3.5" \
			"into $LH_BUILDDIR/etcd-3.5)" >&2
		return 1
		;;
	esac
	echo "$etcd_select_who: etcd ${etcd_select_version#etcd Version: } ($ETCD)"
}

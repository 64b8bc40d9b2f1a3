#!/bin/sh
# test_kit_keyed.sh - keyed reconcile end to end: the keyed test plugin
# (tests/plugins/keyed.c) runs tests/kit/keyed.lhtest on two real hosts
# through leasehold-plugin-test (retries with back-off, requeue-after,
# key_of, deletes, a failover whose snapshot refills the queue).
# In (environment, from make check): LH_BUILDDIR, LH_SRCDIR, ETCD.
set -u
b=${LH_BUILDDIR:?run through make check}
s=${LH_SRCDIR:?run through make check}
"$b/leasehold-plugin-test" --hosts 2 "$b/tests/plugins/.libs/keyed.so" "$s/tests/kit/keyed.lhtest"

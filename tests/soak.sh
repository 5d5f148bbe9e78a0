#!/bin/sh
# tests/soak.sh [BUILD_DIR] - the long variants that make test leaves out (make soak): runs tests/run.sh
# with SOAK=1 for each suite that has them, where the scripts add their full sweeps (the equivalence
# layouts and memory-estimate layouts whose paths others cover, the implementation compiled by
# dp_test, tp_test and coll_test with the compilers dist_test and tp_test use too, xent_test's OpenCL
# memory check on 1024 rows, precision_test's default-size tutorial runs to their final val_loss, MPICH's
# pass in full: every equivalence layout and checkpoint run of at most as many ranks as CPUs), then
# tests/fresh_machine.sh (the README's make demo and make test on a fresh Debian 12 minbase root; 95
# minutes on 2 busy cores; a SKIP line where it cannot run: not root, no mount/chroot, no mirror). Prints each suite's
# lines as run.sh does, then the total "N passed, N failed" as its last line; exit 1 if anything failed.
# Env: TEST_FILTER (only suites whose name contains it; fresh_machine is one), NO_ASAN=1 as in tests/run.sh.
set -u
BUILD=${1:-build/soak}
SUITES="equiv mpich memest dp tp coll xent precision fresh_machine"
P=0
F=0
for s in $SUITES; do
    [ -z "${TEST_FILTER:-}" ] || case $s in *"$TEST_FILTER"*) ;; *) continue ;; esac
    if [ "$s" = fresh_machine ]; then
        out=$(sh tests/fresh_machine.sh "$BUILD/fresh_machine" 2>&1)
    else
        out=$(SOAK=1 TEST_FILTER=$s sh tests/run.sh "$BUILD")
    fi
    echo "$out" | grep -v -E '^([0-9]+ passed, [0-9]+ failed|total time [0-9]+s)$'
    last=$(echo "$out" | tail -n 1)
    case $last in *" passed, "*" failed") ;; *) last="0 passed, 1 failed" ;; esac
    P=$((P + ${last%% *}))
    f=${last#* passed, }
    F=$((F + ${f%% *}))
done
echo "$P passed, $F failed"
[ "$F" -eq 0 ]

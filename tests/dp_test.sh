#!/bin/sh
# tests/dp_test.sh [BUILD_DIR] - data parallelism (>>dp). Builds tests/test_dp.c without MPI (a world of
# one: pt_dp never communicates) and with mpicc -DPTRAIN_MPI -fopenmp, runs the plain one and the MPI
# one under mpirun -np 2 and -np 4, and -np 4 with 2 fake nodes (each rank checks bucketed, overlapped
# gradient averaging, accumulation over 1-4 passes incl. interleaved ones, hierarchical allreduce, bf16
# compression and determinism against a single-process reference it also computes), test_zero
# (ZeRO-1/2, global clip norm, optimizer bytes per rank) under -np 2 and -np 4, and
# compiles the implementation with and without MPI as C and C++ (-Wall -Wextra -Werror; only
# pt_*/PT_* symbols defined). Prints one PASS/FAIL line per run or check, then "N passed, N failed"
# (a run that fails without a failed check, e.g. a crash or a timeout, adds one failure).
# Each mpirun is bounded by `timeout 120`; the whole script takes a few seconds.
# PT_INC: the directory holding ptrain.h (default: the repository root).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# ---- without MPI: a world of one ----
if $CC $W tests/test_dp.c -o "$BUILD/test_dp" -lm >"$BUILD/test_dp.build.log" 2>&1; then
    prog "test_dp (no MPI)" "$BUILD/test_dp.log" "$B/test_dp"
else
    fail "build test_dp ($CC)" "see $BUILD/test_dp.build.log"
    head -n 20 "$BUILD/test_dp.build.log" | sed 's/^/    /'
fi

# ---- with MPI ----
if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if mpicc $W -DPTRAIN_MPI -fopenmp tests/test_dp.c -o "$BUILD/test_dp_mpi" -lm >"$BUILD/test_dp_mpi.build.log" 2>&1; then
    for n in 2 4; do
        prog "mpirun -np $n test_dp" "$BUILD/dp_np$n.log" mpi_run $n -- "$B/test_dp_mpi"
    done
    # hierarchical allreduce across 2 fake nodes of 2 ranks
    prog "mpirun -np 4 test_dp, PTRAIN_FAKE_NODE_SIZE=2 (hierarchical over 2 nodes)" "$BUILD/dp_np4_nodes2.log" \
        mpi_run 4 -x PTRAIN_FAKE_NODE_SIZE=2 -- "$B/test_dp_mpi"
    if mpicc $W -DPTRAIN_MPI -fopenmp tests/test_zero.c -o "$BUILD/test_zero_mpi" -lm >"$BUILD/test_zero_mpi.build.log" 2>&1; then for n in 2 4; do prog "mpirun -np $n test_zero (ZeRO-1/2)" "$BUILD/zero_np$n.log" mpi_run $n -- "$B/test_zero_mpi"; done; else fail "build test_zero_mpi" "see $BUILD/test_zero_mpi.build.log"; fi
else
    fail "build test_dp_mpi (mpicc -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_dp_mpi.build.log"
    head -n 20 "$BUILD/test_dp_mpi.build.log" | sed 's/^/    /'
fi

# ---- the implementation compiles as C and C++, with and without MPI, defining only pt_*/PT_* symbols ----
printf '#define PTRAIN_IMPLEMENTATION\n#include "ptrain.h"\n' >"$BUILD/dp_tu.c"
for cc in "$CC -std=c99 -pedantic" "c++ -x c++ -std=c++11" "mpicc -std=c99 -pedantic -DPTRAIN_MPI" \
    "mpicc -std=c11 -fopenmp -DPTRAIN_MPI" "mpicxx -x c++ -std=c++17 -DPTRAIN_MPI"; do
    o=$BUILD/dp_tu.$(echo "$cc" | tr -c 'a-z0-9+\n' '_').o
    if $cc -Wall -Wextra -Werror -O1 -I"$INC" -c "$BUILD/dp_tu.c" -o "$o" >"$o.log" 2>&1; then
        bad=$(nm -g --defined-only "$o" | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
        if [ -z "$bad" ]; then pass "compile $cc -Wall -Wextra -Werror; only pt_*/PT_* symbols"; else
            fail "compile $cc" "symbols outside pt_/PT_: $bad"; fi
    else
        fail "compile $cc -Wall -Wextra -Werror" "see $o.log"
        head -n 20 "$o.log" | sed 's/^/    /'
    fi
done

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

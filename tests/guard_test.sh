#!/bin/sh
# tests/guard_test.sh [BUILD_DIR] - the health guard (>>guard). Builds tests/test_guard.c without MPI (one
# rank) and with mpicc -DPTRAIN_MPI, runs it plain, under mpirun -np 2 (dp 2) and -np 4 with GUARD_TP=2
# and GUARD_PP=2 (dp 2 x tp 2, dp 2 x pp 2 grids with the MLP replicated: replicas compared per
# TP / PP position, the verdict agreed over the world). Each run injects NaN gradients, loss and gradient
# spikes and a flipped weight (PTRAIN_GUARD_INJECT, set by the program) and compares with fault-free
# reference runs it computes itself: warn / skip / rollback policies, exact resume, replica check.
# C/C++ builds and the symbol check of the whole header are compile_test.sh's and the MPI scripts'.
# Prints PASS/FAIL lines, then "N passed, N failed". Each run is bounded by `timeout 120`; the script
# takes a few seconds. PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# the MPI build starts now, beside the build and the run without MPI (one core each)
p_mpi=""
have mpicc && build_bg "$BUILD/test_guard_mpi.build.log" mpicc $W $PT_OWN -DPTRAIN_MPI -fopenmp tests/test_guard.c -o "$BUILD/test_guard_mpi" -lm && p_mpi=$!
if $CC $W $PT_OWN tests/test_guard.c -o "$BUILD/test_guard" -lm >"$BUILD/test_guard.build.log" 2>&1; then
    prog "test_guard (no MPI, one rank)" "$BUILD/test_guard.log" timeout 120 "$B/test_guard" "$BUILD/guard_np1"
else
    fail "build test_guard ($CC)" "see $BUILD/test_guard.build.log"
    head -n 20 "$BUILD/test_guard.build.log" | sed 's/^/    /'
fi

if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if [ -n "$p_mpi" ] && wait $p_mpi; then
    prog "test_guard: mpirun -np 2 (dp 2)" "$BUILD/test_guard_np2.log" mpi_run 2 -- "$B/test_guard_mpi" "$BUILD/guard_np2"
    prog "test_guard: mpirun -np 4 (dp 2 x tp 2)" "$BUILD/test_guard_np4.log" mpi_run 4 -x GUARD_TP=2 -- "$B/test_guard_mpi" "$BUILD/guard_np4"
    prog "test_guard: mpirun -np 4 (dp 2 x pp 2)" "$BUILD/test_guard_np4pp.log" mpi_run 4 -x GUARD_PP=2 -- "$B/test_guard_mpi" "$BUILD/guard_np4pp"
else
    fail "build test_guard_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_guard_mpi.build.log"
    head -n 20 "$BUILD/test_guard_mpi.build.log" | sed 's/^/    /'
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

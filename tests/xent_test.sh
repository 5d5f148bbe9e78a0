#!/bin/sh
# tests/xent_test.sh [BUILD_DIR] - the LM head and cross-entropy fused in chunks of rows (see ops:
# pt_linear_cross_entropy; tp: pt_linear_cross_entropy_vp). Builds tests/test_xent.c twice (cc without
# MPI: tp = 1; mpicc -DPTRAIN_MPI -fopenmp) and runs the plain one and the MPI one under mpirun -np 2
# (layout tp = 2). Prints one PASS/FAIL line per check, then "N passed, N failed" (a run that fails
# without a failed check, e.g. a crash or a timeout, adds one failure). A few seconds.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

if $CC $W -fopenmp tests/test_xent.c -o "$BUILD/test_xent" -lm >"$BUILD/test_xent.build.log" 2>&1; then
    prog "test_xent (no MPI, tp=1)" "$BUILD/test_xent.log" "$B/test_xent"
else
    fail "build test_xent ($CC)" "see $BUILD/test_xent.build.log"
    head -n 20 "$BUILD/test_xent.build.log" | sed 's/^/    /'
fi
if have_mpi; then
    if mpicc $W -DPTRAIN_MPI -fopenmp tests/test_xent.c -o "$BUILD/test_xent_mpi" -lm >"$BUILD/test_xent_mpi.build.log" 2>&1; then
        prog "test_xent: mpirun -np 2 (tp=2)" "$BUILD/test_xent_np2.log" mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE "$B/test_xent_mpi"
    else
        fail "build test_xent_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_xent_mpi.build.log"
        head -n 20 "$BUILD/test_xent_mpi.build.log" | sed 's/^/    /'
    fi
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

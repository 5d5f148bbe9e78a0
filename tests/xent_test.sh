#!/bin/sh
# tests/xent_test.sh [BUILD_DIR] - the LM head and cross-entropy fused in chunks of rows (see ops:
# pt_linear_cross_entropy; tp: pt_linear_cross_entropy_vp). Builds tests/test_xent.c twice (cc without
# MPI: tp = 1; mpicc -DPTRAIN_MPI -fopenmp) and runs the plain one and the MPI one under mpirun -np 2
# (layout tp = 2), then a third time with -DPTRAIN_OPENCL, run on the OpenCL backend (PTRAIN_DEVICE=opencl:
# the same checks, bit-identical ones included, through the OpenCL kernels and CLBlast; PoCL in the CI;
# the memory check on 512 rows there, 1024 under SOAK=1). Prints one PASS/FAIL line per check, then "N passed, N failed" (a run that fails
# without a failed check, e.g. a crash or a timeout, adds one failure). Under a minute.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# the three builds at once (one core each), then the runs
build_bg "$BUILD/test_xent.build.log" $CC $W -fopenmp $PT_OWN tests/test_xent.c -o "$BUILD/test_xent" -lm
p_plain=$!
p_mpi=""
if have_mpi; then
    build_bg "$BUILD/test_xent_mpi.build.log" build_prog "$BUILD/test_xent_mpi" tests/test_xent.c mpi
    p_mpi=$!
fi
build_bg "$BUILD/test_xent_cl.build.log" $CC $W -fopenmp -DPTRAIN_OPENCL $PT_OWN tests/test_xent.c -o "$BUILD/test_xent_cl" -lm
p_cl=$!
if wait $p_plain; then
    prog "test_xent (no MPI, tp=1)" "$BUILD/test_xent.log" "$B/test_xent"
else
    fail "build test_xent ($CC)" "see $BUILD/test_xent.build.log"
    head -n 20 "$BUILD/test_xent.build.log" | sed 's/^/    /'
fi
if [ -n "$p_mpi" ]; then
    if wait $p_mpi; then
        prog "test_xent: mpirun -np 2 (tp=2)" "$BUILD/test_xent_np2.log" mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE "$B/test_xent_mpi"
    else
        fail "build test_xent_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_xent_mpi.build.log"
        head -n 20 "$BUILD/test_xent_mpi.build.log" | sed 's/^/    /'
    fi
fi
if wait $p_cl; then
    # --quick: the memory check's head on 512 rows, not 1024 (the CPU runs above take 1024; SOAK=1 here too)
    prog "test_xent on OpenCL (PTRAIN_DEVICE=opencl)" "$BUILD/test_xent_cl.log" env PTRAIN_DEVICE=opencl timeout 300 "$B/test_xent_cl" $(soak || echo --quick)
    grep -q '^  backend: opencl' "$BUILD/test_xent_cl.log" && pass "test_xent on OpenCL ran on the opencl backend" ||
        fail "test_xent on OpenCL" "not on the opencl backend: $(grep '^  backend' "$BUILD/test_xent_cl.log")"
else
    fail "build test_xent_cl (-DPTRAIN_OPENCL)" "see $BUILD/test_xent_cl.build.log (make deps installs OpenCL and CLBlast)"
    head -n 20 "$BUILD/test_xent_cl.build.log" | sed 's/^/    /'
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

#!/bin/sh
# tests/trace_test.sh [BUILD_DIR] - timelines and the per-op profile (>>trace). Builds tests/test_trace.c
# without MPI (one rank; run plain and with PTRAIN_PROFILE=1) and with mpicc -DPTRAIN_MPI (run under
# mpirun -np 2: a staged GPT on pp 2, 1F1B, then interleaved 1F1B); C/C++ builds and the symbol check of the whole header are
# compile_test.sh's and the MPI scripts' (dp, tp, coll). The trace files are left in
# BUILD_DIR/trace_np*.json (open them in ui.perfetto.dev). Prints PASS/FAIL lines, then
# "N passed, N failed". Each mpirun is bounded by `timeout 120`; the script takes a few seconds.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# the MPI build starts now, beside the build and the run without MPI (one core each)
p_mpi=""
have mpicc && build_bg "$BUILD/test_trace_mpi.build.log" mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN tests/test_trace.c -o "$BUILD/test_trace_mpi" -lm && p_mpi=$!
if $CC $W $PT_OWN tests/test_trace.c -o "$BUILD/test_trace" -lm >"$BUILD/test_trace.build.log" 2>&1; then
    prog "test_trace (no MPI, one rank)" "$BUILD/test_trace.log" timeout 120 "$B/test_trace" "$BUILD"
    prog "test_trace (no MPI, PTRAIN_PROFILE=1)" "$BUILD/test_trace_prof.log" env PTRAIN_PROFILE=1 timeout 120 "$B/test_trace" "$BUILD"
else
    fail "build test_trace ($CC)" "see $BUILD/test_trace.build.log"
    head -n 20 "$BUILD/test_trace.build.log" | sed 's/^/    /'
fi

if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if [ -n "$p_mpi" ] && wait $p_mpi; then
    prog "test_trace: mpirun -np 2 (pp 2, 1F1B and interleaved)" "$BUILD/test_trace_np2.log" mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE "$B/test_trace_mpi" "$BUILD"
    grep '^rank .*bubble' "$BUILD/test_trace_np2.log" | sed 's/^/    /'
else
    fail "build test_trace_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_trace_mpi.build.log"
    head -n 20 "$BUILD/test_trace_mpi.build.log" | sed 's/^/    /'
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

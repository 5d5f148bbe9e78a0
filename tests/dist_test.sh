#!/bin/sh
# tests/dist_test.sh [BUILD_DIR] - the process grid (>>dist). Builds tests/test_dist.c twice (cc without
# MPI, mpicc -DPTRAIN_MPI), runs the plain one and the MPI one under mpirun with several world sizes
# and (fake) node sizes, checks that a grid refused at the first pt_dist_init is refused on every
# rank with one message and leaves MPI finalized, and compiles the implementation with MPI as C and
# C++ (-Wall -Wextra -Werror; only pt_*/PT_* symbols defined). Prints one PASS/FAIL line per run or
# check, then "N passed, N failed": the checks of every test program plus one per script-level check
# (a run that fails without a failed check, e.g. a crash or a timeout, adds one failure).
# Each mpirun is bounded by `timeout 120`; the whole script takes a few seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# ---- without MPI: pure functions and the world of one ----
# the MPI build starts now, beside the build and the runs without MPI (one core each)
build_bg "$BUILD/test_dist_mpi.build.log" mpicc $W -DPTRAIN_MPI $PT_OWN tests/test_dist.c -o "$BUILD/test_dist_mpi" -lm
p_mpi1=$!
if $CC $W $PT_OWN tests/test_dist.c -o "$BUILD/test_dist" -lm >"$BUILD/test_dist.build.log" 2>&1; then
    prog "test_dist (no MPI)" "$BUILD/test_dist.log" "$B/test_dist"
    prog "test_dist (no MPI, PTRAIN_THREADS=3)" "$BUILD/test_dist.t3.log" env PTRAIN_THREADS=3 "$B/test_dist"
else
    fail "build test_dist ($CC)" "see $BUILD/test_dist.build.log"
    head -n 20 "$BUILD/test_dist.build.log" | sed 's/^/    /'
fi

# ---- with MPI ----
if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if wait $p_mpi1; then
    T=$B/test_dist_mpi
    prog "mpirun -np 8" "$BUILD/dist_np8.log" mpi_run 8 -- env -u PTRAIN_FAKE_NODE_SIZE "$T"
    prog "mpirun -np 8, PTRAIN_FAKE_NODE_SIZE=2" "$BUILD/dist_np8_f2.log" mpi_run 8 -- env PTRAIN_FAKE_NODE_SIZE=2 "$T"
    prog "mpirun -np 4, PTRAIN_FAKE_NODE_SIZE=2" "$BUILD/dist_np4_f2.log" mpi_run 4 -- env PTRAIN_FAKE_NODE_SIZE=2 "$T"
    prog "mpirun -np 4, PTRAIN_THREADS=2" "$BUILD/dist_np4_t2.log" mpi_run 4 -- env -u PTRAIN_FAKE_NODE_SIZE PTRAIN_THREADS=2 "$T"
    prog "mpirun -np 2" "$BUILD/dist_np2.log" mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE "$T"
    prog "mpirun -np 1" "$BUILD/dist_np1.log" mpi_run 1 -- env -u PTRAIN_FAKE_NODE_SIZE "$T"

    # the first grid (the call that initializes MPI) refused: tp=4 in fake nodes of 2 ranks
    log=$BUILD/dist_refused.log
    mpi_run 8 -- env PTRAIN_FAKE_NODE_SIZE=2 "$T" --refused-first 4 1 >"$log" 2>&1
    rc=$?
    n=$(grep -c '^REFUSED rank ' "$log")
    msgs=$(grep '^REFUSED rank ' "$log" | sed 's/^REFUSED rank [0-9]*: //' | sort -u | wc -l)
    want="tp=4 does not fit in nodes of 2 ranks: a tensor-parallel group would cross nodes"
    if [ "$rc" -eq 0 ] && [ "$n" -eq 8 ] && [ "$msgs" -eq 1 ] && grep -q "$want" "$log"; then
        pass "mpirun -np 8: tp=4 in nodes of 2 refused at the first pt_dist_init on all 8 ranks, one message, MPI finalized"
    else
        fail "refused first grid" "exit status $rc, $n of 8 ranks refused, $msgs distinct messages; $log:"
        tail -n 15 "$log" | sed 's/^/    /'
    fi
else
    fail "build test_dist_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_dist_mpi.build.log"
    head -n 20 "$BUILD/test_dist_mpi.build.log" | sed 's/^/    /'
fi

# ---- the implementation compiles with MPI as C and C++, defining only pt_*/PT_* symbols ----
impl_compiles dist "mpicc -std=c99 -pedantic -DPTRAIN_MPI" "mpicc -std=c11 -pedantic -fopenmp -DPTRAIN_MPI" "mpicxx -x c++ -std=c++11 -DPTRAIN_MPI" \
    "mpicxx -x c++ -std=c++17 -DPTRAIN_MPI"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

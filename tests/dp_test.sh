#!/bin/sh
# tests/dp_test.sh [BUILD_DIR] - data parallelism (>>dp). Builds tests/test_dp.c without MPI (a world of
# one: pt_dp never communicates) and with mpicc -DPTRAIN_MPI -fopenmp, runs the plain one and the MPI
# one under mpirun -np 2 and -np 4, and -np 4 with 2 fake nodes (each rank checks bucketed, overlapped
# gradient averaging, accumulation over 1-4 passes incl. interleaved ones, hierarchical allreduce, bf16
# compression and determinism against a single-process reference it also computes), test_zero
# (ZeRO-1/2, global clip norm, optimizer bytes per rank) under -np 2 and -np 4, and
# under SOAK=1 compiles the implementation with and without MPI as C and C++ (-Wall -Wextra -Werror;
# only pt_*/PT_* symbols defined; in make test tp_test and dist_test compile the same). Prints one PASS/FAIL line per run or check, then "N passed, N failed"
# (a run that fails without a failed check, e.g. a crash or a timeout, adds one failure).
# Each mpirun is bounded by `timeout 120`; the whole script takes a few seconds.
# PT_INC: the directory holding ptrain.h (default: the repository root).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# ---- without MPI: a world of one ----
# the MPI builds start now, beside the build and the runs without MPI (one core each)
build_bg "$BUILD/test_dp_mpi.build.log" mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN tests/test_dp.c -o "$BUILD/test_dp_mpi" -lm
p_mpi1=$!
build_bg "$BUILD/test_zero_mpi.build.log" mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN tests/test_zero.c -o "$BUILD/test_zero_mpi" -lm
p_mpi2=$!
build_bg "$BUILD/bench_zero.build.log" build_prog "$BUILD/bench_zero" bench/bench_zero.c mpi
p_mpi3=$!
build_bg "$BUILD/bench_largest.build.log" build_prog "$BUILD/bench_largest" bench/bench_largest.c mpi
p_mpi4=$!
if $CC $W $PT_OWN tests/test_dp.c -o "$BUILD/test_dp" -lm >"$BUILD/test_dp.build.log" 2>&1; then
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
if wait $p_mpi1; then
    for n in 2 4; do
        prog "mpirun -np $n test_dp" "$BUILD/dp_np$n.log" mpi_run $n -- "$B/test_dp_mpi"
    done
    # hierarchical allreduce across 2 fake nodes of 2 ranks
    prog "mpirun -np 4 test_dp, PTRAIN_FAKE_NODE_SIZE=2 (hierarchical over 2 nodes)" "$BUILD/dp_np4_nodes2.log" \
        mpi_run 4 -x PTRAIN_FAKE_NODE_SIZE=2 -- "$B/test_dp_mpi"
    if wait $p_mpi2; then for n in 2 4; do prog "mpirun -np $n test_zero (ZeRO-1/2/3)" "$BUILD/zero_np$n.log" mpi_run $n -- "$B/test_zero_mpi"; done; else fail "build test_zero_mpi" "see $BUILD/test_zero_mpi.build.log"; fi
    # the zero bench's quick mode: a line per stage, the same losses, ZeRO-3's model state per rank within 5% of 16 P / dp
    if wait $p_mpi3; then
        mpi_run 4 -- "$B/bench_zero" quick 2 >"$BUILD/bench_zero.log" 2>&1
        lines=$(grep -c '"bench":"zero".*"same_loss":true' "$BUILD/bench_zero.log")
        r3=$(sed -n 's/.*"stage":3,.*"state_ratio":\([0-9.]*\).*/\1/p' "$BUILD/bench_zero.log")
        if [ "$lines" -eq 4 ] && [ -n "$r3" ] && awk -v r="$r3" 'BEGIN { exit !(r <= 1.05) }'; then
            pass "bench_zero quick at dp 4: 4 stages with equal losses, ZeRO-3 model state $r3 x 16P/dp"
        else fail "bench_zero quick at dp 4" "$lines stage lines with equal losses, ZeRO-3 state ratio '$r3': $(tail -n 3 "$BUILD/bench_zero.log" | tr '\n' ' ')"; fi
    else fail "build bench_zero" "see $BUILD/bench_zero.build.log"; fi
    # the largest_model bench's quick mode: a tiny model in bf16, ZeRO-3, full recomputation trains 10 steps at dp 4 and its loss falls
    if wait $p_mpi4; then
        mpi_run 4 -- "$B/bench_largest" quick auto 10 >"$BUILD/bench_largest.log" 2>&1
        if grep -q '"bench":"largest_model".*"precision":"bf16","zero":3,"recompute":"full".*"total_rss_bytes":[1-9][0-9]*,.*"loss_falls":true' "$BUILD/bench_largest.log"; then
            pass "bench_largest quick at dp 4: bf16 ZeRO-3 full recomputation, the loss falls, total RSS measured"
        else fail "bench_largest quick at dp 4" "$(tail -n 3 "$BUILD/bench_largest.log" | tr '\n' ' ')"; fi
    else fail "build bench_largest" "see $BUILD/bench_largest.build.log"; fi
else
    fail "build test_dp_mpi (mpicc -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_dp_mpi.build.log"
    head -n 20 "$BUILD/test_dp_mpi.build.log" | sed 's/^/    /'
fi

# ---- the implementation compiles as C and C++, with and without MPI, defining only pt_*/PT_* symbols ----
# (in make test tp_test and dist_test compile the same; here under SOAK=1)
impl_compiles dp "soak:$CC -std=c99 -pedantic" "soak:c++ -x c++ -std=c++11" "soak:mpicc -std=c99 -pedantic -DPTRAIN_MPI" \
    "soak:mpicc -std=c11 -fopenmp -DPTRAIN_MPI" "soak:mpicxx -x c++ -std=c++17 -DPTRAIN_MPI"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

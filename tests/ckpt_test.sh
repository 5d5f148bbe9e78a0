#!/bin/sh
# tests/ckpt_test.sh [BUILD_DIR] - checkpoints (>>ckpt). Builds tests/test_ckpt.c without MPI (also
# under ASan/UBSan) and with mpicc -DPTRAIN_MPI; runs it on 1 rank and under mpirun -np 2 (dp2 with
# ZeRO-1: each DP rank writes its optimizer shard), -np 4 (dp2 x tp2), -np 8 (dp2 x tp2 x pp2, ZeRO-1)
# and -np 2 (pp2): CRC32C vectors, bit-exact round trip, exact resume (per-step losses bit-identical
# to an uninterrupted run), corruption detection with fallback to the previous checkpoint,
# retention, a failed save, asynchronous saves (state at the call, exact resume, poll / wait /
# next save commit, background failures reported). Then checkpoints load on other layouts: dp2 ZeRO-1 -> 1 rank, 1 rank ->
# dp2 ZeRO-1 (the moments re-cut), pp2 -> dp2 ZeRO-1, each resumed curve within 1e-5 of that
# layout's own uninterrupted run. Prints PASS/FAIL lines and "N passed, N failed"; ~20 s.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
T1=$BUILD/ckpt_1 T2=$BUILD/ckpt_2 T3=$BUILD/ckpt_3
rm -rf "$T1" "$T2" "$T3" "$BUILD"/ckpt_r[123] "$BUILD/ckpt_4" "$BUILD/ckpt_8" "$BUILD/ckpt_asan"

if $CC $W tests/test_ckpt.c -o "$BUILD/test_ckpt" -lm >"$BUILD/test_ckpt.build.log" 2>&1; then
    prog "test_ckpt (1 rank)" "$BUILD/ckpt_np1.log" env CKPT_KEEP=1 "$B/test_ckpt" "$T1"
else
    fail "build test_ckpt ($CC)" "see $BUILD/test_ckpt.build.log"
    head -n 20 "$BUILD/test_ckpt.build.log" | sed 's/^/    /'
fi

# the same under AddressSanitizer / UBSan (leaks included); NO_ASAN=1 skips it
if [ "${NO_ASAN:-0}" != 1 ]; then
    if $CC -std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra -I"$INC" tests/test_ckpt.c \
        -o "$BUILD/test_ckpt.asan" -lm >"$BUILD/test_ckpt.asan.build.log" 2>&1; then
        prog "test_ckpt (1 rank, ASan/UBSan)" "$BUILD/ckpt_asan.log" env ASAN_OPTIONS=detect_leaks=1 \
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$B/test_ckpt.asan" "$BUILD/ckpt_asan"
    else fail "build test_ckpt.asan" "see $BUILD/test_ckpt.asan.build.log"; fi
fi

if ! have mpicc || ! have mpirun; then
    fail "MPI tests" "mpicc/mpirun not found: install openmpi-bin libopenmpi-dev (make deps)"
    echo "$NP passed, $NF failed"
    exit 1
fi
if mpicc $W -DPTRAIN_MPI -fopenmp -I"$INC" tests/test_ckpt.c -o "$BUILD/test_ckpt_mpi" -lm >"$BUILD/test_ckpt_mpi.build.log" 2>&1; then
    MPIRUN="timeout 120 mpirun --oversubscribe --mca mpi_yield_when_idle 1 -x PTRAIN_THREADS -x OMP_WAIT_POLICY"
    prog "mpirun -np 2 test_ckpt (dp2, ZeRO-1)" "$BUILD/ckpt_np2.log" env CKPT_KEEP=1 $MPIRUN -x CKPT_KEEP -np 2 "$B/test_ckpt_mpi" "$T2"
    prog "mpirun -np 4 test_ckpt (dp2 x tp2, ZeRO-1)" "$BUILD/ckpt_np4.log" env CKPT_TP=2 $MPIRUN -x CKPT_TP -np 4 "$B/test_ckpt_mpi" "$BUILD/ckpt_4"
    prog "mpirun -np 8 test_ckpt (dp2 x tp2 x pp2, ZeRO-1)" "$BUILD/ckpt_np8.log" env CKPT_TP=2 CKPT_PP=2 $MPIRUN -x CKPT_TP -x CKPT_PP -np 8 \
        "$B/test_ckpt_mpi" "$BUILD/ckpt_8"
    prog "mpirun -np 2 test_ckpt (pp2)" "$BUILD/ckpt_pp2.log" env CKPT_KEEP=1 CKPT_PP=2 $MPIRUN -x CKPT_KEEP -x CKPT_PP -np 2 "$B/test_ckpt_mpi" "$T3"
    if [ -d "$T3/run" ]; then
        prog "pp2 checkpoint resumed on dp2 ZeRO-1" "$BUILD/ckpt_r3.log" env CKPT_FROM="$T3/run" $MPIRUN -x CKPT_FROM -np 2 "$B/test_ckpt_mpi" "$BUILD/ckpt_r3"
    else fail "pp2 checkpoint resumed on dp2 ZeRO-1" "no $T3/run (the pp2 run failed)"; fi
    if [ -d "$T2/run" ]; then
        prog "dp2 ZeRO-1 checkpoint resumed on 1 rank" "$BUILD/ckpt_r1.log" env CKPT_FROM="$T2/run" "$B/test_ckpt" "$BUILD/ckpt_r1"
    else fail "dp2 ZeRO-1 checkpoint resumed on 1 rank" "no $T2/run (the np 2 run failed)"; fi
    if [ -d "$T1/run" ]; then
        prog "1-rank checkpoint resumed on dp2 ZeRO-1" "$BUILD/ckpt_r2.log" env CKPT_FROM="$T1/run" $MPIRUN -x CKPT_FROM -np 2 "$B/test_ckpt_mpi" "$BUILD/ckpt_r2"
    else fail "1-rank checkpoint resumed on dp2 ZeRO-1" "no $T1/run (the 1-rank run failed)"; fi
else
    fail "build test_ckpt_mpi (mpicc -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_ckpt_mpi.build.log"
    head -n 20 "$BUILD/test_ckpt_mpi.build.log" | sed 's/^/    /'
fi
rm -rf "$T1" "$T2" "$T3" "$BUILD"/ckpt_r[123] "$BUILD/ckpt_4" "$BUILD/ckpt_8" "$BUILD/ckpt_asan"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

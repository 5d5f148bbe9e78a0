#!/bin/sh
# tests/ckpt_test.sh [BUILD_DIR] - checkpoints (>>ckpt). Builds tests/test_ckpt.c without MPI and with
# mpicc -DPTRAIN_MPI; runs it on 1 rank, under mpirun -np 2 (data parallel, ZeRO-1: each DP rank
# writes its optimizer shard) and -np 4 as dp2 x tp2 with ZeRO-1 (each TP rank writes its shards): CRC32C vectors, bit-exact round trip, exact resume (per-step losses
# bit-identical to an uninterrupted run; also under ASan/UBSan), corruption detection with fallback to the previous
# checkpoint, retention, a failed save. Then a checkpoint of the 2-rank ZeRO-1 run loads on 1 rank and
# one of the 1-rank run on 2 ZeRO-1 ranks (the moments re-cut), each resumed curve within 1e-5 of that
# layout's own uninterrupted run. Prints PASS/FAIL lines and "N passed, N failed"; a few seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
T1=$BUILD/ckpt_1 T2=$BUILD/ckpt_2
rm -rf "$T1" "$T2" "$BUILD/ckpt_r1" "$BUILD/ckpt_r2" "$BUILD/ckpt_4"

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
rm -rf "$T1" "$T2" "$BUILD/ckpt_r1" "$BUILD/ckpt_r2" "$BUILD/ckpt_4"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

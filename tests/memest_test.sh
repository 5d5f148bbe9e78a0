#!/bin/sh
# tests/memest_test.sh [BUILD_DIR] - the memory estimate (>>memest) against the framework's accounting.
# Builds tests/test_memest.c without MPI (one rank) and with mpicc -DPTRAIN_MPI -fopenmp, and runs it
# on dp 2 (ZeRO-0, ZeRO-1 with 2 accumulated passes, ZeRO-2, bf16 compression), tp 2, pp 2 (1F1B and
# GPipe, 4 micro-batches) and dp 2 x tp 2 x pp 2 (ZeRO-1): every rank trains 2 steps and checks each
# part of pt_mem_estimate against pt_mem / pt_dp_stats (within 10%; the ratios are printed, with the
# resident-memory growth for information). Then tools/ptmem.c: a table for a valid layout, exit status
# 2 and a message for bad flags and impossible plans. Prints PASS/FAIL lines, then "N passed, N failed".
# Each mpirun is bounded by `timeout 120`; the script takes about a minute on 2 cores.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

ratios() { grep -E '^(layout|  rank)' "$1" | sed 's/^/    /'; }

if $CC $W tests/test_memest.c -o "$BUILD/test_memest" -lm >"$BUILD/test_memest.build.log" 2>&1; then
    prog "test_memest (no MPI, one rank)" "$BUILD/test_memest.log" timeout 120 "$B/test_memest" 1 1 1 0 1f1b 2
    ratios "$BUILD/test_memest.log"
else
    fail "build test_memest ($CC)" "see $BUILD/test_memest.build.log"
    head -n 20 "$BUILD/test_memest.build.log" | sed 's/^/    /'
fi

if have_mpi; then
    if mpicc $W -DPTRAIN_MPI -fopenmp tests/test_memest.c -o "$BUILD/test_memest_mpi" -lm >"$BUILD/test_memest_mpi.build.log" 2>&1; then
        # DP TP PP ZERO SCHEDULE M [COMPRESS]
        for c in "2 1 1 0 1f1b 1" "2 1 1 1 1f1b 2" "2 1 1 2 1f1b 1" "2 1 1 0 1f1b 1 1" "1 2 1 0 1f1b 1" "1 1 2 0 1f1b 4" "1 1 2 0 gpipe 4" \
            "2 2 2 1 1f1b 2"; do
            set -- $c
            n=$(($1 * $2 * $3))
            log="$BUILD/memest_$(echo "$c" | tr ' ' '_').log"
            prog "test_memest: mpirun -np $n (dp $1 tp $2 pp $3, zero $4, $5, m $6${7:+, bf16})" "$log" mpi_run $n -- env -u PTRAIN_FAKE_NODE_SIZE "$B/test_memest_mpi" $c
            ratios "$log"
        done
    else
        fail "build test_memest_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_memest_mpi.build.log"
        head -n 20 "$BUILD/test_memest_mpi.build.log" | sed 's/^/    /'
    fi
fi

# ---- tools/ptmem ----
if $CC $W tools/ptmem.c -o "$BUILD/ptmem" -lm >"$BUILD/ptmem.build.log" 2>&1; then
    out=$("$B/ptmem" --layers 12 --width 64 --heads 2 --seq 64 --batch 256 --dp 2 --tp 2 --pp 2 --micro-batches 2 --zero 1 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q '^pp 0 .*embedding' && echo "$out" | grep -q '^pp 1 .*head' && echo "$out" | grep -q 'ZeRO-2:'; then
        pass "ptmem: a table per pipeline rank and the ZeRO comparison"
    else
        fail "ptmem table" "$(echo "$out" | head -n 5)"
    fi
    for bad in "--bogus 1:unknown flag" "--dp x:whole number" "--schedule zigzag:--schedule" "--tp 3:does not split" \
        "--precision bf16:f32 only" "--recompute 1:not implemented" "--pp 8:layers" "--batch 10 --dp 4:must split" "--layers:missing value"; do
        args=${bad%%:*} want=${bad#*:}
        # shellcheck disable=SC2086
        msg=$("$B/ptmem" $args 2>&1)
        rc=$?
        if [ $rc -eq 2 ] && echo "$msg" | grep -q -- "$want"; then pass "ptmem $args: exit 2, '$want'"; else fail "ptmem $args" "exit $rc: $msg"; fi
    done
else
    fail "build ptmem ($CC)" "see $BUILD/ptmem.build.log"
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

#!/bin/sh
# tests/memest_test.sh [BUILD_DIR] - the memory estimate (see memest) against the framework's accounting.
# Builds tests/test_memest.c without MPI (one rank) and with mpicc -DPTRAIN_MPI -fopenmp, and runs it
# on dp 2 (ZeRO-0, ZeRO-1 with 2 accumulated passes, ZeRO-2 with 1 and 2 passes, bf16 compression), dp 2 x pp 2 (ZeRO-2), tp 2 (also sequence parallel,
# and with selective recomputation; on tp 2 a run with one layer more checks pt_mem_layer's bytes per layer), pp 2 (1F1B,
# GPipe, interleaved, selective recomputation; 4 micro-batches), tp 2 x pp 2 (full recomputation with sequence
# parallelism) and dp 2 x tp 2 x pp 2 (ZeRO-1); dp 2 ZeRO-0 without compression and pp 2 1F1B without
# recomputation of the default model only under SOAK=1 (make soak): every rank trains 2 steps
# and checks each part of pt_mem_estimate against pt_mem / pt_dp_stats (within 10%, and to the byte;
# ZeRO-3's peak, the largest over the shards, against the largest of a stage's ranks; the ratios are
# printed, with the resident-memory growth for information). The one-process checks
# (test_memest --real: the real constructors, bad plans, every kind of layout; in the MPI build on the
# first layout only, PT_MEMEST_LAYOUT_ONLY=1 on the others) run once more under
# AddressSanitizer / UBSan (NO_ASAN=1 skips that), and once on a copy of ptrain.h whose GPT has a
# narrower MLP (an edit of pt_block_new only): the estimate follows it to the byte without a change
# in memest. Then tools/ptmem.c: a table for a valid layout, its --layer-table (the paper's per-layer
# terms next to ptrain's), exit status 2 and a message for bad flags and impossible plans. Prints PASS/FAIL lines, then "N passed, N failed".
# Each mpirun is bounded by `timeout 120`; the script takes a few minutes on 2 cores.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

ratios() { grep -E '^(layout|  rank)' "$1" | sed 's/^/    /'; }
# bg_run LOG CMD...: runs a test program in the background (one core), its output in LOG, its exit
# status in LOG.rc; bg_prog NAME LOG PID: waits for it and counts it as prog does. The one-process runs
# (ASan, the mutant) go beside the MPI layouts and are counted after them.
bg_run() { _br_log=$1; shift; ( "$@" >"$_br_log" 2>&1; echo $? >"$_br_log.rc" ) & }
bg_prog() { wait "$3"; prog "$1" "$2.counted" sh -c 'cat "$1"; exit "$(cat "$1.rc" 2>/dev/null || echo 1)"' sh "$2"; }

# the builds start together (one core each); each is waited for where it is first needed
mkdir -p "$BUILD/mutant"
sed 's/pt_linear_new(ctx, n, C, 4 \* C, 1, std)/pt_linear_new(ctx, n, C, 3 * C, 1, std)/; s/pt_linear_new(ctx, n, 4 \* C, C, 1, pstd)/pt_linear_new(ctx, n, 3 * C, C, 1, pstd)/' \
    "$INC/ptrain.h" >"$BUILD/mutant/ptrain.h"
build_bg "$BUILD/test_memest.build.log" build_prog "$BUILD/test_memest" tests/test_memest.c w
p_plain=$!
p_asan=""
[ "${NO_ASAN:-0}" != 1 ] && build_bg "$BUILD/test_memest.asan.build.log" build_prog "$BUILD/test_memest.asan" \
    tests/test_memest.c asan -Werror && p_asan=$!
build_bg "$BUILD/test_memest.mutant.build.log" $CC -I"$BUILD/mutant" $W $PT_OWN tests/test_memest.c -o "$BUILD/test_memest.mutant" -lm
p_mutant=$!
p_mpi=""
have mpicc && build_bg "$BUILD/test_memest_mpi.build.log" build_prog "$BUILD/test_memest_mpi" tests/test_memest.c mpi && p_mpi=$!
build_bg "$BUILD/ptmem.build.log" build_prog "$BUILD/ptmem" tools/ptmem.c w
p_ptmem=$!

# the one-process checks under AddressSanitizer / UBSan (leaks included), started first: the longest run
# (about 90 s of CPU; its bound is wide, as it shares the cores with the runs below)
r_asan=""
if [ -n "$p_asan" ]; then
    if wait $p_asan; then
        bg_run "$BUILD/test_memest_asan.log" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
            timeout 600 "$B/test_memest.asan" --real
        r_asan=$!
    else fail "build test_memest.asan" "see $BUILD/test_memest.asan.build.log"; fi
fi

if wait $p_plain; then
    prog "test_memest (no MPI, one rank)" "$BUILD/test_memest.log" timeout 120 "$B/test_memest" 1 1 1 0 1f1b 2
    ratios "$BUILD/test_memest.log"
else
    fail "build test_memest ($CC)" "see $BUILD/test_memest.build.log"
    head -n 20 "$BUILD/test_memest.build.log" | sed 's/^/    /'
fi

# the estimate runs the real constructors: a GPT whose MLP is 3C wide instead of 4C (pt_block_new
# edited, memest untouched) is still estimated to the byte, and its parameter counts differ
# (the copy is made above, before the builds); it runs beside the MPI layouts, counted after them
r_mutant=""
if [ "$(diff "$INC/ptrain.h" "$BUILD/mutant/ptrain.h" | grep -c '^>')" -ne 2 ]; then
    fail "mutant GPT" "the two MLP lines of pt_block_new were not found in ptrain.h (update the sed above)"
elif wait $p_mutant; then
    bg_run "$BUILD/test_memest_mutant.log" timeout 300 "$B/test_memest.mutant" --real
    r_mutant=$!
else
    fail "build test_memest.mutant" "see $BUILD/test_memest.mutant.build.log"
fi

if have_mpi; then
    if [ -n "$p_mpi" ] && wait $p_mpi; then
        # DP TP PP ZERO SCHEDULE M [COMPRESS [LAYERS WIDTH BATCH [RECOMPUTE SEQ_PARALLEL]]]; 6 layers of width 96, micro-batches
        # of 48: pipeline rank 0's received output gradient opens an arena chunk of its own: the first step's peak holds it
        # only for the graph in its backward, not for the others still in flight; then sequence parallelism on tp 2
        # (without and with selective recomputation), full recomputation with it on tp 2 x pp 2, selective on pp 2
        # (soak: SOAK=1 only, their paths taken by the others too: dp 2 ZeRO-0 by its bf16 run, pp 2 1F1B by the
        # 6-layer and the selective runs); rank 0's one-process checks run in the first layout only
        solo=""
        for c in "soak 2 1 1 0 1f1b 1" "2 1 1 1 1f1b 2" "2 1 1 2 1f1b 1" "2 1 1 2 1f1b 2" "2 1 2 2 1f1b 2" "2 1 1 3 1f1b 2" "2 1 2 3 1f1b 2" "2 2 1 3 1f1b 1 0 12 64 64 2 0" "2 1 1 0 1f1b 1 1" "1 2 1 0 1f1b 1" "soak 1 1 2 0 1f1b 4" "1 1 2 0 gpipe 4" \
            "1 1 2 0 interleaved 4" "2 2 2 1 1f1b 2" "1 1 2 0 1f1b 4 0 6 96 48" "1 2 1 0 1f1b 1 0 12 64 64 0 1" \
            "1 2 1 0 1f1b 1 0 12 64 64 1 1" "1 2 2 0 1f1b 2 0 12 64 64 2 1" "1 1 2 0 1f1b 4 0 12 64 64 1 0"; do
            case $c in soak\ *) soak || continue; c=${c#soak } ;; esac
            set -- $c
            n=$(($1 * $2 * $3))
            log="$BUILD/memest_$(echo "$c" | tr ' ' '_').log"
            what="dp $1 tp $2 pp $3, zero $4, $5, m $6$([ "${7:-0}" = 1 ] && echo ', bf16')${8:+, $8 layers of width $9, batch ${10}}$([ "${11:-0}" != 0 ] && echo ", recompute ${11}")$([ "${12:-0}" = 1 ] && echo ', sequence parallel')"
            prog "test_memest: mpirun -np $n ($what)" "$log" mpi_run $n -- env -u PTRAIN_FAKE_NODE_SIZE $solo "$B/test_memest_mpi" $c
            ratios "$log"
            solo=PT_MEMEST_LAYOUT_ONLY=1
        done
    else
        fail "build test_memest_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_memest_mpi.build.log"
        head -n 20 "$BUILD/test_memest_mpi.build.log" | sed 's/^/    /'
    fi
fi

[ -n "$r_asan" ] && bg_prog "test_memest --real (ASan/UBSan)" "$BUILD/test_memest_asan.log" "$r_asan"
if [ -n "$r_mutant" ]; then
    bg_prog "test_memest --real on a GPT with a 3C-wide MLP" "$BUILD/test_memest_mutant.log" "$r_mutant"
    a=$(grep 'estimated parameters' "$BUILD/test_memest_mutant.log" | sed 's/.*(//')
    b=$(grep 'estimated parameters' "$BUILD/test_memest.log" | sed 's/.*(//')
    if [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]; then pass "the mutant's estimated parameters differ from the GPT's (it was estimated, not replayed)"
    else fail "mutant GPT" "its parameter counts equal the GPT's: '$a'"; fi
fi

# ---- tools/ptmem ----
if wait $p_ptmem; then
    out=$("$B/ptmem" --layers 12 --width 64 --heads 2 --seq 64 --batch 256 --dp 2 --tp 2 --pp 2 --micro-batches 2 --zero 1 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q '^pp 0 .*embedding' && echo "$out" | grep -q '^pp 1 .*head' && echo "$out" | grep -q 'ZeRO-2:'; then
        pass "ptmem: a table per pipeline rank and the ZeRO comparison"
    else
        fail "ptmem table" "$(echo "$out" | head -n 5)"
    fi
    # the layer table: every technique's row at t = 2, the plan's (TP + SP) marked, the scores gone under selective
    out=$("$B/ptmem" --layers 12 --width 768 --heads 12 --seq 1024 --batch 1 --tp 2 --seq-parallel --layer-table 2>&1)
    rc=$?
    rows=$(echo "$out" | grep -cE '^[* ] (none|TP|TP \+ SP|TP \+ selective|TP \+ SP \+ selective|TP \+ SP \+ full) +sbh\(')
    if [ $rc -eq 0 ] && [ "$rows" -eq 6 ] && echo "$out" | grep -qE '^\* TP \+ SP +sbh\(34/t \+ 5as/\(ht\)\)' &&
        echo "$out" | grep -E '^  TP \+ SP \+ selective' | awk '{ exit !($9 == "0.00") }'; then
        pass "ptmem --layer-table: 6 rows at tp 2 (none, TP, TP + SP marked as the plan's, selective, full), no scores under selective"
    else
        fail "ptmem --layer-table" "$(echo "$out" | tail -n 10)"
    fi
    for bad in "--bogus 1:unknown flag" "--dp x:--dp expects a whole number in \[1, 2147483647\], found .x." "--schedule zigzag:--schedule" "--tp 3:does not split" \
        "--precision fp8:expects f32, bf16 or fp16, found .fp8." "--recompute 1:expects none, selective or full, found .1." "--seq-parallel --tp 2 --seq 255:does not split" "--pp 8:layers" "--batch 10 --dp 4:must split" "--layers:missing value"; do
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

#!/bin/sh
# tests/ckpt_test.sh [BUILD_DIR] - checkpoints (>>ckpt). Builds tests/test_ckpt.c without MPI (also
# under ASan/UBSan) and with mpicc -DPTRAIN_MPI; runs it on 1 rank and under mpirun -np 2 (dp2 with
# ZeRO-1: each DP rank writes its optimizer shard), -np 4 (dp2 x tp2), -np 8 (dp2 x tp2 x pp2, ZeRO-1)
# and -np 2 (pp2): CRC32C vectors, bit-exact round trip, exact resume (per-step losses bit-identical
# to an uninterrupted run), corruption detection with fallback to the previous checkpoint,
# retention, a failed save, asynchronous saves (state at the call, exact resume, poll / wait /
# next save commit, background failures reported); exact resume with bf16 gradient compression on dp2 (its per-rank
# residual is checkpointed), and with ZeRO-2 (4 KiB buckets: the gradients in pooled bucket buffers) on dp2. Then checkpoints load on other layouts (DP size, ZeRO, PP split, TP
# split): pp2 -> dp2, dp2 -> 1, 1 -> dp2, dp2 x tp2 x pp2 -> dp4, tp2 -> 1, pp2 -> tp2, dp4 -> dp2,
# 1 -> tp2, tp2 -> tp4, dp2 ZeRO-2 -> dp4 ZeRO-2 and -> 1 (ZeRO-1 wherever dp > 1 otherwise), each with every parameter and moment element
# checked against the checkpoint's element of its global index and the resumed curve within 1e-5 of
# the original layout's and that layout's own uninterrupted runs ("reshard" lines: the max
# differences); a bf16 checkpoint on another layout drops the residual with a warning. A pt_loader's
# state saved at dp2 continues at dp4 and dp4 -> dp2: no sample repeated or skipped in the epoch.
# Prints PASS/FAIL lines and "N passed, N failed"; ~45 s (more on a loaded machine).
# PT_MPI=mpich (tests/mpich_test.sh): built by mpicc.mpich, launched by mpiexec.mpich; no build
# without MPI (the 1-rank runs are the MPI build on 1 rank); only the runs marked mpich (SOAK=1:
# every one) and only those of at most as many ranks as CPUs (mpi_fits; the others named in a NOTE).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
T1=$BUILD/ckpt_1 T2=$BUILD/ckpt_2 T3=$BUILD/ckpt_3 T8=$BUILD/ckpt_8 TT=$BUILD/ckpt_tp2 TD=$BUILD/ckpt_dp4 TC=$BUILD/ckpt_bf16 TZ=$BUILD/ckpt_zero2 TZ3=$BUILD/ckpt_zero3 TZ8=$BUILD/ckpt_zero3_8
TMPS="$T1 $T2 $T3 $T8 $TT $TD $TC $TZ $TZ3 $TZ8"
# shellcheck disable=SC2086
rm -rf $TMPS "$BUILD"/ckpt_rd[0-9]* "$BUILD"/ckpt_l[1234] "$BUILD/ckpt_4" "$BUILD/ckpt_asan"

# the MPI build starts now, beside the build and the runs without MPI (one core each)
build_bg "$BUILD/test_ckpt_mpi.build.log" "$MPICC" $W -DPTRAIN_MPI -fopenmp $PT_OWN -I"$INC" tests/test_ckpt.c -o "$BUILD/test_ckpt_mpi" -lm
p_mpi1=$!
M=$B/test_ckpt_mpi
# mrun [mpich] NAME LOG NP [VAR=VALUE...] PROG ARG...: one run of test_ckpt_mpi on NP ranks, the variables in its
# environment; under MPICH only the runs named by `mrun mpich ...` (SOAK=1: all) that fit the CPUs
# (a run reading CKPT_FROM of a directory whose run was left out is left out too)
unfit="" unfit_dirs=" "
mrun() {
    _m=0
    [ "$1" = mpich ] && { _m=1; shift; }
    _name=$1 _log=$2 _np=$3
    shift 3
    if mpich; then
        [ $_m = 1 ] || soak || return 0
        _dep=""
        for _a; do case $_a in CKPT_FROM=*) case $unfit_dirs in *" ${_a#CKPT_FROM=} "*) _dep=1 ;; esac ;; esac; done
        if [ -n "$_dep" ] || ! mpi_fits "$_np"; then
            for _a; do _last=$_a; done
            unfit="$unfit; $_name" unfit_dirs="$unfit_dirs$_last "
            return 0
        fi
    fi
    prog "$_name" "$_log" mpi_run "$_np" -- env "$@"
}
# mpi_built: the MPI build succeeded (waits for it once)
mpi_rc=""
mpi_built() {
    [ -n "$mpi_rc" ] || { wait $p_mpi1; mpi_rc=$?; }
    [ "$mpi_rc" = 0 ]
}
p_asan=""
if ! mpich && [ "${NO_ASAN:-0}" != 1 ]; then
    build_bg "$BUILD/test_ckpt.asan.build.log" $CC -std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
        -Wall -Wextra $PT_OWN -I"$INC" tests/test_ckpt.c -o "$BUILD/test_ckpt.asan" -lm && p_asan=$!
fi
if mpich; then
    if mpi_built; then mrun mpich "test_ckpt (1 rank)" "$BUILD/ckpt_np1.log" 1 CKPT_KEEP=1 "$M" "$T1"; fi
elif $CC $W $PT_OWN tests/test_ckpt.c -o "$BUILD/test_ckpt" -lm >"$BUILD/test_ckpt.build.log" 2>&1; then
    prog "test_ckpt (1 rank)" "$BUILD/ckpt_np1.log" env CKPT_KEEP=1 "$B/test_ckpt" "$T1"
else
    fail "build test_ckpt ($CC)" "see $BUILD/test_ckpt.build.log"
    head -n 20 "$BUILD/test_ckpt.build.log" | sed 's/^/    /'
fi

# the same under AddressSanitizer / UBSan (leaks included); NO_ASAN=1 skips it
if [ -n "$p_asan" ]; then
    if wait $p_asan; then
        prog "test_ckpt (1 rank, ASan/UBSan)" "$BUILD/ckpt_asan.log" env ASAN_OPTIONS=detect_leaks=1 \
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$B/test_ckpt.asan" "$BUILD/ckpt_asan"
    else fail "build test_ckpt.asan" "see $BUILD/test_ckpt.asan.build.log"; fi
fi

if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if mpi_built; then
    mrun mpich "mpirun -np 2 test_ckpt (dp2, ZeRO-1)" "$BUILD/ckpt_np2.log" 2 CKPT_KEEP=1 "$M" "$T2"
    mrun "mpirun -np 4 test_ckpt (dp2 x tp2, ZeRO-1)" "$BUILD/ckpt_np4.log" 4 CKPT_TP=2 "$M" "$BUILD/ckpt_4"
    mrun "mpirun -np 8 test_ckpt (dp2 x tp2 x pp2, ZeRO-1)" "$BUILD/ckpt_np8.log" 8 CKPT_KEEP=1 CKPT_TP=2 CKPT_PP=2 "$M" "$T8"
    mrun mpich "mpirun -np 2 test_ckpt (pp2)" "$BUILD/ckpt_pp2.log" 2 CKPT_KEEP=1 CKPT_PP=2 "$M" "$T3"
    # layouts saved only to be resumed elsewhere (exact resume checked, corruption cases skipped)
    mrun "mpirun -np 2 test_ckpt (tp2, short)" "$BUILD/ckpt_tp2.log" 2 CKPT_KEEP=1 CKPT_SHORT=1 CKPT_TP=2 "$M" "$TT"
    mrun "mpirun -np 4 test_ckpt (dp4, ZeRO-1, short)" "$BUILD/ckpt_dp4.log" 4 CKPT_KEEP=1 CKPT_SHORT=1 "$M" "$TD"
    mrun "mpirun -np 2 test_ckpt (dp2, ZeRO-1, bf16 compression: exact resume)" "$BUILD/ckpt_bf16.log" \
        2 CKPT_KEEP=1 CKPT_SHORT=1 CKPT_COMPRESS=1 "$M" "$TC"
    mrun "mpirun -np 2 test_ckpt (dp2, ZeRO-2, 4 KiB buckets, short)" "$BUILD/ckpt_zero2.log" 2 CKPT_KEEP=1 CKPT_SHORT=1 CKPT_ZERO=2 "$M" "$TZ"
    mrun mpich "mpirun -np 2 test_ckpt (dp2, ZeRO-3, 4 KiB buckets, short)" "$BUILD/ckpt_zero3.log" 2 CKPT_KEEP=1 CKPT_SHORT=1 CKPT_ZERO=3 "$M" "$TZ3"
    mrun "mpirun -np 8 test_ckpt (dp2 x tp2 x pp2, ZeRO-3, short)" "$BUILD/ckpt_zero3_8.log" 8 CKPT_KEEP=1 CKPT_SHORT=1 CKPT_ZERO=3 CKPT_TP=2 CKPT_PP=2 "$M" "$TZ8"
    # resume [mpich] FROM NAME NP [VAR=VALUE ...]: the kept run FROM resumed on NP ranks with the given layout
    resume() {
        _rm=""
        [ "$1" = mpich ] && { _rm=mpich; shift; }
        from=$1 name=$2 np=$3
        shift 3
        n=$((n + 1))
        if mpich && { { [ -z "$_rm" ] && ! soak; } || ! mpi_fits "$np" || case $unfit_dirs in *" $from "*) true ;; *) false ;; esac; }; then
            { [ -n "$_rm" ] || soak; } && unfit="$unfit; $name"
            return
        fi
        if [ ! -d "$from/run" ]; then
            fail "$name" "no $from/run (the run that saves it failed)"
            return
        fi
        if [ "$np" -eq 1 ] && ! mpich; then
            prog "$name" "$BUILD/ckpt_re$n.log" env CKPT_FROM="$from/run" "$@" "$B/test_ckpt" "$BUILD/ckpt_rd$n"
        else
            prog "$name" "$BUILD/ckpt_re$n.log" mpi_run "$np" -- env CKPT_FROM="$from/run" "$@" "$M" "$BUILD/ckpt_rd$n"
        fi
        grep '^reshard ' "$BUILD/ckpt_re$n.log" | sed 's/^/    /'
    }
    n=0
    resume mpich "$T3" "pp2 checkpoint resumed on dp2 ZeRO-1" 2
    resume mpich "$T2" "dp2 ZeRO-1 checkpoint resumed on 1 rank" 1
    resume mpich "$T1" "1-rank checkpoint resumed on dp2 ZeRO-1" 2
    resume "$T8" "dp2 x tp2 x pp2 ZeRO-1 checkpoint resumed on dp4 ZeRO-1" 4
    resume "$TT" "tp2 checkpoint resumed on 1 rank" 1
    resume "$T3" "pp2 checkpoint resumed on tp2" 2 CKPT_TP=2
    resume "$TD" "dp4 ZeRO-1 checkpoint resumed on dp2 ZeRO-1" 2
    resume mpich "$T1" "1-rank checkpoint resumed on tp2" 2 CKPT_TP=2
    resume "$TT" "tp2 checkpoint resumed on tp4" 4 CKPT_TP=4
    resume "$TC" "dp2 bf16 checkpoint resumed on dp4 bf16 (residual dropped, a warning)" 4 CKPT_COMPRESS=1 CKPT_TOL=1e-2
    resume "$TZ" "dp2 ZeRO-2 checkpoint resumed on dp4 ZeRO-2" 4 CKPT_ZERO=2
    resume "$TZ" "dp2 ZeRO-2 checkpoint resumed on 1 rank" 1
    resume "$TZ3" "dp2 ZeRO-3 checkpoint resumed on dp4 ZeRO-3" 4 CKPT_ZERO=3
    resume mpich "$TZ3" "dp2 ZeRO-3 checkpoint resumed on 1 rank" 1
    resume "$TZ3" "dp2 ZeRO-3 checkpoint resumed on dp2 x tp2 ZeRO-1" 4 CKPT_TP=2
    resume "$TZ8" "dp2 x tp2 x pp2 ZeRO-3 checkpoint resumed on dp2 ZeRO-2" 2 CKPT_ZERO=2
    resume "$T2" "dp2 ZeRO-1 checkpoint resumed on dp4 ZeRO-3" 4 CKPT_ZERO=3
    # the data stream: a loader's state saved at dp2 continues at dp4, and dp4 -> dp2
    mrun "loader saved on dp2" "$BUILD/ckpt_l1.log" 2 CKPT_LOADER=save CKPT_KEEP=1 "$M" "$BUILD/ckpt_l1"
    mrun "loader restored on dp4 (no repeat, no skip)" "$BUILD/ckpt_l2.log" 4 CKPT_LOADER=load CKPT_FROM="$BUILD/ckpt_l1" "$M" "$BUILD/ckpt_l2"
    mrun "loader saved on dp4" "$BUILD/ckpt_l3.log" 4 CKPT_LOADER=save CKPT_KEEP=1 "$M" "$BUILD/ckpt_l3"
    mrun "loader restored on dp2 (no repeat, no skip)" "$BUILD/ckpt_l4.log" 2 CKPT_LOADER=load CKPT_FROM="$BUILD/ckpt_l3" "$M" "$BUILD/ckpt_l4"
    grep -h '^loader across' "$BUILD/ckpt_l2.log" "$BUILD/ckpt_l4.log" 2>/dev/null | sed 's/^/    /'
    [ -z "$unfit" ] || echo "NOTE $PT_MPI: left out, more ranks than the $(nproc) CPUs (PT_MPICH_OVERSUBSCRIBE=1 runs them):${unfit#;}"
else
    fail "build test_ckpt_mpi ($MPICC -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_ckpt_mpi.build.log"
    head -n 20 "$BUILD/test_ckpt_mpi.build.log" | sed 's/^/    /'
fi
rm -rf $TMPS "$BUILD"/ckpt_rd[0-9]* "$BUILD"/ckpt_l[1234] "$BUILD/ckpt_4" "$BUILD/ckpt_asan"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

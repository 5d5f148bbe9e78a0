#!/bin/sh
# tests/equiv_test.sh [BUILD_DIR] - the equivalence matrix of parallel training (tests/test_equiv.c):
# a small GPT on each layout among 1, dp2, tp2, pp2, dp2 x tp2, tp2 x pp2, dp2 x pp2, dp2 x tp2 x pp2,
# with ZeRO-1/2/3, pipeline schedules (GPipe, 1F1B, interleaved), micro-batches, gradient accumulation,
# hierarchical allreduce (fake nodes of 2 ranks), dropout and a balanced stage split, must reproduce
# the single-process per-step losses, gradient norms, evaluation loss and final parameters
# (relative 1e-5; AdamW parameters 1e-4, see test_equiv.c), and be bit-identical when run twice.
# With --recompute (activation recomputation, full / selective / mixed per stage) also bit-identical
# to the same layout without it, starting the same DP reductions during backward.
# bf16 gradient compression: losses 1e-3, norms 1e-2, parameters 1e-2 (SGD) / 1e-1 (AdamW).
# Two layouts run in the collective debug mode (PTRAIN_COLL_CHECK=1: every collective agreed first).
# The layouts marked soak run only under SOAK=1 (make soak): each path they take is also taken by a
# layout that make test runs. Every run is one mpirun bounded by `timeout 120`; prints PASS/FAIL per run, then "N passed, N failed".
# PT_MPI=mpich (tests/mpich_test.sh): built by mpicc.mpich, launched by mpiexec.mpich; the runs
# without MPI are left to the Open MPI pass; only the layouts marked mpich run (SOAK=1: every
# layout), and only those of at most as many ranks as CPUs (mpi_fits), the others named in a NOTE.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# both builds at once (one core each)
p_nompi=""
mpich || { build_bg "$BUILD/test_equiv_nompi.build.log" $CC $W $PT_OWN tests/test_equiv.c -o "$BUILD/test_equiv_nompi" -lm && p_nompi=$!; }
# the MPI build links to the implementation object of $MPICC $W -DPTRAIN_MPI -fopenmp (build_prog mpi)
have_mpi && build_bg "$BUILD/test_equiv.build.log" build_prog "$BUILD/test_equiv" tests/test_equiv.c mpi && p_mpi=$!
# without MPI: a world of one (micro-batches; v chunks on one rank handed over in memory)
if [ -z "$p_nompi" ]; then :
elif wait $p_nompi; then
    PTRAIN_THREADS=1 prog "equivalence without MPI --m 4" "$BUILD/equiv_nompi1.log" "$B/test_equiv_nompi" --m 4
    PTRAIN_THREADS=1 prog "equivalence without MPI --schedule interleaved --v 2 --m 2" "$BUILD/equiv_nompi2.log" "$B/test_equiv_nompi" \
        --schedule interleaved --v 2 --m 2
else
    fail "build test_equiv ($CC, no MPI)" "see $BUILD/test_equiv_nompi.build.log"
fi
if [ -z "${p_mpi:-}" ]; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if ! wait $p_mpi; then
    fail "build test_equiv ($MPICC -DPTRAIN_MPI)" "see $BUILD/test_equiv.build.log"
    head -n 20 "$BUILD/test_equiv.build.log" | sed 's/^/    /'
    echo "$NP passed, $NF failed"
    exit 1
fi
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
i=0
unfit=""
while read -r n args; do
    case $n in '' | '#'*) continue ;; esac
    m=0
    if [ "$n" = mpich ]; then # one of MPICH's reduced pass (make test)
        m=1
        n=${args%% *} args=${args#* }
    fi
    if [ "$n" = soak ]; then # a layout whose paths the others cover too: SOAK=1 only
        soak || continue
        n=${args%% *} args=${args#* }
    fi
    if mpich; then
        [ $m = 1 ] || soak || continue
        mpi_fits "$n" || { unfit="$unfit; np=$n $args"; continue; }
    fi
    i=$((i + 1))
    prog "equivalence np=$n $args" "$BUILD/equiv_$i.log" mpi_run "$n" -- "$B/test_equiv" $args </dev/null
done <<'LAYOUTS'
soak 1 --dp 1
soak 1 --dp 1 --m 4
mpich 1 --dp 1 --schedule interleaved --v 2 --m 2
soak 2 --dp 2
mpich 2 --dp 2 --accum 2
soak 2 --dp 2 --zero 1
mpich 2 --dp 2 --zero 2 --m 2
2 --dp 2 --zero 2
mpich 2 --dp 2 --compress
2 --tp 2
mpich 2 --tp 2 --dropout 0.1
2 --pp 2 --schedule gpipe --m 4
soak 2 --pp 2 --schedule 1f1b --m 4
mpich 2 --pp 2 --schedule interleaved --v 2 --m 4
mpich 2 --pp 2 --balanced --dropout 0.1
4 --pp 4 --m 4
4 --dp 4 --hier --fake-node-size 2
4 --dp 4 --zero 2 --accum 2
4 --dp 2 --tp 2
4 --dp 2 --tp 2 --zero 1 --accum 2
4 --dp 2 --tp 2 --zero 2
4 --dp 2 --tp 2 --zero 2 --accum 2
soak 4 --tp 2 --pp 2
4 --tp 2 --pp 2 --schedule interleaved --v 2 --m 2
soak 4 --dp 2 --pp 2
4 --dp 2 --pp 2 --zero 1 --accum 2
4 --dp 2 --pp 2 --zero 2 --m 2
4 --dp 2 --pp 2 --zero 2 --accum 2
4 --dp 2 --pp 2 --schedule gpipe --m 4
soak 4 --dp 2 --pp 2 --hier --fake-node-size 2
8 --dp 2 --tp 2 --pp 2
soak 8 --dp 2 --tp 2 --pp 2 --zero 1
8 --dp 2 --tp 2 --pp 2 --zero 2 --schedule gpipe --m 2
8 --dp 2 --tp 2 --pp 2 --zero 2 --accum 2
8 --dp 2 --tp 2 --pp 2 --schedule interleaved --v 2 --m 2 --accum 2
soak 8 --dp 2 --tp 2 --pp 2 --compress
8 --dp 2 --tp 2 --pp 2 --recompute full
8 --dp 2 --tp 2 --pp 2 --schedule interleaved --v 2 --m 2 --accum 2 --dropout 0.1 --recompute mixed
4 --tp 2 --pp 2 --schedule gpipe --m 4 --dropout 0.1 --recompute selective
mpich 2 --dp 2 --accum 2 --zero 1 --recompute full
2 --dp 2 --accum 2 --zero 2 --recompute full
8 --dp 2 --tp 2 --pp 2 --zero 1 --coll-check
4 --dp 2 --pp 2 --hier --fake-node-size 2 --coll-check
2 --dp 2 --zero 3
mpich 2 --dp 2 --zero 3 --accum 2
4 --dp 4 --zero 3
4 --dp 4 --zero 3 --accum 2
4 --dp 2 --tp 2 --zero 3
4 --dp 2 --tp 2 --zero 3 --accum 2
4 --dp 2 --pp 2 --zero 3 --m 2
4 --dp 2 --pp 2 --zero 3 --accum 2
8 --dp 2 --tp 2 --pp 2 --zero 3 --schedule gpipe --m 2
8 --dp 2 --tp 2 --pp 2 --zero 3 --accum 2
8 --dp 2 --tp 2 --pp 2 --zero 3 --schedule interleaved --v 2 --m 2 --recompute mixed
2 --dp 2 --accum 2 --zero 3 --recompute full
4 --dp 2 --tp 2 --zero 3 --coll-check
LAYOUTS
[ -z "$unfit" ] || echo "NOTE $PT_MPI: left out, more ranks than the $(nproc) CPUs (PT_MPICH_OVERSUBSCRIBE=1 runs them):${unfit#;}"
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

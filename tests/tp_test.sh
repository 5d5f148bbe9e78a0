#!/bin/sh
# tests/tp_test.sh [BUILD_DIR] - tensor parallelism (>>tp), and model-parallel inference (tests/test_infer_mp.c:
# a pt_infer over TP / PP shards against one process, under mpirun -np 2 and 4). Builds tests/test_tp.c (the TP layers) and
# tests/test_tp_gpt.c (the TP GPT against one process) twice each (cc without MPI, mpicc -DPTRAIN_MPI
# -fopenmp), runs the plain ones (tp=1) and the MPI ones under mpirun -np 2 and -np 4
# (layout tp = world size), and compiles the implementation as C99/C++ without MPI (with MPI under
# SOAK=1: dist_test compiles those) (-Wall -Wextra -Werror; only pt_*/PT_* symbols defined). Prints one PASS/FAIL line per run or check,
# then "N passed, N failed": the checks of every test program plus one per script-level check (a run
# that fails without a failed check, e.g. a crash or a timeout, adds one failure). Each mpirun is
# bounded by `timeout 120`; the whole script takes a few seconds.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# the four builds start together (one core each)
build_bg "$BUILD/test_tp.build.log" build_prog "$BUILD/test_tp" tests/test_tp.c w
p_test_tp=$!
build_bg "$BUILD/test_tp_gpt.build.log" build_prog "$BUILD/test_tp_gpt" tests/test_tp_gpt.c w
p_test_tp_gpt=$!
if have mpicc; then
    build_bg "$BUILD/test_tp_mpi.build.log" build_prog "$BUILD/test_tp_mpi" tests/test_tp.c mpi
    p_test_tp_mpi=$!
    build_bg "$BUILD/test_tp_gpt_mpi.build.log" build_prog "$BUILD/test_tp_gpt_mpi" tests/test_tp_gpt.c mpi
    p_test_tp_gpt_mpi=$!
    build_bg "$BUILD/test_infer_mp_mpi.build.log" build_prog "$BUILD/test_infer_mp_mpi" tests/test_infer_mp.c mpi
    p_test_infer_mp_mpi=$!
fi

# ---- without MPI: tp = 1 ----
for t in test_tp test_tp_gpt; do
    if eval "wait \$p_$t"; then
        prog "$t (no MPI, tp=1)" "$BUILD/$t.log" "$B/$t"
    else
        fail "build $t ($CC)" "see $BUILD/$t.build.log"
        head -n 20 "$BUILD/$t.build.log" | sed 's/^/    /'
    fi
done

# ---- with MPI: tp = 2 and 4 ----
if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
for t in test_tp test_tp_gpt; do
    if eval "wait \$p_${t}_mpi"; then
        for n in 2 4; do
            prog "$t: mpirun -np $n (tp=$n)" "$BUILD/${t}_np$n.log" mpi_run $n -- env -u PTRAIN_FAKE_NODE_SIZE "$B/${t}_mpi"
        done
    else
        fail "build ${t}_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/${t}_mpi.build.log"
        head -n 20 "$BUILD/${t}_mpi.build.log" | sed 's/^/    /'
    fi
done

# ---- model-parallel inference: tp 2, pp 2, tp 2 x pp 2, tp 4 against one process ----
if wait $p_test_infer_mp_mpi; then
    for l in "2 1" "1 2" "2 2" "4 1"; do
        set -- $l
        prog "test_infer_mp: mpirun -np $(($1 * $2)) (tp=$1, pp=$2)" "$BUILD/test_infer_mp_$1x$2.log" mpi_run $(($1 * $2)) -- env -u PTRAIN_FAKE_NODE_SIZE "$B/test_infer_mp_mpi" $1 $2
    done
else
    fail "build test_infer_mp_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_infer_mp_mpi.build.log"
    head -n 20 "$BUILD/test_infer_mp_mpi.build.log" | sed 's/^/    /'
fi

# ---- the implementation compiles as C and C++, with and without MPI, defining only pt_*/PT_* symbols ----
# (with MPI: dist_test compiles the same in make test; g++ -std=c++11: compile_test, with the same nm check)
impl_compiles tp "gcc -std=c99 -pedantic" "soak:g++ -x c++ -std=c++11" "soak:mpicc -std=c99 -pedantic -DPTRAIN_MPI" "soak:mpicxx -x c++ -std=c++11 -DPTRAIN_MPI"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

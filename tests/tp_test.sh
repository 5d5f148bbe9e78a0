#!/bin/sh
# tests/tp_test.sh [BUILD_DIR] - tensor parallelism (>>tp). Builds tests/test_tp.c (the TP layers) and
# tests/test_tp_gpt.c (the TP GPT against one process) twice each (cc without MPI, mpicc -DPTRAIN_MPI
# -fopenmp), runs the plain ones (tp=1) and the MPI ones under mpirun -np 2 and -np 4
# (layout tp = world size), and compiles the implementation as C99/C++ with and without MPI
# (-Wall -Wextra -Werror; only pt_*/PT_* symbols defined). Prints one PASS/FAIL line per run or check,
# then "N passed, N failed": the checks of every test program plus one per script-level check (a run
# that fails without a failed check, e.g. a crash or a timeout, adds one failure). Each mpirun is
# bounded by `timeout 120`; the whole script takes a few seconds.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# ---- without MPI: tp = 1 ----
for t in test_tp test_tp_gpt; do
    if $CC $W tests/$t.c -o "$BUILD/$t" -lm >"$BUILD/$t.build.log" 2>&1; then
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
    if mpicc $W -DPTRAIN_MPI -fopenmp tests/$t.c -o "$BUILD/${t}_mpi" -lm >"$BUILD/${t}_mpi.build.log" 2>&1; then
        for n in 2 4; do
            prog "$t: mpirun -np $n (tp=$n)" "$BUILD/${t}_np$n.log" mpi_run $n -- env -u PTRAIN_FAKE_NODE_SIZE "$B/${t}_mpi"
        done
    else
        fail "build ${t}_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/${t}_mpi.build.log"
        head -n 20 "$BUILD/${t}_mpi.build.log" | sed 's/^/    /'
    fi
done

# ---- the implementation compiles as C and C++, with and without MPI, defining only pt_*/PT_* symbols ----
printf '#define PTRAIN_IMPLEMENTATION\n#include "ptrain.h"\n' >"$BUILD/tp_tu.c"
for cc in "gcc -std=c99 -pedantic" "g++ -x c++ -std=c++11" "mpicc -std=c99 -pedantic -DPTRAIN_MPI" "mpicxx -x c++ -std=c++11 -DPTRAIN_MPI"; do
    o=$BUILD/tp_tu.$(echo "$cc" | tr -c 'a-zA-Z0-9+\n' '_').o
    if $cc -Wall -Wextra -Werror -O1 -I"$INC" -c "$BUILD/tp_tu.c" -o "$o" >"$o.log" 2>&1; then
        bad=$(nm -g --defined-only "$o" | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
        if [ -z "$bad" ]; then pass "compile $cc -Wall -Wextra -Werror; only pt_*/PT_* symbols"; else
            fail "compile $cc" "symbols outside pt_/PT_: $bad"; fi
    else
        fail "compile $cc -Wall -Wextra -Werror" "see $o.log"
        head -n 20 "$o.log" | sed 's/^/    /'
    fi
done

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

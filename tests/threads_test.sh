#!/bin/sh
# tests/threads_test.sh [BUILD_DIR] - the thread team against OpenMP and without it. tests/test_threads.c
# (1, 2 and 3 threads bit-identical: a GPT's training steps, a GEMM, attention forward and backward, a
# Q8_0 prefill and batch-1 decode; two contexts at once; a loop inside a job; pt_set_threads) built
#   team    $CC without -fopenmp (the default build: the header's own pthreads)
#   openmp  $CC -DPTRAIN_OPENMP -fopenmp (the OpenMP pragmas instead of the team)
#   clang   clang -Wall -Wextra -Werror without OpenMP (as Apple's clang builds it: warning-free, threaded)
# Each passes its checks; team and openmp (one compiler, one set of flags but the switch) write the
# same hashes of every result (--dump). clang's bits may differ from gcc's (another compiler's code),
# not between its own thread counts. The three builds run together (-O1: each is one full compile of
# the header), then the programs. ~60 s on 2 busy cores.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
T=$BUILD/threads
mkdir -p "$T" || exit 1
F="-std=c99 -O1 -march=native -Wall -Wextra -Werror $PT_OWN -I$INC"
rm -f "$T"/*.dump
build_bg "$T/team.build.log" $CC $F tests/test_threads.c -o "$T/team" -lm
p_team=$!
build_bg "$T/openmp.build.log" $CC $F -DPTRAIN_OPENMP -fopenmp tests/test_threads.c -o "$T/openmp" -lm
p_omp=$!
p_clang=""
if have clang; then
    build_bg "$T/clang.build.log" clang $F tests/test_threads.c -o "$T/clang" -lm
    p_clang=$!
fi
# run NAME PID: waits for NAME's build, runs it with --dump
run() {
    if wait "$2"; then prog "test_threads ($1 build)" "$T/$1.log" "$T/$1" --dump "$T/$1.dump"
    else
        fail "build $1" "the compile failed:"
        head -n 20 "$T/$1.build.log" | sed 's/^/    /'
    fi
}
run team $p_team
run openmp $p_omp
if [ -f "$T/team.dump" ] && [ -f "$T/openmp.dump" ]; then
    if cmp -s "$T/team.dump" "$T/openmp.dump"; then pass "the team's results are the OpenMP build's, bit for bit ($(wc -l <"$T/team.dump") hashes)"
    else
        fail "the team's results are the OpenMP build's" "the hashes differ (team | openmp):"
        paste "$T/team.dump" "$T/openmp.dump" | sed 's/^/    /'
    fi
else
    fail "the team's results are the OpenMP build's" "a program wrote no hashes"
fi
if [ -n "$p_clang" ]; then
    run clang $p_clang
    grep -q 'team on' "$T/clang.log" && pass "clang without OpenMP: the kernels run on the team" ||
        fail "clang without OpenMP: the kernels run on the team" "$(grep 'default threads' "$T/clang.log")"
else
    echo "NOTE clang not found: its build is skipped"
fi
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

#!/bin/sh
# tests/coll_test.sh [BUILD_DIR] - collective records, debug mode and the watchdog (>>dist). Builds
# tests/test_coll.c without MPI (a world of one) and with mpicc -DPTRAIN_MPI -fopenmp, runs the MPI
# one under mpirun -np 2 and -np 3 (records, debug-mode mismatches), then checks at script level:
# a bad PTRAIN_WATCHDOG and a PTRAIN_COLL_CHECK that differs between ranks are refused by
# pt_dist_init on every rank; PTRAIN_COLL_CHECK=1 runs the whole test (and
# tests/test_dp.c under -np 2 and -np 4 with 2 fake nodes) in debug mode; and with
# PTRAIN_WATCHDOG=2 a rank waiting in a collective for a rank that sleeps 8 s aborts the job: exit
# status non-zero (not the timeout's), well before the sleeper wakes, stderr holding the watchdog's
# message and the dump with the stuck call's record. (dist_test.sh compiles the implementation as C
# and C++ with MPI and checks its symbols.) Prints one PASS/FAIL line per run or check, then
# "N passed, N failed". Each mpirun is bounded by `timeout`; the script takes ~35 seconds.
# PTRAIN_INC=DIR takes ptrain.h from DIR instead of the repository root.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

# ---- without MPI: a world of one ----
# the MPI builds start now, beside the build and the runs without MPI (one core each)
build_bg "$BUILD/test_coll_mpi.build.log" mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN tests/test_coll.c -o "$B/test_coll_mpi" -lm
p_mpi1=$!
# dp_test builds the same program with the same command: its binary is used when it is newer than
# every source (make test runs dp_test first)
newer() { _n=$1; shift; for _f; do [ "$_n" -nt "$_f" ] || return 1; done; }
if [ "$INC" = . ] && [ -x "$BUILD/test_dp_mpi" ] && newer "$BUILD/test_dp_mpi" tests/test_dp.c tests/dp_common.h tests/test_util.h ptrain.h; then
    build_bg "$BUILD/test_dp_coll.build.log" cp "$BUILD/test_dp_mpi" "$B/test_dp_coll"
else
    build_bg "$BUILD/test_dp_coll.build.log" mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN tests/test_dp.c -o "$B/test_dp_coll" -lm
fi
p_mpi2=$!
if $CC $W $PT_OWN tests/test_coll.c -o "$BUILD/test_coll" -lm >"$BUILD/test_coll.build.log" 2>&1; then
    prog "test_coll (no MPI)" "$BUILD/test_coll.log" "$B/test_coll"
else
    fail "build test_coll ($CC)" "see $BUILD/test_coll.build.log"
    head -n 20 "$BUILD/test_coll.build.log" | sed 's/^/    /'
fi

# ---- with MPI ----
if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if ! wait $p_mpi1; then
    fail "build test_coll_mpi (mpicc -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_coll_mpi.build.log"
    head -n 20 "$BUILD/test_coll_mpi.build.log" | sed 's/^/    /'
    echo "$NP passed, $NF failed"
    exit 1
fi
T=$B/test_coll_mpi
for n in 2 3; do
    prog "mpirun -np $n test_coll" "$BUILD/coll_np$n.log" mpi_run $n -- env -u PTRAIN_FAKE_NODE_SIZE -u PTRAIN_WATCHDOG -u PTRAIN_COLL_CHECK "$T"
done
prog "mpirun -np 2 test_coll, PTRAIN_COLL_CHECK=1 PTRAIN_WATCHDOG=60" "$BUILD/coll_np2_check.log" \
    mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE PTRAIN_COLL_CHECK=1 PTRAIN_WATCHDOG=60 "$T"

# ---- the data-parallel paths (>>dp) in debug mode: buckets, ZeRO, hierarchical chain, compression ----
if wait $p_mpi2; then
    prog "mpirun -np 2 test_dp, PTRAIN_COLL_CHECK=1 PTRAIN_WATCHDOG=60" "$BUILD/coll_dp_np2_check.log" \
        mpi_run 2 -- env -u PTRAIN_FAKE_NODE_SIZE PTRAIN_COLL_CHECK=1 PTRAIN_WATCHDOG=60 "$B/test_dp_coll"
    prog "mpirun -np 4 test_dp, 2 fake nodes (hierarchical), PTRAIN_COLL_CHECK=1" "$BUILD/coll_dp_np4_check.log" \
        mpi_run 4 -- env PTRAIN_FAKE_NODE_SIZE=2 PTRAIN_COLL_CHECK=1 PTRAIN_WATCHDOG=60 "$B/test_dp_coll"
else
    fail "build test_dp (mpicc -DPTRAIN_MPI -fopenmp)" "see $BUILD/test_dp_coll.build.log"
fi

# ---- bad environment: refused on every rank with one message naming the variable ----
log=$BUILD/coll_badenv.log
mpi_run 2 -- env PTRAIN_WATCHDOG=soon "$T" --init-error >"$log" 2>&1
n=$(grep -c "^INIT ERROR rank ?: pt_dist_init: PTRAIN_WATCHDOG='soon', expected seconds" "$log")
if [ "$n" -eq 2 ]; then pass "PTRAIN_WATCHDOG=soon: pt_dist_init refused on both ranks, naming the variable"
else fail "PTRAIN_WATCHDOG=soon" "$n of 2 ranks refused; $(tail -n 3 "$log" | tr '\n' ' ')"; fi
log=$BUILD/coll_diffenv.log
mpi_run 1 -- env PTRAIN_COLL_CHECK=1 "$T" --init-error : -np 1 env -u PTRAIN_COLL_CHECK "$T" --init-error >"$log" 2>&1
n=$(grep -c "^INIT ERROR rank ?: pt_dist_init: PTRAIN_COLL_CHECK differs between ranks" "$log")
if [ "$n" -eq 2 ]; then pass "PTRAIN_COLL_CHECK set on one rank only: pt_dist_init refused on both ranks"
else fail "PTRAIN_COLL_CHECK on one rank" "$n of 2 ranks refused; $(tail -n 3 "$log" | tr '\n' ' ')"; fi

# ---- a program that called MPI_Init itself (thread level below MULTIPLE): the watchdog thread, which
#      calls MPI_Abort, is refused with the level named; without it pt_dist_init works ----
log=$BUILD/coll_owninit.log
mpi_run 2 -- env PTRAIN_WATCHDOG=2 "$T" --own-init >"$log" 2>&1
n=$(grep -c "^INIT ERROR rank ?: pt_dist_init: PTRAIN_WATCHDOG=2 needs MPI thread level MULTIPLE .*found SINGLE" "$log")
if [ "$n" -eq 2 ]; then pass "MPI_Init by the program (SINGLE) + PTRAIN_WATCHDOG: refused on both ranks, naming the level"
else fail "watchdog under MPI_THREAD_SINGLE" "$n of 2 ranks refused; $(tail -n 3 "$log" | tr '\n' ' ')"; fi
log=$BUILD/coll_owninit2.log
mpi_run 2 -- env -u PTRAIN_WATCHDOG "$T" --own-init >"$log" 2>&1
if [ "$(grep -c '^INIT OK rank [01] level 0$' "$log")" -eq 2 ] && [ "$(grep -c '^SET_WATCHDOG refused$' "$log")" -eq 2 ]; then
    pass "MPI_Init by the program: pt_dist_init works, pt_dist_set_watchdog is PT_ERR_STATE"
else fail "pt_dist_init after MPI_Init" "$(tail -n 4 "$log" | tr '\n' ' ')"; fi

# ---- the watchdog: rank 1 sleeps 8 s, rank 0 waits in pt_dist_agree, deadline 2 s ----
out=$BUILD/coll_watchdog.out
err=$BUILD/coll_watchdog.err
t0=$(date +%s)
mpi_run -t 60 2 -- env -u PTRAIN_FAKE_NODE_SIZE -u PTRAIN_COLL_CHECK PTRAIN_WATCHDOG=2 "$T" --watchdog >"$out" 2>"$err"
rc=$?
secs=$(($(date +%s) - t0))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ! grep -q "NOT ABORTED" "$out"; then
    pass "watchdog: the job is aborted (exit status $rc after ${secs}s)"
else fail "watchdog abort" "exit status $rc after ${secs}s; stdout: $(tr '\n' ' ' <"$out" | head -c 300)"; fi
if [ "$secs" -lt 8 ]; then pass "watchdog: aborted before the sleeping rank woke (${secs}s < 8s)"
else fail "watchdog timing" "took ${secs}s, the sleeper wakes at 8s"; fi
if grep -q "ptrain watchdog: rank 0: allreduce of 1 i32 on the world communicator (call 2, collective #2 there, step 5, micro-batch 1) has been in flight for" "$err" &&
    grep -q "longer than the deadline of 2 s" "$err"; then
    pass "watchdog: stderr names the stuck call (op, count, communicator, number, step, micro-batch) and the deadline"
else fail "watchdog message" "not in $err: $(head -c 600 "$err" | tr '\n' ' ')"; fi
if grep -q "^collective records of rank 0 (tp 0, pp 0, dp 0): 2 calls" "$err" &&
    grep -E -q '^ +1 allreduce +world +1 +1 i32 +-1 +5 +1 .* done$' "$err" &&
    grep -E -q '^ +2 allreduce +world +2 +1 i32 +-1 +5 +1 .* IN FLIGHT$' "$err"; then
    pass "watchdog: stderr holds rank 0's records, the stuck call IN FLIGHT"
else fail "watchdog dump" "not in $err: $(head -c 900 "$err" | tr '\n' ' ')"; fi

# ---- the implementation compiles as C and C++ with MPI, defining only pt_*/PT_* symbols ----
# (in make test dist_test compiles the same; here under SOAK=1)
impl_compiles coll "soak:mpicc -std=c99 -pedantic -DPTRAIN_MPI" "soak:mpicxx -x c++ -std=c++11 -DPTRAIN_MPI"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

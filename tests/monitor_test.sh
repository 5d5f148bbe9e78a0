#!/bin/sh
# tests/monitor_test.sh [BUILD_DIR] - per-step metrics and the JSON-lines log (>>monitor). Builds
# tests/test_monitor.c without MPI (one rank: a GPT from token shards; the log parsed and checked
# against what the test measured; events, val loss, checkpoint stall, memory vs RSS, a bad log path)
# and with mpicc -DPTRAIN_MPI (mpirun -np 2: dp2 with a straggler, and a 1F1B pp2 pipeline); then the
# progress line: off when stderr is not a terminal, on under a pseudo-terminal (script(1)), off there
# when the environment says mpirun, on with PTRAIN_PROGRESS=1, plain lines with print_every.
# Prints PASS/FAIL lines and "N passed, N failed". Takes a few seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
D=$BUILD/monitor
rm -rf "$D" && mkdir -p "$D" || exit 1

if build_prog "$BUILD/test_monitor" tests/test_monitor.c w >"$BUILD/test_monitor.build.log" 2>&1; then
    prog "test_monitor (one rank)" "$BUILD/monitor_one.log" timeout 120 "$B/test_monitor" "$D" one
    # progress: the decision (printed on stdout) and what reaches stderr
    P="$B/test_monitor"
    env -u PTRAIN_PROGRESS "$P" "$D" progress >"$D/p_plain.out" 2>"$D/p_plain.err"
    if grep -q 'progress_on=0' "$D/p_plain.out" && ! grep -q "$(printf '\r')" "$D/p_plain.err"; then pass "progress: off when stderr is not a terminal"
    else fail "progress: off when stderr is not a terminal" "$(cat "$D/p_plain.out")"; fi
    PRINT_EVERY=1 "$P" "$D" progress >"$D/p_every.out" 2>"$D/p_every.err"
    if [ "$(grep -c '^step [0-9]/3 | loss' "$D/p_every.err")" = 3 ] && ! grep -q "$(printf '\r')" "$D/p_every.err"; then pass "progress: plain lines with print_every when not a terminal"
    else fail "progress: plain lines with print_every" "$(cat "$D/p_every.err")"; fi
    PTRAIN_PROGRESS=1 "$P" "$D" progress >"$D/p_forced.out" 2>"$D/p_forced.err"
    if grep -q 'progress_on=1' "$D/p_forced.out" && grep -q "$(printf '\r')step 3/3" "$D/p_forced.err"; then pass "progress: PTRAIN_PROGRESS=1 forces the carriage-return line"
    else fail "progress: PTRAIN_PROGRESS=1" "$(cat "$D/p_forced.out")"; fi
    if have script; then
        env -u PTRAIN_PROGRESS -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMI_RANK -u PMIX_RANK script -qec "$P $D progress" /dev/null >"$D/p_tty.out" 2>&1
        if grep -q 'progress_on=1' "$D/p_tty.out"; then pass "progress: on for an interactive terminal (pty)"; else fail "progress: on for a pty" "$(head -c 300 "$D/p_tty.out")"; fi
        env -u PTRAIN_PROGRESS OMPI_COMM_WORLD_SIZE=1 script -qec "$P $D progress" /dev/null >"$D/p_mpi.out" 2>&1
        if grep -q 'progress_on=0' "$D/p_mpi.out"; then pass "progress: off on a pty under mpirun (OMPI_COMM_WORLD_SIZE set)"; else fail "progress: off under mpirun" "$(head -c 300 "$D/p_mpi.out")"; fi
    else
        echo "SKIP progress on a pty: script(1) not found"
    fi
else
    fail "build test_monitor ($CC)" "see $BUILD/test_monitor.build.log"
    head -n 20 "$BUILD/test_monitor.build.log" | sed 's/^/    /'
fi

if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
if mpicc $W $PT_OWN -DPTRAIN_MPI tests/test_monitor.c -o "$BUILD/test_monitor_mpi" -lm >"$BUILD/test_monitor_mpi.build.log" 2>&1; then
    prog "mpirun -np 2 test_monitor dp (dp2, a straggler)" "$BUILD/monitor_dp.log" mpi_run 2 -- "$B/test_monitor_mpi" "$D" dp
    prog "mpirun -np 2 test_monitor pp (pp2, 1F1B)" "$BUILD/monitor_pp.log" mpi_run 2 -- "$B/test_monitor_mpi" "$D" pp
else
    fail "build test_monitor_mpi (mpicc -DPTRAIN_MPI)" "see $BUILD/test_monitor_mpi.build.log"
    head -n 20 "$BUILD/test_monitor_mpi.build.log" | sed 's/^/    /'
fi
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

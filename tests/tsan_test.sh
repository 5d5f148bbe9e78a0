#!/bin/sh
# tests/tsan_test.sh [BUILD_DIR] - ThreadSanitizer over the tests whose code runs threads beside the
# caller: asynchronous checkpoints (the writer and the retention remover, test_ckpt; the statistics
# read while a write is held in flight, crash_run --stats), the
# prefetching loader (test_data), the monitor and the trace (test_monitor, test_trace), the serving
# engine's thread beside submit, cancel and wait (test_engine), pt_run's
# signals (test_host), the thread team that runs every kernel (test_threads; and all the programs
# here run their kernels on it, PTRAIN_THREADS=2), and the collective watchdog thread under MPI
# (test_coll, 2 ranks, PTRAIN_WATCHDOG=60). Built with -fsanitize=thread and without OpenMP (libgomp
# is not instrumented: its own synchronisation would show as false races). Each program must pass its checks and print no
# ThreadSanitizer report; the first report of a failing one is shown. Open MPI runs over shared memory
# (btl self,vader): its TCP transport takes two locks in both orders inside the library, which TSan
# reports as a potential deadlock that is Open MPI's, not ours. ~1 minute.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
T=$BUILD/tsan
mkdir -p "$T" || exit 1
CCT=${TSAN_CC:-$CC}
TS="-std=c99 -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Wall -Wextra -I$INC"
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1" PTRAIN_THREADS=2

# tsan_prog NAME LOG CMD...: the program's own checks (prog), then no report in its log
tsan_prog() {
    name=$1 log=$2
    prog "$@"
    n=$(grep -c 'WARNING: ThreadSanitizer' "$log")
    if [ "$n" -eq 0 ]; then pass "$name: no ThreadSanitizer report"
    else
        fail "$name" "$n ThreadSanitizer reports; the first:"
        sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY/p' "$log" | head -n 40 | sed 's/^/    /'
    fi
}

# the builds run in two lanes beside the runs (one core each); test_data, test_monitor and test_engine
# link to the tsan configuration's implementation object (tests/build_lib.sh), the others (pt__ internals, the
# implementation's structs, test hooks, PTRAIN_HARNESS with POSIX) compile it themselves, with $PT_OWN
# (-DPTRAIN_STATIC: only the functions they reach).
# bg NAME CMD...: builds $T/NAME with CMD, then writes $T/NAME.done (ok or fail)
bg() {
    _n=$1
    shift
    if "$@" >"$T/$_n.build.log" 2>&1; then echo ok >"$T/$_n.st"; else echo fail >"$T/$_n.st"; fi
    mv "$T/$_n.st" "$T/$_n.done"
}
# built NAME: waits for NAME's build; status 0 if it built, else a FAIL line
built() {
    while [ ! -f "$T/$1.done" ]; do sleep 1; done
    [ "$(cat "$T/$1.done")" = ok ] && return 0
    fail "build $1 with -fsanitize=thread" "$(head -c 400 "$T/$1.build.log")"
    return 1
}

rm -rf "$T/ckpt" "$T/data" "$T/mon" "$T/trace" "$T"/*.done
mkdir -p "$T/data" "$T/mon" "$T/trace"
mpi_ok=0
have mpicc && have mpirun && mpi_ok=1
(
    bg test_ckpt $CCT $TS $PT_OWN tests/test_ckpt.c -o "$T/test_ckpt" -lm -lpthread
    bg test_host $CCT $TS $PT_OWN tests/test_host.c -o "$T/test_host" -lm -lpthread
    bg test_trace $CCT $TS $PT_OWN tests/test_trace.c -o "$T/test_trace" -lm -lpthread
    bg test_threads $CCT $TS $PT_OWN tests/test_threads.c -o "$T/test_threads" -lm -lpthread
    [ $mpi_ok = 1 ] && bg test_coll mpicc $TS $PT_OWN -DPTRAIN_MPI tests/test_coll.c -o "$T/test_coll" -lm
) &
(
    for t in test_data test_monitor test_engine; do bg $t build_prog "$T/$t" tests/$t.c tsan; done
    bg crash_run $CCT $TS $PT_OWN tests/crash_run.c -o "$T/crash_run" -lm -lpthread
) &
built test_ckpt && tsan_prog "test_ckpt (async saves, retention)" "$T/ckpt.log" "$T/test_ckpt" "$T/ckpt"
built test_data && tsan_prog "test_data (prefetch thread)" "$T/data.log" "$T/test_data" --quick --dir "$T/data"
built test_monitor && tsan_prog "test_monitor" "$T/mon.log" "$T/test_monitor" "$T/mon"
built test_trace && tsan_prog "test_trace" "$T/trace.log" "$T/test_trace" "$T/trace"
built test_host && tsan_prog "test_host (signals, CRC32C beside a GEMM)" "$T/host.log" "$T/test_host"
built test_threads && tsan_prog "test_threads (the thread team: jobs, sleep and wake, two contexts, nesting)" "$T/threads.log" "$T/test_threads" --quick
built test_engine && tsan_prog "test_engine (an engine thread beside submit, poll, cancel, wait)" "$T/engine.log" "$T/test_engine"
# pt_ckpt_stats_get while an asynchronous write is held in flight (PTRAIN_CKPT_DELAY_MS, crash_run's test hooks)
if built crash_run; then
    rm -rf "$T/stats" && mkdir -p "$T/stats"
    PTRAIN_CKPT_DELAY_MS=30 "$T/crash_run" --stats "$T/stats" >"$T/stats.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^stats ok' "$T/stats.log" && ! grep -q 'WARNING: ThreadSanitizer' "$T/stats.log"; then
        pass "pt_ckpt_stats_get while an asynchronous write runs: no data race"
    else
        fail "pt_ckpt_stats_get while an asynchronous write runs" "exit $rc; the first report:"
        sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY/p' "$T/stats.log" | head -n 40 | sed 's/^/    /'
    fi
fi
if have_mpi; then
    if built test_coll; then
        tsan_prog "mpirun -np 2 test_coll (watchdog thread, PTRAIN_WATCHDOG=60)" "$T/coll.log" \
            mpi_run 2 --mca btl self,vader -x TSAN_OPTIONS -x PTRAIN_WATCHDOG=60 -- "$T/test_coll"
    fi
fi
wait
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

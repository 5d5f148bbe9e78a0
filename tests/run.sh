#!/bin/sh
# tests/run.sh [BUILD_DIR] - builds and runs every ptrain.h test program from the repository root.
# Each program prints PASS/FAIL lines and a final "N passed, N failed"; this script prints every
# program's summary (and its FAIL lines), then the total as its last line. Exit 1 if anything failed.
# A program that does not build, crashes, or prints no final line counts as 1 failed.
# Env: CC (default cc), TEST_FILTER (only programs whose name contains it), NO_ASAN=1 (skip the
# sanitizer builds), SOAK=1 (the scripts' long variants too; tests/soak.sh, make soak, sets it),
# PT_FULL_COMPILE=1 (the old way, to compare: every program compiles the whole implementation
# itself instead of linking to the object of its configuration in $BUILD/impl or compiling it with
# -DPTRAIN_STATIC, and compile_test generates code for every compile: tests/build_lib.sh).
set -u
BUILD=${1:-build/tests}
CC=${CC:-cc}
if [ ! -f ptrain.h ] || [ ! -d tests ]; then
    echo "tests/run.sh: run me from the repository root" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
mkdir -p "$BUILD" || exit 1
START=$(date +%s)

OPT="-std=c99 -O2 -march=native -fopenmp -Wall -Wextra -I."
ASAN="-std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra -I."
# the implementation is compiled once per configuration into $BUILD/impl (tests/build_lib.sh:
# build_prog, impl_obj), shared by these programs and every script
INC=.
PT_IMPL_DIR=$BUILD/impl
export PT_IMPL_DIR
. tests/build_lib.sh
rm -rf "$PT_IMPL_DIR"/*.lock

TOTAL_P=0
TOTAL_F=0

# build NAME SRC FLAGS: compiles in the background, status in $BUILD/NAME.build; the program compiles
# the implementation itself, with $PT_OWN (-DPTRAIN_STATIC: only what it reaches; tests/build_lib.sh)
BPIDS=""
build() {
    (
        if $CC $3 $PT_OWN "$2" -o "$BUILD/$1" ${4:-} -lm >"$BUILD/$1.build.log" 2>&1; then echo ok >"$BUILD/$1.build"
        else echo fail >"$BUILD/$1.build"; fi
    ) &
    BPIDS="$BPIDS $!"
}
# build_shared NAME SRC CONFIG: the same, linked to CONFIG's implementation object (build_prog)
build_shared() {
    (
        if build_prog "$BUILD/$1" "$2" "$3" >"$BUILD/$1.build.log" 2>&1; then echo ok >"$BUILD/$1.build"
        else echo fail >"$BUILD/$1.build"; fi
    ) &
    BPIDS="$BPIDS $!"
}
# tbuild NAME: builds tests/NAME.c (opt) and, unless NO_ASAN=1, NAME.asan (asan); the programs
# in SHARED link to the configuration's object, the others (pt__ internals, their own PT_MALLOC,
# ...) compile the implementation themselves
SHARED=" test_pp test_recompute test_sample test_engine "
tbuild() {
    case $SHARED in *" $1 "*) sh_=1 ;; *) sh_=0 ;; esac
    if want "$1"; then
        if [ $sh_ = 1 ]; then build_shared "$1" "tests/$1.c" opt; else build "$1" "tests/$1.c" "$OPT"; fi
        PROGS="$PROGS $1"
    fi
    if [ "${NO_ASAN:-0}" != 1 ] && want "$1[asan]"; then
        if [ $sh_ = 1 ]; then build_shared "$1.asan" "tests/$1.c" asan; else build "$1.asan" "tests/$1.c" "$ASAN"; fi
        PROGS="$PROGS $1.asan"
    fi
}

# account NAME LOGFILE RC SECONDS: parses the final line of the log and adds to the totals
account() {
    name=$1 log=$2 rc=$3 secs=$4
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$last" ]; then
        p=0 f=1
        why="no final line (exit status $rc)"
    else
        p=$(echo "$last" | cut -d' ' -f1)
        f=$(echo "$last" | cut -d' ' -f3)
        why=""
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
            why="exit status $rc after its final line (sanitizer report?)"
        fi
    fi
    grep -E '^FAIL ' "$log" | sed "s/^/  [$name] /"
    if [ -n "$why" ]; then
        echo "  [$name] FAIL $why; last lines of $log:"
        tail -n 15 "$log" | sed 's/^/    /'
    fi
    echo "$name: $p passed, $f failed (${secs}s)"
    TOTAL_P=$((TOTAL_P + p))
    TOTAL_F=$((TOTAL_F + f))
}

want() { [ -z "${TEST_FILTER:-}" ] || case "$1" in *"$TEST_FILTER"*) return 0 ;; *) return 1 ;; esac; }

# ---- build everything (in parallel) ----
# a full run first builds, beside the programs, the implementation objects that several scripts
# link to, and (make -j2) the tools that several scripts run, so that each is compiled once
PREPIDS=""
if [ -z "${TEST_FILTER:-}" ]; then
    (for c in w mpi w+posix tool+posix; do impl_obj "$c" >/dev/null; done) &
    PREPIDS="$PREPIDS $!"
    (for c in mpi0+cl+posix01 tsan; do impl_obj "$c" >/dev/null; done
        make -s -j2 build/prepare_shards build/ptreport build/ptckpt build/pttrain-hooks >"$BUILD/tools.build.log" 2>&1) &
    PREPIDS="$PREPIDS $!"
fi
PROGS=""
TESTS="test_core test_json test_ops test_gemm test_attn test_kernels test_pp test_alloc test_host test_recompute"
TESTS="$TESTS test_quant"
for t in $TESTS; do tbuild "$t"; done
# gguf: the GGUF reader, writer, export and import (tests/test_gguf.c; its Python half: tests/gguf_test.sh)
tbuild test_gguf
# host safety once more as strict C99 without POSIX: pt_run's signals through C's signal()
if want "test_host[c99]"; then
    build test_host.c99 tests/test_host.c "$OPT -DHOST_PLAIN_C"
    PROGS="$PROGS test_host.c99"
fi
# the sampler and stop strings (see sample), and its sanitizer build
tbuild test_sample
# KV-cached inference (see infer), and its sanitizer build
tbuild test_infer
# the serving engine and block sharing (see engine, infer), and its sanitizer build
tbuild test_engine
# the ops once more with -DPTRAIN_CBLAS: matrix products through the system BLAS
if want "test_ops[cblas]"; then
    build test_ops.cblas tests/test_ops.c "$OPT -DPTRAIN_CBLAS" -lopenblas
    PROGS="$PROGS test_ops.cblas"
fi
# shellcheck disable=SC2086
wait $BPIDS

# ---- run ----
for b in $PROGS; do
    case $b in
    *.cblas) name="${b%.cblas}[cblas]"; args="--quick"; env="" ;;
    *.c99) name="${b%.c99}[c99]"; args=""; env="" ;;
    *.asan) name="${b%.asan}[asan]"; args="--quick"
        env="ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1" ;;
    *) name=$b; args=""; env="" ;;
    esac
    log="$BUILD/$b.log"
    if [ "$(cat "$BUILD/$b.build" 2>/dev/null)" != ok ]; then
        echo "  [$name] FAIL does not build:"
        head -n 30 "$BUILD/$b.build.log" | sed 's/^/    /'
        echo "$name: 0 passed, 1 failed (build)"
        TOTAL_F=$((TOTAL_F + 1))
        continue
    fi
    t0=$(date +%s)
    case $BUILD in /*) bin="$BUILD/$b" ;; *) bin="./$BUILD/$b" ;; esac
    env $env "$bin" $args >"$log" 2>&1
    rc=$?
    account "$name" "$log" "$rc" $(($(date +%s) - t0))
done

# script NAME ARG: runs tests/NAME.sh ARG (a script ending with "N passed, N failed") and counts it
script() {
    t0=$(date +%s)
    CC="$CC" sh "tests/$1.sh" "$2" >"$BUILD/$1.log" 2>&1
    account "$1" "$BUILD/$1.log" "$?" $(($(date +%s) - t0))
}
# shellcheck disable=SC2086
[ -z "$PREPIDS" ] || wait $PREPIDS
want compile_test && script compile_test "$BUILD/compile"
want dist && script dist_test "$BUILD"
want dp && script dp_test "$BUILD"
want ckpt && script ckpt_test "$BUILD"
want ckpttool && script ckpttool_test "$BUILD"
want gguf && script gguf_test "$BUILD"
want crash && script crash_test "$BUILD"
want tp && script tp_test "$BUILD"
want xent && script xent_test "$BUILD"
want coll && script coll_test "$BUILD"
want equiv && script equiv_test "$BUILD"
# the MPI equivalence and checkpoint suites once more under MPICH (a reduced 2-rank set; docs/mpi.md)
want mpich && script mpich_test "$BUILD/mpich"
want examples && script examples_test "$BUILD/examples"
want ptgen && script ptgen_test "$BUILD/ptgen"
want serve && script serve_test "$BUILD/serve"
want opencl && script opencl_test "$BUILD"
want opencl_mpi && script opencl_mpi_test "$BUILD"
want cltools && script cltools_test "$BUILD"
want cldl && script cldl_test "$BUILD"
want data && script data_test "$BUILD"
want report && script report_test "$BUILD"
want fuzz && script fuzz_test "$BUILD"
want trace && script trace_test "$BUILD"
want monitor && script monitor_test "$BUILD"
want guard && script guard_test "$BUILD"
want ptrun && script ptrun_test "$BUILD"
# the abuse suite: the supervisor's channel, ptserve and the loaders attacked (tests/abuse_*.sh)
want abuse && script abuse_test "$BUILD/abuse"
want memest && script memest_test "$BUILD"
want precision && script precision_test "$BUILD"
want toc && script toc_test "$BUILD"
want layers && script layers_test "$BUILD"
want threads && script threads_test "$BUILD"
want tsan && script tsan_test "$BUILD"
want arm64 && script arm64_test "$BUILD"
want bench && script bench_test "$BUILD"

echo "total time $(($(date +%s) - START))s"
echo "$TOTAL_P passed, $TOTAL_F failed"
[ "$TOTAL_F" -eq 0 ]

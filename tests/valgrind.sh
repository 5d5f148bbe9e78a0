#!/bin/sh
# tests/valgrind.sh [BUILD_DIR] - the single-process test programs under valgrind's memcheck (make
# valgrind): each built at -O1 -g without -march=native (valgrind 3.19 does not decode AVX-512; the
# kernels then take their AVX2 or portable paths, chosen at run time as on any CPU), run with --quick
# (the programs that have it) on one OpenMP thread. A program counts as failed when it fails a check, or when memcheck reports an
# invalid access, a use of uninitialised values or a definite / indirect leak (--error-exitcode).
# Prints each program's summary and memcheck's error summary, then "N passed, N failed" last.
# Env: CC (default cc), TEST_FILTER (only programs whose name contains it), VG_ARGS (more valgrind flags).
set -u
BUILD=${1:-build/valgrind}
CC=${CC:-cc}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "tests/valgrind.sh: valgrind is not installed (apt-get install valgrind; make deps does)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
mkdir -p "$BUILD" || exit 1
FLAGS="-std=c99 -O1 -g -fopenmp -Wall -Wextra -I."
PROGS="test_core test_json test_ops test_gemm test_attn test_kernels test_pp test_alloc test_host test_recompute test_xent test_memest test_sample test_gguf test_data test_infer test_engine"
P=0
F=0
for t in $PROGS; do
    [ -z "${TEST_FILTER:-}" ] || case $t in *"$TEST_FILTER"*) ;; *) continue ;; esac
    [ -f "tests/$t.c" ] || continue
    if ! $CC $FLAGS "tests/$t.c" -o "$BUILD/$t" -lm >"$BUILD/$t.build.log" 2>&1; then
        echo "  [$t] FAIL does not build:"; head -n 20 "$BUILD/$t.build.log" | sed 's/^/    /'
        F=$((F + 1)); continue
    fi
    args=""; grep -q -- 'test_util.h\|"--quick"' "tests/$t.c" && args=--quick
    # test_data writes its shards into a folder of its own
    [ "$t" = test_data ] && mkdir -p "$BUILD/test_data.d" && args="$args --dir $BUILD/test_data.d"
    t0=$(date +%s)
    OMP_NUM_THREADS=1 PTRAIN_THREADS=1 valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect --track-origins=yes --log-file="$BUILD/$t.vg" ${VG_ARGS:-} \
        "$BUILD/$t" $args >"$BUILD/$t.log" 2>&1
    rc=$?
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$BUILD/$t.log" | tail -n 1)
    errs=$(grep -E 'ERROR SUMMARY' "$BUILD/$t.vg" | tail -n 1 | sed 's/^==[0-9]*== //')
    p=${last%% *}; f=${last#* passed, }; f=${f%% *}
    [ -n "$last" ] || { p=0; f=1; }
    grep -E '^FAIL ' "$BUILD/$t.log" | sed "s/^/  [$t] /"
    if [ "$rc" -eq 99 ]; then
        echo "  [$t] FAIL memcheck: $errs (first reports below; all in $BUILD/$t.vg)"
        grep -E -A 12 'Invalid|uninitialised|definitely lost|indirectly lost' "$BUILD/$t.vg" | head -n 40 | sed 's/^/    /'
        f=$((f + 1))
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "  [$t] FAIL exit status $rc"; f=1
    fi
    echo "$t: $p passed, $f failed ($(($(date +%s) - t0))s; memcheck: $errs)"
    P=$((P + p)); F=$((F + f))
done
echo "$P passed, $F failed"
[ "$F" -eq 0 ]

#!/bin/sh
# tests/compile_test.sh [OUT_DIR] - ptrain.h builds cleanly as C99, C11, C++11 and C++17 (gcc and,
# when present, clang) with -Wall -Wextra -Werror; two translation units link (one holds the
# implementation); tu_a.o exports only pt_*/PT_* symbols; PTRAIN_STATIC copies in two TUs link.
# A compiler whose -fopenmp finds no omp.h fails its -fopenmp lines naming the Debian package (clang: libomp-dev).
# Prints PASS/FAIL lines and "N passed, N failed"; exit 1 if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${1:-build/tests/compile}
mkdir -p "$OUT" || exit 1
CC=${CC:-cc}
NP=0
NF=0
W="-Wall -Wextra -Werror"

pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }

# try NAME LOG CMD...: runs the command; PASS if it exits 0, else FAIL with the log's first lines
try() {
    name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then pass "$name"; else
        fail "$name" "'$*' failed:"
        head -n 20 "$log" | sed 's/^/    /'
    fi
}

# queue NAME LOG CMD...: like try, but the command runs in the background, two at a time (each
# compile is one core); `results` waits for them all and prints their PASS/FAIL lines in queue order
QN=0
rm -f "$OUT"/q*.rc
QIDS=""
QPIDS=""
queue() {
    QN=$((QN + 1))
    printf '%s\n' "$1" >"$OUT/q$QN.name"
    printf '%s\n' "$2" >"$OUT/q$QN.logname"
    _ql=$2
    shift 2
    echo "$*" >"$OUT/q$QN.cmd"
    set -- $QPIDS
    if [ $# -ge 2 ]; then
        wait "$1"
        shift
        QPIDS="$*"
    fi
    _qn=$QN
    (
        if eval "$(cat "$OUT/q$_qn.cmd")" >"$_ql" 2>&1; then echo 0 >"$OUT/q$_qn.rc"; else echo 1 >"$OUT/q$_qn.rc"; fi
    ) &
    QPIDS="$QPIDS $!"
    QIDS="$QIDS $QN"
}
results() {
    wait
    for _q in $QIDS; do
        _qname=$(cat "$OUT/q$_q.name")
        if [ "$(cat "$OUT/q$_q.rc" 2>/dev/null)" = 0 ]; then pass "$_qname"; else
            fail "$_qname" "'$(cat "$OUT/q$_q.cmd")' failed:"
            head -n 20 "$(cat "$OUT/q$_q.logname")" | sed 's/^/    /'
        fi
    done
    QIDS=""
    QPIDS=""
}

have() { command -v "$1" >/dev/null 2>&1; }

GCC=gcc
have gcc || GCC=$CC
GXX=g++
COMPILERS_C="$GCC"
COMPILERS_CXX=""
have g++ && COMPILERS_CXX="g++"
if have clang; then COMPILERS_C="$COMPILERS_C clang"; else echo "NOTE clang not found: clang checks skipped"; fi
have clang++ && COMPILERS_CXX="$COMPILERS_CXX clang++"

# omp_missing C: C -fopenmp finds no omp.h; prints the Debian package that has it
omp_missing() {
    printf '#include <omp.h>\n' | $1 -fopenmp -E -x c - >/dev/null 2>&1 && return 1
    case $1 in
    clang*) echo "libomp-dev (LLVM's OpenMP)" ;;
    *) echo "the compiler's OpenMP runtime (gcc: libgcc-12-dev, from build-essential)" ;;
    esac
}

# ---- the implementation TU in every language standard ----
# What a compile costs is code generation (~15 s of CPU); parsing and checking the TU takes under 2 s.
# So a compile whose object nothing uses and whose warnings come from the front end alone is
# -fsyntax-only (the same flags, -O level included, so __OPTIMIZE__ and the headers are the same):
#  - clang: its warnings are all the front end's (-Wall -Wextra -pedantic, -Wuninitialized included),
#    so -fsyntax-only prints what the full compile prints; one clang compile (-std=c99 -fopenmp -O2)
#    still generates code, and so do its C++ compiles (-O1: their objects' symbols are checked below;
#    at -O0 clang++ would emit the inline functions of <cmath> as global symbols).
#  - gcc: -O2's middle-end warnings (-Wmaybe-uninitialized, -Warray-bounds, -Wstringop-*, ...) come
#    from code generation, so -std=c99 builds objects with and without -fopenmp; -std=c11 is
#    -fsyntax-only (the implementation's code has no __STDC_VERSION__ branch: -std=c11 adds only
#    system-header declarations it does not use, so the optimizer sees the same functions).
#  - g++: -std=c++11 -O1 builds its object; -std=c++17 is checked -O1 -fsyntax-only here and compiled
#    at -O3 below (its nm check reads that object).
# SYNTAX_ONLY="compiler std ..." lists them; PT_FULL_COMPILE=1 builds every one (the old way).
cmode() { # cmode COMPILER STD OBJ: the "-c -o OBJ" of a full compile or -fsyntax-only
    if [ "${PT_FULL_COMPILE:-0}" != 1 ]; then
        case " $SYNTAX_ONLY " in *" $1:$2 "*) echo "-fsyntax-only"; return ;; esac
    fi
    echo "-c -o $3"
}
SYNTAX_ONLY="gcc:c11 gcc:c11.omp clang:c99 clang:c11 clang:c11.omp g++:c++17 oclh:oclh"
for c in $COMPILERS_C; do
    omp_pkg=$(omp_missing "$c")
    for std in c99 c11; do
        queue "compile $c -std=$std -pedantic $W" "$OUT/$c.$std.log" $c -std=$std -pedantic $W -O2 $(cmode "$c" $std "$OUT/$c.$std.o") tests/tu_a.c
        if [ -n "$omp_pkg" ]; then
            fail "compile $c -std=$std -pedantic $W -fopenmp" "$c -fopenmp finds no omp.h: install $omp_pkg (make deps)"
        else
            queue "compile $c -std=$std -pedantic $W -fopenmp" "$OUT/$c.$std.omp.log" $c -std=$std -pedantic $W -O2 -fopenmp $(cmode "$c" $std.omp "$OUT/$c.$std.omp.o") tests/tu_a.c
        fi
    done
done
for cxx in $COMPILERS_CXX; do
    for std in c++11 c++17; do
        queue "compile $cxx -x c++ -std=$std $W" "$OUT/$cxx.$std.log" $cxx -x c++ -std=$std $W -O1 $(cmode "$cxx" $std "$OUT/$cxx.$std.o") tests/tu_a.c
    done
done
# -O3 enables more analysis-based warnings (format truncation, ...); bench and users build with it
queue "compile $GCC -std=c99 -O3 -march=native $W -fopenmp" "$OUT/o3.log" $GCC -std=c99 -pedantic $W -O3 -march=native -fopenmp -c tests/tu_a.c -o "$OUT/o3.o"
queue "compile g++ -x c++ -O3 $W" "$OUT/o3xx.log" $GXX -x c++ -std=c++17 $W -O3 -c tests/tu_a.c -o "$OUT/o3xx.o"
queue "compile $GCC -std=c99 $W -fopenmp -DPTRAIN_STATIC (static_test.c)" "$OUT/static.c.log" \
    $GCC -std=c99 -pedantic $W -O1 -fopenmp -c tests/static_test.c -o "$OUT/static_a.o"
if [ -n "$COMPILERS_CXX" ]; then
    queue "compile g++ -x c++ -std=c++11 $W -DPTRAIN_STATIC (static_test.c)" "$OUT/static.cxx.log" \
        $GXX -x c++ -std=c++11 $W -O1 -c tests/static_test.c -o "$OUT/static_cxx.o"
fi

# ---- -DPTRAIN_OPENCL (no OpenCL or CLBlast header needed: the backend declares what it uses and loads
# the libraries at run time): C and C++, only pt_*/PT_* symbols, no OpenCL or CLBlast symbol to link;
# with the headers installed, it also compiles beside <CL/cl.h> and <clblast_c.h> (a program using both) ----
have_cl=1
have_clh=0
[ -e /usr/include/CL/cl.h ] && [ -e /usr/include/clblast_c.h ] && have_clh=1
OCL_CCS="$GCC -std=c99 -pedantic|$GXX -x c++ -std=c++11"
oIFS=$IFS
IFS='|'
for cc in $OCL_CCS; do
    IFS=$oIFS
    o=$OUT/ocl.$(echo "$cc" | tr -c 'a-z0-9+\n' '_').o
    queue "compile $cc -DPTRAIN_OPENCL $W" "$o.log" $cc $W -O1 -DPTRAIN_OPENCL -c tests/tu_a.c -o "$o"
done
IFS=$oIFS
if [ $have_clh = 1 ]; then
    queue "compile $GCC -std=c99 -DPTRAIN_OPENCL $W after <CL/cl.h> and <clblast_c.h>" "$OUT/oclh.log" \
        $GCC -std=c99 $W -O1 -DPTRAIN_OPENCL -DCL_TARGET_OPENCL_VERSION=120 -include CL/cl.h -include clblast_c.h $(cmode oclh oclh "$OUT/oclh.o") tests/tu_a.c
fi
# the second PTRAIN_STATIC translation unit (linked below to the first)
queue "compile $GCC -std=c99 $W -fopenmp -DPTRAIN_STATIC -DSTATIC_SECOND (static_test.c)" "$OUT/st2.log" \
    $GCC -std=c99 $W -O1 -fopenmp -DSTATIC_SECOND -c tests/static_test.c -o "$OUT/st2.o"
results
# the C++ objects too define only pt_*/PT_* global symbols (extern "C"; tp_test, which checked g++
# -std=c++11 the same way, leaves that compile to this script outside SOAK=1)
for cxx in $COMPILERS_CXX; do
    for std in c++11 c++17; do
        o=$OUT/$cxx.$std.o
        [ "$(cmode "$cxx" $std x)" = -fsyntax-only ] && [ "$cxx" = "$GXX" ] && [ $std = c++17 ] && o=$OUT/o3xx.o
        bad=$(nm -g --defined-only "$o" 2>/dev/null | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
        if [ -f "$o" ] && [ -z "$bad" ]; then pass "nm: $cxx -x c++ -std=$std defines only pt_*/PT_* global symbols"; else
            fail "nm: $cxx -x c++ -std=$std defines only pt_*/PT_* global symbols" "found: ${bad:-no object}"; fi
    done
done
if [ $have_cl = 1 ]; then
    IFS='|'
    for cc in $OCL_CCS; do
        IFS=$oIFS
        o=$OUT/ocl.$(echo "$cc" | tr -c 'a-z0-9+\n' '_').o
        bad=$(nm -g --defined-only "$o" 2>/dev/null | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
        if [ -f "$o" ] && [ -z "$bad" ]; then pass "nm: $cc -DPTRAIN_OPENCL defines only pt_*/PT_* global symbols"; else
            fail "nm: $cc -DPTRAIN_OPENCL defines only pt_*/PT_* global symbols" "found: ${bad:-no object}"; fi
        und=$(nm -u "$o" 2>/dev/null | awk '{print $NF}' | grep -E '^(cl[A-Z]|CLBlast)' | tr '\n' ' ')
        if [ -f "$o" ] && [ -z "$und" ] && nm -u "$o" | grep -q -w dlopen; then pass "nm: $cc -DPTRAIN_OPENCL needs no OpenCL or CLBlast symbol (dlopen instead)"; else
            fail "nm: $cc -DPTRAIN_OPENCL needs no OpenCL or CLBlast symbol" "undefined: ${und:-none}; dlopen $(nm -u "$o" 2>/dev/null | grep -c -w dlopen)"; fi
    done
    IFS=$oIFS
fi

# ---- two translation units: tu_a holds the implementation, tu_b only includes the header ----
# tu_a.o is the C99 OpenMP object compiled above when there is one (the same source, -O2 -pedantic)
if { { [ -f "$OUT/$GCC.c99.omp.o" ] && cp "$OUT/$GCC.c99.omp.o" "$OUT/tu_a.o"; } ||
    $GCC -std=c99 -O1 -fopenmp -c tests/tu_a.c -o "$OUT/tu_a.o" >"$OUT/tu_a.log" 2>&1; } &&
    $GCC -std=c99 $W -O1 -c tests/tu_b.c -o "$OUT/tu_b.o" >"$OUT/tu_b.log" 2>&1; then
    try "link tu_a.o + tu_b.o (no duplicate symbols)" "$OUT/link2.log" $GCC -fopenmp "$OUT/tu_a.o" "$OUT/tu_b.o" -o "$OUT/tu2" -lm
    try "run the two-TU program" "$OUT/run2.log" "$OUT/tu2"
    # every defined global symbol of the implementation TU starts with pt_ or PT_
    bad=$(nm -g --defined-only "$OUT/tu_a.o" | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
    if [ -z "$bad" ]; then pass "nm: tu_a.o defines only pt_*/PT_* global symbols"; else
        fail "nm: tu_a.o defines only pt_*/PT_* global symbols" "found: $bad"; fi
    n=$(nm -g --defined-only "$OUT/tu_a.o" | grep -c -E ' (pt_|PT_)')
    if [ "$n" -gt 50 ]; then pass "nm: tu_a.o exports the API ($n symbols)"; else
        fail "nm: tu_a.o exports the API" "only $n pt_ symbols"; fi
    bad=$(nm -g --defined-only "$OUT/tu_b.o" | awk 'NF >= 3 {print $3}' | grep -v -x main | tr '\n' ' ')
    if [ -z "$bad" ]; then pass "nm: tu_b.o (header only) defines nothing but main"; else
        fail "nm: tu_b.o (header only) defines nothing but main" "found: $bad"; fi
    if [ -n "$COMPILERS_CXX" ]; then
        try "C++ tu_b links against C tu_a (extern \"C\")" "$OUT/linkxx.log" \
            $GXX -x c++ -std=c++11 $W -O1 tests/tu_b.c -x none "$OUT/tu_a.o" -fopenmp -o "$OUT/tu2xx" -lm
        try "run the C++/C two-TU program" "$OUT/run2xx.log" "$OUT/tu2xx"
    fi
else
    fail "build tu_a.c / tu_b.c" "see $OUT/tu_a.log $OUT/tu_b.log"
    cat "$OUT/tu_a.log" "$OUT/tu_b.log" | head -n 20 | sed 's/^/    /'
fi

# ---- PTRAIN_STATIC: two private copies link and both work ----
# st1.o is static_a.o compiled above (the same source and flags, -pedantic), st2.o was queued above
if { { [ -f "$OUT/static_a.o" ] && cp "$OUT/static_a.o" "$OUT/st1.o"; } ||
    $GCC -std=c99 $W -O1 -fopenmp -c tests/static_test.c -o "$OUT/st1.o" >"$OUT/st1.log" 2>&1; } && [ -f "$OUT/st2.o" ]; then
    try "link two PTRAIN_STATIC TUs" "$OUT/linkst.log" $GCC -fopenmp "$OUT/st1.o" "$OUT/st2.o" -o "$OUT/static_test" -lm
    try "run the PTRAIN_STATIC program" "$OUT/runst.log" "$OUT/static_test"
    bad=$(nm -g --defined-only "$OUT/st1.o" "$OUT/st2.o" | awk 'NF >= 3 {print $3}' | grep -E '^(pt_|PT_)' | tr '\n' ' ')
    if [ -z "$bad" ]; then pass "nm: PTRAIN_STATIC TUs export no pt_ symbols"; else
        fail "nm: PTRAIN_STATIC TUs export no pt_ symbols" "found: $bad"; fi
else
    fail "build static_test.c twice" "see $OUT/st1.log $OUT/st2.log"
    cat "$OUT/st1.log" "$OUT/st2.log" | head -n 20 | sed 's/^/    /'
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

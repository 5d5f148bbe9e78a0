#!/bin/sh
# tests/opencl_test.sh [BUILD_DIR] - the OpenCL backend (>>opencl). Needs an OpenCL platform (PoCL:
# Debian pocl-opencl-icd, installed by `make deps`), the ICD loader and CLBlast: without them this
# script FAILS (it does not skip) and says what to install. Builds tests/test_opencl.c with
# -DPTRAIN_OPENCL and runs it (every op forward and backward against the CPU backend on odd shapes,
# with a parity table; optimizers; transfer counts; the program binary cache; error paths), runs it
# once more with OCL_ICD_VENDORS pointing at an empty directory (no platform: a clear error), builds
# it without -DPTRAIN_OPENCL (asking for "opencl" fails with a message), and compiles the
# implementation with -DPTRAIN_OPENCL as C99/C11 and C++11/17 (-Wall -Wextra -Werror), checking that
# only pt_*/PT_* symbols are defined. Prints PASS/FAIL lines and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# a platform must be present (the CI installs PoCL); no platform is a failure, not a skip
if have clinfo; then
    nplat=$(clinfo -l 2>/dev/null | grep -c '^Platform')
    if [ "$nplat" -eq 0 ]; then
        fail "OpenCL platform" "no OpenCL platform found (clinfo -l lists none): install pocl-opencl-icd (make deps)"
        echo "$NP passed, $NF failed"
        exit 1
    fi
fi

# the builds start together (one core each); each is waited for where it is first needed
$CC $W -DPTRAIN_OPENCL $PT_OWN tests/test_opencl.c -o "$BUILD/test_opencl" -lm >"$BUILD/test_opencl.build.log" 2>&1 &
p_b1=$!
build_prog "$BUILD/test_opencl_nocl" tests/test_opencl.c w+posix >"$BUILD/test_opencl_nocl.build.log" 2>&1 &
p_b2=$!
if wait $p_b1; then
    prog "test_opencl (cpu vs opencl)" "$BUILD/test_opencl.log" timeout 600 "$B/test_opencl" "$BUILD"
    sed -n '/^parity table/,$p' "$BUILD/test_opencl.log" | grep -v -E '^[0-9]+ passed' | sed 's/^/    /'
    grep '^transfers of one step' "$BUILD/test_opencl.log" | sed 's/^/    /'
    mkdir -p "$BUILD/no_icd_vendors"
    prog "test_opencl --no-platform (OCL_ICD_VENDORS empty)" "$BUILD/test_opencl_noplat.log" \
        env OCL_ICD_VENDORS="$BUILD/no_icd_vendors" timeout 60 "$B/test_opencl" --no-platform
else
    fail "build test_opencl (-DPTRAIN_OPENCL)" "see $BUILD/test_opencl.build.log (make deps installs OpenCL and CLBlast)"
    head -n 20 "$BUILD/test_opencl.build.log" | sed 's/^/    /'
fi
if wait $p_b2; then
    prog "test_opencl without PTRAIN_OPENCL" "$BUILD/test_opencl_nocl.log" "$B/test_opencl_nocl"
else
    fail "build test_opencl without PTRAIN_OPENCL" "see $BUILD/test_opencl_nocl.build.log"
fi

# ---- the implementation with OpenCL compiles as C and C++, defining only pt_*/PT_* symbols ----
# (C99 with gcc and C++11 with g++: compile_test compiles the same, with the same nm check, in make test)
c99=soak: cxx11=soak:
# sameversion A B: the two compilers report the same version and target (cc is gcc, c++ is g++)
sameversion() { [ "$($1 -dumpfullversion -dumpmachine 2>&1)" = "$($2 -dumpfullversion -dumpmachine 2>&1)" ]; }
sameversion "$CC" gcc || c99=""
sameversion c++ g++ || cxx11=""
impl_compiles ocl "${c99}$CC -std=c99 -pedantic -DPTRAIN_OPENCL" "$CC -std=c11 -pedantic -fopenmp -DPTRAIN_OPENCL" "${cxx11}c++ -x c++ -std=c++11 -DPTRAIN_OPENCL" \
    "c++ -x c++ -std=c++17 -DPTRAIN_OPENCL"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

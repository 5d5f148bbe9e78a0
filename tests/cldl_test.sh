#!/bin/sh
# tests/cldl_test.sh [BUILD_DIR] - OpenCL and CLBlast loaded at run time (>>opencl: pt__clf_load): one
# binary built with -DPTRAIN_OPENCL and no -l flag (tests/test_cldl.c) needs neither library to start:
# it does not link them (readelf), trains on the CPU to the same bits with the libraries hidden (a
# private mount namespace, tests/cl_hide.sh) as without, and with them hidden a device request fails
# with PT_ERR_DEVICE naming libOpenCL.so.1, dlopen's reason and the packages (with only CLBlast hidden:
# naming libclblast.so.1, the listing still works); with them present it finds the device. Hiding needs root (unshare -m); without it those checks are skipped with a message.
# Prints PASS/FAIL lines and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
. tests/cl_hide.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
unset PTRAIN_DEVICE PTRAIN_CL_TUNE
T=$BUILD/cldl
mkdir -p "$T"
if ! $CC $W -O1 -DPTRAIN_OPENCL $PT_OWN tests/test_cldl.c -o "$T/test_cldl" -lm >"$T/build.log" 2>&1; then
    fail "build test_cldl (-DPTRAIN_OPENCL, no -l flag)" "see $T/build.log"
    head -n 20 "$T/build.log" | sed 's/^/    /'
    echo "$NP passed, $NF failed"
    exit 1
fi
pass "test_cldl builds with -DPTRAIN_OPENCL and no OpenCL header or library flag"
needed=$(readelf -d "$T/test_cldl" 2>/dev/null | grep NEEDED | grep -o '\[.*\]' | tr '\n' ' ')
case "$needed" in
'') fail "readelf -d test_cldl" "no NEEDED entries read" ;;
*OpenCL* | *clblast*) fail "test_cldl links no OpenCL library" "NEEDED: $needed" ;;
*) pass "test_cldl links neither libOpenCL nor libclblast (NEEDED: $needed)" ;;
esac

prog "test_cldl train (libraries present)" "$T/train.log" "$B/cldl/test_cldl" train "$T/losses.txt"
prog "test_cldl present" "$T/present.log" timeout 60 "$B/cldl/test_cldl" present
if cl_hide_setup; then
    prog "test_cldl train (libraries hidden)" "$T/train_hidden.log" cl_hide "$B/cldl/test_cldl" train "$T/losses_hidden.txt"
    if [ -s "$T/losses.txt" ] && cmp -s "$T/losses.txt" "$T/losses_hidden.txt"; then
        pass "the CPU run with the libraries hidden: the same losses, bit for bit ($(wc -l <"$T/losses.txt") steps)"
    else fail "the CPU run with the libraries hidden" "losses differ: $(tr '\n' ' ' <"$T/losses.txt") vs $(tr '\n' ' ' <"$T/losses_hidden.txt" 2>/dev/null)"; fi
    prog "test_cldl hidden (libraries hidden)" "$T/hidden.log" cl_hide "$B/cldl/test_cldl" hidden
    grep '^    message:' "$T/hidden.log" | head -n 1
    # CLBlast alone missing (the OpenCL loader and PoCL there)
    all=$CL_HIDE_LIBS
    CL_HIDE_LIBS=$(for l in $all; do case $l in *clblast*) echo "$l" ;; esac; done | tr '\n' ' ')
    prog "test_cldl blast (libclblast.so.1 hidden)" "$T/blast.log" cl_hide timeout 60 "$B/cldl/test_cldl" blast
    CL_HIDE_LIBS=$all
else
    echo "SKIP hiding the libraries: $CL_HIDE_WHY (not counted)"
fi
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

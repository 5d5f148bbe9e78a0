#!/bin/sh
# tests/cltools_test.sh [BUILD_DIR] - the OpenCL tooling: CLBlast tuning files (tests/test_cltune.c,
# built with and without -DPTRAIN_OPENCL), tools/ptcl (list, check, tune and their errors: no
# platform, bad device, the OpenCL libraries hidden) and bench/bench_cl (its JSON lines; the GPT line is a measurement or an
# "error" field, never a crash). Needs an OpenCL platform (PoCL: `make deps` installs
# pocl-opencl-icd); without one it FAILS and says what to install. Prints PASS/FAIL lines and
# "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
. tests/cl_hide.sh
export PTRAIN_THREADS=${PTRAIN_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
unset PTRAIN_CL_TUNE PTRAIN_DEVICE
T=$BUILD/cltools
mkdir -p "$T" "$T/no_icd_vendors"


# ---- tuning files ----
# the builds start together (one core each); each is waited for where it is first needed
$CC $W -D_POSIX_C_SOURCE=200809L -DPTRAIN_OPENCL $PT_OWN tests/test_cltune.c -o "$T/test_cltune" -lm >"$T/test_cltune.build.log" 2>&1 &
p_b1=$!
build_prog "$T/test_cltune_nocl" tests/test_cltune.c w+posix -D_POSIX_C_SOURCE=200809L >"$T/test_cltune_nocl.build.log" 2>&1 &
p_b2=$!
$CC -O2 -fopenmp -Wall -Wextra -Werror -DPTRAIN_OPENCL $PT_OWN -I. tools/ptcl.c -o "$T/ptcl" -lm >"$T/ptcl.build.log" 2>&1 &
p_b3=$!
# bench_cl alone calls OpenCL and CLBlast itself (its direct baselines): it needs their headers and -l flags
if [ -e /usr/include/CL/cl.h ] && [ -e /usr/include/clblast_c.h ]; then
    $CC -O2 -fopenmp -Wall -Wextra -Werror -DPTRAIN_OPENCL $PT_OWN -I. bench/bench_cl.c -o "$T/bench_cl" -lOpenCL -lclblast -lm >"$T/bench_cl.build.log" 2>&1 &
    p_b4=$!
else
    echo "CL/cl.h or clblast_c.h missing: install ocl-icd-opencl-dev opencl-headers libclblast-dev (make deps)" >"$T/bench_cl.build.log"
    (exit 1) &
    p_b4=$!
fi
if wait $p_b1; then
    prog "test_cltune (tuning files, interop)" "$T/test_cltune.log" timeout 300 "$B/cltools/test_cltune" "$T"
else fail "build test_cltune" "see $T/test_cltune.build.log"; fi
if wait $p_b2; then
    prog "test_cltune without PTRAIN_OPENCL" "$T/test_cltune_nocl.log" "$B/cltools/test_cltune_nocl" "$T"
else fail "build test_cltune without PTRAIN_OPENCL" "see $T/test_cltune_nocl.build.log"; fi

# ---- tools/ptcl (built as `make tools` builds it) ----
PTCL=$B/cltools/ptcl
if wait $p_b3; then
    pass "tools/ptcl builds (-Wall -Wextra -Werror)"
    "$PTCL" list >"$T/list.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^  opencl:0:0 ' "$T/list.log" && grep -q 'compute units' "$T/list.log"; then pass "ptcl list: opencl:0:0 with its name, driver, memory, compute units"
    else fail "ptcl list" "exit $rc: $(head -c 300 "$T/list.log")"; fi
    timeout 120 "$PTCL" check >"$T/check.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^check: PASS' "$T/check.log" && ! grep -q '^FAIL' "$T/check.log"; then pass "ptcl check: ops forward/backward and a GEMM equal the CPU (exit 0)"
    else fail "ptcl check" "exit $rc: $(grep -E '^(FAIL|check)' "$T/check.log" | head -n 5 | tr '\n' ' ')"; fi
    "$PTCL" check opencl:0:99 >"$T/check99.log" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q 'has no device 99' "$T/check99.log"; then pass "ptcl check opencl:0:99: exit 2 naming the missing device"
    else fail "ptcl check opencl:0:99" "exit $rc: $(head -c 300 "$T/check99.log")"; fi
    for c in list check; do
        OCL_ICD_VENDORS="$T/no_icd_vendors" "$PTCL" $c >"$T/noplat_$c.log" 2>&1
        rc=$?
        if [ $rc -ne 0 ] && grep -q 'pocl-opencl-icd' "$T/noplat_$c.log" && grep -q 'make deps' "$T/noplat_$c.log"; then pass "ptcl $c without a platform: exit $rc, says to install pocl-opencl-icd"
        else fail "ptcl $c without a platform" "exit $rc: $(head -c 300 "$T/noplat_$c.log")"; fi
    done
    # the libraries hidden (tests/cl_hide.sh; root): ptcl, built with no -l flag, starts and says what is missing
    if cl_hide_setup; then
        for c in list check; do
            cl_hide "$PTCL" $c >"$T/hidden_$c.log" 2>&1
            rc=$?
            if [ $rc -ne 0 ] && grep -q 'cannot load libOpenCL.so.1' "$T/hidden_$c.log" && grep -q 'ocl-icd-libopencl1' "$T/hidden_$c.log"; then
                pass "ptcl $c without libOpenCL.so.1: exit $rc naming the library and the packages"
            else fail "ptcl $c with the libraries hidden" "exit $rc: $(head -c 300 "$T/hidden_$c.log")"; fi
        done
    else
        echo "SKIP ptcl with the OpenCL libraries hidden: $CL_HIDE_WHY (not counted)"
    fi
    "$PTCL" frobnicate >"$T/usage.log" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q '^usage: ptcl' "$T/usage.log"; then pass "ptcl with a bad command: usage, exit 2"; else fail "ptcl frobnicate" "exit $rc"; fi
    rm -f "$T/tune.txt"
    timeout 300 "$PTCL" tune -n 64 -t 4 -o "$T/tune.txt" >"$T/tune.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^Xgemm.MWG = ' "$T/tune.txt" && grep -q '^XgemmDirect.WGD = ' "$T/tune.txt" && grep -q '^tuned: gemm 64' "$T/tune.log"; then
        pass "ptcl tune -n 64: searches, verifies against the CPU, writes a file that loads"
    else fail "ptcl tune -n 64" "exit $rc: $(tail -n 3 "$T/tune.log" | tr '\n' ' ')"; fi
    PTRAIN_CL_TUNE="$T/tune.txt" timeout 120 "$PTCL" check >"$T/check_tuned.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^check: PASS' "$T/check_tuned.log"; then pass "PTRAIN_CL_TUNE=<the file ptcl tune wrote> ptcl check: PASS"
    else fail "ptcl check with the tuned file" "exit $rc: $(grep -E '^(FAIL|check)' "$T/check_tuned.log" | head -n 5 | tr '\n' ' ')"; fi
else
    fail "build tools/ptcl" "see $T/ptcl.build.log (make deps installs OpenCL and CLBlast)"
fi

# ---- bench/bench_cl ----
if wait $p_b4; then
    BCL=$B/cltools/bench_cl
    "$BCL" gemm 128 >"$T/bgemm.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^{"bench":"cl_gemm","n":128,"device":".*","ptrain_gflops":[0-9.]*,"clblast_direct_gflops":[0-9.]*,"ratio":[0-9.]*,"tuned":0}$' "$T/bgemm.log"; then
        pass "bench_cl gemm: one cl_gemm JSON line"
    else fail "bench_cl gemm 128" "exit $rc: $(head -c 300 "$T/bgemm.log")"; fi
    "$BCL" bandwidth 65536 >"$T/bbw.log" 2>&1
    rc=$?
    n=$(grep -c '^{"bench":"cl_bandwidth","op":"[a-z]*","n":65536,"copy_gbs":[0-9.]*,"ptrain_elementwise_gbs":[0-9.]*,' "$T/bbw.log")
    if [ $rc -eq 0 ] && [ "$n" -eq 3 ]; then pass "bench_cl bandwidth: add, gelu, adamw lines"
    else fail "bench_cl bandwidth 65536" "exit $rc, $n lines: $(head -c 300 "$T/bbw.log")"; fi
    timeout 300 "$BCL" gpt A 1 >"$T/bgpt.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q -E '^\{"bench":"gpt_train","backend":"opencl","config":"A",.*("tokens_per_s":[0-9.]+|"error":")' "$T/bgpt.log"; then
        pass "bench_cl gpt A: a gpt_train line ($(grep -o -E '"(tokens_per_s":[0-9.]+|error":"[^"]{0,60})' "$T/bgpt.log"))"
    else fail "bench_cl gpt A 1" "exit $rc: $(head -c 300 "$T/bgpt.log")"; fi
else
    fail "build bench/bench_cl" "see $T/bench_cl.build.log"
fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

#!/bin/sh
# tests/opencl_mpi_test.sh [BUILD_DIR] - data, tensor and pipeline parallelism with every rank on
# OpenCL (PoCL: the ranks share its one device). Needs MPI, an OpenCL platform and CLBlast (as
# tests/opencl_test.sh; missing ones are a FAIL, not a skip).
# 1. tests/test_clmpi.c: a model without attention (vocabulary-parallel embedding tied with the
#    head, one TP MLP block per pipeline stage, vocabulary-parallel cross-entropy) on layouts 1,
#    tp2, pp2, dp2, dp2 x tp2, dp2 x tp2 x pp2, ZeRO-1/2, bf16, hierarchical: losses, norms and
#    parameters against a single CPU process, the same layout twice bit-identical, and the host <->
#    device transfers of one step by kind checked exactly (counts and bytes) on 1, tp2, pp2, dp2,
#    dp2 x tp2 x pp2.
# 2. tests/test_equiv.c --device opencl: the GPT equivalence matrix with the parallel run on
#    OpenCL (the reference on the CPU) on 1, dp2, tp2, pp2, dp2 x tp2 x pp2 and ZeRO.
# Every run is one mpirun bounded by `timeout 180`; prints PASS/FAIL per run, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
if ! have_mpi; then
    echo "$NP passed, $NF failed"
    exit 1
fi
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
ok_clmpi=0 ok_equiv=0
# the builds start together (one core each); each is waited for where it is first needed
build_prog "$BUILD/test_clmpi" tests/test_clmpi.c mpi0+cl+posix01 >"$BUILD/test_clmpi.build.log" 2>&1 &
p_b1=$!
build_prog "$BUILD/test_equiv_cl" tests/test_equiv.c mpi0+cl+posix01 >"$BUILD/test_equiv_cl.build.log" 2>&1 &
p_b2=$!
if wait $p_b1; then ok_clmpi=1; else
    fail "build test_clmpi (mpicc -DPTRAIN_MPI -DPTRAIN_OPENCL)" "see $BUILD/test_clmpi.build.log"
    head -n 20 "$BUILD/test_clmpi.build.log" | sed 's/^/    /'
fi
if wait $p_b2; then ok_equiv=1; else
    fail "build test_equiv (mpicc -DPTRAIN_MPI -DPTRAIN_OPENCL)" "see $BUILD/test_equiv_cl.build.log"
    head -n 20 "$BUILD/test_equiv_cl.build.log" | sed 's/^/    /'
fi
i=0
while read -r prog n args; do
    case $prog in '' | '#'*) continue ;; esac
    [ "$prog" = clmpi ] && [ $ok_clmpi = 0 ] && continue
    [ "$prog" = equiv ] && [ $ok_equiv = 0 ] && continue
    i=$((i + 1))
    if [ "$prog" = clmpi ]; then bin=$B/test_clmpi; else bin=$B/test_equiv_cl; fi
    prog "$prog np=$n $args" "$BUILD/opencl_mpi_$i.log" mpi_run -t 180 "$n" -- "$bin" $args </dev/null
    grep '^  transfers' "$BUILD/opencl_mpi_$i.log" | sed 's/^/    /'
done <<'RUNS'
clmpi 1 --dp 1 --device opencl
clmpi 2 --tp 2 --device opencl
clmpi 2 --pp 2 --device opencl
clmpi 2 --pp 2 --m 4 --device opencl --sgd
clmpi 2 --dp 2 --device opencl
clmpi 2 --dp 2 --zero 1 --device opencl
clmpi 2 --dp 2 --zero 2 --m 2 --device opencl
clmpi 2 --dp 2 --compress --device opencl
clmpi 4 --dp 4 --hier --fake-node-size 2 --device opencl
clmpi 4 --dp 2 --tp 2 --device opencl --sgd
clmpi 8 --dp 2 --tp 2 --pp 2 --device opencl
clmpi 8 --dp 2 --tp 2 --pp 2 --zero 1 --device opencl
equiv 1 --dp 1 --device opencl
equiv 2 --dp 2 --device opencl
equiv 2 --tp 2 --device opencl
equiv 2 --pp 2 --device opencl
equiv 2 --dp 2 --zero 2 --m 2 --device opencl
equiv 8 --dp 2 --tp 2 --pp 2 --device opencl
equiv 8 --dp 2 --tp 2 --pp 2 --zero 1 --device opencl
RUNS
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

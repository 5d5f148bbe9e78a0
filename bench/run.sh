#!/bin/sh
# Runs every benchmark, each configuration in its own process; prints JSON lines.
# Usage: sh bench/run.sh [path/to/bench] [path/to/bench_dist] [path/to/bench_pp]
# bench_dist (data parallelism, built with mpicc) runs under mpirun -np 2, once with Open MPI's default
# choice of non-blocking allreduce algorithm and once with the ring (coll_libnbc_iallreduce_algorithm=1),
# since pt_dp's buckets go through MPI_Iallreduce, whose default is slower than the blocking
# MPI_Allreduce it is compared with on some machines.
# OpenBLAS is measured with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, so it picks its own best
# kernel for this CPU (some machines set them to work around old OpenBLAS bugs, which slows it).
BENCH=${1:-build/bench}
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BENCH" "$@"; }
run gemm 1024 || exit 1
for c in A B C; do run gpt $c 5 || exit 1; done
DIST=${2:-build/bench_dist}
if [ -x "$DIST" ] && command -v mpirun >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpirun -np 2 "$DIST" || exit 1
    OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 mpirun -np 2 -x OMPI_MCA_coll_libnbc_iallreduce_algorithm "$DIST" || exit 1
else
    echo "bench_dist: skipped ($DIST or mpirun missing)" >&2
fi
# pipeline bubbles: 2 pipeline ranks, one thread each (measured vs simulated with measured times)
PP=${3:-build/bench_pp}
if [ -x "$PP" ] && command -v mpirun >/dev/null 2>&1; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 "$PP" || exit 1
else
    echo "bench_pp: skipped ($PP or mpirun missing)" >&2
fi

#!/bin/sh
# Runs every benchmark, each configuration in its own process; prints JSON lines.
# Usage: sh bench/run.sh [path/to/bench] [path/to/bench_dist] [path/to/bench_pp] [path/to/bench_cl] [path/to/ptcl] [path/to/bench_data]
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
# the monitor's overhead on config A: 5 interleaved pairs of 20-step runs without and with it
run monitor A 5 20 || exit 1
# the token loader (>>data): tokens/s with and without the prefetch thread, data wait per batch
DATA=${6:-build/bench_data}
if [ -x "$DATA" ]; then "$DATA" || exit 1; else echo "bench_data: skipped ($DATA missing)" >&2; fi
# checkpoints: CRC32C speed, a synchronous save vs a plain fsynced write of the same bytes, resume
CKPT=${BENCH_CKPT:-build/bench_ckpt}
if [ -x "$CKPT" ]; then "$CKPT" A build/bench_ckpt_dir || exit 1; else echo "bench_ckpt: skipped ($CKPT missing)" >&2; fi
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
# OpenCL (skipped with a message when bench_cl is missing or no OpenCL device opens): GEMM through
# ptrain vs a direct CLBlast call untuned, then tuned with the file `ptcl tune` writes (once, into
# CL_TUNE, default build/ptrain_cl_tune.txt; delete it to search again), elementwise bandwidth vs
# the device's copy, and the GPT step (tuned when the file exists).
CL=${4:-build/bench_cl}
PTCL=${5:-build/ptcl}
CL_TUNE=${CL_TUNE:-build/ptrain_cl_tune.txt}
if [ -x "$CL" ] && "$CL" probe >/dev/null 2>&1; then
    env -u PTRAIN_CL_TUNE "$CL" gemm 1024 || exit 1
    if [ ! -f "$CL_TUNE" ] && [ -x "$PTCL" ]; then
        echo "bench_cl: tuning CLBlast's GEMM for this device into $CL_TUNE (ptcl tune, a few minutes)" >&2
        "$PTCL" tune -n 512 -t 300 -o "$CL_TUNE" >&2 || rm -f "$CL_TUNE"
    fi
    [ -f "$CL_TUNE" ] && { PTRAIN_CL_TUNE=$CL_TUNE "$CL" gemm 1024 || exit 1; }
    env -u PTRAIN_CL_TUNE "$CL" bandwidth || exit 1
    if [ -f "$CL_TUNE" ]; then PTRAIN_CL_TUNE=$CL_TUNE "$CL" gpt A 3 || exit 1
    else env -u PTRAIN_CL_TUNE "$CL" gpt A 3 || exit 1; fi
else
    echo "bench_cl: skipped ($CL missing or no OpenCL device: make deps installs pocl-opencl-icd; build/ptcl list shows the devices)" >&2
fi

#!/bin/sh
# Runs every benchmark, each configuration in its own process; prints JSON lines.
# Usage: sh bench/run.sh [path/to/bench]
# OpenBLAS is measured with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, so it picks its own best
# kernel for this CPU (some machines set them to work around old OpenBLAS bugs, which slows it).
BENCH=${1:-build/bench}
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BENCH" "$@"; }
run gemm 1024 || exit 1
for c in A B C; do run gpt $c 5 || exit 1; done

#!/bin/sh
# Runs every benchmark, each configuration in its own process; prints JSON lines.
# Usage: sh bench/run.sh [path/to/bench]
BENCH=${1:-build/bench}
"$BENCH" gemm 1024 || exit 1
for c in A B C; do "$BENCH" gpt $c 5 || exit 1; done

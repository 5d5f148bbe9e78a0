#!/bin/sh
# tests/arm64_test.sh [BUILD_DIR] - the AArch64 build and its NEON kernels, under qemu-user (docs/arm64.md).
# Cross-compiles test programs with Debian's aarch64-linux-gnu-gcc (-std=c99 -O2 -Wall -Wextra, no
# -fopenmp: a user's AArch64 toolchain may lack OpenMP; -O1, -O2 under SOAK=1) and runs them with qemu-aarch64. Each program runs
# the NEON path and the scalar reference in the same process and compares them:
#   test_kernels --quick  AdamW, GELU, softmax, logsumexp, layernorm: NEON = C bit for bit (ctx->cpu_simd)
#   test_quant --quick    pt__qmm f32 / f16 / bf16 / q8_0 / q4_0: NEON = C reference bit for bit
#   test_gemm --tiny      SGEMM (and the bf16 / fp16 GEMMs on widened panels): NEON and C kernels
#                         against a double-precision reference, NEON against its fmaf summation rule
#                         bit for bit, thread-count invariance
#   test_infer --quick    KV-cached prefill and decode on the NEON kernels (cache = no cache, batch
#                         and thread invariance, ...), and the ragged batch with the scalar references
#                         = with NEON, bit for bit (f32, q8_0 weights)
# and checks that the NEON paths were the ones picked, and that ptrain.h compiled without a warning.
# SOAK=1 (make soak): the same at full size, plus test_core (the core API; 30 s of CPU under qemu even
# with --quick). qemu checks correctness only; its timings mean nothing.
# These programs reach pt__ internals (forced kernels), so each compiles the implementation itself
# (tests/build_lib.sh's shared objects serve programs that use the public API only).
# Without the cross compiler or qemu (make deps installs gcc-aarch64-linux-gnu qemu-user
# libc6-dev-arm64-cross) the script skips with a NOTE. Env: AARCH64_CC (default aarch64-linux-gnu-gcc),
# QEMU_AARCH64 (qemu-aarch64), AARCH64_SYSROOT (/usr/aarch64-linux-gnu, qemu's -L).
# Prints one PASS/FAIL line per program and check, then "N passed, N failed". About 65 s of CPU in make
# test (four cross compiles of the header at -O1, ~10 s each, one core each, and ~26 s under qemu).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh

XCC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
if ! have "$XCC" || ! have "$QEMU" || [ ! -d "$SYSROOT/lib" ]; then
    echo "NOTE arm64: $XCC, $QEMU or $SYSROOT/lib missing (make deps installs gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross): skipped"
    echo "0 passed, 0 failed"
    exit 0
fi
# -O1 in make test (half the compile time of -O2, about the same time under qemu), -O2 under SOAK=1
XW="-std=c99 -O$(soak && echo 2 || echo 1) -Wall -Wextra -I$INC"
A=$BUILD/arm64
mkdir -p "$A" || exit 1
case $A in /*) AB=$A ;; *) AB=./$A ;; esac

if soak; then
    PROGS="test_kernels test_quant test_gemm test_core test_infer"
else
    PROGS="test_kernels test_quant test_gemm test_infer"
fi
# the builds at once (one core each)
PIDS=""
for t in $PROGS; do
    build_bg "$A/$t.build.log" $XCC $XW $PT_OWN "tests/$t.c" -o "$A/$t" -lm
    PIDS="$PIDS $!"
done
# shellcheck disable=SC2086
wait $PIDS

for t in $PROGS; do
    if [ ! -x "$A/$t" ]; then
        fail "build $t ($XCC)" "see $A/$t.build.log"
        head -n 20 "$A/$t.build.log" | sed 's/^/    /'
        continue
    fi
    case $t in
    test_gemm) args=$(soak || echo --tiny) ;;
    test_core) args="" ;;
    *) args=$(soak || echo --quick) ;;
    esac
    # shellcheck disable=SC2086
    prog "$t on aarch64 (qemu) $args" "$A/$t.log" timeout "$(soak && echo 2400 || echo 900)" "$QEMU" -L "$SYSROOT" "$AB/$t" $args
done

# the header compiles without a warning under the cross compiler
if cat "$A"/*.build.log 2>/dev/null | grep -q 'ptrain\.h:[0-9]*:[0-9]*: warning'; then
    fail "ptrain.h warning-free with $XCC -Wall -Wextra" "$(cat "$A"/*.build.log | grep -m 3 'ptrain\.h:[0-9]*:[0-9]*: warning')"
else
    pass "ptrain.h warning-free with $XCC -Wall -Wextra"
fi
# the NEON paths were the ones picked (not the C fallback on every path)
chk() { # NAME LOG PATTERN
    if grep -q "$3" "$2" 2>/dev/null; then pass "$1"; else fail "$1" "no '$3' in $2"; fi
}
chk "aarch64: the elementwise kernels run their NEON paths" "$A/test_kernels.log" 'elementwise SIMD paths: NEON'
chk "aarch64: pt__qmm picks NEON for every weight type" "$A/test_quant.log" 'kernels here: f32 neon, f16 neon, bf16 neon, q8_0 neon, q4_0 neon'
chk "aarch64: the GEMM picks the NEON micro-kernel (f32 and bf16)" "$A/test_gemm.log" 'bf16 auto-selected kernel: neon'
chk "aarch64: the NEON GEMM's summation rule checked" "$A/test_gemm.log" '^PASS neon gemm = its summation rule'

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

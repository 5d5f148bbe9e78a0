#!/bin/sh
# tests/fuzz/build.sh OUTDIR [OPT] - builds every harness of tests/fuzz into one libFuzzer binary,
# OUTDIR/ptfuzz (fuzz_all.c; ptrain.h compiled once), and the links OUTDIR/fuzz_NAME that choose the
# harness by name. OPT: -O1 (default, for fuzzing) or -O0 (builds in seconds: the replay of make test).
# clang with libFuzzer (Debian: clang, libclang-rt-14-dev; `make deps`). Exit 1 with the reason.
set -u
OUT=$1
OPT=${2:--O1}
FUZZ_CC=${FUZZ_CC:-clang}
NAMES="ckpt safetensors shard idx tokenizer cltune runlog gguf serve ptrun_line"
if ! command -v "$FUZZ_CC" >/dev/null 2>&1; then
    echo "fuzz: $FUZZ_CC not found: the fuzz harnesses need clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev, or make deps)" >&2
    exit 1
fi
mkdir -p "$OUT" || exit 1
if ! $FUZZ_CC -std=c99 $OPT -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -DPTRAIN_NO_THREADS \
    -Wall -Wextra -I. tests/fuzz/fuzz_all.c -o "$OUT/ptfuzz.tmp" -lm >"$OUT/build.log" 2>&1; then
    if grep -q 'libclang_rt.fuzzer' "$OUT/build.log"; then
        echo "fuzz: $FUZZ_CC has no libFuzzer runtime (Debian: apt-get install libclang-rt-14-dev, or make deps)" >&2
    else
        echo "fuzz: tests/fuzz/fuzz_all.c does not build with $FUZZ_CC:" >&2
        head -n 30 "$OUT/build.log" >&2
    fi
    rm -f "$OUT/ptfuzz.tmp"
    exit 1
fi
if grep -q 'warning:' "$OUT/build.log"; then
    echo "fuzz: tests/fuzz/fuzz_all.c builds with warnings:" >&2
    grep -A3 'warning:' "$OUT/build.log" | head -n 30 >&2
    rm -f "$OUT/ptfuzz.tmp"
    exit 1
fi
mv "$OUT/ptfuzz.tmp" "$OUT/ptfuzz" || exit 1
for n in $NAMES; do ln -sf ptfuzz "$OUT/fuzz_$n" || exit 1; done

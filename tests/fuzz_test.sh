#!/bin/sh
# tests/fuzz_test.sh [BUILD_DIR] - the fuzz harnesses of tests/fuzz: builds them with clang
# (-fsanitize=fuzzer,address,undefined, -O0: seconds; tests/fuzz/build.sh), writes the seed corpus
# (gen_seeds.c, valid files made by the library) and replays once, under the sanitizers, every seed,
# every input of tests/fuzz/corpus/NAME and, one by one, every past crash input of
# tests/fuzz/crashes/NAME (each must now be refused cleanly). No fuzzing here: `make fuzz` does
# that. Without clang (or its libFuzzer runtime) one failure says what to install. Prints PASS/FAIL
# lines, then "N passed, N failed". Well under a minute.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build/tests}
T=$BUILD/fuzz
NP=0
NF=0
pass() { NP=$((NP + 1)); printf 'PASS %s\n' "$1"; }
fail() { NF=$((NF + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }
finish() {
    echo "$NP passed, $NF failed"
    [ "$NF" -eq 0 ]
    exit
}
mkdir -p "$T" || exit 1
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
if sh tests/fuzz/build.sh "$T" -O0 2>"$T/build.err"; then pass "the harnesses build with clang -fsanitize=fuzzer,address,undefined (-Wall -Wextra clean)"
else
    fail "build the fuzz harnesses" "$(head -n 20 "$T/build.err")"
    finish
fi
rm -rf "$T/seeds"
if PTFUZZ_SEEDS="$T/seeds" "$T/ptfuzz" >"$T/seeds.log" 2>&1; then pass "gen_seeds writes the seed corpus ($(ls "$T/seeds"/*/* | wc -l) files)"
else
    fail "gen_seeds" "$(tail -n 20 "$T/seeds.log")"
    finish
fi
# inputs DIR: the input files of DIR (not its README or .gitkeep)
inputs() { for f in "$1"/*; do case $f in */README*|*/.gitkeep|*'*') ;; *) [ -f "$f" ] && echo "$f" ;; esac; done; }
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for n in ckpt safetensors shard idx tokenizer cltune runlog gguf serve ptrun_line; do
    # shellcheck disable=SC2046
    set -- $(inputs "$T/seeds/$n") $(inputs "tests/fuzz/corpus/$n")
    if [ $# -eq 0 ]; then fail "fuzz_$n corpus" "no seeds"; continue; fi
    timeout 120 "$T/fuzz_$n" -timeout=20 -rss_limit_mb=2048 "$@" >"$T/$n.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then pass "fuzz_$n: the $# inputs of its corpus run clean"
    else fail "fuzz_$n corpus" "exit $rc on $(sed -n 's/^Running: //p' "$T/$n.log" | tail -n 1): $(grep -m1 -E 'SUMMARY|ERROR|property failed' "$T/$n.log")"; fi
    for f in $(inputs "tests/fuzz/crashes/$n"); do
        timeout 60 "$T/fuzz_$n" -timeout=20 -rss_limit_mb=2048 "$f" >"$T/$n.crash.log" 2>&1
        rc=$?
        if [ $rc -eq 0 ]; then pass "fuzz_$n: past crash $(basename "$f") is handled"
        else fail "fuzz_$n crash $f" "exit $rc: $(grep -m1 -E 'SUMMARY|ERROR|property failed' "$T/$n.crash.log")"; fi
    done
done
finish

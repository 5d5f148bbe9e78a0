#!/bin/sh
# tests/fuzz/run.sh FUZZDIR - `make fuzz`: runs each harness of FUZZDIR (built by tests/fuzz/build.sh)
# for FUZZ_SECONDS (default 60) on a scratch copy of its corpus: the generated seeds (gen_seeds.c)
# and tests/fuzz/corpus/NAME. Prints per harness the executions, the corpus size (and how many
# inputs it found) and the crashes, saved as FUZZDIR/artifacts/NAME/crash-* (minimize one with
# `FUZZDIR/fuzz_NAME -minimize_crash=1 -runs=10000 FILE`, then keep it in tests/fuzz/crashes/NAME/).
# FUZZ_MERGE=1: the new inputs that add coverage are merged into tests/fuzz/corpus/NAME (the seeds
# themselves are not). FUZZ_TARGETS="ckpt runlog": only those. Exit 1 if any harness crashed.
set -u
D=$1
SECS=${FUZZ_SECONDS:-60}
NAMES=${FUZZ_TARGETS:-ckpt safetensors shard idx tokenizer cltune runlog gguf serve ptrun_line}
case $D in /*) ;; *) D=$(pwd)/$D ;; esac
rm -rf "$D/seeds"
PTFUZZ_SEEDS="$D/seeds" "$D/ptfuzz" >"$D/seeds.log" 2>&1 || { echo "fuzz: writing the seeds failed:"; cat "$D/seeds.log"; exit 1; }
bad=0
for n in $NAMES; do
    [ -x "$D/fuzz_$n" ] || { echo "fuzz: no harness $n (FUZZ_TARGETS: ckpt safetensors shard idx tokenizer cltune runlog gguf serve ptrun_line)"; bad=1; continue; }
    w=$D/work/$n a=$D/artifacts/$n
    rm -rf "$w"
    mkdir -p "$w" "$a" "tests/fuzz/corpus/$n"
    cp "$D/seeds/$n"/* "$w/" 2>/dev/null
    for f in tests/fuzz/corpus/$n/*; do case $f in */README*|*/.gitkeep|*'*') ;; *) cp "$f" "$w/" ;; esac; done
    before=$(ls "$w" | wc -l)
    crashes0=$(ls "$a" | wc -l)
    "$D/fuzz_$n" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
        -artifact_prefix="$a/" "$w" >"$D/$n.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$D/$n.log" | tail -n 1)
    after=$(ls "$w" | wc -l)
    crashes=$(($(ls "$a" | wc -l) - crashes0))
    line="fuzz $n: ${execs:-?} executions in ${SECS}s, corpus $after inputs ($((after - before)) new), $crashes crashes"
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
        bad=1
        echo "$line (exit $rc): $(ls -t "$a" | head -n 3 | sed "s|^|$a/|" | tr '\n' ' ')"
        grep -m1 -E '^(SUMMARY|==[0-9]+==ERROR|fuzz: property failed)' "$D/$n.log" | sed 's/^/    /'
    else echo "$line"; fi
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        k0=$(ls "tests/fuzz/corpus/$n" | wc -l)
        "$D/fuzz_$n" -merge=1 -timeout=20 -rss_limit_mb=2048 -close_fd_mask=3 "tests/fuzz/corpus/$n" "$w" >"$D/$n.merge.log" 2>&1
        for s in "$D/seeds/$n"/*; do rm -f "tests/fuzz/corpus/$n/$(sha1sum <"$s" | cut -d' ' -f1)"; done
        echo "    merged: tests/fuzz/corpus/$n has $(ls "tests/fuzz/corpus/$n" | wc -l) inputs (was $k0)"
    fi
done
[ "$bad" -eq 0 ]

#!/bin/sh
# tests/data_test.sh [BUILD_DIR] - token shards and the streaming loader (>>data). Builds tests/test_data.c
# three ways (with the prefetch thread; -DPTRAIN_NO_THREADS; C++ with address/undefined sanitizers) and
# runs each (exactly-once epochs for dp 1, 2, 4, resume = uninterrupted stream, bad shards refused, a
# dataset smaller than one batch refused; the same for IDX records; the BPE tokenizer against a naive one); then builds tools/prepare_shards.c, turns two text files into
# train/val shards (ptrain layout, several shards; llm.c layout; --val FILE; --bpe 300; --tokenizer FILE; --prose) and checks that the
# shards hold the text's bytes in order (with --bpe: that the ids decode to the text). Prints PASS/FAIL lines, then "N passed, N failed". A few seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
D=$BUILD/data
mkdir -p "$D" || exit 1
export PTRAIN_THREADS=${PTRAIN_THREADS:-1}

# the builds start together (one core each); each is waited for where it is first needed
build_prog "$BUILD/test_data" tests/test_data.c w >"$BUILD/test_data.build.log" 2>&1 &
p_b1=$!
$CC $W -DPTRAIN_NO_THREADS $PT_OWN tests/test_data.c -o "$BUILD/test_data_nothreads" -lm >"$BUILD/test_data_nt.build.log" 2>&1 &
p_b2=$!
build_prog "$BUILD/prepare_shards" tools/prepare_shards.c w >"$BUILD/prepare_shards.build.log" 2>&1 &
p_b3=$!
if wait $p_b1; then
    prog "test_data (prefetch thread)" "$BUILD/test_data.log" timeout 60 "$B/test_data" --dir "$D"
else
    fail "build test_data" "see $BUILD/test_data.build.log"
fi
if wait $p_b2; then
    prog "test_data -DPTRAIN_NO_THREADS" "$BUILD/test_data_nt.log" timeout 60 "$B/test_data_nothreads" --dir "$D"
else
    fail "build test_data -DPTRAIN_NO_THREADS" "see $BUILD/test_data_nt.build.log"
fi
if [ "${NO_ASAN:-0}" != 1 ] && have g++; then
    if g++ -x c++ -std=c++11 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra -Werror $PT_OWN -I. tests/test_data.c \
        -o "$BUILD/test_data_asan" -lm >"$BUILD/test_data_asan.build.log" 2>&1; then
        prog "test_data (C++, sanitizers)" "$BUILD/test_data_asan.log" env UBSAN_OPTIONS=halt_on_error=1 timeout 120 "$B/test_data_asan" --dir "$D"
    else
        fail "build test_data as C++ with sanitizers" "see $BUILD/test_data_asan.build.log"
    fi
fi

# ---- tools/prepare_shards ----
if wait $p_b3; then
    T=$D/text
    rm -rf "$T" && mkdir -p "$T/p" "$T/l" "$T/v"
    head -c 40000 ptrain.h >"$T/a.txt"
    head -c 9001 README.md >"$T/b.txt"
    cat "$T/a.txt" "$T/b.txt" >"$T/all.txt"
    if "$B/prepare_shards" --val-fraction 0.1 --shard-tokens 10000 "$T/p" "$T/a.txt" "$T/b.txt" >"$T/p.log" 2>&1 &&
        [ "$(ls "$T/p" | grep -c '^train_')" -eq 5 ]; then pass "prepare_shards: 49001 bytes -> 5 train shards + val"
    else fail "prepare_shards (ptrain layout)" "$(cat "$T/p.log"; ls "$T/p")"; fi
    prog "prepared ptrain shards hold the text" "$T/pc.log" "$B/test_data" --prepared "$T/p" "$T/all.txt"
    if "$B/prepare_shards" --format llmc --val-fraction 0.2 "$T/l" "$T/a.txt" "$T/b.txt" >"$T/l.log" 2>&1; then pass "prepare_shards --format llmc"
    else fail "prepare_shards --format llmc" "$(cat "$T/l.log")"; fi
    prog "prepared llm.c shards hold the text" "$T/lc.log" "$B/test_data" --prepared "$T/l" "$T/all.txt"
    if "$B/prepare_shards" --val "$T/b.txt" "$T/v" "$T/a.txt" >"$T/v.log" 2>&1; then pass "prepare_shards --val FILE"
    else fail "prepare_shards --val FILE" "$(cat "$T/v.log")"; fi
    prog "prepared shards (--val FILE) hold the text" "$T/vc.log" "$B/test_data" --prepared "$T/v" "$T/all.txt"
    mkdir -p "$T/bpe"
    if "$B/prepare_shards" --bpe 300 --val-fraction 0.1 --shard-tokens 8000 "$T/bpe" "$T/a.txt" "$T/b.txt" >"$T/bpe.log" 2>&1 &&
        [ -f "$T/bpe/tokenizer.bin" ] && [ "$(ls "$T/bpe" | grep -c '^train_')" -ge 2 ]; then pass "prepare_shards --bpe 300: tokenizer.bin and several shards"
    else fail "prepare_shards --bpe 300" "$(cat "$T/bpe.log"; ls "$T/bpe")"; fi
    prog "prepared --bpe shards decode to the text" "$T/bpec.log" "$B/test_data" --prepared "$T/bpe" "$T/all.txt"
    # --tokenizer FILE: the tokenizer a --bpe run saved encodes the same text into the same shards
    if "$B/prepare_shards" --tokenizer "$T/bpe/tokenizer.bin" --val-fraction 0.1 --shard-tokens 8000 "$T/bpet" "$T/a.txt" "$T/b.txt" >"$T/bpet.log" 2>&1 &&
        cmp -s "$T/bpe/train_000000.bin" "$T/bpet/train_000000.bin" && cmp -s "$T/bpe/val_000000.bin" "$T/bpet/val_000000.bin" &&
        cmp -s "$T/bpe/tokenizer.bin" "$T/bpet/tokenizer.bin"; then pass "prepare_shards --tokenizer FILE (the --bpe run's): the same shards and tokenizer.bin"
    else fail "prepare_shards --tokenizer FILE" "$(cat "$T/bpet.log"; ls "$T/bpet")"; fi
    if "$B/prepare_shards" --val-fraction 0.1 "$T/bpe" "$T/a.txt" "$T/b.txt" >"$T/bpe2.log" 2>&1 && [ ! -f "$T/bpe/tokenizer.bin" ]; then
        pass "prepare_shards without --bpe into the same directory: the tokenizer is removed"
    else fail "prepare_shards without --bpe after --bpe" "$(cat "$T/bpe2.log"; ls "$T/bpe")"; fi
    # --prose: three prose paragraphs kept (with the blank lines after them), ASCII art, capitals and
    # a table of numbers dropped; the shards must hold exactly the kept paragraphs, byte-level and BPE
    mkdir -p "$T/prose" "$T/proseb"
    printf 'A fool and his money are soon parted.\n\tBut it was fun while it lasted.\n\n' >"$T/keep.txt"
    printf 'Never trust a man who tells you he is honest.\n\n\n' >>"$T/keep.txt"
    printf 'Wit is educated insolence.\n\t\t-- Aristotle\n' >>"$T/keep.txt"
    { printf 'A fool and his money are soon parted.\n\tBut it was fun while it lasted.\n\n'
      printf '  /\\_/\\\n ( o.o )\n  > ^ <\n\n'
      printf 'Never trust a man who tells you he is honest.\n\n\n'
      printf 'WARNING: THIS FORTUNE IS WRITTEN IN CAPITALS.\n\n'
      printf '12:00  3.14  2.71  1.41  1.73\n12:05  6.28  5.42  2.82  3.46\n\n'
      printf 'Wit is educated insolence.\n\t\t-- Aristotle\n'; } >"$T/mixed.txt"
    printf 'NOTICE: ALL CAPITALS HERE.\n\nHe who laughs last thinks slowest.\n' >"$T/mixedval.txt"
    printf 'He who laughs last thinks slowest.\n' >>"$T/keep.txt"
    if "$B/prepare_shards" --prose --val "$T/mixedval.txt" "$T/prose" "$T/mixed.txt" >"$T/prose.log" 2>&1 &&
        grep -q "prose: kept 3 of 6 paragraphs .* for training, 1 of 2 " "$T/prose.log"; then pass "prepare_shards --prose: 3 of 6 training and 1 of 2 validation paragraphs kept (art, capitals, numbers dropped)"
    else fail "prepare_shards --prose" "$(cat "$T/prose.log")"; fi
    prog "prepared --prose shards hold the prose paragraphs only" "$T/prosec.log" "$B/test_data" --prepared "$T/prose" "$T/keep.txt"
    if "$B/prepare_shards" --prose --bpe 20 --val "$T/mixedval.txt" "$T/proseb" "$T/mixed.txt" >"$T/proseb.log" 2>&1; then pass "prepare_shards --prose --bpe 20"
    else fail "prepare_shards --prose --bpe 20" "$(cat "$T/proseb.log")"; fi
    printf '#### 1 2 3\n\n| == | -- |\n' >"$T/art.txt"
    if "$B/prepare_shards" --prose "$T/none" "$T/art.txt" >"$T/art.log" 2>&1; then fail "prepare_shards --prose on no prose" "exit status 0"
    elif grep -q "kept no training text (none of its 2 paragraphs" "$T/art.log"; then pass "prepare_shards --prose on no prose: an error saying so"
    else fail "prepare_shards --prose on no prose" "$(cat "$T/art.log")"; fi
    prog "prepared --prose --bpe shards decode to the prose paragraphs" "$T/prosebc.log" "$B/test_data" --prepared "$T/proseb" "$T/keep.txt"
    if "$B/prepare_shards" "$T/none" "$T/missing.txt" >"$T/m.log" 2>&1; then fail "prepare_shards on a missing file" "exit status 0"
    elif grep -q "cannot read" "$T/m.log"; then pass "prepare_shards on a missing file: an error naming it"
    else fail "prepare_shards on a missing file" "$(cat "$T/m.log")"; fi
else
    fail "build tools/prepare_shards.c" "see $BUILD/prepare_shards.build.log"
fi
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

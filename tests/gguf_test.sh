#!/bin/sh
# tests/gguf_test.sh [BUILD_DIR] - GGUF (>>gguf) with the command tool and an independent reader:
# tests/test_gguf.c makes its checkpoints and exports (and checks them itself: see its header), then
#   - tools/ptckpt.c (built as `make tools` builds it, warnings as errors): `export --format gguf
#     --type q8_0` writes the bytes of the library's export; a BPE model needs --tokenizer (refused
#     without, naming the flag) and with it gives the library's bytes; `inspect FILE.gguf` lists the
#     keys and tensors; `import X.gguf` makes a checkpoint whose f32 export is the original file byte
#     for byte (GGUF -> checkpoint -> GGUF), also from a q4_0 file; a truncated file and a bad
#     --type are refused (exit 1 naming the problem, exit 2); a checkpoint imported from safetensors with
#     --tokenizer (GPT-2's files, bytes in GPT-2's order) carries it into its export, the library's bytes;
#   - Python's `gguf` package (PyPI; the tests' venv, PTRAIN_PYENV or build/pyenv, made by
#     tools/deps.sh / make deps) reads every export (tests/gguf_check.py: names, shapes, types,
#     metadata, values dequantized by gguf.quants against the f32 export; q8_0 the same bytes as
#     gguf-py's quantizer) and writes a gpt2 file of its own that pt_gguf_load reads
#     (test_gguf --foreign). Without that venv (no PyPI) this part is skipped with a NOTE.
# Prints PASS/FAIL lines and "N passed, N failed"; ~30 s (the two compiles).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
T=$BUILD/gguf_sh
rm -rf "$T"
mkdir -p "$T"
case $T in /*) TA=$T ;; *) TA=./$T ;; esac
F=$T/files

# expect NAME WANT_RC GREP LOG CMD...: runs CMD, checks its exit status and that its output has GREP
expect() {
    name=$1 want=$2 pat=$3 log=$4
    shift 4
    "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -e "$pat" "$log"; then pass "$name"
    else fail "$name" "exit $rc (want $want), '$pat' $(grep -q -e "$pat" "$log" && echo found || echo 'not found'): $(head -c 400 "$log")"; fi
}

$CC -std=c99 -O2 -Wall -Wextra $PT_OWN -I"$INC" tests/test_gguf.c -o "$T/test_gguf" -lm >"$T/build.log" 2>&1 &
p_b1=$!
build_prog "$T/ptckpt" tools/ptckpt.c tool+posix >"$T/ptckpt.build.log" 2>&1 &
p_b2=$!
if wait $p_b1; then prog "test_gguf (its exports into $F)" "$T/test_gguf.log" "$TA/test_gguf" "$F"
else
    fail "build test_gguf" "see $T/build.log"
    head -n 20 "$T/build.log" | sed 's/^/    /'
fi

# ---- the command ----
P=$TA/ptckpt
if ! wait $p_b2; then fail "tools/ptckpt builds (-Wall -Wextra -Werror)" "see $T/ptckpt.build.log"
elif [ ! -f "$F/A_q8_0.gguf" ] || [ ! -f "$F/C_f32.gguf" ]; then
    pass "tools/ptckpt builds (-Wall -Wextra -Werror)"
    fail "ptckpt gguf" "no exports from test_gguf (it failed above)"
else
    pass "tools/ptckpt builds (-Wall -Wextra -Werror)"
    expect "ptckpt export --format gguf --type q8_0" 0 "wrote .*q8_0 matrices" "$T/exp.log" "$P" export --format gguf --type q8_0 "$F/ckA" "$T/a_q8.gguf"
    if cmp -s "$T/a_q8.gguf" "$F/A_q8_0.gguf"; then pass "... the bytes of the library's export"; else fail "... the bytes of the library's export" "they differ"; fi
    expect "ptckpt export X.gguf: the format from the extension (f32)" 0 "wrote .*f32 matrices" "$T/exp2.log" "$P" export "$F/ckA" "$T/a_f32.gguf"
    if cmp -s "$T/a_f32.gguf" "$F/A_f32.gguf"; then pass "... the bytes of the library's f32 export"; else fail "... the bytes of the library's f32 export" "they differ"; fi
    expect "ptckpt export of a BPE model without --tokenizer refused, naming the flag" 1 "give its BPE tokenizer.*--tokenizer FILE" "$T/exp3.log" \
        "$P" export --format gguf "$F/ckC" "$T/c.gguf"
    expect "ptckpt export --tokenizer FILE" 0 "with its BPE vocabulary" "$T/exp4.log" "$P" export --format gguf --tokenizer "$F/tokenizer.bin" "$F/ckC" "$T/c.gguf"
    if cmp -s "$T/c.gguf" "$F/C_f32.gguf"; then pass "... the bytes of the library's BPE export"; else fail "... the bytes of the library's BPE export" "they differ"; fi
    expect "ptckpt export --type q5_0 refused" 2 "expected f32, f16, bf16, q8_0 or q4_0" "$T/exp5.log" "$P" export --format gguf --type q5_0 "$F/ckA" "$T/x.gguf"
    expect "ptckpt export --type with safetensors refused" 2 "options of the gguf format" "$T/exp6.log" "$P" export --type q8_0 "$F/ckA" "$T/x.safetensors"
    expect "ptckpt inspect FILE.gguf: keys" 0 "tokenizer.ggml.tokens  *array  258 x string" "$T/insp.log" "$P" inspect "$F/A_q4_0.gguf"
    for pat in "^version    3, alignment 32" "gpt2.block_count  *u32  *2$" "ptrain.vocab  *u32  *60$" "token_embd.weight  *q8_0  *64x258" \
        "blk.1.ffn_down.weight  *q4_0  *256x64" "^tensors    28 "; do
        if grep -q -e "$pat" "$T/insp.log"; then pass "ptckpt inspect shows '$pat'"; else fail "ptckpt inspect shows '$pat'" "$(head -c 600 "$T/insp.log")"; fi
    done
    expect "ptckpt import X.gguf (f32)" 0 "wrote .*step_000000002 (28 parameters" "$T/imp.log" "$P" import "$F/A_f32.gguf" "$T/imp"
    expect "... the checkpoint: vocab 60 of 258 rows, the file's step" 0 "model  *vocab=60 vocab_padded=258 max_seq=16 layers=2 width=64 heads=4" \
        "$T/imp_insp.log" "$P" inspect "$T/imp"
    expect "... exported again" 0 "wrote" "$T/reexp.log" "$P" export --format gguf "$T/imp" "$T/reexp.gguf"
    if cmp -s "$T/reexp.gguf" "$F/A_f32.gguf"; then pass "GGUF -> checkpoint -> GGUF: the same bytes"; else fail "GGUF -> checkpoint -> GGUF: the same bytes" "they differ"; fi
    expect "ptckpt import of a q4_0 file (dequantized)" 0 "wrote .*step_000000007" "$T/imp4.log" "$P" import "$F/B_q4_0.gguf" "$T/imp4" --step 7
    expect "ptckpt import of a gguf with safetensors flags refused" 2 "takes only --step" "$T/imp5.log" "$P" import "$F/A_f32.gguf" "$T/imp5" --width 8
    # GPT-2's tokenizer files (test_gguf wrote them and ckG, a model of vocabulary 256 + 12 merges + 1): a checkpoint
    # imported from safetensors with --tokenizer carries it, and its export is the library's, GPT-2's byte order included
    if [ -f "$F/gpt2_tok.bin" ] && [ -f "$F/G_q8_0.gguf" ]; then
        "$P" export "$F/ckG" "$T/g.safetensors" >"$T/g_st.log" 2>&1
        expect "ptckpt import X.safetensors --tokenizer (GPT-2's files): the checkpoint carries it" 0 "the tokenizer of --tokenizer" "$T/g_imp.log" \
            "$P" import "$T/g.safetensors" "$T/impg" --tokenizer "$F/gpt2_tok.bin"
        expect "... and export --format gguf uses it" 0 "with its BPE vocabulary" "$T/g_exp.log" "$P" export --format gguf --type q8_0 "$T/impg" "$T/g.gguf"
        if cmp -s "$T/g.gguf" "$F/G_q8_0.gguf"; then pass "... the bytes of the library's export (tokens 0..255 in GPT-2's order)"; else fail "... the bytes of the library's export" "they differ"; fi
    else fail "GPT-2's tokenizer files" "test_gguf left no $F/gpt2_tok.bin or G_q8_0.gguf"; fi
    head -c 3000 "$F/A_f32.gguf" >"$T/trunc.gguf"
    expect "ptckpt import of a truncated gguf refused" 1 "trunc.gguf: truncated" "$T/imp6.log" "$P" import "$T/trunc.gguf" "$T/imp6"
    expect "ptckpt inspect of a truncated gguf refused" 1 "truncated" "$T/insp6.log" "$P" inspect "$T/trunc.gguf"
fi

# ---- Python's gguf package: an independent reader and writer ----
PY=${PTRAIN_PYENV:-build/pyenv}/bin/python
if [ -x "$PY" ] && "$PY" -c 'import gguf, numpy' >/dev/null 2>&1; then
    if [ -f "$F/A_f32.gguf" ]; then
        prog "gguf-py ($("$PY" -c 'from importlib.metadata import version; print("gguf", version("gguf"))')) reads every export (tests/gguf_check.py)" \
            "$T/py.log" "$PY" tests/gguf_check.py "$F"
        grep '^NOTE' "$T/py.log"
        if [ -f "$F/foreign.gguf" ]; then prog "pt_gguf_load of gguf-py's own gpt2 file (test_gguf --foreign)" "$T/foreign.log" "$TA/test_gguf" --foreign "$F/foreign.gguf"
        else fail "gguf-py's foreign.gguf" "not written (see $T/py.log)"; fi
    fi
else
    echo "NOTE no Python with the gguf package at $PY (tools/deps.sh makes it; PyPI unreachable?): the independent reader's checks are skipped"
fi

rm -rf "$T/imp" "$T/imp4" "$T/impg"
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]

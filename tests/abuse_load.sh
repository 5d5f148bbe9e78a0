#!/bin/sh
# tests/abuse_load.sh [WORKDIR] - the model loaders against crafted files (the checks `abuse 12/13/14`).
# The files are made here (Python 3, the standard library only): a 352-byte tokenizer.bin whose 40
# merges double a token each step (token 295 would stand for 2^40 bytes), a tokenizer with a
# 2,048-byte token (a BPE of runs of 2,048 'a': must still load), a tiny GPT (vocabulary 296, 2
# layers, width 64, context 64) as a 0.5 MB safetensors file, the same file whose metadata says
# max_seq 2,000,000, its checkpoint (ptckpt import) with the manifest edited the same way (checksum
# recomputed), and its GGUF export (ptckpt export --tokenizer) with merge 0's text changed so that
# the file's tokenizer is refused. Checks:
#   12: the doubling tokenizer is refused at load naming PT_TOK_MAX_TOKEN_BYTES, in < 2 s, peak RSS
#       < 64 MB; the 2,048-byte token loads and encodes.
#   13: the safetensors and the manifest with max_seq 2,000,000 are refused naming the field, the
#       tensor and both values, in < 1 s, peak RSS < 64 MB (/usr/bin/time -v when present); so is a
#       manifest whose wpe record says [2000000, 64] too (its pieces hold 4,096 elements).
#   14: ptgen and ptserve stop on the GGUF whose tokenizer is refused (exit 1, the reason); --tokenizer
#       FILE runs it; --bytes over 296 tokens is refused; a 296-token model without any tokenizer is
#       not run as bytes (--prompt-ids: ids only, said on stderr).
# Needs build/ptgen, build/ptckpt, build/ptserve (made with make when missing; PTGEN / PTCKPT / PTSERVE
# point elsewhere, e.g. at an older build). Prints PASS/FAIL lines and "N passed, N failed".
set -u
W=${1:-build/tests/abuse_load}
PTGEN=${PTGEN:-build/ptgen}
PTCKPT=${PTCKPT:-build/ptckpt}
PTSERVE=${PTSERVE:-build/ptserve}
mkdir -p "$W"
P=0
F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; F=$((F + 1)); }
SPID=
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; }
trap cleanup EXIT INT TERM
for b in "$PTGEN" "$PTCKPT" "$PTSERVE"; do
    case "$b" in build/*) make -s "$b" >"$W/make.log" 2>&1 || { echo "FAIL make $b: $(tail -n 3 "$W/make.log")"; echo "0 passed, 1 failed"; exit 1; } ;; esac
done
command -v python3 >/dev/null 2>&1 || { echo "FAIL python3 is needed to make the files"; echo "0 passed, 1 failed"; exit 1; }
TIMEV=
[ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1 && TIMEV=/usr/bin/time

# run NAME CMD...: stdout and stderr in $W/NAME.out / .err, the status in $rc, the wall seconds in
# $secs, the peak RSS in KB in $rss (0 without /usr/bin/time -v)
run() {
    n=$1
    shift
    t0=$(date +%s.%N)
    if [ -n "$TIMEV" ]; then
        $TIMEV -v -o "$W/$n.time" timeout 20 "$@" >"$W/$n.out" 2>"$W/$n.err"
        rc=$?
        rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/$n.time")
    else
        timeout 20 "$@" >"$W/$n.out" 2>"$W/$n.err"
        rc=$?
        rss=0
    fi
    secs=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.3f", $2 - $1}')
    [ -n "$rss" ] || rss=0
}
has() { grep -q -- "$2" "$W/$1.err"; }
fast() { awk -v s="$secs" -v lim="$1" 'BEGIN { exit !(s < lim) }'; }

python3 - "$W" <<'EOF' || { echo "FAIL the crafted files"; echo "0 passed, 1 failed"; exit 1; }
import array, json, random, struct, sys
W = sys.argv[1]
T = []
for i in range(256):
    c = i
    for _ in range(8): c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b: c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
def tokenizer(path, pairs):
    body = b"".join(struct.pack("<II", a, b) for a, b in pairs)
    head = struct.pack("<IIIII", 0x45504250, 1, len(pairs), 256 + len(pairs), crc32c(body)) + bytes(12)
    open(path, "wb").write(head + body)
tokenizer(W + "/double.bin", [(97, 97)] + [(255 + i, 255 + i) for i in range(1, 40)])   # token 256 + i: 2^(i+1) bytes
tokenizer(W + "/long.bin", [(97, 97)] + [(255 + i, 255 + i) for i in range(1, 11)])     # token 266: 2,048 'a'
tokenizer(W + "/good.bin", [(97 + i % 26, 97 + (i * 7 + 3) % 26 if i < 26 else 65 + i % 26) for i in range(40)])
# a tiny GPT: vocabulary 296 (rows 320), context 64, 2 layers, width 64, 4 heads; F32, random values
V, VP, S, L, C = 296, 320, 64, 2, 64
rng = random.Random(1)
tensors = [("wte", [VP, C]), ("wpe", [S, C])]
for l in range(L):
    for n, sh in (("ln1.w", [C]), ("ln1.b", [C]), ("attn.w", [3 * C, C]), ("attn.b", [3 * C]), ("attn_proj.w", [C, C]), ("attn_proj.b", [C]),
                  ("ln2.w", [C]), ("ln2.b", [C]), ("mlp.fc.w", [4 * C, C]), ("mlp.fc.b", [4 * C]), ("mlp.proj.w", [C, 4 * C]), ("mlp.proj.b", [C])):
        tensors.append(("h.%d.%s" % (l, n), sh))
tensors += [("lnf.w", [C]), ("lnf.b", [C])]
blobs, head, off = [], {}, 0
for n, sh in tensors:
    k = 1
    for d in sh: k *= d
    vals = array.array("f", [1.0 if n.endswith("ln1.w") or n.endswith("ln2.w") or n == "lnf.w" else rng.gauss(0, 0.05) for _ in range(k)])
    b = vals.tobytes()
    head[n] = {"dtype": "F32", "shape": sh, "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
def safetensors(path, max_seq):
    h = dict(head)
    h["__metadata__"] = {"format": "pt", "step": "0", "vocab": str(V), "vocab_padded": str(VP), "max_seq": str(max_seq), "layers": str(L),
                         "width": str(C), "heads": "4", "untied": "0", "dropout": "0"}
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + b"".join(blobs))
safetensors(W + "/good.safetensors", S)
safetensors(W + "/big.safetensors", 2000000)
EOF

# the checkpoint (manifest edited, its checksum recomputed) and the GGUF (merge 0's text changed)
rm -rf "$W/ck" "$W/ckbig" "$W/ckshape"
"$PTCKPT" import "$W/good.safetensors" "$W/ck" >"$W/import.log" 2>&1 || fail "ptckpt import of the tiny model: $(tail -n 3 "$W/import.log")"
"$PTCKPT" export --format gguf --tokenizer "$W/good.bin" "$W/ck" "$W/good.gguf" >"$W/export.log" 2>&1 || fail "ptckpt export --format gguf: $(tail -n 3 "$W/export.log")"
cp -r "$W/ck" "$W/ckbig"
cp -r "$W/ck" "$W/ckshape"
python3 - "$W" <<'EOF' || fail "editing the manifest and the GGUF"
import glob, struct, sys
W = sys.argv[1]
T = []
for i in range(256):
    c = i
    for _ in range(8): c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b: c = T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
for d, shape_too in (("ckbig", False), ("ckshape", True)):   # max_seq; max_seq and wpe's recorded shape
    m = glob.glob(W + "/" + d + "/step_*/manifest")[0]
    t = open(m, "rb").read()
    assert b" max_seq=64 " in t and b"name=wpe kind=param rank=0 dtype=f32 shape=64,64 " in t
    t = t.replace(b" max_seq=64 ", b" max_seq=2000000 ", 1)
    if shape_too: t = t.replace(b"name=wpe kind=param rank=0 dtype=f32 shape=64,64 ", b"name=wpe kind=param rank=0 dtype=f32 shape=2000000,64 ", 1)
    body = t[:t.rindex(b"end crc32c=")]
    open(m, "wb").write(body + b"end crc32c=0x%08x\n" % crc32c(body))
g = bytearray(open(W + "/good.gguf", "rb").read())
k = g.index(b"tokenizer.ggml.merges")
at = k + len("tokenizer.ggml.merges") + 4 + 4 + 8          # the array's type, element type, count
n = struct.unpack_from("<Q", g, at)[0]
s = bytes(g[at + 8:at + 8 + n])
assert s == b"a d", s                                        # merge 0 of good.bin: 'a' + 'd'
g[at + 8 + n - 1] = ord("e")                                 # "a e": no longer token 256's text "ad"
open(W + "/badtok.gguf", "wb").write(bytes(g))
EOF

# ---- 12: tokens bounded at load ----
run tok_double "$PTGEN" "$W/good.safetensors" --tokenizer "$W/double.bin" --prompt ab --max-tokens 2 --temperature 0
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && has tok_double "token 272 .*expands to 131072 bytes, at most PT_TOK_MAX_TOKEN_BYTES (65536)" && has tok_double "double.bin" && fast 2 &&
    [ "$rss" -lt 65536 ]; then
    pass "abuse 12: a 352-byte tokenizer.bin whose merges double is refused at load, naming the token and PT_TOK_MAX_TOKEN_BYTES ($secs s, peak RSS $rss KB)"
else fail "abuse 12: the doubling tokenizer: exit $rc, $secs s, peak RSS $rss KB: $(head -c 300 "$W/tok_double.err")"; fi
aa=$(printf '%2048s' '' | tr ' ' a)
run tok_long "$PTGEN" "$W/good.safetensors" --tokenizer "$W/long.bin" --prompt "$aa" --max-tokens 1 --temperature 0
if [ $rc -eq 0 ] && has tok_long "prefill 1 tokens"; then pass "abuse 12: a tokenizer with a 2,048-byte token (runs of 2,048 'a') still loads: the 2,048 bytes are one token"
else fail "abuse 12: the 2,048-byte token: exit $rc: $(head -c 300 "$W/tok_long.err")"; fi

# ---- 13: sizes from metadata checked against the tensors before anything is allocated ----
run st_big "$PTGEN" "$W/big.safetensors" --prompt ab --max-tokens 2
if [ $rc -eq 1 ] && has st_big "max_seq is 2000000 in the metadata, tensor 'wpe' has shape \[64, 64\] (expected \[2000000, 64\])" && fast 1 && [ "$rss" -lt 65536 ]; then
    pass "abuse 13: a 0.5 MB safetensors whose metadata says max_seq 2,000,000 is refused naming the field, the tensor and both values ($secs s, peak RSS $rss KB)"
else fail "abuse 13: the safetensors with max_seq 2,000,000: exit $rc, $secs s, peak RSS $rss KB: $(head -c 300 "$W/st_big.err")"; fi
run ck_big "$PTGEN" "$W/ckbig" --prompt ab --max-tokens 2
if [ $rc -eq 1 ] && has ck_big "max_seq is 2000000 in the manifest, tensor 'wpe' has shape \[64, 64\] (expected \[2000000, 64\])" && fast 1 && [ "$rss" -lt 65536 ]; then
    pass "abuse 13: a checkpoint manifest edited to max_seq 2,000,000 (checksum recomputed) is refused the same way ($secs s, peak RSS $rss KB)"
else fail "abuse 13: the manifest with max_seq 2,000,000: exit $rc, $secs s, peak RSS $rss KB: $(head -c 300 "$W/ck_big.err")"; fi

run ck_shape "$PTGEN" "$W/ckshape" --prompt ab --max-tokens 2
if [ $rc -eq 1 ] && has ck_shape "tensor 'wpe' \[2000000, 64\] needs 128000000 elements, the file holds 4096 of it" && fast 1 && [ "$rss" -lt 65536 ]; then
    pass "abuse 13: a manifest whose max_seq and wpe record both say 2,000,000 is refused: its pieces hold 4,096 elements ($secs s, peak RSS $rss KB)"
else fail "abuse 13: the manifest with max_seq and wpe's shape 2,000,000: exit $rc, $secs s, peak RSS $rss KB: $(head -c 300 "$W/ck_shape.err")"; fi

# ---- 14: a refused tokenizer stops ptgen and ptserve; --tokenizer FILE / --bytes ----
run gg_bad "$PTGEN" "$W/badtok.gguf" --prompt ab --max-tokens 4
if [ $rc -eq 1 ] && has gg_bad "its tokenizer (tokenizer.ggml.\*) is refused: merge 0 does not make token 256" && has gg_bad "give --tokenizer FILE"; then
    pass "abuse 14: ptgen stops on a GGUF whose tokenizer is refused (exit 1, the reason), no fallback to bytes"
else fail "abuse 14: ptgen on the GGUF with a refused tokenizer: exit $rc: $(head -c 300 "$W/gg_bad.err")"; fi
run gg_bytes "$PTGEN" "$W/badtok.gguf" --bytes --prompt ab --max-tokens 4
run gg_tok "$PTGEN" "$W/badtok.gguf" --tokenizer "$W/good.bin" --prompt ab --max-tokens 4 --temperature 0
if [ $rc -eq 0 ] && has gg_tok "decode [0-9]* tokens" && grep -q -- "--bytes: the model's vocabulary is 296 tokens, more than the 256 bytes" "$W/gg_bytes.err"; then
    pass "abuse 14: ptgen --tokenizer FILE runs that GGUF; --bytes over its 296 tokens is refused"
else fail "abuse 14: ptgen --tokenizer FILE (exit $rc: $(head -c 200 "$W/gg_tok.err")) / --bytes ($(head -c 200 "$W/gg_bytes.err"))"; fi
run st_notok "$PTGEN" "$W/good.safetensors" --prompt ab --max-tokens 4
run st_ids "$PTGEN" "$W/good.safetensors" --prompt-ids 97,98 --max-tokens 4 --temperature 0
if [ $rc -eq 0 ] && grep -q '^ids: [0-9]*,[0-9]*,[0-9]*,[0-9]*$' "$W/st_ids.out" && has st_ids "ids only" && grep -q "a vocabulary of 296 tokens and no tokenizer" "$W/st_notok.err" &&
    [ "$(grep -c . "$W/st_notok.out")" = 0 ]; then
    pass "abuse 14: a 296-token model without a tokenizer is not run as bytes: a text prompt stops ptgen, --prompt-ids runs on ids only (said on stderr)"
else fail "abuse 14: the 296-token model without a tokenizer: text prompt: $(head -c 200 "$W/st_notok.err"); --prompt-ids exit $rc: $(head -c 200 "$W/st_ids.err")"; fi

# ptserve: stops with the reason; --bytes refused; starts with --tokenizer FILE (then stopped)
run sv_bad "$PTSERVE" --gguf "$W/badtok.gguf" --port 0 --threads 1
svrc=$rc
run sv_bytes "$PTSERVE" --gguf "$W/badtok.gguf" --port 0 --threads 1 --bytes
ok=0
if [ $rc -eq 2 ] && has sv_bytes "the model's vocabulary is 296 tokens"; then
    "$PTSERVE" --gguf "$W/badtok.gguf" --port 0 --threads 1 --tokenizer "$W/good.bin" >"$W/sv_tok.out" 2>"$W/sv_tok.err" &
    SPID=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q "listening on" "$W/sv_tok.out" && kill -0 "$SPID" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    grep -q "vocabulary 296, its tokenizer" "$W/sv_tok.out" && grep -q "listening on" "$W/sv_tok.out" && ok=1
    kill "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null
    SPID=
fi
if [ $svrc -eq 1 ] && grep -q "its tokenizer (tokenizer.ggml.\*) is refused: merge 0 does not make token 256" "$W/sv_bad.err" && ! grep -q "listening on" "$W/sv_bad.out" && [ $ok = 1 ]; then
    pass "abuse 14: ptserve does not start on it (exit 1, the reason); --bytes refused; --tokenizer FILE starts it with that tokenizer"
else touch "$W/sv_tok.out"; fail "abuse 14: ptserve: without flags: $(head -c 200 "$W/sv_bad.err") $(head -c 200 "$W/sv_bad.out"); --bytes: $(head -c 200 "$W/sv_bytes.err"); --tokenizer: $(head -c 200 "$W/sv_tok.out")"; fi

echo "$P passed, $F failed"
[ $F -eq 0 ]

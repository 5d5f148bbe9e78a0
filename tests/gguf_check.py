# tests/gguf_check.py DIR - the independent reader of tests/gguf_test.sh: Python's `gguf` package
# (PyPI; the tests' venv build/pyenv, made by tools/deps.sh) reads every export tests/test_gguf.c
# left in DIR ({A,B,C,D}_{f32,f16,bf16,q8_0,q4_0}.gguf) and checks names, shapes, types, metadata
# and values against the same case's f32 export (which test_gguf checked bit for bit against the
# checkpoint): f16 equal to numpy's rounding, bf16 to round-to-nearest-even, q8_0 the same bytes
# as gguf-py's quantizer, q4_0 within the format's error (and how many rows gguf-py's quantizer
# makes byte-identical is reported), dequantized with gguf.quants.dequantize. Then it writes
# DIR/foreign.gguf, a gpt2 of the formula tests/test_gguf.c --foreign checks. Prints PASS/FAIL lines.
import glob
import os
import sys

import numpy as np
import gguf
from gguf import GGUFReader
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

D = sys.argv[1]
NP = NF = 0


def check(ok, name, why=""):
    global NP, NF
    if ok:
        NP += 1
        print("PASS " + name)
    else:
        NF += 1
        print("FAIL %s: %s" % (name, why))
    return ok


def bytes_to_unicode():  # GPT-2's, as openai/gpt-2 encoder.py writes it
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


BYTE = bytes_to_unicode()
CASES = {"A": dict(L=2, C=64, H=4, T=16, vocab=60, tied=True), "B": dict(L=1, C=32, H=2, T=8, vocab=256, tied=False),
         "C": dict(L=1, C=32, H=2, T=8, vocab=None, tied=True), "D": dict(L=1, C=48, H=4, T=8, vocab=40, tied=True)}
FTYPE = {Q.F32: 0, Q.F16: 1, Q.Q4_0: 2, Q.Q8_0: 7, Q.BF16: 32}


def kv(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


def want_type(name, ft, cols, tied):
    if not name.endswith(".weight") or "norm" in name or name == "position_embd.weight":
        return Q.F32
    t = ft
    if ft == Q.Q4_0 and (name == "output.weight" or (name == "token_embd.weight" and tied)):
        t = Q.Q8_0
    if t in (Q.Q8_0, Q.Q4_0) and cols % 32:
        t = Q.F16
    return t


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    return (r << 16).view(np.float32)


def check_file(path, case, ref):
    c = CASES[case]
    label = os.path.basename(path)
    r = GGUFReader(path)
    ft = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0}[label.split("_", 1)[1][:-5]]
    toks = kv(r, "tokenizer.ggml.tokens")
    merges = kv(r, "tokenizer.ggml.merges")
    V = len(toks)
    vocab = c["vocab"] if c["vocab"] is not None else kv(r, "ptrain.vocab")
    ok = (kv(r, "general.architecture") == "gpt2" and kv(r, "gpt2.block_count") == c["L"] and kv(r, "gpt2.embedding_length") == c["C"]
          and kv(r, "gpt2.attention.head_count") == c["H"] and kv(r, "gpt2.context_length") == c["T"]
          and kv(r, "gpt2.feed_forward_length") == 4 * c["C"] and abs(kv(r, "gpt2.attention.layer_norm_epsilon") - 1e-5) < 1e-12
          and kv(r, "general.file_type") == FTYPE[ft] and kv(r, "ptrain.vocab") == vocab)
    check(ok, "%s: gpt2 hyper-parameters, file_type, ptrain.vocab" % label, "")
    types = kv(r, "tokenizer.ggml.token_type")
    ids = kv(r, "ptrain.merge_ids")
    ok = (toks[:256] == [BYTE[b] for b in range(256)] and toks[-1] == "<|endoftext|>" and types[-1] == 3 and all(t == 1 for t in types[:-1])
          and kv(r, "tokenizer.ggml.bos_token_id") == V - 1 and kv(r, "tokenizer.ggml.eos_token_id") == V - 1
          and kv(r, "tokenizer.ggml.model") == "gpt2" and kv(r, "tokenizer.ggml.pre") == "gpt-2" and len(merges) == V - 257 and len(merges) >= 1
          and len(set(toks)) == V)  # llama.cpp aborts on two tokens of one text
    for i, m in enumerate(merges):  # merge i: "LEFT RIGHT" of earlier tokens, joined = token 256 + i
        a, b = m.split(" ", 1)
        ok = ok and a + b == toks[256 + i] and toks[ids[2 * i]] == a and toks[ids[2 * i + 1]] == b and ids[2 * i] < 256 + i and ids[2 * i + 1] < 256 + i
    check(ok, "%s: the vocabulary (%d distinct tokens: GPT-2's byte characters, %d merges that make tokens 256.., <|endoftext|> bos/eos)" % (label, V, len(merges)))
    names = [t.name for t in r.tensors]
    want = ["token_embd.weight", "position_embd.weight"] + ["blk.%d.%s.%s" % (l, n, k) for l in range(c["L"])
            for n in ("attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down") for k in ("weight", "bias")]
    want += ["output_norm.weight", "output_norm.bias"] + ([] if c["tied"] else ["output.weight"])
    check(sorted(names) == sorted(want), "%s: the %d tensor names of gpt2" % (label, len(want)), "%s" % sorted(set(names) ^ set(want)))
    bad = []
    q4rows = q4same = 0
    for t in r.tensors:
        cols = int(t.shape[0])
        wt = want_type(t.name, ft, cols, c["tied"])
        if t.tensor_type != wt:
            bad.append("%s is %s, want %s" % (t.name, t.tensor_type.name, wt.name))
            continue
        x = ref[t.name]
        if tuple(int(s) for s in t.shape) != tuple(int(s) for s in x.shape[::-1]):
            bad.append("%s shape %s vs %s" % (t.name, list(t.shape), x.shape))
            continue
        y = dequantize(t.data, t.tensor_type).reshape(x.shape)
        if wt == Q.F32:
            good = np.array_equal(y.view(np.uint32), x.view(np.uint32))
        elif wt == Q.F16:
            good = np.array_equal(y, x.astype(np.float16).astype(np.float32))
        elif wt == Q.BF16:
            good = np.array_equal(y, bf16_round(x))
        else:
            blocks = np.abs(x.reshape(-1, 32))
            d = blocks.max(axis=1) / (127 if wt == Q.Q8_0 else 8)
            tol = np.repeat(d * (0.5 if wt == Q.Q8_0 else 1.0) * 1.002, 32).reshape(x.shape) + np.abs(x) / 1024 + 1e-12
            good = bool(np.all(np.abs(y - x) <= tol))
            mine = np.asarray(t.data).reshape(x.shape[0], -1)
            theirs = quantize(x, wt).reshape(x.shape[0], -1)
            if wt == Q.Q8_0:
                good = good and np.array_equal(mine, theirs)
            else:
                q4rows += x.shape[0]
                q4same += int(np.sum(np.all(mine == theirs, axis=1)))
        if not good:
            bad.append("%s values (%s)" % (t.name, wt.name))
    how = {Q.F32: "bit for bit", Q.F16: "= numpy's float16 rounding", Q.BF16: "= round to nearest even",
           Q.Q8_0: "q8_0 bytes = gguf-py's quantizer's", Q.Q4_0: "q4_0 within its error"}[ft]
    check(not bad, "%s: types as llama.cpp's tools choose them, values dequantized by gguf.quants (%s)" % (label, how), "; ".join(bad[:4]))
    if q4rows:
        print("NOTE %s: %d of %d q4_0 rows byte-identical to gguf-py's quantizer (it rounds in float64, ggml in float32: a tie may differ)" % (label, q4same, q4rows))


for case in "ABCD":
    f32 = os.path.join(D, "%s_f32.gguf" % case)
    if not os.path.exists(f32):
        check(False, "%s_f32.gguf exists" % case, "run test_gguf first")
        continue
    ref = {t.name: np.array(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape([int(s) for s in t.shape[::-1]]) for t in GGUFReader(f32).tensors}
    for path in sorted(glob.glob(os.path.join(D, "%s_*.gguf" % case))):
        check_file(path, case, ref)

# a foreign gpt2 for test_gguf --foreign: 2 layers, width 64, 4 heads, 32 positions, the bytes + "th";
# every tensor the formula's values (test_gguf's fval) in test_gguf's order
L, C, H, T = 2, 64, 4, 32
toks = [BYTE[b] for b in range(256)] + ["th"]
V = len(toks)
w = gguf.GGUFWriter(os.path.join(D, "foreign.gguf"), "gpt2")
w.add_context_length(T)
w.add_embedding_length(C)
w.add_block_count(L)
w.add_feed_forward_length(4 * C)
w.add_head_count(H)
w.add_layer_norm_eps(1e-5)
w.add_file_type(1)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("gpt-2")
w.add_token_list(toks)
w.add_token_types([1] * V)
w.add_token_merges(["t h"])
w.add_float64("test.f64", 0.1)
w.add_int16("test.i16", -300)
w.add_array("test.u64s", [1, 2, 3])
w.add_array("test.strs", ["a", "bé"])
shapes = [("token_embd.weight", (V, C)), ("position_embd.weight", (T, C))]
for l in range(L):
    for n, s in (("attn_norm.weight", (C,)), ("attn_norm.bias", (C,)), ("attn_qkv.weight", (3 * C, C)), ("attn_qkv.bias", (3 * C,)),
                 ("attn_output.weight", (C, C)), ("attn_output.bias", (C,)), ("ffn_norm.weight", (C,)), ("ffn_norm.bias", (C,)),
                 ("ffn_up.weight", (4 * C, C)), ("ffn_up.bias", (4 * C,)), ("ffn_down.weight", (C, 4 * C)), ("ffn_down.bias", (C,))):
        shapes.append(("blk.%d.%s" % (l, n), s))
shapes += [("output_norm.weight", (C,)), ("output_norm.bias", (C,)), ("output.weight", (V, C))]
for k, (name, s) in enumerate(shapes):
    i = np.arange(int(np.prod(s)), dtype=np.int64)
    x = (((i * 37 + k * 11) % 97 - 48) / 512.0).astype(np.float32).reshape(s)
    if name == "blk.0.attn_qkv.weight":
        w.add_tensor(name, quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    elif name == "blk.1.ffn_up.weight":
        w.add_tensor(name, quantize(x, Q.Q4_0), raw_dtype=Q.Q4_0)
    elif len(s) == 2 and name != "position_embd.weight":
        w.add_tensor(name, x.astype(np.float16))
    else:
        w.add_tensor(name, x)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
check(True, "gguf-py wrote foreign.gguf (gpt2, f16 + q8_0 + q4_0, bytes + the merge t h)")
print("%d passed, %d failed" % (NP, NF))
sys.exit(1 if NF else 0)

"""Token-id agreement with llama.cpp: the greedy continuation of the same prompt ids.

python llama_agree.py FILE.gguf PROMPT_IDS PTRAIN_IDS [n]

PROMPT_IDS and PTRAIN_IDS are comma-separated token ids: the prompt, and the n greedy tokens that
ptrain (tools/ptgen --prompt-ids ... --temperature 0 --print-ids) generated from it with the same
file. llama.cpp (llama-cpp-python, 2 threads) generates n greedy tokens from the same ids; the
script prints one JSON line with both lists, the length of their common prefix, and "ok" when that
is at least n (exit 0), else exit 1. llama.cpp's gpt2 tokenizer splits text with GPT-2's regex
before BPE and ptrain's BPE does not, so the comparison is on ids, not on text.
"""
import json, sys

import llama_cpp

path, prompt, theirs = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 32
prompt = [int(t) for t in prompt.split(",") if t]
theirs = [int(t) for t in theirs.split(",") if t][:n]
llm = llama_cpp.Llama(model_path=path, n_threads=2, n_threads_batch=2, n_ctx=1024, verbose=False, seed=1)
llm.reset()
llm.eval(prompt)
ours = []
for _ in range(n):
    t = llm.sample(temp=0.0)
    ours.append(int(t))
    llm.eval([t])
common = 0
while common < min(len(ours), len(theirs)) and ours[common] == theirs[common]:
    common += 1
print(json.dumps({"bench": "agree", "file": path, "prompt_tokens": len(prompt), "n": n, "common_prefix": common,
                  "ok": common >= n, "llama_cpp": ours, "ptrain": theirs}))
sys.exit(0 if common >= n else 1)

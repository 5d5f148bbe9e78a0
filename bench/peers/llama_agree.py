"""Token-id agreement with llama.cpp: the greedy continuation of the same prompt ids.

python llama_agree.py FILE.gguf PROMPT_IDS PTRAIN_IDS [n [PTRAIN_LOGPROBS]]

PROMPT_IDS and PTRAIN_IDS are comma-separated token ids: the prompt, and the n greedy tokens that
ptrain (tools/ptgen --prompt-ids ... --temperature 0 --print-ids) generated from it with the same
file. llama.cpp (llama-cpp-python, 2 threads) generates n greedy tokens from the same ids; the
script prints one JSON line with both lists, the length of their common prefix, and "ok" when that
is at least n (exit 0), else exit 1. With PTRAIN_LOGPROBS (ptgen --logprobs: each generated
token's log-probability), also the largest difference from llama.cpp's log-probability of the same
token at the same position (log-softmax of its logits over ptrain's real vocabulary, the export's
ptrain.vocab), over the common prefix. llama.cpp's gpt2 tokenizer splits text with GPT-2's regex
before BPE and ptrain's BPE does not, so the comparison is on ids, not on text.
"""
import json, math, sys

import llama_cpp

path, prompt, theirs = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 32
their_lp = [float(x) for x in sys.argv[5].split(",") if x] if len(sys.argv) > 5 else []
prompt = [int(t) for t in prompt.split(",") if t]
theirs = [int(t) for t in theirs.split(",") if t][:n]
llm = llama_cpp.Llama(model_path=path, n_threads=2, n_threads_batch=2, n_ctx=0, verbose=False, seed=1, logits_all=True)  # n_ctx 0: the model's context
# ptrain's real vocabulary (its export adds rows llama.cpp needs: a merge for a byte vocabulary, an
# end-of-text token; they are zero, logit 0): log-probabilities over the real tokens only
V = int(llm.metadata.get("ptrain.vocab", llm.n_vocab()))
llm.reset()
llm.eval(prompt)
ours, our_lp = [], []
for _ in range(n):
    row = [float(x) for x in llm.scores[llm.n_tokens - 1][:V]]
    t = llm.sample(temp=0.0)
    m = max(row)
    our_lp.append(row[t] - m - math.log(sum(math.exp(x - m) for x in row)))
    ours.append(int(t))
    llm.eval([t])
common = 0
while common < min(len(ours), len(theirs)) and ours[common] == theirs[common]:
    common += 1
out = {"bench": "agree", "file": path, "prompt_tokens": len(prompt), "n": n, "common_prefix": common, "ok": common >= n}
if their_lp:
    out["max_logprob_diff"] = round(max(abs(a - b) for a, b in zip(our_lp[:common], their_lp[:common])), 6) if common else None
out["llama_cpp"], out["ptrain"] = ours, theirs
print(json.dumps(out))
sys.exit(0 if common >= n else 1)

"""llama.cpp's decode and prefill speed on a GGUF file, as bench_decode measures ptrain's: JSON lines.

python llama_decode.py FILE.gguf MODEL FORMAT [new_tokens [reps]]

Runs with 2 threads (n_threads and n_threads_batch; LLAMA_THREADS=N other), greedy; tokens_per_cpu_s:
decode tokens over the process's CPU time (as bench_decode's). Decode: a 16-token prompt (token ids,
so no tokenizer is involved), then new_tokens steps of one token; prefill: 256 tokens in one eval.
Prints one line per run set: the medians of reps runs. Needs llama-cpp-python (a scratch virtual
environment: pip install llama-cpp-python builds llama.cpp from source, 20-25 minutes on 2 cores);
bench/run.sh runs it only when BENCH_LLAMA names that environment's python.
"""
import json, os, statistics, sys, time

import llama_cpp

path, model, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
new_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 64
reps = int(sys.argv[5]) if len(sys.argv) > 5 else 3
TH = int(os.environ.get("LLAMA_THREADS", "2"))
llm = llama_cpp.Llama(model_path=path, n_threads=TH, n_threads_batch=TH, n_ctx=512, n_batch=512, verbose=False, seed=1)
V = llm.n_vocab()


cpu = []


def decode():
    llm.reset()
    llm.eval([(i * 13) % V for i in range(16)])
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(new_tokens):
        llm.eval([llm.sample(temp=0.0)])
    cpu.append(new_tokens / (time.process_time() - c0))
    return new_tokens / (time.perf_counter() - t0)


def prefill():
    llm.reset()
    toks = [(i * 31 + 7) % V for i in range(256)]
    t0 = time.perf_counter()
    llm.eval(toks)
    return 256 / (time.perf_counter() - t0)


decode()  # warm-up
cpu.clear()
d = [decode() for _ in range(reps)]
p = [prefill() for _ in range(reps)]
print(json.dumps({"bench": "decode_peer", "peer": "llama.cpp " + llama_cpp.__version__, "model": model, "format": fmt, "batch": 1,
                  "tokens_per_s": round(statistics.median(d), 1), "prefill_tokens_per_s": round(statistics.median(p), 1),
                  "threads": TH, "reps": reps, "tokens_per_cpu_s": round(statistics.median(cpu), 1),
                  "load": os.getloadavg()[0]}), flush=True)

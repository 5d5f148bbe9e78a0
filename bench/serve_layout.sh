#!/bin/sh
# bench/serve_layout.sh - ptserve on a model-parallel layout against ptserve on one process, at the same
# request rate, through HTTP (build/ptload: Poisson arrivals, streaming clients). The model: GPT-2 small's
# shape (12 layers, width 768, 12 heads, 50,257 tokens; deterministic initialization, saved once by
# build/make_gpt_ckpt in SLAYOUT_CKPT), weights in SLAYOUT_QUANT (q8_0), 16 sequences at once. "one": one
# process of 2 threads; "tp2" / "pp2": mpirun -np 2, 1 thread a rank (on a 2-core machine the layouts cannot
# beat one process: the figures show what a layout costs). Prints one JSON line per run:
# {"bench":"serve_layout","layout":...,"rate":...,"requests":...,"output_throughput":...,"p50_tpot_ms":...,
#  "p50_ttft_ms":...,"vs_one":...} (vs_one: output throughput over the one-process run's, same round).
# The rate saturates the server (16 requests running, the rest queued; clients wait up to 900 s), so
# output_throughput is what each layout sustains at batch 16. SLAYOUT_ROUNDS rounds interleave the layouts (1). A machine without MPI prints a line saying why.
# Env: SLAYOUT_RATE (8 requests/s), SLAYOUT_REQUESTS (32), SLAYOUT_LAYOUTS ("one tp2 pp2"),
# SLAYOUT_TOKENIZER (build/bench_bpe_50001.bin).
set -u
cd "$(dirname "$0")/.." || exit 1
CK=${SLAYOUT_CKPT:-build/bench_gpt2_124m}
TOK=${SLAYOUT_TOKENIZER:-build/bench_bpe_50001.bin}
Q=${SLAYOUT_QUANT:-q8_0}
RATE=${SLAYOUT_RATE:-8}
NREQ=${SLAYOUT_REQUESTS:-32}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say() { printf '{"bench":"serve_layout","error":"%s"}\n' "$1"; exit 0; }
command -v mpirun >/dev/null 2>&1 || say "not run: no mpirun (make deps)"
make -s build/ptserve build/ptload build/make_gpt_ckpt >/dev/null 2>&1 || say "not run: make build/ptserve build/ptload build/make_gpt_ckpt failed"
[ -f "$TOK" ] || say "not run: no tokenizer $TOK (BENCH=decode makes it; or SLAYOUT_TOKENIZER=FILE)"
if [ ! -f "$CK/latest" ]; then
    rm -rf "$CK"
    ./build/make_gpt_ckpt "$CK" 12 768 12 50257 1024 "$TOK" >/dev/null || say "not run: make_gpt_ckpt failed"
fi
out=${TMPDIR:-/tmp}/ptrain_serve_layout.$$
run() { # run LAYOUT: one JSON line of ptload into $out.$1
    lay=$1
    case $lay in
    one) ./build/ptserve --ckpt "$CK" --quant "$Q" --port 0 --threads 2 --max-seqs 16 --max-conns-per-ip 64 >"$out.srv" 2>"$out.err" & ;;
    tp2) timeout 900 mpirun --oversubscribe -np 2 ./build/ptserve --ckpt "$CK" --quant "$Q" --port 0 --threads 1 --max-seqs 16 --max-conns-per-ip 64 --tp 2 >"$out.srv" 2>"$out.err" & ;;
    pp2) timeout 900 mpirun --oversubscribe -np 2 ./build/ptserve --ckpt "$CK" --quant "$Q" --port 0 --threads 1 --max-seqs 16 --max-conns-per-ip 64 --pp 2 >"$out.srv" 2>"$out.err" & ;;
    esac
    SP=$!
    URL=""
    while [ -z "$URL" ] && kill -0 $SP 2>/dev/null; do URL=$(sed -n 's/^ptserve: listening on //p' "$out.srv" 2>/dev/null); sleep 0.5; done
    if [ -z "$URL" ]; then echo "{\"error\":\"ptserve $lay did not start\"}" >"$out.$lay"; return; fi
    ./build/ptload --url "${URL%/}" --rate "$RATE" --requests "$NREQ" --prompt-len 16:32 --output-len 64 --temperature 0 --timeout 900 2>/dev/null | tail -n 1 >"$out.$lay"
    P0=$(sed -n 's/.*pids 0:\([0-9]*\) .*/\1/p' "$out.srv")
    kill -TERM "${P0:-$SP}" 2>/dev/null
    wait $SP 2>/dev/null
}
r=1
while [ "$r" -le "${SLAYOUT_ROUNDS:-1}" ]; do
    for lay in ${SLAYOUT_LAYOUTS:-one tp2 pp2}; do run "$lay"; done
    base=$(sed -n 's/.*"output_throughput":\([0-9.]*\).*/\1/p' "$out.one" 2>/dev/null)
    for lay in ${SLAYOUT_LAYOUTS:-one tp2 pp2}; do
        python3 - "$lay" "$RATE" "$NREQ" "$Q" "${base:-0}" "$r" "$out.$lay" <<'PY'
import json, sys
lay, rate, n, q, base, rnd, path = sys.argv[1:]
try:
    d = json.loads(open(path).read())
    thr = d["output_throughput"]
    print(json.dumps({"bench": "serve_layout", "layout": lay, "format": q, "round": int(rnd), "rate": float(rate), "requests": int(n),
                      "completed": d.get("completed"), "output_throughput": thr, "p50_tpot_ms": d.get("p50_tpot_ms"),
                      "p50_ttft_ms": d.get("p50_ttft_ms"), "vs_one": round(thr / float(base), 3) if float(base) > 0 else None}))
except Exception as e:
    print(json.dumps({"bench": "serve_layout", "layout": lay, "error": "no ptload line: %s" % e}))
PY
    done
    r=$((r + 1))
done
rm -f "$out".*

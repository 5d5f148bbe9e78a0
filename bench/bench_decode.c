/* bench_decode.c - KV-cached decode and prefill speed of a GPT in each weight format, JSON lines.

   bench_decode MODEL [formats [batches [new_tokens [reps]]]]
     MODEL     gpt2-85m-bytes (12 layers, width 768, 12 heads, byte vocabulary: 85M parameters) or
               gpt2-124m (the same with GPT-2's 50,257-token vocabulary: 124M)
     formats   comma-separated weight formats (default f32,bf16,q8_0,q4_0)
     batches   comma-separated batch sizes (default 1,4,16)
     new_tokens decoded per sequence and run (default 64)
     reps      runs per (format, batch), the median reported (default 3)

   The model has random weights (pt_gpt_new's deterministic init): speed does not depend on them.
   For each format the weights are made once (pt_gpt_weights_from: f32 points into the parameters,
   the others are quantized copies), then the runs go round-robin over the batch sizes so that every
   configuration sees the same machine load. Decode: each of B sequences is prefilled with a 16-token
   prompt (ragged: 16 + b tokens for sequence b), then new_tokens steps of one token per sequence,
   greedy; tokens_per_s = B * new_tokens / time of those steps. Prefill: one sequence of 256 tokens in
   one pt_infer_step; prefill_tokens_per_s = 256 / its time. weight_bytes = the bytes decode reads per
   token (pt_gpt_weights_bytes); gb_per_s = weight_bytes x tokens/s at batch 1 (what bandwidth the
   decode reaches). tokens_per_cpu_s: the same tokens over the process's CPU time (every thread's):
   with PTRAIN_THREADS=1 a measure that a loaded machine disturbs little (no thread waits for another),
   the llama.cpp peer's the same with LLAMA_THREADS=1; load: the 1-minute load average at the end.

   --gguf-out FILE TYPE (after the other arguments) writes the same model as GGUF in TYPE (f32, f16,
   q8_0, q4_0) and exits: the llama.cpp peer reads that file (bench/run.sh's decode benchmark).
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_decode.c -o build/bench_decode -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define MAXR 16

static int split_list(const char *s, char out[][16], int max) {
    int n = 0;
    while (s && *s && n < max) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len >= 16) len = 15;
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        s = e ? e + 1 : NULL;
    }
    return n;
}

static int argmax(const float *x, int n) {
    int i, b = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double g_cpu_tps; /* the last decode_run's tokens per CPU-second (all threads' CPU time) */
/* one decode run: B sequences, ragged prompts, new_tokens greedy steps; returns tokens/s (0 on error) */
static double decode_run(pt_ctx *ctx, pt_infer *inf, int V, int B, int new_tokens) {
    int32_t seqs[64], ntok[64], toks[64 * 40], b, s, n = 0;
    float *logits = (float *)malloc((size_t)B * (size_t)V * sizeof(float));
    double t0, dt;
    clock_t c0;
    if (!logits) return 0;
    for (b = 0; b < B; b++) {
        int i, len = 16 + b;
        if ((seqs[b] = pt_infer_seq_new(inf)) < 0) { free(logits); return 0; }
        ntok[b] = len;
        for (i = 0; i < len; i++) toks[n++] = (int32_t)((b * 7 + i * 13) % V);
    }
    if (pt_infer_step(inf, B, seqs, ntok, toks, logits, 0) != PT_OK) { free(logits); return 0; }
    t0 = pt_time(), c0 = clock();
    for (s = 0; s < new_tokens; s++) {
        for (b = 0; b < B; b++) ntok[b] = 1, toks[b] = argmax(logits + (size_t)b * V, V);
        if (pt_infer_step(inf, B, seqs, ntok, toks, logits, 0) != PT_OK) break;
    }
    dt = pt_time() - t0;
    g_cpu_tps = (double)B * new_tokens / ((double)(clock() - c0) / CLOCKS_PER_SEC + 1e-9);
    for (b = 0; b < B; b++) pt_infer_seq_free(inf, seqs[b]);
    free(logits);
    (void)ctx;
    return s == new_tokens && dt > 0 ? (double)B * new_tokens / dt : 0;
}

static double prefill_run(pt_infer *inf, int V, int T) {
    int32_t seq, nt = T, *toks = (int32_t *)malloc((size_t)T * sizeof(int32_t));
    float *logits = (float *)malloc((size_t)V * sizeof(float));
    double t0, dt = 0;
    int i, ok = 0;
    if (toks && logits && (seq = pt_infer_seq_new(inf)) >= 0) {
        for (i = 0; i < T; i++) toks[i] = (int32_t)((i * 31 + 7) % V);
        t0 = pt_time();
        ok = pt_infer_step(inf, 1, &seq, &nt, toks, logits, 0) == PT_OK;
        dt = pt_time() - t0;
        pt_infer_seq_free(inf, seq);
    }
    free(toks);
    free(logits);
    return ok && dt > 0 ? T / dt : 0;
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "gpt2-85m-bytes";
    char fmts[8][16], bs[8][16];
    int nf, nb, new_tokens, reps, f, b, r, i;
    pt_gpt_config cfg;
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt *m;
    const char *gguf_out = NULL, *gguf_type = NULL;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--gguf-out") && i + 2 < argc) gguf_out = argv[i + 1], gguf_type = argv[i + 2], argc = i;
    nf = split_list(argc > 2 ? argv[2] : "f32,bf16,q8_0,q4_0", fmts, 8);
    nb = split_list(argc > 3 ? argv[3] : "1,4,16", bs, 8);
    new_tokens = argc > 4 ? atoi(argv[4]) : 64;
    reps = argc > 5 ? atoi(argv[5]) : 3;
    if (reps < 1 || reps > MAXR || new_tokens < 1) {
        fprintf(stderr, "bench_decode: reps must be 1..%d and new_tokens >= 1\n", MAXR);
        return 2;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.layers = 12, cfg.width = 768, cfg.heads = 12, cfg.max_seq = 1024;
    if (!strcmp(model, "gpt2-85m-bytes")) cfg.vocab = 256;
    else if (!strcmp(model, "gpt2-124m")) cfg.vocab = 50257;
    else {
        fprintf(stderr, "bench_decode: unknown model '%s' (expected gpt2-85m-bytes or gpt2-124m)\n", model);
        return 2;
    }
    memset(&d, 0, sizeof d);
    d.seed = 1;
    if (!(ctx = pt_init(&d)) || !(m = pt_gpt_new(ctx, &cfg))) {
        fprintf(stderr, "bench_decode: %s\n", ctx ? pt_error(ctx) : "pt_init failed");
        return 1;
    }
    if (gguf_out) { /* the model as a checkpoint, exported as GGUF (what ptckpt export --format gguf does) */
        int t = pt_wtype_parse(gguf_type);
        char err[512], dir[600], step[700];
        pt_gguf_export_opts eo;
        pt_ckpt_opts co;
        memset(&eo, 0, sizeof eo);
        memset(&co, 0, sizeof co);
        co.model = &cfg;
        eo.type = (pt_wtype)t;
        snprintf(dir, sizeof dir, "%s.ckpt", gguf_out);
        if (t < 0 || pt_ckpt_save(ctx, NULL, dir, 0, &co) != PT_OK || pt_ckpt_step_dir(dir, step, sizeof step) != PT_OK ||
            pt_gguf_export(step, gguf_out, &eo, err, sizeof err) != PT_OK) {
            fprintf(stderr, "bench_decode: --gguf-out %s %s: %s\n", gguf_out, gguf_type, t < 0 ? "unknown type" : ctx->status ? pt_error(ctx) : err);
            return 1;
        }
        pt_gpt_free(m);
        pt_shutdown(ctx);
        return 0;
    }
    for (f = 0; f < nf; f++) {
        int t = pt_wtype_parse(fmts[f]);
        pt_gpt_weights *w;
        pt_infer *inf;
        pt_infer_desc id;
        double dec[8][MAXR], cpu[8][MAXR], pre[MAXR];
        if (t < 0) {
            fprintf(stderr, "bench_decode: unknown format '%s' (f32, bf16, f16, q8_0, q4_0)\n", fmts[f]);
            return 2;
        }
        memset(&id, 0, sizeof id);
        id.max_seqs = 64;
        id.kv_tokens = 64 * 256;
        if (!(w = pt_gpt_weights_from(m, (pt_wtype)t)) || !(inf = pt_infer_new(ctx, w, &id))) {
            fprintf(stderr, "bench_decode: %s\n", pt_error(ctx));
            return 1;
        }
        decode_run(ctx, inf, cfg.vocab, 1, 4); /* warm-up: workspaces grown, pages touched */
        for (r = 0; r < reps; r++) {
            for (b = 0; b < nb; b++) dec[b][r] = decode_run(ctx, inf, cfg.vocab, atoi(bs[b]), new_tokens), cpu[b][r] = g_cpu_tps;
            pre[r] = prefill_run(inf, cfg.vocab, 256);
        }
        {
            double p = median(pre, reps), one = 0;
            long long wb = (long long)pt_gpt_weights_bytes(w);
            for (b = 0; b < nb; b++) {
                double tps = median(dec[b], reps);
                int B = atoi(bs[b]);
                if (B == 1) one = tps;
                printf("{\"bench\":\"decode\",\"model\":\"%s\",\"format\":\"%s\",\"batch\":%d,\"tokens_per_s\":%.1f,"
                       "\"prefill_tokens_per_s\":%.1f,\"weight_bytes\":%lld,\"gb_per_s\":%.2f,\"new_tokens\":%d,\"reps\":%d,"
                       "\"threads\":%d,\"kernel\":\"%s\",\"tokens_per_cpu_s\":%.1f,\"load\":%.2f}\n",
                       model, fmts[f], B, tps, p, wb, B == 1 ? (double)wb * tps / 1e9 : 0.0, new_tokens, reps, pt_threads(ctx),
                       pt__qmm_kernel((pt_wtype)t), median(cpu[b], reps), bench_loadavg());
                if (B > 1 && one > 0) printf("{\"bench\":\"decode_batch_gain\",\"model\":\"%s\",\"format\":\"%s\",\"batch\":%d,\"vs_batch1\":%.2f}\n",
                                             model, fmts[f], B, tps / one);
            }
            fflush(stdout);
        }
        pt_infer_free(inf);
        pt_gpt_weights_free(w);
    }
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return 0;
}

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

   bench_decode MODEL --profile FORMATS [tokens] (tokens: rounds, default 32): where a batch-1 decode step's
   time goes, per format, on PTRAIN_THREADS threads (default 2). Each round, in turn: a streaming read of the
   step's weight bytes (op "stream"), the hand-off probe (op "handoff"), the step's 49 matrix products
   timed call by call (pt__qmm on the model's own matrices and biases, one activation row, in the step's
   order: per layer qkv, attn_proj, fc, fc_proj, then lm_head), for q8_0 / q4_0 the activation row's
   quantization alone (op "act_quant"), and one real pt_infer_step of one token (op "step"); after a warm-up round, the medians over the rounds. One decode_profile line per op:
   us_per_call, bytes_per_call (the weight bytes it reads), gb_per_s, of_stream (over the stream's GB/s),
   share_of_step; "matmul" sums the products (us x calls), "other" is step - matmul (attention, norms,
   GELU, embedding, the cache).
   --gguf-out FILE TYPE (after the other arguments) writes the same model as GGUF in TYPE (f32, f16,
   q8_0, q4_0) and exits: the llama.cpp peer reads that file (bench/run.sh's decode benchmark). The
   124M model's vocabulary is a byte-level BPE of 50,001 merges: --tokenizer FILE (default
   build/bench_bpe_50001.bin), trained on --corpus TEXT (default data/fortunes/train.txt, written by
   sh tools/prepare_text.sh data/fortunes) the first time, about 2 s, and kept in FILE; GPT-2's own
   (ptckpt import vocab.json merges.txt FILE) serves as well. The checkpoint carries it and the GGUF
   holds it as llama.cpp's gpt2 vocabulary (tokenizer.ggml.model "gpt2", pre "gpt-2", tokens,
   token_type, merges, <|endoftext|> as bos / eos); every token's text is checked distinct first.
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_decode.c -o build/bench_decode -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define MAXR 16


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

/* ---- --profile: where a batch-1 decode step's time goes ----
   The matrix products of one step, in the step's order (per layer qkv, attn_proj, fc, fc_proj, then
   lm_head), each a pt__qmm call on the model's own weight matrix and bias with one activation row, timed
   call by call; a streaming read of the same weight bytes (uint64 sums, 128 bytes a step, prefetching
   4 KiB ahead, on the thread team: one parallel loop over 256 KiB chunks); one whole pt_infer_step of one token. Each round runs the three in turn (so they see the same
   machine load and the same cache state: the step's weights pass through the caches between two calls
   on one matrix); the medians over the rounds are reported. */
enum { OP_QKV, OP_PROJ, OP_FC, OP_FPROJ, OP_HEAD, NOPS };
static const char *const op_name[NOPS] = {"qkv", "attn_proj", "fc", "fc_proj", "lm_head"};
typedef struct { const unsigned char *p; int64_t n; } span;
typedef struct { const span *chunk; uint64_t sum[64 * 8]; } stream_job; /* sum: one cache line per thread */
static volatile uint64_t g_sink;
static void stream_part(void *arg, int64_t lo, int64_t hi, int tid) {
    stream_job *j = (stream_job *)arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t c, i;
    for (c = lo; c < hi; c++) {
        const unsigned char *p = j->chunk[c].p;
        const int64_t n = j->chunk[c].n, w = n / 128 * 128;
        for (i = 0; i < w; i += 128) {
            uint64_t v[16];
            int k;
#if defined(__GNUC__) || defined(__clang__)
            __builtin_prefetch(p + i + 4096), __builtin_prefetch(p + i + 4096 + 64); /* 4 KiB ahead, as pt__qmm's tiles */
#endif
            memcpy(v, p + i, 128);
            for (k = 0; k < 16; k += 4) a0 += v[k], a1 += v[k + 1], a2 += v[k + 2], a3 += v[k + 3];
        }
        for (; i < n; i++) a0 += p[i];
    }
    j->sum[(tid & 63) * 8] += a0 + a1 + a2 + a3;
}

/* the hand-off probe: each item spins 5 us, so every thread of the team takes part; the loop's time over
   its ideal (items x 5 us / threads) is what starting and joining the team cost */
#define HAND_ITEM_US 5.0
static void spin_part(void *arg, int64_t lo, int64_t hi, int tid) {
    const double end = pt_time() + 1e-6 * HAND_ITEM_US * (double)(hi - lo);
    (void)arg, (void)tid;
    while (pt_time() < end) {}
}

static int profile(pt_ctx *ctx, const char *model, const pt_gpt_config *cfg, pt_gpt *m, const char *fmt, int rounds) {
    enum { CHUNK = 256 << 10 };
    const int64_t C = cfg->width, V = cfg->vocab, L = cfg->layers;
    int t = pt_wtype_parse(fmt), r, l, o, nt = pt_threads(ctx);
    pt_gpt_weights *w;
    pt_infer *inf;
    pt_infer_desc id;
    pt_qmat head;
    span *chunk = NULL;
    stream_job *sj = NULL;
    float *x = NULL, *y = NULL, *logits = NULL;
    double *us[NOPS], *stream_us = NULL, *step_us = NULL, *hand_us = NULL, *aq_us = NULL, med[NOPS], smed, tmed, hmed, mm = 0;
    /* the activation row's quantization to q8_0 (q8_0 and q4_0 weights), as pt__qmm does it on the calling thread */
    void (*qx)(const float *, int64_t, int8_t *, float *, int32_t *, int32_t) = pt__qmm_quant_x;
    int8_t *xq = NULL;
    float *xd = NULL;
    int32_t *xs = NULL;
    const pt__wt *wt = NULL;
    int64_t bytes[NOPS], total = 0, nchunk = 0;
    int32_t seq, one = 1, tok, prompt[16], np = 16;
    const int calls[NOPS] = {(int)L, (int)L, (int)L, (int)L, 1};
    int rc = 1;
    if (t < 0) {
        fprintf(stderr, "bench_decode: --profile: unknown format '%s' (f32, bf16, f16, q8_0, q4_0)\n", fmt);
        return 2;
    }
    for (o = 0; o < NOPS; o++) us[o] = NULL;
    memset(&id, 0, sizeof id);
    id.max_seqs = 1;
    id.kv_tokens = 16 + rounds + 32;
    if (!(w = pt_gpt_weights_from(m, (pt_wtype)t)) || !(inf = pt_infer_new(ctx, w, &id))) {
        fprintf(stderr, "bench_decode: --profile %s: %s\n", fmt, pt_error(ctx));
        if (w) pt_gpt_weights_free(w);
        return 1;
    }
    wt = pt__wt_of((pt_wtype)t);
#if PT__X86
    {
        const int kern = pt__qmm_resolve(PT__QMM_KERN_AUTO, (pt_wtype)t);
        if (kern == PT__QMM_KERN_AVX512) qx = pt__qmm_quant_x_512;
        else if (kern == PT__QMM_KERN_AVX2) qx = pt__qmm_quant_x_256;
    }
#endif
    head = w->head;
    head.rows = V;
    bytes[OP_QKV] = pt__qmat_bytes(&w->layer[0].qkv), bytes[OP_PROJ] = pt__qmat_bytes(&w->layer[0].proj);
    bytes[OP_FC] = pt__qmat_bytes(&w->layer[0].fc), bytes[OP_FPROJ] = pt__qmat_bytes(&w->layer[0].fproj);
    bytes[OP_HEAD] = pt__qmat_bytes(&head);
    for (o = 0; o < NOPS; o++) total += bytes[o] * calls[o];
    /* the stream's chunks: every matrix of the step, in the step's order, cut in CHUNK bytes */
    chunk = (span *)malloc((size_t)(total / CHUNK + 5 * L + 8) * sizeof(span));
    sj = (stream_job *)calloc(1, sizeof *sj);
    x = (float *)malloc((size_t)(4 * C) * sizeof(float));
    y = (float *)malloc((size_t)(4 * C > V ? 4 * C : V) * sizeof(float));
    logits = (float *)malloc((size_t)V * sizeof(float));
    stream_us = (double *)malloc((size_t)rounds * sizeof(double));
    step_us = (double *)malloc((size_t)rounds * sizeof(double));
    hand_us = (double *)malloc((size_t)rounds * sizeof(double));
    aq_us = (double *)malloc((size_t)rounds * sizeof(double));
    xq = (int8_t *)malloc((size_t)(4 * C));
    xd = (float *)malloc((size_t)(4 * C / 32 + 2) * sizeof(float));
    xs = (int32_t *)malloc((size_t)C * sizeof(int32_t));
    for (o = 0; o < NOPS; o++) us[o] = (double *)malloc((size_t)rounds * sizeof(double));
    if (!chunk || !sj || !x || !y || !logits || !stream_us || !step_us || !hand_us || !aq_us || !xq || !xd || !xs || !us[0] || !us[1] || !us[2] || !us[3] || !us[4]) {
        fprintf(stderr, "bench_decode: --profile %s: out of memory\n", fmt);
        goto done;
    }
    for (l = 0; l <= L; l++) {
        const pt_qmat *mat[4];
        int k, nm = l < L ? 4 : 1;
        if (l < L) mat[0] = &w->layer[l].qkv, mat[1] = &w->layer[l].proj, mat[2] = &w->layer[l].fc, mat[3] = &w->layer[l].fproj;
        else mat[0] = &head;
        for (k = 0; k < nm; k++) {
            const int64_t n = pt__qmat_bytes(mat[k]);
            int64_t off;
            for (off = 0; off < n; off += CHUNK) chunk[nchunk].p = (const unsigned char *)mat[k]->data + off, chunk[nchunk++].n = PT__MIN(CHUNK, n - off);
        }
    }
    sj->chunk = chunk;
    for (o = 0; o < 4 * C; o++) x[o] = (float)((o * 37 % 101) - 50) / 50.0f;
    for (o = 0; o < np; o++) prompt[o] = (int32_t)((o * 13 + 7) % V);
    if ((seq = pt_infer_seq_new(inf)) < 0 || pt_infer_step(inf, 1, &seq, &np, prompt, logits, 0) != PT_OK) {
        fprintf(stderr, "bench_decode: --profile %s: the prompt's step failed: %s\n", fmt, pt_error(ctx));
        goto done;
    }
    for (r = -1; r < rounds; r++) { /* round -1: a warm-up (workspaces, pages), not counted */
        double tt[NOPS] = {0, 0, 0, 0, 0}, t0;
        t0 = pt_time();
        pt__par_run(ctx, nt, nchunk, stream_part, sj);
        if (r >= 0) stream_us[r] = 1e6 * (pt_time() - t0);
        t0 = pt_time();
        for (o = 0; o < 16; o++) pt__par_run(ctx, nt, 4 * nt, spin_part, NULL);
        if (r >= 0) hand_us[r] = 1e6 * (pt_time() - t0) / 16 - 4 * HAND_ITEM_US;
        for (l = 0; l < L; l++) {
            const pt_gpt_layer_w *lw = &w->layer[l];
            t0 = pt_time(), pt__qmm(ctx, &lw->qkv, x, C, 1, lw->qkv_b, y, 3 * C), tt[OP_QKV] += pt_time() - t0;
            t0 = pt_time(), pt__qmm(ctx, &lw->proj, x, C, 1, lw->proj_b, y, C), tt[OP_PROJ] += pt_time() - t0;
            t0 = pt_time(), pt__qmm(ctx, &lw->fc, x, C, 1, lw->fc_b, y, 4 * C), tt[OP_FC] += pt_time() - t0;
            t0 = pt_time(), pt__qmm(ctx, &lw->fproj, x, 4 * C, 1, lw->fproj_b, y, C), tt[OP_FPROJ] += pt_time() - t0;
        }
        t0 = pt_time(), pt__qmm(ctx, &head, x, C, 1, NULL, y, V), tt[OP_HEAD] += pt_time() - t0;
        if (ctx->status != PT_OK) {
            fprintf(stderr, "bench_decode: --profile %s: pt__qmm: %s\n", fmt, pt_error(ctx));
            goto done;
        }
        t0 = pt_time();
        if (wt && wt->xc) {
            for (o = 0; o < 3 * L + 1; o++) qx(x, C, xq, xd, xs, wt->xc);     /* qkv, attn_proj, fc, lm_head: K = C */
            for (o = 0; o < L; o++) qx(x, 4 * C, xq, xd, xs, wt->xc);         /* fc_proj: K = 4C */
        }
        if (r >= 0) aq_us[r] = 1e6 * (pt_time() - t0) / (4 * L + 1);
        tok = argmax(logits, (int)V);
        t0 = pt_time();
        if (pt_infer_step(inf, 1, &seq, &one, &tok, logits, 0) != PT_OK) {
            fprintf(stderr, "bench_decode: --profile %s: the decode step failed: %s\n", fmt, pt_error(ctx));
            goto done;
        }
        if (r >= 0) {
            step_us[r] = 1e6 * (pt_time() - t0);
            for (o = 0; o < NOPS; o++) us[o][r] = 1e6 * tt[o] / calls[o];
        }
    }
    {
        const char *kern = pt__qmm_kernel((pt_wtype)t);
        double sgb, load = bench_loadavg();
        uint64_t s = 0;
        for (o = 0; o < 64; o++) s += sj->sum[o * 8];
        g_sink = s;
        smed = median(stream_us, rounds), tmed = median(step_us, rounds);
        sgb = (double)total / (smed * 1e3);
#define PROF_HEAD "{\"bench\":\"decode_profile\",\"model\":\"%s\",\"format\":\"%s\",\"threads\":%d,\"kernel\":\"%s\",\"op\":\"%s\""
#define PROF_ARGS model, fmt, nt, kern
        for (o = 0; o < NOPS; o++) {
            med[o] = median(us[o], rounds), mm += med[o] * calls[o];
            printf(PROF_HEAD ",\"calls_per_token\":%d,\"us_per_call\":%.1f,\"bytes_per_call\":%lld,\"gb_per_s\":%.2f,\"stream_gb_per_s\":%.2f,"
                   "\"of_stream\":%.3f,\"share_of_step\":%.3f,\"rounds\":%d,\"load\":%.2f}\n",
                   PROF_ARGS, op_name[o], calls[o], med[o], (long long)bytes[o], (double)bytes[o] / (med[o] * 1e3), sgb,
                   (double)bytes[o] / (med[o] * 1e3) / sgb, med[o] * calls[o] / tmed, rounds, load);
        }
        printf(PROF_HEAD ",\"calls_per_token\":%d,\"us_per_call\":%.1f,\"bytes_per_call\":%lld,\"gb_per_s\":%.2f,\"stream_gb_per_s\":%.2f,"
               "\"of_stream\":%.3f,\"share_of_step\":%.3f,\"rounds\":%d,\"load\":%.2f}\n",
               PROF_ARGS, "matmul", (int)(4 * L + 1), mm, (long long)total, (double)total / (mm * 1e3), sgb, (double)total / (mm * 1e3) / sgb, mm / tmed, rounds, load);
        printf(PROF_HEAD ",\"calls_per_token\":1,\"us_per_call\":%.1f,\"bytes_per_call\":%lld,\"gb_per_s\":%.2f,\"stream_gb_per_s\":%.2f,"
               "\"share_of_step\":%.3f,\"chunks\":%lld,\"rounds\":%d,\"load\":%.2f}\n",
               PROF_ARGS, "stream", smed, (long long)total, sgb, sgb, smed / tmed, (long long)nchunk, rounds, load);
        printf(PROF_HEAD ",\"calls_per_token\":1,\"us_per_call\":%.1f,\"bytes_per_call\":%lld,\"gb_per_s\":%.2f,\"stream_gb_per_s\":%.2f,"
               "\"of_stream\":%.3f,\"share_of_step\":1.000,\"tokens_per_s\":%.1f,\"rounds\":%d,\"load\":%.2f}\n",
               PROF_ARGS, "step", tmed, (long long)total, (double)total / (tmed * 1e3), sgb, (double)total / (tmed * 1e3) / sgb, 1e6 / tmed, rounds, load);
        printf(PROF_HEAD ",\"us_per_call\":%.1f,\"share_of_step\":%.3f,\"rounds\":%d,\"load\":%.2f}\n", PROF_ARGS, "other", tmed - mm, (tmed - mm) / tmed,
               rounds, load);
        if (wt && wt->xc) {
            double amed = median(aq_us, rounds);
            printf(PROF_HEAD ",\"calls_per_token\":%d,\"us_per_call\":%.2f,\"share_of_step\":%.3f,\"rounds\":%d,\"load\":%.2f}\n", PROF_ARGS,
                   "act_quant", (int)(4 * L + 1), amed, amed * (4 * L + 1) / tmed, rounds, load);
        }
        hmed = median(hand_us, rounds);
        printf(PROF_HEAD ",\"calls_per_token\":%d,\"us_per_call\":%.2f,\"share_of_step\":%.3f,\"rounds\":%d,\"load\":%.2f}\n", PROF_ARGS, "handoff",
               (int)(4 * L + 1), hmed, hmed * (4 * L + 1) / tmed, rounds, load);
#undef PROF_HEAD
#undef PROF_ARGS
        fflush(stdout);
    }
    rc = 0;
done:
    for (o = 0; o < NOPS; o++) free(us[o]);
    free(chunk), free(sj), free(x), free(y), free(logits), free(stream_us), free(step_us), free(hand_us), free(aq_us), free(xq), free(xd), free(xs);
    pt_infer_free(inf);
    pt_gpt_weights_free(w);
    return rc;
}

/* ---- the 124M model's tokenizer (--tokenizer FILE [--corpus TEXT]) ----
   The GGUF of a model of vocabulary 50,257 needs a BPE of 50,001 merges (256 + 50,001 ids; llama.cpp's
   <|endoftext|> is the export's token 50,257) or GPT-2's own 50,000 (+ its <|endoftext|> row): FILE
   when it exists (any tokenizer file: `ptckpt import vocab.json merges.txt FILE` makes GPT-2's), else
   pt_tokenizer_train of 50,001 merges on TEXT (default data/fortunes/train.txt: tools/prepare_text.sh),
   saved as FILE for the next run. Each token's text must be distinct: llama.cpp aborts on a
   vocabulary with two tokens of one text. */
#define BPE_MERGES 50001
static pt_tokenizer *bench_tokenizer(pt_ctx *ctx, const char *path, const char *corpus, int vocab) {
    pt_tokenizer *tk = NULL;
    FILE *f = fopen(path, "rb");
    int64_t V, i, cap, *tab = NULL, total = 0, dup = -1, first = -1;
    unsigned char *text = NULL, *all = NULL;
    int64_t *off = NULL;
    if (f) {
        fclose(f);
        if (!(tk = pt_tokenizer_load(ctx, path))) {
            fprintf(stderr, "bench_decode: --tokenizer %s: %s\n", path, pt_error(ctx));
            return NULL;
        }
    } else {
        long n = -1;
        double t0 = pt_time();
        if ((f = fopen(corpus, "rb")) && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (text = (unsigned char *)malloc((size_t)n)) &&
            fread(text, 1, (size_t)n, f) == (size_t)n)
            tk = pt_tokenizer_train(ctx, text, n, BPE_MERGES);
        if (f) fclose(f);
        free(text);
        if (!tk || pt_tokenizer_vocab(tk) != 256 + BPE_MERGES) {
            fprintf(stderr, "bench_decode: no tokenizer %s, and the corpus %s %s (sh tools/prepare_text.sh data/fortunes writes the default one)\n", path, corpus,
                    !f ? "cannot be opened" : tk ? "gives fewer than 50,001 merges" : n <= 0 ? "is empty" : pt_error(ctx));
            pt_tokenizer_free(tk);
            return NULL;
        }
        if (pt_tokenizer_save(tk, path) != PT_OK) {
            fprintf(stderr, "bench_decode: --tokenizer %s: %s\n", path, pt_error(ctx));
            pt_tokenizer_free(tk);
            return NULL;
        }
        fprintf(stderr, "bench_decode: trained %d merges on %s (%ld bytes) in %.2f s: %s\n", BPE_MERGES, corpus, n, pt_time() - t0, path);
    }
    V = pt_tokenizer_vocab(tk);
    if (V + 1 < vocab || V > vocab) {
        fprintf(stderr, "bench_decode: --tokenizer %s has a vocabulary of %lld, the model %d: expected %d (256 + 50,001 merges) or %d (GPT-2's 50,000 merges + <|endoftext|>)\n", path,
                (long long)V, vocab, vocab, vocab - 1);
        pt_tokenizer_free(tk);
        return NULL;
    }
    /* every token's text distinct (open addressing over FNV-1a of the bytes) */
    for (cap = 1; cap < 2 * V; cap *= 2) {}
    off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(V + 1));
    tab = (int64_t *)malloc(sizeof(int64_t) * (size_t)cap);
    for (i = 0; off && i < V; i++) {
        int32_t id = (int32_t)i;
        off[i] = total, total += pt_tokenizer_decode(tk, &id, 1, NULL, 0);
    }
    if (off) off[V] = total;
    all = off && tab ? (unsigned char *)malloc((size_t)total + 1) : NULL;
    for (i = 0; all && i < cap; i++) tab[i] = -1;
    for (i = 0; all && i < V && dup < 0; i++) {
        int32_t id = (int32_t)i;
        int64_t l = pt_tokenizer_decode(tk, &id, 1, all + off[i], off[i + 1] - off[i]), h = (int64_t)0xcbf29ce484222325ull, k;
        for (k = 0; k < l; k++) h = (int64_t)(((uint64_t)h ^ all[off[i] + k]) * 0x100000001b3ull);
        for (h = (int64_t)((uint64_t)h & (uint64_t)(cap - 1)); tab[h] >= 0; h = (h + 1) & (cap - 1)) {
            int64_t o = tab[h];
            if (off[o + 1] - off[o] == l && !memcmp(all + off[o], all + off[i], (size_t)l)) {
                dup = i, first = o;
                break;
            }
        }
        if (dup < 0) tab[h] = i;
    }
    if (!all || dup >= 0) {
        if (!all) fprintf(stderr, "bench_decode: out of memory\n");
        else fprintf(stderr, "bench_decode: --tokenizer %s: tokens %lld and %lld have the same text: llama.cpp refuses such a vocabulary\n", path, (long long)first, (long long)dup);
        pt_tokenizer_free(tk);
        tk = NULL;
    }
    free(off), free(tab), free(all);
    return tk;
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
    const char *prof = NULL, *tok_path = "build/bench_bpe_50001.bin", *corpus = "data/fortunes/train.txt";
    int prof_rounds = 32, j;
    for (i = j = 1; i < argc; i++) /* --tokenizer FILE and --corpus TEXT, anywhere: taken out of argv */
        if ((!strcmp(argv[i], "--tokenizer") || !strcmp(argv[i], "--corpus")) && i + 1 < argc) {
            if (argv[i][2] == 't') tok_path = argv[i + 1];
            else corpus = argv[i + 1];
            i++;
        } else argv[j++] = argv[i];
    argc = j;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--gguf-out") && i + 2 < argc) gguf_out = argv[i + 1], gguf_type = argv[i + 2], argc = i;
    if (argc > 2 && !strcmp(argv[2], "--profile")) {
        if (argc < 4 || argc > 5 || (argc == 5 && (prof_rounds = atoi(argv[4])) < 1) || prof_rounds > 100000) {
            fprintf(stderr, "bench_decode: usage: bench_decode MODEL --profile FORMATS [tokens >= 1]%s%s\n", argc == 5 ? "; found tokens " : "",
                    argc == 5 ? argv[4] : "");
            return 2;
        }
        prof = argv[3];
    }
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
    if (prof && !getenv("PTRAIN_THREADS")) d.threads = 2; /* the profile: PTRAIN_THREADS, else 2 */
    if (!(ctx = pt_init(&d)) || !(m = pt_gpt_new(ctx, &cfg))) {
        fprintf(stderr, "bench_decode: %s\n", ctx ? pt_error(ctx) : "pt_init failed");
        return 1;
    }
    if (gguf_out) { /* the model as a checkpoint, exported as GGUF (what ptckpt export --format gguf does) */
        int t = pt_wtype_parse(gguf_type);
        char err[512], dir[600], step[700];
        pt_gguf_export_opts eo;
        pt_ckpt_opts co;
        pt_tokenizer *tk = NULL;
        memset(&eo, 0, sizeof eo);
        memset(&co, 0, sizeof co);
        if (cfg.vocab > 256 && !(tk = bench_tokenizer(ctx, tok_path, corpus, cfg.vocab))) return 1; /* a BPE model: its vocabulary */
        co.model = &cfg, co.tokenizer = tk;
        eo.type = (pt_wtype)t, eo.tokenizer = tk;
        snprintf(dir, sizeof dir, "%s.ckpt", gguf_out);
        if (t < 0 || pt_ckpt_save(ctx, NULL, dir, 0, &co) != PT_OK || pt_ckpt_step_dir(dir, step, sizeof step) != PT_OK ||
            pt_gguf_export(step, gguf_out, &eo, err, sizeof err) != PT_OK) {
            fprintf(stderr, "bench_decode: --gguf-out %s %s: %s\n", gguf_out, gguf_type, t < 0 ? "unknown type" : ctx->status ? pt_error(ctx) : err);
            return 1;
        }
        pt_tokenizer_free(tk);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        return 0;
    }
    if (prof) { /* --profile FORMATS [tokens]: each format's step profile */
        int rc = 0;
        nf = split_list(prof, fmts, 8);
        for (f = 0; f < nf && rc == 0; f++) rc = profile(ctx, model, &cfg, m, fmts[f], prof_rounds);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        return rc;
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

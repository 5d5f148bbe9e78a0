/* bench_infer.c - KV-cached inference speed (see infer): decode tokens/s at batch 1, 4 and 16, prefill
   tokens/s of a 256-token prompt, and where a decode step's time goes (batch 1 at contexts 64 and 512, batch 16 at 64). One JSON line per
   measurement. A GPT of 12 layers, width 768, 12 heads, byte vocabulary (256), max_seq 1024: 85M
   parameters, llama.cpp's gpt2-small-sized reference (f32 131 tokens/s, q8_0 290, q4_0 442 on 2 threads).
   Build: cc -std=c99 -O2 -march=native -fopenmp -I. bench/bench_infer.c -o build/bench_infer -lm
   Run:   OMP_WAIT_POLICY=passive build/bench_infer [--threads N] [--types f32,q8_0,q4_0] [--decode N] [--reps N] [--kv f32|f16] */
#define _POSIX_C_SOURCE 199309L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

static int g_kv = PT_W_F32; /* --kv f16: the cache in fp16 */
static double best_of(double a, double b) { return a < b ? a : b; }

/* process CPU seconds (both threads): on a shared machine the wall clock also counts other programs'
   time slices; cpu / threads is what a step would take on idle cores (a projection, not a measurement) */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* decode tokens/s of B sequences decoding ndec tokens each after a 16-token prompt, greedy (best of
   reps); *cpu_tps: the same from process CPU time / threads */
static double decode_tps(pt_ctx *ctx, const pt_gpt_weights *w, int B, int ndec, int reps, double *cpu_tps) {
    pt_infer_desc d;
    pt_infer *inf;
    int32_t seq[16], ntok[16], toks[16 * 16];
    float *lg = (float *)malloc(sizeof(float) * 16 * 256);
    double best = 1e30, bestc = 1e30;
    int k, i, rep, step;
    memset(&d, 0, sizeof d);
    d.max_seqs = B, d.kv_tokens = (int64_t)B * 512, d.kv_type = g_kv;
    inf = pt_infer_new(ctx, w, &d);
    if (!inf) return 0;
    for (rep = 0; rep < reps; rep++) {
        double t0, c0;
        for (k = 0; k < B; k++) {
            seq[k] = pt_infer_seq_new(inf), ntok[k] = 16;
            for (i = 0; i < 16; i++) toks[k * 16 + i] = (int32_t)((k * 31 + i * 7) % 256);
        }
        if (pt_infer_step(inf, B, seq, ntok, toks, lg, 0) != PT_OK) break;
        t0 = pt_time(), c0 = cpu_now();
        for (step = 0; step < ndec; step++) {
            for (k = 0; k < B; k++) { /* greedy */
                const float *r = lg + (size_t)k * 256;
                int bi = 0;
                for (i = 1; i < 256; i++)
                    if (r[i] > r[bi]) bi = i;
                ntok[k] = 1, toks[k] = bi;
            }
            if (pt_infer_step(inf, B, seq, ntok, toks, lg, 0) != PT_OK) break;
        }
        best = best_of(best, (pt_time() - t0) / ((double)ndec * B));
        bestc = best_of(bestc, (cpu_now() - c0) / pt_threads(ctx) / ((double)ndec * B));
        for (k = 0; k < B; k++) pt_infer_seq_free(inf, seq[k]);
    }
    pt_infer_free(inf);
    free(lg);
    if (cpu_tps) *cpu_tps = bestc < 1e30 ? 1.0 / bestc : 0;
    return best < 1e30 ? 1.0 / best : 0;
}

/* prefill tokens/s of one T-token prompt (best of reps) */
static double prefill_tps(pt_ctx *ctx, const pt_gpt_weights *w, int T, int reps, double *cpu_tps) {
    pt_infer_desc d;
    pt_infer *inf;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)T), s;
    float *lg = (float *)malloc(sizeof(float) * 256);
    double best = 1e30, bestc = 1e30;
    int i, rep;
    memset(&d, 0, sizeof d);
    d.max_seqs = 1, d.kv_tokens = T, d.kv_type = g_kv;
    inf = pt_infer_new(ctx, w, &d);
    for (i = 0; i < T; i++) ids[i] = (int32_t)((i * 13 + 5) % 256);
    for (rep = 0; inf && rep < reps; rep++) {
        double t0, c0;
        s = pt_infer_seq_new(inf);
        t0 = pt_time(), c0 = cpu_now();
        if (pt_infer_step(inf, 1, &s, &T, ids, lg, 0) != PT_OK) break;
        best = best_of(best, pt_time() - t0);
        bestc = best_of(bestc, (cpu_now() - c0) / pt_threads(ctx));
        pt_infer_seq_free(inf, s);
    }
    pt_infer_free(inf);
    free(ids), free(lg);
    if (cpu_tps) *cpu_tps = bestc < 1e30 ? T / bestc : 0;
    return best < 1e30 ? T / best : 0;
}

/* where a decode step of B sequences at context n goes: the pieces timed on their own in process CPU
   time, divided by the threads that run them (the matrix products on every thread; attention on every
   thread when the step's attention is large enough, as pt_infer_step decides; the row-wise work on
   one thread, as at batch 1), iters times each */
static void profile(pt_ctx *ctx, const pt_gpt_weights *w, const char *tn, int n, int B, int iters) {
    pt_infer_desc d;
    pt_infer *inf;
    int32_t seq[16], ntok[16], toks[16], *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)n * 16);
    float *lg = (float *)malloc(sizeof(float) * 256 * 16);
    double t0, c0, step, cstep, mm[5] = {0}, att = 0, rows = 0;
    int it, l, i, k;
    const int C = w->cfg.width, nt = pt_threads(ctx);
    memset(&d, 0, sizeof d);
    d.max_seqs = B, d.kv_tokens = (int64_t)B * (n + 64), d.kv_type = g_kv;
    inf = pt_infer_new(ctx, w, &d);
    for (i = 0; i < n * B; i++) ids[i] = (int32_t)((i * 13 + 5) % 256);
    for (k = 0; k < B; k++) seq[k] = pt_infer_seq_new(inf), ntok[k] = n, toks[k] = 7;
    pt_infer_step(inf, B, seq, ntok, ids, lg, 0);
    for (k = 0; k < B; k++) ntok[k] = 1;
    /* whole steps: append then drop one token (the lengths stay n) */
    t0 = pt_time(), c0 = cpu_now();
    for (it = 0; it < iters; it++) {
        pt_infer_step(inf, B, seq, ntok, toks, lg, 0);
        for (k = 0; k < B; k++) inf->seq[seq[k]].len--;
    }
    step = (pt_time() - t0) / iters, cstep = (cpu_now() - c0) / iters;
    for (it = 0; it < iters; it++) {
        /* the matrix products alone at M = B */
        for (l = 0; l < w->cfg.layers; l++) {
            const pt_gpt_layer_w *lw = &w->layer[l];
            c0 = cpu_now(), pt__qmm(ctx, &lw->qkv, inf->h, inf->ldc, B, lw->qkv_b, inf->qkv, inf->ld3), mm[0] += cpu_now() - c0;
            c0 = cpu_now(), pt__qmm(ctx, &lw->proj, inf->att, inf->ldc, B, lw->proj_b, inf->h, inf->ldc), mm[1] += cpu_now() - c0;
            c0 = cpu_now(), pt__qmm(ctx, &lw->fc, inf->h, inf->ldc, B, lw->fc_b, inf->ff, inf->ld4), mm[2] += cpu_now() - c0;
            c0 = cpu_now(), pt__qmm(ctx, &lw->fproj, inf->ff, inf->ld4, B, lw->fproj_b, inf->h, inf->ldc), mm[3] += cpu_now() - c0;
        }
        {
            pt_qmat hv = w->head;
            hv.rows = w->cfg.vocab;
            c0 = cpu_now(), pt__qmm(ctx, &hv, inf->h, inf->ldc, B, NULL, lg, w->cfg.vocab), mm[4] += cpu_now() - c0;
        }
        /* attention of one query per sequence over n + 1 positions, every layer */
        for (k = 0; k < B; k++) inf->st_seq[k] = seq[k], inf->st_ntok[k] = 1, inf->st_row0[k] = k, inf->st_len0[k] = n;
        c0 = cpu_now();
        for (l = 0; l < w->cfg.layers; l++) pt__inf_attention(inf, l, 0, B); /* sequences [0, B) */
        att += cpu_now() - c0;
        /* the row-wise work: 2 layernorms, GELU, 2 residual adds a layer and row, the final norm */
        c0 = cpu_now();
        for (k = 0; k < B; k++) {
            for (l = 0; l < w->cfg.layers; l++) {
                const pt_gpt_layer_w *lw = &w->layer[l];
                pt__inf_ln(inf->x + k * inf->ldc, inf->h + k * inf->ldc, lw->ln1_w, lw->ln1_b, C);
                pt__inf_ln(inf->x + k * inf->ldc, inf->h + k * inf->ldc, lw->ln2_w, lw->ln2_b, C);
                pt__inf_add(inf->x + k * inf->ldc, inf->h + k * inf->ldc, C);
                pt__inf_add(inf->x + k * inf->ldc, inf->h + k * inf->ldc, C);
                pt__inf_gelu(inf->ff + k * inf->ld4, 4 * C);
            }
            pt__inf_ln(inf->x + k * inf->ldc, inf->h + k * inf->ldc, w->lnf_w, w->lnf_b, C);
        }
        rows += cpu_now() - c0;
    }
    {
        /* CPU seconds a step, then each piece as the wall time it takes on the threads that run it; rest:
           the CPU time of everything else (the KV writes, the embedding, validation, the fork and join) */
        const int ta = (int64_t)B * (n + 1) * C / 8 >= 32768 ? nt : 1, tr = 3 * B * C >= 32768 ? nt : 1;
        double rest = cstep * iters - att - rows;
        for (i = 0; i < 5; i++) rest -= mm[i], mm[i] /= iters * (double)nt;
        att /= iters * (double)ta, rows /= iters * (double)tr, rest /= iters;
        printf("{\"bench\":\"infer_profile\",\"type\":\"%s\",\"kv\":\"%s\",\"batch\":%d,\"context\":%d,\"step_wall_ms\":%.3f,\"step_cpu_ms\":%.3f,"
               "\"qkv_ms\":%.3f,\"proj_ms\":%.3f,\"fc_ms\":%.3f,\"fproj_ms\":%.3f,\"head_ms\":%.3f,\"attention_ms\":%.3f,\"rows_ms\":%.3f,"
               "\"rest_cpu_ms\":%.3f,\"load\":%.1f}\n",
               tn, pt_wtype_name((pt_wtype)g_kv), B, n, step * 1e3, cstep * 1e3, mm[0] * 1e3, mm[1] * 1e3, mm[2] * 1e3, mm[3] * 1e3, mm[4] * 1e3,
               att * 1e3, rows * 1e3, rest * 1e3, bench_loadavg());
    }
    fflush(stdout);
    pt_infer_free(inf);
    free(ids), free(lg);
}

int main(int argc, char **argv) {
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m;
    const char *types = "f32";
    int threads = 2, ndec = 128, reps = 3, a;
    char buf[256], *tok;
    for (a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--threads")) threads = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--types")) types = argv[a + 1];
        else if (!strcmp(argv[a], "--decode")) ndec = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--reps")) reps = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--kv")) g_kv = !strcmp(argv[a + 1], "f16") ? PT_W_F16 : PT_W_F32;
    }
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = threads;
    ctx = pt_init(&desc);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = 1024, cfg.layers = 12, cfg.width = 768, cfg.heads = 12;
    m = pt_gpt_new(ctx, &cfg);
    if (!m) {
        fprintf(stderr, "bench_infer: %s\n", pt_error(ctx));
        return 1;
    }
    snprintf(buf, sizeof buf, "%s", types);
    for (tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int t = !strcmp(tok, "f32") ? PT_W_F32 : !strcmp(tok, "q8_0") ? PT_W_Q8_0 : !strcmp(tok, "q4_0") ? PT_W_Q4_0 : !strcmp(tok, "f16") ? PT_W_F16
                                                                                                                           : !strcmp(tok, "bf16") ? PT_W_BF16 : -1;
        pt_gpt_weights *w = t >= 0 ? pt_gpt_weights_from(m, (pt_wtype)t) : NULL;
        static const int bs[3] = {1, 4, 16};
        int b;
        if (!w) {
            fprintf(stderr, "bench_infer: type %s: %s\n", tok, pt_error(ctx));
            pt_error_clear(ctx);
            continue;
        }
        for (b = 0; b < 3; b++) {
            double cps = 0, tps = decode_tps(ctx, w, bs[b], ndec, reps, &cps);
            printf("{\"bench\":\"infer_decode\",\"type\":\"%s\",\"kv\":\"%s\",\"threads\":%d,\"batch\":%d,\"decode_tokens\":%d,\"tokens_per_s\":%.1f,"
                   "\"cpu_tokens_per_s\":%.1f,\"load\":%.1f}\n", tok, pt_wtype_name((pt_wtype)g_kv), threads, bs[b], ndec, tps, cps, bench_loadavg());
            fflush(stdout);
        }
        {
            double cps = 0, tps = prefill_tps(ctx, w, 256, reps, &cps);
            printf("{\"bench\":\"infer_prefill\",\"type\":\"%s\",\"kv\":\"%s\",\"threads\":%d,\"prompt\":256,\"tokens_per_s\":%.1f,\"cpu_tokens_per_s\":%.1f,"
                   "\"load\":%.1f}\n", tok, pt_wtype_name((pt_wtype)g_kv), threads, tps, cps, bench_loadavg());
            fflush(stdout);
        }
        profile(ctx, w, tok, 64, 1, 20);
        profile(ctx, w, tok, 512, 1, 20);
        profile(ctx, w, tok, 64, 16, 5);
        pt_gpt_weights_free(w);
    }
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return 0;
}

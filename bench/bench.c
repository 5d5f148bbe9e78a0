/* bench.c - ptrain.h benchmarks, one JSON line per measurement.

   bench gemm [n]        ptrain's SGEMM vs OpenBLAS cblas_sgemm at n x n x n, same threads, same run
   bench gemm_bf16 [reps] the bf16 GEMM (pt__gemm_bf16, its auto-selected kernel) vs ptrain's SGEMM at the
                         GPT config C linear-layer shapes (M = 512 rows: X[M,K] W[N,K]^T), 1 and 2 threads;
                         each rep times both, alternately; medians of reps (default 7; 3 at the vocab shape)
   bench monitor A [pairs] [steps]  the overhead of pt_monitor (>>monitor: a JSON line per step to a file)
                         on config A: `pairs` (5) pairs of `steps` (20) steps without and with it, interleaved;
                         fraction = median over pairs of (with - without) / without
   bench gpt A|B|C       one GPT training step (median of >= 5 after 2 warm-ups), with the n=1024
                         OpenBLAS rate measured in the same process after the training steps (so
                         OpenBLAS's buffers do not count in peak_rss_mb)
   bench precision A|B|C [rounds] [steps]  the training step in f32, bf16 and fp16 precision (pt_desc.precision):
                         three models from the same init, `rounds` (3) interleaved blocks of `steps` (3) steps
                         each; medians, ratio_vs_f32 = f32's step time over this one's

   FLOPs per training step = 6*P*B*T + 12*L*B*T^2*C, P = weights used in matmuls (blocks + LM head).
   Build: cc -O3 -march=native -fopenmp -I. bench/bench.c -o build/bench -lopenblas -lm */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"
/* the context whose thread team runs a bare workspace's threaded GEMM (4 threads; freed at exit) */
static pt_ctx *g_team_ctx;
static void team_ctx_free(void) { pt_shutdown(g_team_ctx); }
static pt_ctx *team_ctx(void) {
    if (!g_team_ctx) {
        pt_desc d;
        memset(&d, 0, sizeof d);
        d.threads = 4;
        d.log_level = PT_LOG_WARN;
        g_team_ctx = pt_init(&d);
        atexit(team_ctx_free);
    }
    return g_team_ctx;
}

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"

/* GFLOP/s of OpenBLAS sgemm at n, median of reps */
static double openblas_gflops(int n, int threads, int reps) {
    float *A = (float *)malloc(sizeof(float) * (size_t)n * n), *B = (float *)malloc(sizeof(float) * (size_t)n * n),
          *C = (float *)malloc(sizeof(float) * (size_t)n * n);
    double t[32];
    int i;
    openblas_set_num_threads(threads);
    for (i = 0; i < n * n; i++) A[i] = (float)(i % 7) * 0.1f, B[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
    for (i = 0; i < reps; i++) {
        double t0 = pt_time();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
        t[i] = pt_time() - t0;
    }
    free(A), free(B), free(C);
    return 2.0 * n * n * (double)n / median(t, reps) * 1e-9;
}

/* GFLOP/s of ptrain's matmul op (the path training uses) at n, median of reps */
static double ptrain_gflops(pt_ctx *ctx, int n, int ta, int tb, int reps) {
    pt_graph *g = pt_graph_new(ctx), *gc = pt_graph_new(ctx); /* inputs; the product, reset each rep as in training */
    pt_tensor *a, *b;
    double t[32];
    int i;
    pt_graph_set_grad(g, 0);
    pt_graph_set_grad(gc, 0);
    a = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0);
    b = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0);
    for (i = 0; i < n * n; i++) pt_f32(a)[i] = (float)(i % 7) * 0.1f, pt_f32(b)[i] = (float)(i % 5) * 0.1f;
    for (i = -2; i < reps; i++) {
        pt_tensor *c;
        double t0;
        pt_graph_reset(gc);
        t0 = pt_time();
        c = pt_matmul(gc, a, b, ta, tb);
        if (i >= 0) t[i] = pt_time() - t0;
        (void)c;
    }
    pt_graph_free(gc);
    pt_graph_free(g);
    return 2.0 * n * n * (double)n / median(t, reps) * 1e-9;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int bench_gemm(int n) {
    pt_ctx *ctx = pt_init(NULL);
    int th, ta, tb;
    if (!ctx) return 1;
    th = pt_threads(ctx);
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++) {
            double ob = openblas_gflops(n, th, 9), pt = ptrain_gflops(ctx, n, ta, tb, 9);
            printf("{\"bench\":\"gemm\",\"n\":%d,\"ta\":%d,\"tb\":%d,\"threads\":%d,\"ptrain_gflops\":%.1f,\"openblas_gflops\":%.1f,\"ratio\":%.3f}\n", n,
                   ta, tb, th, pt, ob, pt / ob);
            fflush(stdout);
        }
    pt_shutdown(ctx);
    return 0;
}

static const char *gemm_kern_name(int k) {
    static const char *names[] = {"auto", "c", "avx2", "avx512", "avx512_bf16"};
    return k >= 0 && k <= PT__GEMM_KERN_AVX512BF16 ? names[k] : "?";
}

/* seconds of one product on ws: pt__sgemm on the f32 operands (flags < 0), else pt__gemm_bf16 with
   flags on the f32 or bf16 copies (af/a16, bf/b16); A is M x K, B is N x K (used transposed) */
static double gemm_time(pt__gemm_ws *ws, int flags, int M, int N, int K, const float *af, const uint16_t *a16,
                        const float *bf, const uint16_t *b16, void *C) {
    double t0 = pt_time();
    if (flags < 0) pt__sgemm(ws, 0, 1, 1, M, N, K, 1.0f, af, K, 0, bf, K, 0, 0.0f, (float *)C, N, 0);
    else
        pt__gemm_bf16(ws, flags, 0, 1, 1, M, N, K, 1.0f, flags & PT__GEMM_A_BF16 ? (const void *)a16 : (const void *)af, K, 0,
                      flags & PT__GEMM_B_BF16 ? (const void *)b16 : (const void *)bf, K, 0, 0.0f, C, N, 0);
    return pt_time() - t0;
}

static int bench_gemm_bf16(int reps) {
    /* config C (width 768, MLP 3072, vocab 50304) at 512 rows; the operand storage of each line */
    static const struct { int m, n, k, flags; } sh[] = {
        {512, 768, 768, 3}, {512, 3072, 768, 3}, {512, 768, 3072, 3}, {512, 50304, 768, 3},
        {512, 3072, 768, PT__GEMM_B_BF16}, {512, 3072, 768, 7}};
    size_t s;
    int th;
    if (reps < 1 || reps > 32) reps = 7;
    for (s = 0; s < sizeof(sh) / sizeof(sh[0]); s++) {
        const int M = sh[s].m, N = sh[s].n, K = sh[s].k, fl = sh[s].flags, nr = N > 10000 && reps > 3 ? 3 : reps;
        float *af = (float *)malloc(sizeof(float) * (size_t)M * K), *bf = (float *)malloc(sizeof(float) * (size_t)N * K);
        float *C = (float *)malloc(sizeof(float) * (size_t)M * N);
        uint16_t *a16 = (uint16_t *)malloc(2 * (size_t)M * K), *b16 = (uint16_t *)malloc(2 * (size_t)N * K);
        size_t i;
        if (!af || !bf || !C || !a16 || !b16) return 1;
        for (i = 0; i < (size_t)M * K; i++) af[i] = (float)(i % 7) * 0.1f - 0.3f;
        for (i = 0; i < (size_t)N * K; i++) bf[i] = (float)(i % 5) * 0.1f - 0.2f;
        pt__bf16_from_f32_n(af, a16, (int64_t)M * K);
        pt__bf16_from_f32_n(bf, b16, (int64_t)N * K);
        for (th = 1; th <= 2; th++) {
            pt__gemm_ws ws;
            double t16[32], t32[32], flop = 2.0 * M * N * (double)K, g16, g32;
            int r;
            memset(&ws, 0, sizeof(ws));
            ws.nthreads = th;
            ws.ctx = team_ctx();
            gemm_time(&ws, fl, M, N, K, af, a16, bf, b16, C); /* warm-up: workspace, kernel choice */
            gemm_time(&ws, -1, M, N, K, af, a16, bf, b16, C);
            for (r = 0; r < nr; r++) {
                t32[r] = gemm_time(&ws, -1, M, N, K, af, a16, bf, b16, C);
                t16[r] = gemm_time(&ws, fl, M, N, K, af, a16, bf, b16, C);
            }
            g16 = flop / median(t16, nr) * 1e-9;
            g32 = flop / median(t32, nr) * 1e-9;
            printf("{\"bench\":\"gemm_bf16\",\"m\":%d,\"n\":%d,\"k\":%d,\"ta\":0,\"tb\":1,\"a\":\"%s\",\"b\":\"%s\",\"c\":\"%s\","
                   "\"threads\":%d,\"kernel\":\"%s\",\"f32_kernel\":\"%s\",\"reps\":%d,\"gflops\":%.1f,\"f32_gflops\":%.1f,\"ratio\":%.3f}\n",
                   M, N, K, fl & PT__GEMM_A_BF16 ? "bf16" : "f32", fl & PT__GEMM_B_BF16 ? "bf16" : "f32",
                   fl & PT__GEMM_C_BF16 ? "bf16" : "f32", th, gemm_kern_name(ws.kern_bf16), gemm_kern_name(ws.kern), nr, g16,
                   g32, g16 / g32);
            fflush(stdout);
            pt__gemm_ws_free(&ws);
        }
        free(af), free(bf), free(C), free(a16), free(b16);
    }
    return 0;
}

/* one training step of the GPT on the batch ids (B x T inputs, targets shifted by one row's worth):
   the loss in *loss, returns the gradient norm pt_optim_step reports, NAN on error (printed) */
static float gpt_step(pt_ctx *ctx, pt_graph *g, pt_gpt *m, pt_optim *opt, const int32_t *ids, int B, int T, float *loss) {
    pt_tensor *l = gpt_batch_loss(g, m, ids, ids + B, B, T);
    pt_zero_grad(ctx);
    if (!l || pt_backward(g, l) != PT_OK) {
        fprintf(stderr, "bench: %s\n", pt_error(ctx));
        return NAN;
    }
    *loss = pt_item(l);
    return pt_optim_step(opt, 1e-4f);
}

/* a GPT config (A, B, C) ready to train: context, model, AdamW, graph, one random batch */
typedef struct gpt_run {
    pt_gpt_config cfg;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_graph *g;
    int32_t *ids;
    int B, T;
} gpt_run;
static void gpt_run_free(gpt_run *r) {
    free(r->ids);
    pt_optim_free(r->opt);
    pt_graph_free(r->g);
    pt_gpt_free(r->m);
    pt_shutdown(r->ctx);
}
/* 0, 1 (out of memory or a library error, printed) or 2 (unknown config); matrix products in precision prec */
static int gpt_run_new_p(gpt_run *r, const char *which, pt_dtype prec) {
    pt_desc d;
    pt_optim_desc od;
    pt_gpt_config *cfg = &r->cfg;
    int i;
    memset(r, 0, sizeof *r);
    if (!strcmp(which, "A")) cfg->vocab = 256, cfg->layers = 4, cfg->width = 256, cfg->heads = 8, r->B = 8, r->T = 256;
    else if (!strcmp(which, "B")) cfg->vocab = 512, cfg->layers = 6, cfg->width = 384, cfg->heads = 6, r->B = 8, r->T = 256;
    else if (!strcmp(which, "C")) cfg->vocab = 50257, cfg->vocab_padded = 50304, cfg->layers = 12, cfg->width = 768, cfg->heads = 12, r->B = 4, r->T = 64;
    else {
        fprintf(stderr, "bench: unknown GPT config '%s' (expected A, B or C)\n", which);
        return 2;
    }
    cfg->max_seq = !strcmp(which, "C") ? 1024 : r->T;
    memset(&d, 0, sizeof d);
    d.seed = 1, d.precision = prec;
    if (!(r->ctx = pt_init(&d))) return 1;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    r->ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(r->B * (r->T + 1)));
    if (!(r->m = pt_gpt_new(r->ctx, cfg)) || !(r->opt = pt_optim_new(r->ctx, &od)) || !(r->g = pt_graph_new(r->ctx)) || !r->ids) {
        fprintf(stderr, "bench: %s\n", pt_error(r->ctx));
        gpt_run_free(r);
        return 1;
    }
    {
        pt_rng rng = pt_rng_seed(7);
        for (i = 0; i < r->B * (r->T + 1); i++) r->ids[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg->vocab);
    }
    return 0;
}

static int gpt_run_new(gpt_run *r, const char *which) { return gpt_run_new_p(r, which, PT_F32); }

static int bench_gpt(const char *which, int steps) {
    gpt_run r;
    int s, rc = gpt_run_new(&r, which);
    double t[64], flops, med, rss;
    if (rc) return rc;
    if (steps > 64) steps = 64;
    for (s = -2; s < steps; s++) {
        double t0 = pt_time();
        float loss;
        if (isnan(gpt_step(r.ctx, r.g, r.m, r.opt, r.ids, r.B, r.T, &loss))) return 1;
        if (s >= 0) t[s] = pt_time() - t0;
    }
    med = median(t, steps);
    rss = peak_rss_mb();
    flops = pt_gpt_flops(&r.cfg, r.B, r.T);
    printf("{\"bench\":\"gpt_train\",\"config\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"B\":%d,\"T\":%d,\"step_s\":%.4f,\"tokens_per_s\":%.1f,"
           "\"step_gflops\":%.1f,\"openblas_gflops\":%.1f,\"peak_rss_mb\":%.1f,\"params\":%lld,\"mem_peak_mb\":%.1f}\n",
           which, pt_backend_name(r.ctx), pt_threads(r.ctx), r.B, r.T, med, r.B * r.T / med, flops / med * 1e-9, openblas_gflops(1024, pt_threads(r.ctx), 9),
           rss, (long long)pt_param_numel(r.ctx), pt_mem(r.ctx).peak_total / 1048576.0);
    fflush(stdout);
    gpt_run_free(&r);
    return 0;
}

/* bf16 (and fp16) mixed precision vs f32 on a GPT config: one model per precision, from the same init and
   batch, trained in interleaved blocks of `steps` steps (`rounds` of them, after 2 warm-up steps each), so
   both see the same machine; the median step of each, one line per precision (ratio: tokens/s over f32's) */
static int bench_precision(const char *which, int rounds, int steps) {
    static const pt_dtype prec[3] = {PT_F32, PT_BF16, PT_F16};
    static const char *name[3] = {"f32", "bf16", "fp16"};
    gpt_run r[3];
    double t[3][256], med[3], loss0[3], loss1[3];
    int p, k, s, n = 0, rc = 0, made = 0;
    if (rounds < 1 || steps < 1 || rounds * steps > 256) {
        fprintf(stderr, "bench precision: 1..256 steps in all\n");
        return 2;
    }
    memset(r, 0, sizeof r);
    for (p = 0; p < 3 && !rc; p++)
        if (!(rc = gpt_run_new_p(&r[p], which, prec[p]))) made++; /* a failed one has freed itself */
    for (p = 0; p < 3 && !rc; p++)
        for (s = 0; s < 2 && !rc; s++) { /* warm-up: workspaces grown, pages touched */
            float l;
            if (isnan(gpt_step(r[p].ctx, r[p].g, r[p].m, r[p].opt, r[p].ids, r[p].B, r[p].T, &l))) rc = 1;
            if (s == 0) loss0[p] = l;
        }
    for (k = 0; k < rounds && !rc; k++, n += steps)
        for (p = 0; p < 3 && !rc; p++)
            for (s = 0; s < steps && !rc; s++) {
                double t0 = pt_time();
                float l;
                if (isnan(gpt_step(r[p].ctx, r[p].g, r[p].m, r[p].opt, r[p].ids, r[p].B, r[p].T, &l))) rc = 1;
                t[p][n + s] = pt_time() - t0;
                loss1[p] = l;
            }
    for (p = 0; p < 3 && !rc; p++) med[p] = median(t[p], n);
    for (p = 0; p < 3 && !rc; p++)
        printf("{\"bench\":\"precision\",\"config\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"B\":%d,\"T\":%d,\"steps\":%d,"
               "\"step_s\":%.4f,\"tokens_per_s\":%.1f,\"ratio_vs_f32\":%.3f,\"loss_first\":%.6f,\"loss_last\":%.6f}\n",
               which, name[p], pt_threads(r[p].ctx), r[p].B, r[p].T, n, med[p], r[p].B * r[p].T / med[p], med[0] / med[p],
               loss0[p], loss1[p]);
    if (rc) fprintf(stderr, "bench precision: a step failed\n");
    fflush(stdout);
    for (p = 0; p < made; p++) gpt_run_free(&r[p]);
    return rc;
}

/* the overhead of the monitor on a GPT config: pairs of `steps`-step blocks without and with it */
static int bench_monitor(const char *which, int pairs, int steps) {
    gpt_run r;
    pt_monitor_desc md;
    pt_monitor *mon;
    int p, s, w, rc;
    double frac[64], tw[64], two[64];
    if (strcmp(which, "A") || pairs < 1 || pairs > 64 || steps < 1) {
        fprintf(stderr, "bench monitor: config A, 1..64 pairs\n");
        return 2;
    }
    if ((rc = gpt_run_new(&r, which)) != 0) return rc;
    memset(&md, 0, sizeof md);
    md.log_path = "build/bench_monitor.jsonl", md.model = &r.cfg, md.seq = r.T, md.progress = -1;
    if (!(mon = pt_monitor_new(r.ctx, NULL, &md))) {
        fprintf(stderr, "bench monitor: %s\n", pt_error(r.ctx));
        gpt_run_free(&r);
        return 1;
    }
    for (p = -1; p < pairs; p++) /* pair -1: warm-up */
        for (w = 0; w < 2; w++) { /* without, then with */
            double t0 = pt_time();
            for (s = 0; s < steps; s++) {
                float loss, gn = gpt_step(r.ctx, r.g, r.m, r.opt, r.ids, r.B, r.T, &loss);
                if (isnan(gn)) return 1;
                if (w) {
                    pt_monitor_step ms;
                    ms.loss = loss, ms.grad_norm = gn, ms.lr = 1e-4f, ms.tokens = (int64_t)r.B * r.T;
                    pt_monitor_step_end(mon, &ms);
                }
            }
            if (p >= 0) *(w ? &tw[p] : &two[p]) = pt_time() - t0;
            if (w && p >= 0) frac[p] = (tw[p] - two[p]) / two[p];
        }
    printf("{\"bench\":\"monitor_overhead\",\"config\":\"%s\",\"threads\":%d,\"pairs\":%d,\"steps_per_run\":%d,\"step_s_without\":%.5f,\"step_s_with\":%.5f,"
           "\"fraction\":%.5f}\n",
           which, pt_threads(r.ctx), pairs, steps, median(two, pairs) / steps, median(tw, pairs) / steps, median(frac, pairs));
    fflush(stdout);
    pt_monitor_free(mon);
    gpt_run_free(&r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "monitor")) return bench_monitor(argv[2], argc >= 4 ? atoi(argv[3]) : 5, argc >= 5 ? atoi(argv[4]) : 20);
    if (argc >= 2 && !strcmp(argv[1], "gemm")) return bench_gemm(argc >= 3 ? atoi(argv[2]) : 1024);
    if (argc >= 2 && !strcmp(argv[1], "gemm_bf16")) return bench_gemm_bf16(argc >= 3 ? atoi(argv[2]) : 7);
    if (argc >= 3 && !strcmp(argv[1], "gpt")) return bench_gpt(argv[2], argc >= 4 ? atoi(argv[3]) : 5);
    if (argc >= 3 && !strcmp(argv[1], "precision"))
        return bench_precision(argv[2], argc >= 4 ? atoi(argv[3]) : 3, argc >= 5 ? atoi(argv[4]) : 3);
    fprintf(stderr, "usage: bench gemm [n] | bench gemm_bf16 [reps] | bench gpt A|B|C [steps] | bench monitor A [pairs] [steps]\n");
    return 2;
}

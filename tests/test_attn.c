/* test_attn.c - the CPU causal self-attention kernels of ptrain.h (pt__cpu_attn_fwd / _bwd) against a
   double-precision reference that materializes the T x T scores: every kernel the CPU supports
   (ctx->attn_kernel: 1 = C, 2 = AVX-512, 3 = C compiled for AVX2), 1 and 2 threads, large scores
   (stability), bit-identical results for 1, 2 and 3 threads, finite differences through the float
   forward, no allocation in the steady state, and the C % H != 0 error.
   Usage: test_attn [--quick]   (--quick: accepted for the sanitizer run; every case is small enough
                                 to run in full there, so it changes nothing)
          test_attn bench [c|avx2]   (benchmark, not part of the suite: prints GFLOP/s) */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"
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

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) { /* uniform [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* ---- a context from pt_init and hand-made tensors ------------------------------------------------ */
static void quiet_error(void *user, pt_status st, const char *msg) { (void)user; (void)st; (void)msg; }
static pt_ctx *new_ctx(int nthreads, int kernel) {
    pt_desc d;
    pt_ctx *ctx;
    memset(&d, 0, sizeof d);
    d.threads = nthreads;
    d.on_error = quiet_error;
    d.log_level = PT_LOG_WARN;
    ctx = pt_init(&d);
    if (!ctx) {
        printf("FAIL pt_init returned NULL\n");
        exit(1);
    }
    ctx->attn_kernel = kernel;
    return ctx;
}

typedef struct ttensor {
    pt_storage st;
    pt_tensor t;
} ttensor;
static float *tt_new(ttensor *x, int64_t n) {
    memset(x, 0, sizeof *x);
    x->st.raw = x->st.host = malloc((size_t)n * sizeof(float) + 1);
    x->st.bytes = n * (int64_t)sizeof(float);
    x->t.st = &x->st;
    x->t.ndim = 1;
    x->t.shape[0] = n;
    return (float *)x->st.host;
}
static void tt_free(ttensor *x) { free(x->st.raw); }

/* ---- double-precision reference materializing T×T ---------------------------------------------- */
static void ref_attn(int B, int T, int C, int H, const float *qkv, const float *dout, double *out, double *lse,
                     double *dqkv) {
    const int hs = C / H;
    const int64_t ld3 = 3 * (int64_t)C;
    const double scale = 1.0 / sqrt((double)hs);
    double *P = (double *)malloc(sizeof(double) * (size_t)T * T), *dP = (double *)malloc(sizeof(double) * (size_t)T * T);
    int b, h, i, j, d;
    memset(dqkv, 0, sizeof(double) * (size_t)B * T * ld3);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            const float *base = qkv + (int64_t)b * T * ld3 + h * hs;
            for (i = 0; i < T; i++) {
                double m = -1e300, s = 0;
                for (j = 0; j <= i; j++) {
                    double acc = 0;
                    for (d = 0; d < hs; d++) acc += (double)base[i * ld3 + d] * base[j * ld3 + C + d];
                    P[i * T + j] = acc * scale;
                    if (P[i * T + j] > m) m = P[i * T + j];
                }
                for (j = 0; j <= i; j++) s += exp(P[i * T + j] - m);
                lse[((int64_t)b * H + h) * T + i] = m + log(s);
                for (j = 0; j <= i; j++) P[i * T + j] = exp(P[i * T + j] - m) / s;
                for (d = 0; d < hs; d++) {
                    double acc = 0;
                    for (j = 0; j <= i; j++) acc += P[i * T + j] * base[j * ld3 + 2 * C + d];
                    out[((int64_t)b * T + i) * C + h * hs + d] = acc;
                }
            }
            if (!dout) continue;
            for (i = 0; i < T; i++) {
                const float *go = dout + ((int64_t)b * T + i) * C + h * hs;
                double Di = 0;
                for (j = 0; j <= i; j++) {
                    double acc = 0;
                    for (d = 0; d < hs; d++) acc += (double)go[d] * base[j * ld3 + 2 * C + d];
                    dP[i * T + j] = acc;
                    Di += acc * P[i * T + j];
                }
                for (j = 0; j <= i; j++) {
                    const double ds = P[i * T + j] * (dP[i * T + j] - Di) * scale;
                    double *dq = dqkv + ((int64_t)b * T + i) * ld3 + h * hs;
                    double *dk = dqkv + ((int64_t)b * T + j) * ld3 + C + h * hs;
                    double *dv = dqkv + ((int64_t)b * T + j) * ld3 + 2 * C + h * hs;
                    for (d = 0; d < hs; d++) {
                        dq[d] += ds * base[j * ld3 + C + d];
                        dk[d] += ds * base[i * ld3 + d];
                        dv[d] += P[i * T + j] * go[d];
                    }
                }
            }
        }
    free(P);
    free(dP);
}

static double max_rel_err(const float *a, const double *r, int64_t n) {
    double e = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]) / (1.0 + fabs(r[i]));
        if (!(d <= e)) e = d; /* NaN-propagating */
    }
    return e;
}

static const char *kname(int k) { return k == 1 ? "C" : k == 2 ? "avx512" : k == 3 ? "avx2" : "auto"; }

/* forward + backward against the reference; kernel k; values scaled by amp */
static void run_case(int B, int T, int C, int H, int k, int nthreads, float amp) {
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C, nl = (int64_t)B * H * T;
    ttensor tq, to, tl, tdo, tdq;
    float *q = tt_new(&tq, nq), *o = tt_new(&to, no), *l = tt_new(&tl, nl), *go = tt_new(&tdo, no);
    float *dq = tt_new(&tdq, nq), *dq0 = (float *)malloc(sizeof(float) * (size_t)nq);
    double *ro = (double *)malloc(sizeof(double) * (size_t)no), *rl = (double *)malloc(sizeof(double) * (size_t)nl);
    double *rdq = (double *)malloc(sizeof(double) * (size_t)nq);
    double tol = amp > 2 ? 2e-3 : 2e-4, eo, el, ed;
    int64_t i;
    pt_ctx *ctx = new_ctx(nthreads, k);
    for (i = 0; i < nq; i++) q[i] = amp * frand();
    for (i = 0; i < no; i++) go[i] = frand();
    for (i = 0; i < nq; i++) dq[i] = dq0[i] = frand();
    for (i = 0; i < no; i++) o[i] = NAN;
    pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
    pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
    ref_attn(B, T, C, H, q, go, ro, rl, rdq);
    for (i = 0; i < nq; i++) rdq[i] += dq0[i];
    eo = max_rel_err(o, ro, no);
    el = max_rel_err(l, rl, nl);
    ed = max_rel_err(dq, rdq, nq);
    CHECKF(eo <= tol && el <= tol && ed <= tol && ctx->status == PT_OK,
           tu_name("attn B=%d T=%d C=%d H=%d kern=%s threads=%d amp=%g", B, T, C, H, kname(k), nthreads, (double)amp),
           "err out %.3g lse %.3g dqkv %.3g (tol %.3g), status %d", eo, el, ed, tol, (int)ctx->status);
    pt_shutdown(ctx);
    tt_free(&tq); tt_free(&to); tt_free(&tl); tt_free(&tdo); tt_free(&tdq);
    free(dq0); free(ro); free(rl); free(rdq);
}

/* bitwise identical results for 1 and 2 (and 3) threads */
static void run_determinism(int B, int T, int C, int H, int k) {
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C, nl = (int64_t)B * H * T;
    float *o1 = (float *)malloc(sizeof(float) * (size_t)no), *l1 = (float *)malloc(sizeof(float) * (size_t)nl);
    float *d1 = (float *)malloc(sizeof(float) * (size_t)nq);
    ttensor tq, to, tl, tdo, tdq;
    float *q = tt_new(&tq, nq), *o = tt_new(&to, no), *l = tt_new(&tl, nl), *go = tt_new(&tdo, no);
    float *dq = tt_new(&tdq, nq);
    int64_t i;
    int nt, same = 1;
    for (i = 0; i < nq; i++) q[i] = frand();
    for (i = 0; i < no; i++) go[i] = frand();
    for (nt = 1; nt <= 3; nt++) {
        pt_ctx *ctx = new_ctx(nt, k);
        for (i = 0; i < nq; i++) dq[i] = 0.25f;
        pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
        pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
        if (nt == 1) {
            memcpy(o1, o, sizeof(float) * (size_t)no);
            memcpy(l1, l, sizeof(float) * (size_t)nl);
            memcpy(d1, dq, sizeof(float) * (size_t)nq);
        } else {
            same &= !memcmp(o1, o, sizeof(float) * (size_t)no) && !memcmp(l1, l, sizeof(float) * (size_t)nl) &&
                    !memcmp(d1, dq, sizeof(float) * (size_t)nq);
        }
        pt_shutdown(ctx);
    }
    CHECKF(same, tu_name("attn determinism B=%d T=%d C=%d H=%d kern=%s", B, T, C, H, kname(k)),
           "1/2/3 threads differ");
    tt_free(&tq); tt_free(&to); tt_free(&tl); tt_free(&tdo); tt_free(&tdq);
    free(o1); free(l1); free(d1);
}

/* finite differences of loss = sum(out * W) through the float forward */
static void run_fd(int B, int T, int C, int H, int k) {
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C, nl = (int64_t)B * H * T;
    ttensor tq, to, tl, tdo, tdq;
    float *q = tt_new(&tq, nq), *o = tt_new(&to, no), *w = tt_new(&tdo, no);
    float *dq = tt_new(&tdq, nq);
    const float eps = 1e-2f;
    double worst = 0;
    int64_t i, j;
    pt_ctx *ctx = new_ctx(2, k);
    tt_new(&tl, nl);
    for (i = 0; i < nq; i++) q[i] = frand();
    for (i = 0; i < no; i++) w[i] = frand();
    for (i = 0; i < nq; i++) dq[i] = 0;
    pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
    pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
    for (i = 0; i < nq; i++) {
        const float x = q[i];
        double lp = 0, lm = 0, num, e;
        q[i] = x + eps;
        pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
        for (j = 0; j < no; j++) lp += (double)o[j] * w[j];
        q[i] = x - eps;
        pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
        for (j = 0; j < no; j++) lm += (double)o[j] * w[j];
        q[i] = x;
        num = (lp - lm) / (2.0 * (double)eps);
        e = fabs(num - dq[i]) / (1.0 + fabs(num));
        if (!(e <= worst)) worst = e;
    }
    CHECKF(worst < 2e-3, tu_name("attn finite differences B=%d T=%d C=%d H=%d kern=%s", B, T, C, H, kname(k)),
           "worst %.3g", worst);
    pt_shutdown(ctx);
    tt_free(&tq); tt_free(&to); tt_free(&tl); tt_free(&tdo); tt_free(&tdq);
}

/* steady state: no allocation after the first call; bad shape is an error */
static void run_misc(void) {
    const int B = 2, T = 70, C = 64, H = 2;
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C, nl = (int64_t)B * H * T;
    ttensor tq, to, tl, tdo, tdq;
    float *q = tt_new(&tq, nq), *go = tt_new(&tdo, no), *dq = tt_new(&tdq, nq);
    int64_t i, n1;
    pt_ctx *ctx = new_ctx(2, 0);
    tt_new(&to, no);
    tt_new(&tl, nl);
    for (i = 0; i < nq; i++) q[i] = frand(), dq[i] = 0;
    for (i = 0; i < no; i++) go[i] = frand();
    pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
    pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
    n1 = ctx->nallocs;
    for (i = 0; i < 3; i++) {
        pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
        pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
    }
    CHECKF(ctx->nallocs == n1 && ctx->status == PT_OK, "attn steady state does not allocate",
           "allocations %lld -> %lld, status %d", (long long)n1, (long long)ctx->nallocs, (int)ctx->status);
    pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, 3);
    CHECKF(ctx->status == PT_ERR_SHAPE, "attn C % H != 0 is rejected", "status %d", (int)ctx->status);
    pt_shutdown(ctx);
    tt_free(&tq); tt_free(&to); tt_free(&tl); tt_free(&tdo); tt_free(&tdq);
}

/* ---- benchmark (argv "bench"; not part of the suite) ------------------------------------------- */
static int g_bench_kernel = 0;
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_cfg(int B, int T, int C, int H) {
    const int64_t nq = (int64_t)B * T * 3 * C, no = (int64_t)B * T * C, nl = (int64_t)B * H * T;
    const double fl = 4.0 * B * H * (double)T * T * (C / H);
    ttensor tq, to, tl, tdo, tdq;
    float *q = tt_new(&tq, nq), *go = tt_new(&tdo, no), *dq = tt_new(&tdq, nq);
    int64_t i;
    int nt;
    tt_new(&to, no);
    tt_new(&tl, nl);
    for (i = 0; i < nq; i++) q[i] = frand(), dq[i] = 0;
    for (i = 0; i < no; i++) go[i] = frand();
    for (nt = 1; nt <= 2; nt++) {
        double res[2];
        int pass;
        pt_ctx *ctx = new_ctx(nt, g_bench_kernel);
        for (pass = 0; pass < 2; pass++) {
            double s[5], t0, one;
            int r, reps, rep;
            for (r = 0; r < 2; r++) { /* warm-up */
                pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
                if (pass) pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
            }
            t0 = pt_time();
            if (pass) pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
            else pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
            one = pt_time() - t0;
            reps = (int)(0.03 / (one > 1e-6 ? one : 1e-6)) + 1;
            for (r = 0; r < 5; r++) {
                t0 = pt_time();
                for (rep = 0; rep < reps; rep++) {
                    if (pass) pt__cpu_attn_bwd(ctx, &tdq.t, &tdo.t, &tq.t, &to.t, &tl.t, B, T, C, H);
                    else pt__cpu_attn_fwd(ctx, &to.t, &tl.t, &tq.t, B, T, C, H);
                }
                s[r] = (pt_time() - t0) / reps;
            }
            qsort(s, 5, sizeof(double), cmp_d);
            res[pass] = (pass ? 2.0 * fl : fl) / s[2] * 1e-9;
        }
        printf("| B=%d T=%-4d C=%-4d H=%-2d hs=%-3d | %d | %7.1f | %7.1f | %7.1f |\n", B, T, C, H, C / H, nt, res[0],
               res[1], 3.0 * fl / (fl / res[0] + 2.0 * fl / res[1]) * 1e0);
        pt_shutdown(ctx);
    }
    tt_free(&tq); tt_free(&to); tt_free(&tl); tt_free(&tdo); tt_free(&tdq);
}

static void bench_gemm(void) {
    const int64_t n = 768;
    float *a = (float *)malloc(sizeof(float) * (size_t)(n * n)), *b = (float *)malloc(sizeof(float) * (size_t)(n * n));
    float *c = (float *)malloc(sizeof(float) * (size_t)(n * n));
    int64_t i;
    int nt;
    for (i = 0; i < n * n; i++) a[i] = frand(), b[i] = frand();
    for (nt = 1; nt <= 2; nt++) {
        pt__gemm_ws ws;
        double s[5], t0;
        int r;
        memset(&ws, 0, sizeof ws);
        ws.nthreads = nt;
        ws.ctx = team_ctx();
        pt__sgemm(&ws, 0, 1, 1, n, n, n, 1.0f, a, n, 0, b, n, 0, 0.0f, c, n, 0);
        for (r = 0; r < 5; r++) {
            t0 = pt_time();
            pt__sgemm(&ws, 0, 1, 1, n, n, n, 1.0f, a, n, 0, b, n, 0, 0.0f, c, n, 0);
            s[r] = pt_time() - t0;
        }
        qsort(s, 5, sizeof(double), cmp_d);
        printf("reference: pt__sgemm %lldx%lldx%lld, %d thread(s): %.1f GFLOP/s\n", (long long)n, (long long)n,
               (long long)n, nt, 2.0 * n * n * n / s[2] * 1e-9);
        pt__gemm_ws_free(&ws);
    }
    free(a); free(b); free(c);
}

static int bench(int argc, char **argv) {
    /* `bench c` / `bench avx2`: the portable kernels, plain or compiled for AVX2 */
    g_bench_kernel = argc > 2 && !strcmp(argv[2], "c") ? 1 : argc > 2 && !strcmp(argv[2], "avx2") ? 3 : 0;
#if PT__ATTN_X86
    __builtin_cpu_init();
    if (!g_bench_kernel) g_bench_kernel = __builtin_cpu_supports("avx512f") ? 2 : 3;
#else
    g_bench_kernel = 1;
#endif
    printf("attention kernels: %s (may fall back if the CPU lacks it)\n", kname(g_bench_kernel));
    bench_gemm();
    printf("| config                       | threads | fwd GFLOP/s | bwd GFLOP/s | fwd+bwd GFLOP/s |\n");
    printf("|------------------------------|---|---------|---------|---------|\n");
    bench_cfg(8, 256, 256, 8);
    bench_cfg(8, 256, 384, 6);
    bench_cfg(4, 64, 768, 12);
    return 0;
}

int main(int argc, char **argv) {
    static const int cases[][4] = {
        {1, 1, 4, 1},   {1, 7, 12, 3},  {2, 65, 6, 2},   {1, 7, 1, 1},   {1, 1, 3, 3},    {2, 65, 64, 2},
        {1, 130, 128, 2}, {2, 64, 96, 1}, {1, 33, 80, 1}, {1, 20, 40, 1}, {1, 50, 150, 3}, {1, 129, 17, 1},
        {2, 17, 48, 1}, {1, 200, 96, 3}, {3, 5, 9, 3},
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    int k, i, kmax = 1;
    if (argc > 1 && !strcmp(argv[1], "bench")) return bench(argc, argv);
    tu_init(argc, argv);
#if PT__ATTN_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kmax = 3;
#endif
    for (k = 1; k <= kmax; k++) {
#if PT__ATTN_X86
        if (k == 2 && !__builtin_cpu_supports("avx512f")) continue;
#endif
        for (i = 0; i < ncases; i++) {
            run_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], k, 1, 1.0f);
            run_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], k, 2, 1.0f);
        }
        run_case(2, 70, 64, 2, k, 2, 8.0f); /* large scores: stability */
        run_case(1, 40, 12, 2, k, 1, 8.0f);
        run_determinism(2, 130, 64, 2, k);
        run_determinism(3, 67, 30, 3, k);
        run_fd(1, 5, 6, 2, k);
        run_fd(2, 9, 3, 1, k);
    }
    run_misc();
    return tu_summary();
}

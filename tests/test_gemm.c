/* test_gemm.c - the packed SGEMM of ptrain.h (pt__sgemm, workspace pt__gemm_ws) against a naive
   double-precision reference: every micro-kernel the CPU supports (C, AVX2, AVX-512, forced through
   pt__gemm_ws.kern), all four transpose cases, odd shapes, padding (left untouched), alpha/beta,
   batches (shared B, batch-parallel and per-gemm modes), K = 0, alpha = 0, bit-identical results for
   1, 2 and 3 threads, and no allocation once the workspace has grown.
   Usage: test_gemm [--quick]   (--quick: the large shapes are skipped or shrunk, for sanitizers) */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

/* ---- counting allocator (must be defined before the implementation) ------------------------- */
static long g_nmalloc = 0;
static void *test_malloc(size_t sz) {
    g_nmalloc++;
    return malloc(sz);
}
#define PT_MALLOC(sz) test_malloc(sz)
#define PT_FREE(p) free(p)
#define PT_REALLOC(p, sz) realloc(p, sz)
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

static uint32_t g_rng = 12345u;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static const char *kname(int k) {
    return k == PT__GEMM_KERN_AVX512 ? "avx512" : k == PT__GEMM_KERN_AVX2 ? "avx2" : k == PT__GEMM_KERN_C ? "c" : "auto";
}

/* stored matrix size for op(X) rows x cols with transpose flag t and row stride ld */
static int64_t stored_elems(int t, int64_t rows, int64_t cols, int64_t ld) {
    int64_t r = t ? cols : rows, c = t ? rows : cols;
    return r == 0 ? 0 : (r - 1) * ld + c;
}

static void ref_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, const float *C0, float *Cref, int64_t ldc) {
    int64_t i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0.0;
            for (k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
            }
            s *= alpha;
            if (beta != 0.0f) s += (double)beta * C0[i * ldc + j];
            Cref[i * ldc + j] = (float)s;
        }
}

/* Run one configuration with kernel `kern`, compare every batch item. */
static void run_case(int kern, int nthreads, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                     float alpha, float beta, int64_t pad, int shareB) {
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t sa = stored_elems(ta, M, K, lda) + 3, sb = shareB ? 0 : stored_elems(tb, K, N, ldb) + 5;
    int64_t sc = stored_elems(0, M, N, ldc) + 1;
    size_t na = (size_t)(sa * batch + 1), nb = (size_t)((shareB ? stored_elems(tb, K, N, ldb) : sb * batch) + 1);
    size_t nc = (size_t)(sc * batch + 1);
    float *A = (float *)malloc(na * sizeof(float)), *B = (float *)malloc(nb * sizeof(float));
    float *C = (float *)malloc(nc * sizeof(float)), *C0 = (float *)malloc(nc * sizeof(float));
    float *R = (float *)malloc(nc * sizeof(float));
    pt__gemm_ws ws;
    size_t i;
    int64_t b, r, c;
    int ok = 1, rc;
    double maxerr = 0.0;
    for (i = 0; i < na; i++) A[i] = frand();
    for (i = 0; i < nb; i++) B[i] = frand();
    for (i = 0; i < nc; i++) C0[i] = beta == 0.0f ? NAN : frand();
    memcpy(C, C0, nc * sizeof(float));
    memcpy(R, C0, nc * sizeof(float));
    memset(&ws, 0, sizeof(ws));
    ws.nthreads = nthreads;
    ws.kern = kern;
    rc = pt__sgemm(&ws, ta, tb, batch, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    for (b = 0; b < batch; b++)
        ref_gemm(ta, tb, M, N, K, alpha, A + b * sa, lda, B + b * sb, ldb, beta, C0 + b * sc, R + b * sc, ldc);
    /* compare all of C including the padding (which must be untouched) */
    for (b = 0; b < batch; b++)
        for (r = 0; r < M; r++)
            for (c = 0; c < ldc && (r < M - 1 || c < N); c++) {
                size_t o = (size_t)(b * sc + r * ldc + c);
                double tol = 1e-5 * (double)(K + 4) * (fabs(alpha) + 1.0) + 1e-5;
                double e = fabs((double)C[o] - (double)R[o]);
                if (c >= N) { /* padding: bitwise untouched (may be NaN) */
                    if (memcmp(&C[o], &C0[o], sizeof(float)) != 0) ok = 0;
                    continue;
                }
                if (!(e <= tol)) ok = 0;
                if (e > maxerr) maxerr = e;
            }
    /* last element of every slot after the batch region */
    if (memcmp(&C[nc - 1], &C0[nc - 1], sizeof(float)) != 0) ok = 0;
    CHECKF(ok && rc == 0,
           tu_name("gemm kern=%s nt=%d ta=%d tb=%d batch=%lld M=%lld N=%lld K=%lld a=%g b=%g pad=%lld shareB=%d", kname(kern),
                   nthreads, ta, tb, (long long)batch, (long long)M, (long long)N, (long long)K, (double)alpha,
                   (double)beta, (long long)pad, shareB),
           "rc %d, max error %g (or padding / past-the-end element touched)", rc, maxerr);
    pt__gemm_ws_free(&ws);
    free(A); free(B); free(C); free(C0); free(R);
}

/* Bitwise identical results for nthreads 1 and 2 (and 3). */
static void run_determinism(int kern, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K) {
    int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
    size_t na = (size_t)(M * K * batch), nb = (size_t)(K * N * batch), nc = (size_t)(M * N * batch);
    float *A = (float *)malloc(na * sizeof(float)), *B = (float *)malloc(nb * sizeof(float));
    float *C1 = (float *)malloc(nc * sizeof(float)), *C2 = (float *)malloc(nc * sizeof(float));
    pt__gemm_ws ws;
    size_t i;
    int nt, ok = 1;
    for (i = 0; i < na; i++) A[i] = frand();
    for (i = 0; i < nb; i++) B[i] = frand();
    for (i = 0; i < nc; i++) C1[i] = frand();
    memset(&ws, 0, sizeof(ws));
    ws.kern = kern;
    ws.nthreads = 1;
    memcpy(C2, C1, nc * sizeof(float));
    pt__sgemm(&ws, ta, tb, batch, M, N, K, 0.7f, A, lda, M * K, B, ldb, K * N, 0.3f, C1, ldc, M * N);
    for (nt = 2; nt <= 3; nt++) {
        float *C3 = (float *)malloc(nc * sizeof(float));
        memcpy(C3, C2, nc * sizeof(float));
        ws.nthreads = nt;
        pt__sgemm(&ws, ta, tb, batch, M, N, K, 0.7f, A, lda, M * K, B, ldb, K * N, 0.3f, C3, ldc, M * N);
        if (memcmp(C1, C3, nc * sizeof(float)) != 0) ok = 0;
        free(C3);
    }
    CHECKF(ok,
           tu_name("determinism kern=%s ta=%d tb=%d batch=%lld M=%lld N=%lld K=%lld", kname(kern), ta, tb,
                   (long long)batch, (long long)M, (long long)N, (long long)K),
           "1, 2 and 3 threads give different bits");
    pt__gemm_ws_free(&ws);
    free(A); free(B); free(C1); free(C2);
}

/* A second call with the same sizes must not allocate. */
static void run_noalloc(int nthreads) {
    int64_t M = 300, N = 200, K = 500;
    float *A = (float *)calloc((size_t)(M * K), sizeof(float));
    float *B = (float *)calloc((size_t)(K * N), sizeof(float));
    float *C = (float *)calloc((size_t)(M * N), sizeof(float));
    pt__gemm_ws ws;
    long before;
    int t;
    memset(&ws, 0, sizeof(ws));
    ws.nthreads = nthreads;
    for (t = 0; t < 4; t++)
        pt__sgemm(&ws, t & 1, t >> 1, 1, M, N, K, 1.0f, A, t & 1 ? M : K, 0, B, t >> 1 ? K : N, 0, 0.0f, C, N, 0);
    before = g_nmalloc;
    for (t = 0; t < 4; t++)
        pt__sgemm(&ws, t & 1, t >> 1, 1, M, N, K, 1.0f, A, t & 1 ? M : K, 0, B, t >> 1 ? K : N, 0, 0.0f, C, N, 0);
    /* smaller sizes must not allocate either */
    pt__sgemm(&ws, 0, 0, 1, 10, 10, 10, 1.0f, A, 10, 0, B, 10, 0, 0.0f, C, 10, 0);
    CHECKF(g_nmalloc == before && before > 0, tu_name("no allocation on a second call with the same sizes (nt=%d)", nthreads),
           "%ld allocations before, %ld after", before, g_nmalloc);
    pt__gemm_ws_free(&ws);
    free(A); free(B); free(C);
}

/* --quick: a shape is kept when M*N*K <= QUICK_MNK; the large-size cases are shrunk (same structure:
   several K blocks, several MC/NC blocks, batch modes) */
#define QUICK_MNK 1000000
static int64_t qd(int64_t full, int64_t quick) { return tu_quick ? quick : full; }

int main(int argc, char **argv) {
    static const int64_t shapes[][3] = {{1, 1, 1},       {1, 37, 1},     {1, 1, 300},    {17, 33, 65},   {100, 1, 7},
                                        {1, 100, 7},     {13, 31, 5},    {12, 32, 16},   {24, 64, 1},    {25, 65, 33},
                                        {64, 64, 64},    {5, 200, 900},  {200, 5, 900},  {3, 7, 2000},   {130, 97, 401},
                                        {193, 257, 385}, {7, 4100, 3},   {385, 50, 770}};
    int kerns[3], nk = 0, ki, ta, tb;
    size_t s;
    tu_init(argc, argv);
    kerns[nk++] = PT__GEMM_KERN_C;
#if PT__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kerns[nk++] = PT__GEMM_KERN_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        kerns[nk++] = PT__GEMM_KERN_AVX512;
#endif
    printf("auto-selected kernel: %s%s\n", kname(pt__gemm_pick_kern()), tu_quick ? " (--quick: smaller sizes)" : "");

    for (ki = 0; ki < nk; ki++) {
        int k = kerns[ki];
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++)
                for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                    int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    if (tu_quick && M * N * K > QUICK_MNK) continue;
                    run_case(k, 1, ta, tb, 1, M, N, K, 1.0f, 0.0f, 0, 0);
                    run_case(k, 2, ta, tb, 1, M, N, K, -2.0f, 0.5f, 3, 0);
                    run_case(k, 2, ta, tb, 1, M, N, K, 1.0f, 1.0f, 1, 0);
                }
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++) {
                /* degenerate dims, K = 0, alpha = 0 */
                run_case(k, 2, ta, tb, 1, 0, 5, 5, 1.0f, 0.5f, 0, 0);
                run_case(k, 2, ta, tb, 1, 5, 0, 5, 1.0f, 0.5f, 0, 0);
                run_case(k, 2, ta, tb, 1, 5, 6, 0, 1.0f, 0.5f, 2, 0);
                run_case(k, 2, ta, tb, 1, 5, 6, 0, 1.0f, 0.0f, 2, 0);
                run_case(k, 2, ta, tb, 2, 5, 6, 7, 0.0f, 0.0f, 2, 0);
                /* batches: shared B, odd counts, batch-parallel and per-gemm modes */
                run_case(k, 2, ta, tb, 5, 17, 33, 65, 1.0f, 0.0f, 1, 1);
                run_case(k, 2, ta, tb, 4, 40, 70, 30, 0.5f, 1.0f, 0, 1);
                run_case(k, 2, ta, tb, 3, 50, 45, 20, -2.0f, 0.5f, 2, 0);
                run_case(k, 3, ta, tb, 7, 9, 8, 100, 1.0f, 0.0f, 0, 0);
                /* large K (several K blocks), larger M/N (several MC/NC blocks) */
                run_case(k, 2, ta, tb, 1, qd(33, 9), 47, qd(3000, 1100), 1.0f, 0.5f, 1, 0);
                run_case(k, 2, ta, tb, 1, qd(700, 500), qd(70, 13), qd(70, 20), 1.0f, 0.0f, 0, 0);
                run_case(k, 2, ta, tb, 1, qd(20, 7), qd(4500, 4200), qd(40, 5), 1.0f, 1.0f, 0, 0);
                run_determinism(k, ta, tb, 1, qd(333, 130), qd(275, 70), qd(1100, 600));
                run_determinism(k, ta, tb, 1, 7, qd(1000, 500), qd(300, 100));
                run_determinism(k, ta, tb, 6, 50, 60, 70);
                run_determinism(k, ta, tb, 3, 50, 60, 70);
            }
    }
    run_noalloc(1);
    run_noalloc(2);
    return tu_summary();
}

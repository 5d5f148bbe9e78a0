/* test_gemm.c - the packed SGEMM of ptrain.h (pt__sgemm, workspace pt__gemm_ws) against a naive
   double-precision reference: every micro-kernel the CPU supports (C, AVX2, AVX-512, forced through
   pt__gemm_ws.kern), all four transpose cases, odd shapes, padding (left untouched), alpha/beta,
   batches (shared B, batch-parallel and per-gemm modes), K = 0, alpha = 0, bit-identical results for
   1, 2 and 3 threads, and no allocation once the workspace has grown.
   The bf16 GEMM (pt__gemm_bf16) the same way for each of its kernels (C, AVX2, AVX-512 widening and
   AVX512_BF16, forced through pt__gemm_ws.kern_bf16): against a double-precision reference on the
   bf16-rounded inputs, A and B each stored as f32 or bf16, C as f32 or bf16; the widening kernels
   bit-identical to pt__sgemm on the rounded inputs; a bf16 C the rounding of the f32 result; exact
   integer products equal on every kernel; thread-count independence. fp16 inputs (PT__GEMM_AB_F16)
   bit-identical to pt__sgemm on fp16-rounded operands, on each f32 kernel. The f32 <-> bf16 / fp16
   conversions of base: exact values, ties to even, NaN, infinities, subnormals, fp16 overflow.
   NEON (AArch64): the kernel joins every check above, and its stated summation rule is checked bit for bit
   against a scalar fmaf model (run_neon_rule).
   Usage: test_gemm [--quick | --tiny]   (--quick: the large shapes are skipped or shrunk, for sanitizers;
   --tiny: smaller still, for qemu: tests/arm64_test.sh) */
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

static uint32_t g_rng = 12345u;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static const char *kname(int k) {
    return k == PT__GEMM_KERN_AVX512 ? "avx512" : k == PT__GEMM_KERN_AVX2 ? "avx2" : k == PT__GEMM_KERN_NEON ? "neon"
         : k == PT__GEMM_KERN_C ? "c" : "auto";
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
    ws.ctx = team_ctx();
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
    ws.ctx = team_ctx();
    memcpy(C2, C1, nc * sizeof(float));
    pt__sgemm(&ws, ta, tb, batch, M, N, K, 0.7f, A, lda, M * K, B, ldb, K * N, 0.3f, C1, ldc, M * N);
    for (nt = 2; nt <= 3; nt++) {
        float *C3 = (float *)malloc(nc * sizeof(float));
        memcpy(C3, C2, nc * sizeof(float));
        ws.nthreads = nt;
        ws.ctx = team_ctx();
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

/* transpose case t (ta = t & 1, tb = t >> 1) of an M x N x K product of zeros: pt__sgemm (flags < 0)
   or pt__gemm_bf16 with flags */
static void gemm_zeros(pt__gemm_ws *ws, int flags, int t, int64_t M, int64_t N, int64_t K, const float *A,
                       const float *B, float *C) {
    const int ta = t & 1, tb = t >> 1;
    if (flags < 0) pt__sgemm(ws, ta, tb, 1, M, N, K, 1.0f, A, ta ? M : K, 0, B, tb ? K : N, 0, 0.0f, C, N, 0);
    else pt__gemm_bf16(ws, flags, ta, tb, 1, M, N, K, 1.0f, A, ta ? M : K, 0, B, tb ? K : N, 0, 0.0f, C, N, 0);
}

/* A second call with the same sizes must not allocate (pt__sgemm, or pt__gemm_bf16 with flags:
   with a bf16 C, its scratch tile too). */
static void run_noalloc(int nthreads, int flags) {
    int64_t M = tu_quick > 1 ? 100 : 300, N = tu_quick > 1 ? 70 : 200, K = tu_quick > 1 ? 300 : 500;
    float *A = (float *)calloc((size_t)(M * K), sizeof(float));
    float *B = (float *)calloc((size_t)(K * N), sizeof(float));
    float *C = (float *)calloc((size_t)(M * N), sizeof(float));
    pt__gemm_ws ws;
    long before;
    int t;
    memset(&ws, 0, sizeof(ws));
    ws.nthreads = nthreads;
    ws.ctx = team_ctx();
    for (t = 0; t < 4; t++) gemm_zeros(&ws, flags, t, M, N, K, A, B, C);
    before = g_nmalloc;
    for (t = 0; t < 4; t++) gemm_zeros(&ws, flags, t, M, N, K, A, B, C);
    /* smaller sizes must not allocate either */
    gemm_zeros(&ws, flags, 0, 10, 10, 10, A, B, C);
    CHECKF(g_nmalloc == before && before > 0,
           tu_name("%sno allocation on a second call with the same sizes (nt=%d)", flags < 0 ? "" : "bf16: ", nthreads),
           "%ld allocations before, %ld after", before, g_nmalloc);
    pt__gemm_ws_free(&ws);
    free(A); free(B); free(C);
}

/* --quick: a shape is kept when M*N*K <= QUICK_MNK; the large-size cases are shrunk (same structure:
   several K blocks, several MC/NC blocks, batch modes) */
#define QUICK_MNK (tu_quick > 1 ? 60000 : 1000000) /* --tiny (an emulator): smaller still */
static int64_t qd(int64_t full, int64_t quick) { return tu_quick ? quick : full; }
static int64_t qt(int64_t full, int64_t quick, int64_t tiny) { return tu_quick > 1 ? tiny : tu_quick ? quick : full; }

/* ================================================================ bf16 GEMM */

static const char *kname16(int k) { return k == PT__GEMM_KERN_AVX512BF16 ? "avx512_bf16" : kname(k); }
/* uniform in [-1, 1) with a full 24-bit mantissa; every 5th value a tie between two bf16 values */
static float frand24(void) {
    float x;
    uint32_t u;
    g_rng = g_rng * 1664525u + 1013904223u;
    x = (float)(g_rng >> 8) / 8388608.0f - 1.0f;
    if (g_rng % 5u == 0) {
        memcpy(&u, &x, 4);
        u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&x, &u, 4);
    }
    return x;
}

/* one operand: n elements of f32 values (xf) and, stored as bf16, x16; xr: what the product sees */
typedef struct opnd {
    float *xf, *xr;
    uint16_t *x16;
} opnd;
static void opnd_new(opnd *o, size_t n, int integers) {
    size_t i;
    o->xf = (float *)malloc(n * sizeof(float));
    o->xr = (float *)malloc(n * sizeof(float));
    o->x16 = (uint16_t *)malloc(n * sizeof(uint16_t));
    for (i = 0; i < n; i++) {
        o->xf[i] = integers ? (float)((int)(g_rng = g_rng * 1664525u + 1013904223u) % 9 - 4) : frand24();
        o->x16[i] = pt__bf16_from_f32(o->xf[i]);
        o->xr[i] = pt__f32_from_bf16(o->x16[i]);
    }
}
static void opnd_free(opnd *o) { free(o->xf); free(o->xr); free(o->x16); }

/* the reference for one batch item, in double on the rounded inputs; S: |alpha| sum |a b| + |beta c| */
static void ref_gemm_abs(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, const float *C0, double *R, double *S, int64_t ldc) {
    int64_t i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0.0, sa = 0.0;
            for (k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
                sa += fabs(a * b);
            }
            s *= alpha, sa *= fabs(alpha);
            if (beta != 0.0f) s += (double)beta * C0[i * ldc + j], sa += fabs((double)beta * C0[i * ldc + j]);
            R[i * ldc + j] = s;
            S[i * ldc + j] = sa;
        }
}

static int g_bf16_kern_ok = 1; /* every forced kernel was the one that ran */

/* One pt__gemm_bf16 configuration with kernel kern vs the reference; flags say how A, B, C are stored.
   integers: small integer inputs, where every kernel must give the exact result. Also: a widening
   kernel bit-identical to pt__sgemm with the same kernel on the rounded inputs (f32 C); a bf16 C the
   bf16 rounding of the same call's f32 C (started from the widened old values). */
static void run_bf16_case(int kern, int nthreads, int flags, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                          float alpha, float beta, int64_t pad, int integers) {
    const int a16 = flags & PT__GEMM_A_BF16, b16 = flags & PT__GEMM_B_BF16, c16 = flags & PT__GEMM_C_BF16;
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t sa = stored_elems(ta, M, K, lda) + 3, sb = stored_elems(tb, K, N, ldb) + 5, sc = stored_elems(0, M, N, ldc) + 1;
    size_t na = (size_t)(sa * batch + 1), nb = (size_t)(sb * batch + 1), nc = (size_t)(sc * batch + 1), i;
    opnd a, b, c0;
    float *C = (float *)malloc(nc * sizeof(float)), *Cs = (float *)malloc(nc * sizeof(float));
    uint16_t *H = (uint16_t *)malloc(nc * sizeof(uint16_t));
    double *R = (double *)malloc(nc * sizeof(double)), *S = (double *)malloc(nc * sizeof(double));
    pt__gemm_ws ws, ws2;
    int64_t bi, r, cc, nkb = (K + 255) / 256 + 1;
    int ok = 1, same = 1, rc, rc2 = 0, used;
    double maxrel = 0.0;
    char why[160] = "";
    opnd_new(&a, na, integers);
    opnd_new(&b, nb, integers);
    opnd_new(&c0, nc, integers);
    if (beta == 0.0f)
        for (i = 0; i < nc; i++) c0.xf[i] = c0.xr[i] = NAN, c0.x16[i] = 0x7fc1;
    /* C starts from c0: f32 C the f32 values, bf16 C their bf16 (the reference uses what C holds) */
    memcpy(C, c16 ? c0.xr : c0.xf, nc * sizeof(float));
    memcpy(H, c0.x16, nc * sizeof(uint16_t));
    for (bi = 0; bi < batch; bi++)
        ref_gemm_abs(ta, tb, M, N, K, alpha, a.xr + bi * sa, lda, b.xr + bi * sb, ldb, beta, C + bi * sc, R + bi * sc, S + bi * sc, ldc);
    memset(&ws, 0, sizeof(ws));
    ws.nthreads = nthreads;
    ws.ctx = team_ctx();
    ws.kern_bf16 = kern;
    rc = pt__gemm_bf16(&ws, flags, ta, tb, batch, M, N, K, alpha, a16 ? (const void *)a.x16 : (const void *)a.xf, lda, sa,
                       b16 ? (const void *)b.x16 : (const void *)b.xf, ldb, sb, beta, c16 ? (void *)H : (void *)C, ldc, sc);
    used = ws.kern_bf16;
    if (used != kern && M > 0 && N > 0 && K > 0 && alpha != 0.0f) g_bf16_kern_ok = 0;
    if (c16) /* the bf16 result widened; the f32 C path must round to exactly it */
        for (i = 0; i < nc; i++) C[i] = pt__f32_from_bf16(H[i]);
    for (bi = 0; bi < batch; bi++)
        for (r = 0; r < M; r++)
            for (cc = 0; cc < ldc && (r < M - 1 || cc < N); cc++) {
                size_t o = (size_t)(bi * sc + r * ldc + cc);
                /* fp32 accumulation: at most K + 2 per K block + 2 roundings on any path, each within
                   2^-24 of a partial sum bounded by S; a bf16 C adds one rounding (2^-9 relative) */
                double tol = (double)(K + 2 * nkb + 2) * ldexp(1.0, -24) * S[o] * 1.01 + (c16 ? ldexp(1.0, -8) * fabs(R[o]) : 0.0);
                double e = fabs((double)C[o] - R[o]);
                if (cc >= N) { /* padding: bitwise untouched */
                    if (c16 ? H[o] != c0.x16[o] : memcmp(&C[o], &c0.xf[o], sizeof(float)) != 0) {
                        if (ok) snprintf(why, sizeof why, "padding at %lld touched", (long long)o);
                        ok = 0;
                    }
                    continue;
                }
                if (integers ? (double)C[o] != (c16 ? (double)pt__f32_from_bf16(pt__bf16_from_f32((float)R[o])) : R[o]) : !(e <= tol)) {
                    if (ok) snprintf(why, sizeof why, "C[%lld] = %.9g, reference %.9g (bound %.3g)", (long long)o, (double)C[o], R[o], tol);
                    ok = 0;
                }
                if (S[o] > 0 && e / S[o] > maxrel) maxrel = e / S[o];
            }
    if (c16 ? H[nc - 1] != c0.x16[nc - 1] : memcmp(&C[nc - 1], &c0.xf[nc - 1], sizeof(float)) != 0) {
        if (ok) snprintf(why, sizeof why, "the element past the last batch item touched");
        ok = 0;
    }
    /* the same product with f32 C (from the same old values): pt__sgemm on the rounded inputs for a
       widening kernel, pt__gemm_bf16 itself for AVX512_BF16 */
    memset(&ws2, 0, sizeof(ws2));
    ws2.nthreads = nthreads;
    ws2.ctx = team_ctx();
    ws2.kern = ws2.kern_bf16 = kern;
    memcpy(Cs, c16 ? c0.xr : c0.xf, nc * sizeof(float));
    if (c16 || kern != PT__GEMM_KERN_AVX512BF16) {
        if (kern == PT__GEMM_KERN_AVX512BF16)
            rc2 = pt__gemm_bf16(&ws2, flags & ~PT__GEMM_C_BF16, ta, tb, batch, M, N, K, alpha, a16 ? (const void *)a.x16 : (const void *)a.xf,
                                lda, sa, b16 ? (const void *)b.x16 : (const void *)b.xf, ldb, sb, beta, Cs, ldc, sc);
        else
            rc2 = pt__sgemm(&ws2, ta, tb, batch, M, N, K, alpha, a.xr, lda, sa, b.xr, ldb, sb, beta, Cs, ldc, sc);
        for (bi = 0; bi < batch; bi++)
            for (r = 0; r < M; r++)
                for (cc = 0; cc < N; cc++) {
                    size_t o = (size_t)(bi * sc + r * ldc + cc);
                    if (c16 ? H[o] != pt__bf16_from_f32(Cs[o]) : memcmp(&C[o], &Cs[o], sizeof(float)) != 0) same = 0;
                }
    }
    CHECKF(ok && same && rc == 0 && rc2 == 0 && used == kern,
           tu_name("bf16 gemm kern=%s nt=%d A=%s B=%s C=%s ta=%d tb=%d batch=%lld M=%lld N=%lld K=%lld a=%g b=%g pad=%lld%s",
                   kname16(kern), nthreads, a16 ? "bf16" : "f32", b16 ? "bf16" : "f32", c16 ? "bf16" : "f32", ta, tb,
                   (long long)batch, (long long)M, (long long)N, (long long)K, (double)alpha, (double)beta, (long long)pad,
                   integers ? " integers" : ""),
           "rc %d/%d, kernel used %s; %s%s (max error / sum |a b| %.3g)", rc, rc2, kname16(used), why,
           same ? "" : c16 ? "; bf16 C is not the rounding of the f32 C" : "; not bit-identical to pt__sgemm on the rounded inputs",
           maxrel);
    pt__gemm_ws_free(&ws);
    pt__gemm_ws_free(&ws2);
    opnd_free(&a); opnd_free(&b); opnd_free(&c0);
    free(C); free(Cs); free(H); free(R); free(S);
}

/* bit-identical results for 1, 2 and 3 threads */
static void run_bf16_determinism(int kern, int flags, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K) {
    const int c16 = flags & PT__GEMM_C_BF16;
    int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
    size_t na = (size_t)(M * K * batch), nb = (size_t)(K * N * batch), nc = (size_t)(M * N * batch);
    size_t cb = nc * (c16 ? sizeof(uint16_t) : sizeof(float));
    opnd a, b, c0;
    void *C1 = malloc(cb), *C2 = malloc(cb);
    pt__gemm_ws ws;
    int nt, ok = 1;
    opnd_new(&a, na, 0);
    opnd_new(&b, nb, 0);
    opnd_new(&c0, nc, 0);
    memset(&ws, 0, sizeof(ws));
    ws.kern_bf16 = kern;
    for (nt = 1; nt <= 3; nt++) {
        void *C = nt == 1 ? C1 : C2;
        memcpy(C, c16 ? (void *)c0.x16 : (void *)c0.xf, cb);
        ws.nthreads = nt;
        ws.ctx = team_ctx();
        pt__gemm_bf16(&ws, flags, ta, tb, batch, M, N, K, 0.7f, flags & PT__GEMM_A_BF16 ? (const void *)a.x16 : (const void *)a.xf,
                      lda, M * K, flags & PT__GEMM_B_BF16 ? (const void *)b.x16 : (const void *)b.xf, ldb, K * N, 0.3f, C, ldc, M * N);
        if (nt > 1 && memcmp(C1, C2, cb) != 0) ok = 0;
    }
    CHECKF(ok && ws.kern_bf16 == kern,
           tu_name("bf16 determinism kern=%s flags=%d ta=%d tb=%d batch=%lld M=%lld N=%lld K=%lld", kname16(kern), flags, ta, tb,
                   (long long)batch, (long long)M, (long long)N, (long long)K),
           "1, 2 and 3 threads give different bits (kernel used %s)", kname16(ws.kern_bf16));
    pt__gemm_ws_free(&ws);
    opnd_free(&a); opnd_free(&b); opnd_free(&c0);
    free(C1); free(C2);
}

/* ================================================================ conversions */

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

#if PT__X86
/* the AVX-512 packing's rounding of 16 floats (pt__gemm_ld512, F32R), as bf16 */
PT__G512_TGT static void t_round512(const float *x, uint16_t *y) {
    __m512i v = _mm512_srli_epi32(_mm512_castps_si512(pt__gemm_ld512(x, 0, 0xFFFF, PT__GEMM_SRC_F32R)), 16);
    _mm256_storeu_si256((__m256i *)(void *)y, _mm512_cvtepi32_epi16(v));
}
__attribute__((target("f16c"))) static uint16_t t_cvtsh(float x) { return (uint16_t)_cvtss_sh(x, 0); }
static int has_f16c(void) { /* CPUID leaf 1, ECX bit 29 */
    unsigned a = 1, b, c = 0, d;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return (c >> 29) & 1u;
}
#endif

static void test_conversions(void) {
    static const struct { uint32_t f; uint16_t h; } bf[] = {
        {0x3f800000u, 0x3f80}, {0xc0000000u, 0xc000}, {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* exact */
        {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82}, {0x3f808001u, 0x3f81}, {0xbf818000u, 0xbf82}, /* ties to even */
        {0x3f807fffu, 0x3f80}, {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},                        /* infinities */
        {0x7f7fffffu, 0x7f80}, {0x7f7f7fffu, 0x7f7f}, {0xff7f8000u, 0xff80},                        /* overflow */
        {0x7f800001u, 0x7fc0}, {0xffc00000u, 0xffc0}, {0x7fa12345u, 0x7fe1},                        /* NaN quiet */
        {0x00000001u, 0x0000}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002}, {0x00010000u, 0x0001}, /* subnormal */
        {0x807f8000u, 0x8080}};
    static const struct { float f; uint16_t h; } hf[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {0.0f, 0x0000}, {-0.0f, 0x8000}, {0.5f, 0x3800},
        {1.0f + 1.0f / 2048, 0x3c00}, {1.0f + 3.0f / 2048, 0x3c02}, {1.0f + 1.0f / 2048 + 1.0f / 65536, 0x3c01}, /* ties */
        {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {1e10f, 0x7c00}, {-1e10f, 0xfc00}, {-65520.0f, 0xfc00},           /* overflow */
        {5.9604645e-8f, 0x0001}, {2.9802322e-8f, 0x0000}, {4.4703484e-8f, 0x0001}, {8.9406967e-8f, 0x0002},    /* subnormal */
        {6.1035156e-5f, 0x0400}, {6.1005354e-5f, 0x0400}, {-5.9604645e-8f, 0x8001}, {1e-30f, 0x0000}};
    uint16_t y[16];
    float x[16];
    int i, ok = 1, ok2 = 1, ok3 = 1;
    uint32_t u;
    char why[128] = "";
    for (i = 0; i < (int)(sizeof(bf) / sizeof(bf[0])); i++) {
        uint16_t h = pt__bf16_from_f32(f_of(bf[i].f));
        x[0] = f_of(bf[i].f);
        pt__bf16_from_f32_n(x, y, 1);
        if (h != bf[i].h || y[0] != bf[i].h) {
            if (ok) snprintf(why, sizeof why, "f32 0x%08x: 0x%04x / 0x%04x, want 0x%04x", (unsigned)bf[i].f, h, y[0], bf[i].h);
            ok = 0;
        }
    }
    CHECKF(ok, "bf16_from_f32: exact values, ties to even, infinities, overflow, quiet NaN, subnormals (scalar and _n)", "%s", why);
    /* every bf16 back and forth: exact, NaN stays NaN (quiet) */
    for (u = 0, ok = 1; u < 65536u; u++) {
        float f = pt__f32_from_bf16((uint16_t)u), g;
        uint16_t h = pt__bf16_from_f32(f);
        pt__f32_from_bf16_n((const uint16_t *)&h, &g, 1);
        if (u_of(f) != u << 16 || u_of(g) != (uint32_t)h << 16) ok = 0;
        if (isnan(f) ? h != (u | 0x40u) : h != u) ok = 0;
    }
    CHECK(ok, "bf16 -> f32 -> bf16: every value back exactly (a NaN made quiet)");
    /* scalar, _n and the AVX-512 packing's rounding agree on a spread of bit patterns */
    for (u = 0, ok = 1; u < 0xffffffffu - 40009u; u += 40009u) {
        int j;
        for (j = 0; j < 16; j++) x[j] = f_of(u + (uint32_t)j * 0x7fffu);
        x[3] = f_of((u & 0xffff0000u) | 0x8000u); /* a tie */
        pt__bf16_from_f32_n(x, y, 16);
        for (j = 0; j < 16; j++)
            if (y[j] != pt__bf16_from_f32(x[j])) ok = 0;
#if PT__X86
        if (pt__gemm_pick_kern() == PT__GEMM_KERN_AVX512) {
            uint16_t z[16];
            t_round512(x, z);
            if (memcmp(y, z, sizeof z) != 0) ok2 = 0;
        }
#endif
    }
    CHECK(ok, "bf16_from_f32_n = bf16_from_f32 on 107k bit patterns (ties, NaN, infinities, subnormals among them)");
    CHECK(ok2, "the AVX-512 packing's rounding = bf16_from_f32 on the same patterns (or no AVX-512)");

    for (i = 0, ok = 1; i < (int)(sizeof(hf) / sizeof(hf[0])); i++) {
        uint16_t h = pt__f16_from_f32(hf[i].f);
        if (h != hf[i].h) {
            if (ok) snprintf(why, sizeof why, "%.9g: 0x%04x, want 0x%04x", (double)hf[i].f, h, hf[i].h);
            ok = 0;
        }
    }
    CHECKF(ok, "f16_from_f32: exact values, ties to even, overflow to infinity, subnormals, underflow", "%s", why);
    ok = pt__f16_from_f32(f_of(0x7f800000u)) == 0x7c00 && pt__f16_from_f32(f_of(0xff800000u)) == 0xfc00 &&
         pt__f16_from_f32(f_of(0x7f800001u)) == 0x7e00 && pt__f16_from_f32(f_of(0xffc02000u)) == 0xfe01 &&
         isinf(pt__f32_from_f16(0x7c00)) && isnan(pt__f32_from_f16(0x7e00)) && isnan(pt__f32_from_f16(0x7c01));
    CHECK(ok, "f16: infinities kept, a NaN stays a NaN (quiet, top payload bits kept), also one with only low payload bits");
    for (u = 0, ok = 1; u < 65536u; u++) {
        float f = pt__f32_from_f16((uint16_t)u);
        uint16_t h = pt__f16_from_f32(f);
        if (isnan(f) ? h != (u | 0x200u) : h != u) ok = 0;
    }
    CHECK(ok, "fp16 -> f32 -> fp16: every value back exactly (a NaN made quiet)");
#if PT__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && has_f16c()) {
        for (u = 0; u < 0xffffffffu - 4099u; u += 4099u)
            if (pt__f16_from_f32(f_of(u)) != t_cvtsh(f_of(u))) {
                if (ok3) snprintf(why, sizeof why, "f32 0x%08x: 0x%04x, vcvtps2ph 0x%04x", (unsigned)u, pt__f16_from_f32(f_of(u)), t_cvtsh(f_of(u)));
                ok3 = 0;
            }
        CHECKF(ok3, "f16_from_f32 = the F16C instruction (round to nearest even) on 1M bit patterns", "%s", why);
    }
#endif
    (void)ok3;
}

static int kern_bf16_ok(int k) {
    if (k == PT__GEMM_KERN_C) return 1;
    if (k == PT__GEMM_KERN_NEON) return PT__NEON;
#if PT__X86
    __builtin_cpu_init();
    if (k == PT__GEMM_KERN_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (k == PT__GEMM_KERN_AVX512) return pt__gemm_pick_kern() == PT__GEMM_KERN_AVX512;
    if (k == PT__GEMM_KERN_AVX512BF16) return pt__gemm_pick_kern_bf16() == PT__GEMM_KERN_AVX512BF16;
#endif
    return 0;
}

static void test_bf16(void) {
    static const int64_t shapes[][3] = {{1, 1, 1},     {7, 33, 100},  {33, 7, 1},     {100, 100, 7},  {13, 31, 5},
                                        {12, 32, 16},  {25, 65, 33},  {1, 100, 301},  {100, 1, 300},  {130, 97, 401},
                                        {193, 257, 385}, {7, 600, 1541}, {37, 4200, 9},  {9, 40, 63},   {40, 9, 95}};
    static const int all[5] = {PT__GEMM_KERN_C, PT__GEMM_KERN_AVX2, PT__GEMM_KERN_AVX512, PT__GEMM_KERN_AVX512BF16, PT__GEMM_KERN_NEON};
    int ki, ta, tb, f;
    size_t s;
    printf("bf16 auto-selected kernel: %s\n", kname16(pt__gemm_pick_kern_bf16()));
    test_conversions();
    for (ki = 0; ki < 5; ki++) {
        int k = all[ki];
        if (!kern_bf16_ok(k)) {
            printf("NOTE bf16 kernel %s: not on this CPU (or compiler), skipped\n", kname16(k));
            continue;
        }
        g_bf16_kern_ok = 1;
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++) {
                for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                    int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    if (tu_quick && M * N * K > QUICK_MNK / 4) continue;
                    run_bf16_case(k, 1, (int)(s + ta) % 4, ta, tb, 1, M, N, K, 1.0f, 0.0f, 0, 0);
                    run_bf16_case(k, 2, 4 | (int)(s + tb + 1) % 4, ta, tb, 1, M, N, K, -2.0f, 0.5f, 3, 0);
                }
                for (f = 0; f < 8; f++) { /* every storage combination: batches, alpha/beta, exact integers */
                    run_bf16_case(k, 2, f, ta, tb, 3, 25, 65, 33, 0.5f, 1.0f, 1, 0);
                    run_bf16_case(k, 2, f, ta, tb, 2, 40, 70, qt(1601, 801, 301), 1.0f, 1.0f, 0, 1);
                }
                run_bf16_case(k, 2, 7, ta, tb, 1, 5, 6, 0, 1.0f, 0.5f, 2, 0); /* K = 0, alpha = 0 */
                run_bf16_case(k, 2, 3, ta, tb, 1, 5, 6, 0, 1.0f, 0.0f, 2, 0);
                run_bf16_case(k, 2, 4, ta, tb, 2, 5, 6, 7, 0.0f, 0.5f, 2, 0);
                run_bf16_case(k, 3, 5, ta, tb, 7, 9, 8, 100, 1.0f, 0.0f, 0, 0);
                run_bf16_case(k, 2, 6, ta, tb, 1, qd(500, 250), qd(70, 13), qd(70, 20), 1.0f, 0.0f, 0, 0); /* several MC blocks */
                run_bf16_determinism(k, 3, ta, tb, 1, qd(333, 130), qd(275, 70), qt(1100, 600, 300));
                run_bf16_determinism(k, 4, ta, tb, 1, qd(333, 130), qd(275, 70), qt(1100, 600, 300));
                run_bf16_determinism(k, 7, ta, tb, 6, 50, 60, 71);
            }
        CHECKF(g_bf16_kern_ok, tu_name("bf16 kernel %s, when forced, is the one that runs", kname16(k)), "another kernel ran");
    }
    run_noalloc(1, 7);
    run_noalloc(2, 7);
    run_noalloc(2, 0);
}


/* ================================================================ fp16 inputs (PT__GEMM_AB_F16) */
/* pt__gemm_bf16 with PT__GEMM_AB_F16 on f32 operands vs pt__sgemm (the same kernel) on the operands
   rounded to fp16 beforehand by pt__f16_from_f32: bit-identical, ties, fp16 subnormals and values past
   65504 (infinity) included; and not the f32 product (the rounding happened) */
static void run_f16_case(int kern, int ta, int tb, int64_t M, int64_t N, int64_t K, float big) {
    size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N), i;
    float *A = (float *)malloc(na * 4), *B = (float *)malloc(nb * 4), *Ar = (float *)malloc(na * 4), *Br = (float *)malloc(nb * 4);
    float *C = (float *)malloc(nc * 4), *Cr = (float *)malloc(nc * 4), *Cf = (float *)malloc(nc * 4);
    pt__gemm_ws ws, ws2;
    int same = 1, differs = 0, infs = 0, rc;
    for (i = 0; i < na; i++) {
        A[i] = frand24() * (i % 7 == 3 ? 1e-5f : 1.0f); /* some in fp16's subnormal range */
        if (big > 0 && i == na / 2) A[i] = big;
        Ar[i] = pt__f32_from_f16(pt__f16_from_f32(A[i]));
    }
    for (i = 0; i < nb; i++) B[i] = frand24(), Br[i] = pt__f32_from_f16(pt__f16_from_f32(B[i]));
    memset(&ws, 0, sizeof ws), memset(&ws2, 0, sizeof ws2);
    ws.nthreads = ws2.nthreads = 2;
    ws.ctx = ws2.ctx = team_ctx();
    ws.kern = ws2.kern = kern;
    rc = pt__gemm_bf16(&ws, PT__GEMM_AB_F16, ta, tb, 1, M, N, K, 1.0f, A, ta ? M : K, 0, B, tb ? K : N, 0, 0.0f, C, N, 0);
    rc |= pt__sgemm(&ws2, ta, tb, 1, M, N, K, 1.0f, Ar, ta ? M : K, 0, Br, tb ? K : N, 0, 0.0f, Cr, N, 0);
    rc |= pt__sgemm(&ws2, ta, tb, 1, M, N, K, 1.0f, A, ta ? M : K, 0, B, tb ? K : N, 0, 0.0f, Cf, N, 0);
    for (i = 0; i < nc; i++) {
        if (memcmp(&C[i], &Cr[i], 4) != 0) same = 0;
        if (C[i] != Cf[i]) differs = 1;
        if (isinf(C[i])) infs++;
    }
    CHECKF(rc == 0 && same && differs && ws.kern == kern && (big > 0 ? infs > 0 : infs == 0),
           tu_name("fp16 gemm kern=%s ta=%d tb=%d M=%lld N=%lld K=%lld%s", kname(kern), ta, tb, (long long)M, (long long)N,
                   (long long)K, big > 0 ? " with a value past 65504" : ""),
           "rc %d, bit-identical to sgemm on fp16-rounded inputs %d, differs from f32 %d, %d infinities, kernel %s", rc, same,
           differs, infs, kname(ws.kern));
    pt__gemm_ws_free(&ws), pt__gemm_ws_free(&ws2);
    free(A), free(B), free(Ar), free(Br), free(C), free(Cr), free(Cf);
}

/* ================================================================ NEON: its summation rule, bit for bit */
/* The NEON kernel (AArch64) against a scalar model of the rule the gemm section states for it: K cut
   into the C kernel's blocks (<= 256, even split), per block acc = fmaf(a_k, b_k, acc) with k in order,
   then C = alpha acc (first block, beta 0) or fmaf(beta_eff, C, alpha acc); every element bit for bit,
   in each transpose case, edge tiles, several K blocks, beta 0 / 1 / other. The C kernel runs the same
   order unfused under ISO C: within the tolerance of run_case (checked there). */
#if PT__NEON
static void run_neon_rule(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    int64_t lda = ta ? M : K, ldb = tb ? K : N, i, j, k, p0, nkb = (K + 255) / 256, kc = (K + nkb - 1) / nkb;
    float *A = (float *)malloc((size_t)(M * K + 1) * 4), *B = (float *)malloc((size_t)(K * N + 1) * 4);
    float *C = (float *)malloc((size_t)(M * N + 1) * 4), *R = (float *)malloc((size_t)(M * N + 1) * 4);
    pt__gemm_ws ws;
    int ok = 1, rc;
    for (i = 0; i < M * K; i++) A[i] = frand();
    for (i = 0; i < K * N; i++) B[i] = frand();
    for (i = 0; i < M * N; i++) C[i] = R[i] = beta == 0.0f ? NAN : frand();
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++)
            for (p0 = 0; p0 < K; p0 += kc) {
                float acc = 0.0f, be = p0 == 0 ? beta : 1.0f, *r = &R[i * N + j];
                for (k = p0; k < PT__GEMM_MIN(K, p0 + kc); k++)
                    acc = fmaf(ta ? A[k * lda + i] : A[i * lda + k], tb ? B[j * ldb + k] : B[k * ldb + j], acc);
                *r = be == 0.0f ? alpha * acc : fmaf(be, *r, alpha * acc);
            }
    memset(&ws, 0, sizeof ws);
    ws.nthreads = 2;
    ws.kern = PT__GEMM_KERN_NEON;
    rc = pt__sgemm(&ws, ta, tb, 1, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, N, 0);
    for (i = 0; i < M * N && ok; i++)
        if (memcmp(&C[i], &R[i], 4) != 0) ok = 0;
    CHECKF(ok && rc == 0 && ws.kern == PT__GEMM_KERN_NEON,
           tu_name("neon gemm = its summation rule bit for bit ta=%d tb=%d M=%lld N=%lld K=%lld a=%g b=%g", ta, tb, (long long)M,
                   (long long)N, (long long)K, (double)alpha, (double)beta),
           "rc %d, kernel %s, element %lld: %.9g, rule %.9g", rc, kname(ws.kern), (long long)(i - 1), (double)C[i - 1], (double)R[i - 1]);
    pt__gemm_ws_free(&ws);
    free(A), free(B), free(C), free(R);
}
#endif

int main(int argc, char **argv) {
    static const int64_t shapes[][3] = {{1, 1, 1},       {1, 37, 1},     {1, 1, 300},    {17, 33, 65},   {100, 1, 7},
                                        {1, 100, 7},     {13, 31, 5},    {12, 32, 16},   {24, 64, 1},    {25, 65, 33},
                                        {64, 64, 64},    {5, 200, 900},  {200, 5, 900},  {3, 7, 2000},   {130, 97, 401},
                                        {193, 257, 385}, {7, 4100, 3},   {385, 50, 770}};
    int kerns[4], nk = 0, ki, ta, tb;
    size_t s;
    tu_init(argc, argv);
    kerns[nk++] = PT__GEMM_KERN_C;
#if PT__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kerns[nk++] = PT__GEMM_KERN_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        kerns[nk++] = PT__GEMM_KERN_AVX512;
#endif
#if PT__NEON
    kerns[nk++] = PT__GEMM_KERN_NEON; /* Advanced SIMD: always there on AArch64 */
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
    run_noalloc(1, -1);
    run_noalloc(2, -1);
#if PT__NEON
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++) {
            run_neon_rule(ta, tb, 17, 29, 37, 1.0f, 0.0f);
            run_neon_rule(ta, tb, 8, 12, 600, -2.0f, 0.5f); /* three K blocks */
            run_neon_rule(ta, tb, qd(133, 41), qd(77, 25), qd(300, 260), 0.5f, 1.0f);
        }
#endif
    test_bf16();
    for (ki = 0; ki < nk; ki++)
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++) {
                run_f16_case(kerns[ki], ta, tb, 37, 45, 77, 0.0f);
                run_f16_case(kerns[ki], ta, tb, 13, 70, qd(900, 300), ta ? 70000.0f : 65520.0f); /* 65520 rounds up to infinity */
            }
    return tu_summary();
}

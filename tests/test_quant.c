/* test_quant.c - the weight formats and the inference matrix kernel of ptrain.h (see quant).
   Formats: names and numbers (ggml's), bytes per block (q8_0 34, q4_0 18) and per weight, ggml's
   reference quantizers on hand-computed blocks (q8_0's d = amax / 127 and roundf's halves away from
   zero; q4_0's d = max / -8 with the sign of the largest |x|, the first one on ties, min(15, x / d + 8.5)
   truncated; nibble order: elements 0-15 low nibbles, 16-31 high), f16 / bf16 ties to even,
   dequantization, the round-trip error bounds.
   pt__qmm: for every type and every kernel this CPU runs (C, AVX2, AVX-512 / VNNI, NEON, forced with
   pt__qmm_force), on odd shapes (rows 1, 7, 33, 257; cols 32, 96, 800; M 1, 3, 17; strided x and y,
   bias): the C reference against a double-precision product of the dequantized weights and the
   (q8_0-quantized) x, every SIMD kernel bit for bit equal to the C reference, batch invariance (a row
   alone vs inside M = 16, bitwise), thread-count invariance (1, 2, 3 threads), no allocation once the
   workspace has grown, the padding of y untouched, errors for bad matrices. pt_gpt_weights_free (release,
   owned blocks) and pt_gpt_weights_bytes.
   The table of weight types: numbers and names unique, gguf's view of the five the same rows, the
   lists messages print.
   Usage: test_quant [--quick] */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

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

static const pt_wtype all_types[] = {PT_W_F32, PT_W_F16, PT_W_BF16, PT_W_Q8_0, PT_W_Q4_0};
#define NTYPES 5
/* the name of one of all_types for a check's name (never NULL: gcc sees through the table that it could be) */
static const char *tname(pt_wtype t) { return pt_wtype_name(t) ? pt_wtype_name(t) : "?"; }

static void test_names(void) {
    int i;
    for (i = 0; i < NTYPES; i++) {
        pt_wtype t = all_types[i];
        CHECKF(pt_wtype_parse(tname(t)) == (int)t, tu_name("name %s parses back", tname(t)), "got %d", pt_wtype_parse(tname(t)));
    }
    CHECK(PT_W_F32 == 0 && PT_W_F16 == 1 && PT_W_Q4_0 == 2 && PT_W_Q8_0 == 8 && PT_W_BF16 == 30, "type numbers are ggml's");
    CHECK(pt_wtype_name((pt_wtype)3) == NULL && pt_wtype_parse("q4_1") == -1 && pt_wtype_parse(NULL) == -1, "unknown types: NULL / -1");
    CHECK(pt_wtype_block(PT_W_F32) == 1 && pt_wtype_block(PT_W_BF16) == 1 && pt_wtype_block(PT_W_Q8_0) == 32 &&
              pt_wtype_block(PT_W_Q4_0) == 32 && pt_wtype_block((pt_wtype)7) == 0, "elements per block");
    CHECK(sizeof(pt__block_q8_0) == 34 && sizeof(pt__block_q4_0) == 18, "block structs: 34 and 18 bytes");
    CHECK(pt_wtype_row_bytes(PT_W_Q8_0, 32) == 34 && pt_wtype_row_bytes(PT_W_Q4_0, 32) == 18 &&
              pt_wtype_row_bytes(PT_W_Q8_0, 768) == 24 * 34 && pt_wtype_row_bytes(PT_W_Q4_0, 768) == 24 * 18, "row bytes of q8_0 / q4_0");
    CHECK(pt_wtype_row_bytes(PT_W_BF16, 7) == 14 && pt_wtype_row_bytes(PT_W_F16, 7) == 14 && pt_wtype_row_bytes(PT_W_F32, 7) == 28,
          "bf16 / f16: 2 bytes a weight, f32 4");
    CHECK(pt_wtype_row_bytes(PT_W_Q8_0, 33) == -1 && pt_wtype_row_bytes(PT_W_Q4_0, 16) == -1 && pt_wtype_row_bytes(PT_W_F32, -1) == -1 &&
              pt_wtype_row_bytes((pt_wtype)5, 32) == -1, "row bytes: -1 for partial blocks, negative n, unknown type");
    CHECK(pt_wtype_row_bytes(PT_W_Q8_0, 0) == 0, "row bytes of 0 elements");
    CHECK(pt__qmm_kernel((pt_wtype)99) == NULL, "pt__qmm_kernel: NULL for an unknown type");
    printf("  kernels here: f32 %s, f16 %s, bf16 %s, q8_0 %s, q4_0 %s\n", pt__qmm_kernel(PT_W_F32), pt__qmm_kernel(PT_W_F16),
           pt__qmm_kernel(PT_W_BF16), pt__qmm_kernel(PT_W_Q8_0), pt__qmm_kernel(PT_W_Q4_0));
}

/* the table of weight types: one row per ggml number and name; gguf's names and sizes are quant's;
   every type inference computes with has its functions; the list messages print */
static void test_table(void) {
    char buf[128];
    int i, k, uniq = 1, full = 1, agree = 1, order = 1;
    for (i = 0; i < PT__WT_N; i++)
        for (k = 0; k < i; k++) uniq &= pt__wtypes[i].id != pt__wtypes[k].id && strcmp(pt__wtypes[i].name, pt__wtypes[k].name) != 0;
    CHECK(uniq, "the table: ggml numbers and names unique");
    for (i = 0; i < PT__WT_N; i++) {
        const pt__wt *r = &pt__wtypes[i];
        if (r->to_float) full &= r->quantize && r->dot && r->block > 0 && r->bytes > 0 && (r->block == 1 || r->xc) && (!r->st || r->block == 1);
        else order &= r->id <= PT__WT_MAX_ID && !r->quantize && !r->dot && !r->avx2 && !r->avx512 && !r->neon;
    }
    CHECK(full, "the table: every type inference computes with has a quantizer and a C kernel (blocks > 1: x quantized)");
    CHECK(order, "the table: ggml's other types carry no functions; PT__WT_MAX_ID is the largest number");
    for (i = 0; i < NTYPES; i++) {
        pt_wtype t = all_types[i];
        agree &= pt_gguf_type_name(t) && !strcmp(pt_gguf_type_name(t), pt_wtype_name(t)) && pt_gguf_type_bytes(t, 64) == pt_wtype_row_bytes(t, 64) &&
                 pt__wt_of(t) == pt__wt_find(t);
    }
    CHECK(agree, "gguf's names and sizes of the five are quant's rows");
    CHECK(pt_gguf_type_name(3) && !strcmp(pt_gguf_type_name(3), "q4_1") && pt_gguf_type_bytes(3, 64) == 40 && !pt_wtype_name((pt_wtype)3) &&
              !pt__wt_of(3) && !pt_gguf_type_name(4) && pt_gguf_type_bytes(14, 256) == 210,
          "ggml's other types: named and sized for the container (q4_1, q6_K), not for inference; 4 (removed) unknown");
    CHECKF(!strcmp(pt_wtype_names(buf, sizeof buf, " or "), "f32, f16, bf16, q8_0 or q4_0"), "pt_wtype_names: the five, in the messages' order", "got '%s'", buf);
    CHECKF(!strcmp(pt_wtype_names(buf, 12, NULL), "f32, f16, b"), "pt_wtype_names: cut to the buffer", "got '%s'", buf);
    CHECKF(!strcmp(pt__wt_list(buf, sizeof buf, 2, NULL), "F32, F16, BF16") && pt__wt_st("BF16") == pt__wt_of(PT_W_BF16) && !pt__wt_st("F64"),
           "the safetensors dtypes inference reads: F32, F16, BF16", "got '%s'", buf);
}

/* hand-computed blocks in ggml's rules */
static void test_quantizers(void) {
    float x[64], y[64];
    unsigned char b[2 * 34];
    pt__block_q8_0 *q8 = (pt__block_q8_0 *)(void *)b;
    pt__block_q4_0 *q4 = (pt__block_q4_0 *)(void *)b;
    int j, ok;
    uint16_t h[4];
    /* q8_0 block 0: amax 127 -> d = 1, id = 1: roundf halves away from zero (0.5 -> 1, 2.5 -> 3, -2.5 -> -3) */
    memset(x, 0, sizeof x);
    x[0] = 127.0f, x[1] = 0.5f, x[2] = -0.5f, x[3] = 1.5f, x[4] = 2.5f, x[5] = -2.5f, x[6] = 0.49f, x[7] = -126.6f, x[31] = 3.0f;
    /* block 1: all zero -> d = 0, q = 0 */
    pt_quantize_row(PT_W_Q8_0, x, b, 64);
    CHECKF(q8[0].d == 0x3C00, "q8_0: d = amax / 127 = 1 (fp16 0x3c00)", "d 0x%04x", q8[0].d);
    CHECKF(q8[0].qs[0] == 127 && q8[0].qs[1] == 1 && q8[0].qs[2] == -1 && q8[0].qs[3] == 2 && q8[0].qs[4] == 3 && q8[0].qs[5] == -3 &&
               q8[0].qs[6] == 0 && q8[0].qs[7] == -127 && q8[0].qs[31] == 3 && q8[0].qs[8] == 0,
           "q8_0: roundf, halves away from zero", "qs %d %d %d %d %d %d %d %d", q8[0].qs[0], q8[0].qs[1], q8[0].qs[2], q8[0].qs[3], q8[0].qs[4],
           q8[0].qs[5], q8[0].qs[6], q8[0].qs[7]);
    ok = q8[1].d == 0;
    for (j = 0; j < 32; j++) ok &= q8[1].qs[j] == 0;
    CHECK(ok, "q8_0: an all-zero block has d 0 and zero values");
    /* amax 254 -> d = 2, id = 0.5: 3 -> 1.5 -> 2, -1 -> -0.5 -> -1 */
    memset(x, 0, sizeof x);
    x[0] = -254.0f, x[1] = 3.0f, x[2] = -1.0f, x[3] = 1.0f;
    pt_quantize_row(PT_W_Q8_0, x, b, 32);
    CHECKF(q8[0].d == 0x4000 && q8[0].qs[0] == -127 && q8[0].qs[1] == 2 && q8[0].qs[2] == -1 && q8[0].qs[3] == 1,
           "q8_0: d 2 from a negative amax, scaled halves away from zero", "d 0x%04x qs %d %d %d %d", q8[0].d, q8[0].qs[0], q8[0].qs[1], q8[0].qs[2], q8[0].qs[3]);
    pt_dequantize_row(PT_W_Q8_0, b, y, 32);
    CHECK(y[0] == -254.0f && y[1] == 4.0f && y[2] == -2.0f && y[3] == 2.0f && y[4] == 0.0f, "q8_0 dequantized: d * q");

    /* q4_0 block 0: the largest |x| first met is -16 (a later +16 ties and loses): d = -16 / -8 = 2, id 0.5 */
    memset(x, 0, sizeof x);
    x[5] = -16.0f, x[20] = 16.0f, x[1] = 1.0f, x[2] = -1.0f, x[3] = 14.0f, x[17] = -15.0f, x[30] = 13.0f;
    /* block 1: the largest is +8: d = -1, id = -1 (x = 8 -> 0.5 -> 0; -7 -> 15.5 -> 15; 3 -> 5.5 -> 5) */
    x[32] = 8.0f, x[33] = -7.0f, x[34] = 3.0f, x[48] = -8.0f;
    pt_quantize_row(PT_W_Q4_0, x, b, 64);
    CHECKF(q4[0].d == 0x4000 && q4[1].d == 0xBC00, "q4_0: d = max / -8 with the sign of the first largest |x|", "d 0x%04x 0x%04x", q4[0].d, q4[1].d);
    /* block 0: q = min(15, (int8)(x * 0.5 + 8.5)): x=0 -> 8, 1 -> 9, -1 -> 8, 14 -> 15, -16 -> 0, 16 -> 16 -> 15, -15 -> 1, 13 -> 15 */
    CHECKF(q4[0].qs[0] == (8 | 8 << 4) && q4[0].qs[1] == (9 | 1 << 4) && q4[0].qs[2] == (8 | 8 << 4) && q4[0].qs[3] == (15 | 8 << 4) &&
               q4[0].qs[4] == (8 | 15 << 4) && q4[0].qs[5] == (0 | 8 << 4) && q4[0].qs[14] == (8 | 15 << 4),
           "q4_0: nibbles (element j low, 16 + j high), + 8.5 truncated, clamped to 15",
           "qs %02x %02x %02x %02x %02x %02x %02x", q4[0].qs[0], q4[0].qs[1], q4[0].qs[2], q4[0].qs[3], q4[0].qs[4], q4[0].qs[5], q4[0].qs[14]);
    /* block 1 (elements 32..63): 32 -> 0, 33 -> 15, 34 -> 5, 48 = -8 -> 16.5 -> 16 -> 15 (high nibble of byte 0), 49 = 0 -> 8 */
    CHECKF(q4[1].qs[0] == (0 | 15 << 4) && q4[1].qs[1] == (15 | 8 << 4) && q4[1].qs[2] == (5 | 8 << 4) && q4[1].qs[3] == (8 | 8 << 4),
           "q4_0: a negative d (x / d + 8.5), element 16 + j in the high nibble of byte j", "qs %02x %02x %02x %02x", q4[1].qs[0], q4[1].qs[1],
           q4[1].qs[2], q4[1].qs[3]);
    pt_dequantize_row(PT_W_Q4_0, b, y, 64);
    CHECK(y[5] == -16.0f && y[20] == 14.0f && y[1] == 2.0f && y[0] == 0.0f && y[32] == 8.0f && y[33] == -7.0f && y[34] == 3.0f,
          "q4_0 dequantized: d * (q - 8)");

    /* f16 / bf16: nearest, ties to even */
    x[0] = 1.0f, x[1] = 1.0f + 1.0f / 256.0f, x[2] = 1.0f + 3.0f / 256.0f, x[3] = -2.0f;
    pt_quantize_row(PT_W_BF16, x, h, 4);
    CHECKF(h[0] == 0x3F80 && h[1] == 0x3F80 && h[2] == 0x3F82 && h[3] == 0xC000, "bf16: nearest, ties to even", "%04x %04x %04x %04x", h[0], h[1], h[2], h[3]);
    x[1] = 1.0f + 1.0f / 2048.0f, x[2] = 1.0f + 3.0f / 2048.0f;
    pt_quantize_row(PT_W_F16, x, h, 4);
    CHECKF(h[0] == 0x3C00 && h[1] == 0x3C00 && h[2] == 0x3C02 && h[3] == 0xC000, "f16: nearest, ties to even", "%04x %04x %04x %04x", h[0], h[1], h[2], h[3]);
}

/* random rows: dequantize(quantize(x)) within the format's step */
static void test_roundtrip(void) {
    tu_rng r = {7};
    float x[256], y[256];
    unsigned char buf[1024];
    int i, t, j;
    for (i = 0; i < 256; i++) x[i] = tu_uniform(&r, -3.0f, 3.0f) * (i % 32 == 5 ? 10.0f : 1.0f);
    for (t = 0; t < NTYPES; t++) {
        double worst = 0.0;
        int ok = 1;
        pt_quantize_row(all_types[t], x, buf, 256);
        pt_dequantize_row(all_types[t], buf, y, 256);
        for (j = 0; j < 256; j += 32) {
            float amax = 0.0f, tol;
            for (i = j; i < j + 32; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            tol = all_types[t] == PT_W_Q8_0 ? amax / 127.0f * 0.5f * 1.002f + 1e-6f
                : all_types[t] == PT_W_Q4_0 ? amax / 8.0f * 1.002f + 1e-6f
                : all_types[t] == PT_W_F32 ? 0.0f : amax * (all_types[t] == PT_W_BF16 ? 1.0f / 256.0f : 1.0f / 2048.0f);
            for (i = j; i < j + 32; i++) {
                double e = fabs((double)x[i] - y[i]);
                if (e > worst) worst = e;
                if (e > tol) ok = 0;
            }
        }
        CHECKF(ok, tu_name("%s round trip within its step", pt_wtype_name(all_types[t])), "worst error %g", worst);
    }
}

/* the activation quantizer of each kernel = the scalar one, bit for bit, on rows with exact halves
   (amax 127: id 1, so k + 0.5 must round away from zero), zeros, tiny and huge values */
static void test_quant_x(void) {
    float x[256];
    int8_t q0[256], q1[256];
    float d0[10], d1[10];
    int32_t s0[64], s1[64];
    tu_rng r = {3};
    int i, k, c, ok[2] = {1, 1};
    for (i = 0; i < 256; i++) x[i] = (float)((i * 37) % 255 - 127) + ((i & 1) ? 0.5f : 0.0f);
    for (i = 0; i < 256; i += 32) x[i] = 127.0f;          /* amax 127 in blocks 0..7: id = 1, the halves are ties */
    for (i = 96; i < 128; i++) x[i] = 0.0f;                /* an all-zero block */
    for (i = 128; i < 160; i++) x[i] = tu_uniform(&r, -1e-6f, 1e-6f);
    for (i = 160; i < 192; i++) x[i] = tu_uniform(&r, -3e4f, 3e4f);
    for (c = 0; c < 2; c++) {
        int cc = c ? 8 : 128;
        pt__qmm_quant_x(x, 224, q0, d0, s0, cc);
        for (k = 0; k < 2; k++) {
            int lvl = k ? PT__QMM_KERN_AVX512 : PT__QMM_KERN_AVX2;
            if (pt__qmm_resolve(lvl, PT_W_F32) != lvl) continue;
            memset(q1, 0x55, sizeof q1), memset(d1, 0x55, sizeof d1), memset(s1, 0x55, sizeof s1);
#if PT__X86
            (k ? pt__qmm_quant_x_512 : pt__qmm_quant_x_256)(x, 224, q1, d1, s1, cc);
#endif
            ok[k] &= !memcmp(q0, q1, 224) && !memcmp(d0, d1, 8 * sizeof(float)) && !memcmp(s0, s1, 56 * sizeof(int32_t));
        }
    }
    CHECKF(q0[0] == 127 && q0[1] == (int8_t)roundf(x[1]) && q0[3] == (int8_t)roundf(x[3]), "quant_x: ties away from zero (scalar)", "%d %d", q0[1], q0[3]);
    if (pt__qmm_resolve(PT__QMM_KERN_AVX2, PT_W_F32) == PT__QMM_KERN_AVX2) CHECK(ok[0], "x quantized by the AVX2 kernel = the scalar rule, bit for bit (halves, zeros, tiny, huge)");
    if (pt__qmm_resolve(PT__QMM_KERN_AVX512, PT_W_F32) == PT__QMM_KERN_AVX512) CHECK(ok[1], "x quantized by the AVX-512 kernel = the scalar rule, bit for bit (halves, zeros, tiny, huge)");
}

/* a random matrix of type t: rows x cols, its bytes */
static unsigned char *make_mat(pt_wtype t, int64_t rows, int64_t cols, tu_rng *r, pt_qmat *m) {
    int64_t rb = pt_wtype_row_bytes(t, cols), n, k;
    unsigned char *d = (unsigned char *)malloc((size_t)(rb * rows + 64));
    float *row = (float *)malloc((size_t)cols * sizeof(float));
    for (n = 0; n < rows; n++) {
        for (k = 0; k < cols; k++) row[k] = tu_uniform(r, -1.0f, 1.0f) * (k % 37 == 3 ? 4.0f : 1.0f);
        pt_quantize_row(t, row, d + n * rb, cols);
    }
    free(row);
    m->type = t, m->rows = rows, m->cols = cols, m->data = d;
    return d;
}

/* the C reference against double precision over the values the kernel multiplies (dequantized W,
   and for the quantized types x as quantized to q8_0) */
static double check_ref(const pt_qmat *w, const float *x, int64_t ldx, int64_t M, const float *bias, const float *y, int64_t ldy) {
    int64_t rb = pt_wtype_row_bytes(w->type, w->cols), m, n, k, K = w->cols;
    float *wr = (float *)malloc((size_t)K * 4), *xr = (float *)malloc((size_t)K * 4);
    unsigned char *xqb = (unsigned char *)malloc((size_t)(K / 32 + 1) * 34);
    double worst = 0.0;
    int q = w->type == PT_W_Q8_0 || w->type == PT_W_Q4_0;
    for (m = 0; m < M; m++) {
        if (q) {
            pt_quantize_row(PT_W_Q8_0, x + m * ldx, xqb, K);
            pt_dequantize_row(PT_W_Q8_0, xqb, xr, K);
        } else memcpy(xr, x + m * ldx, (size_t)K * 4);
        for (n = 0; n < w->rows; n++) {
            double s = bias ? bias[n] : 0.0, a = bias ? fabs(bias[n]) : 0.0, e;
            pt_dequantize_row(w->type, (const unsigned char *)w->data + n * rb, wr, K);
            for (k = 0; k < K; k++) s += (double)xr[k] * wr[k], a += fabs((double)xr[k] * wr[k]);
            e = fabs(s - y[m * ldy + n]) / (a + 1e-30);
            if (e > worst) worst = e;
        }
    }
    free(wr), free(xr), free(xqb);
    return worst;
}

static int kern_list(pt_wtype t, int *ks) { /* the distinct kernels this CPU runs for t */
    int n = 0, k;
    for (k = PT__QMM_KERN_C; k <= PT__QMM_KERN_NEON; k++)
        if (pt__qmm_resolve(k, t) == k) ks[n++] = k;
    return n;
}

static void test_kernels(pt_ctx *ctx) {
    static const int64_t rows_[] = {1, 7, 33, 257}, cols_[] = {32, 96, 800}, Ms[] = {1, 3, 17};
    tu_rng r = {11};
    int ti, ri, ci, mi, kk, nk, ks[4];
    for (ti = 0; ti < NTYPES; ti++) {
        pt_wtype t = all_types[ti];
        int ok_ref = 1, ok_bits[5] = {1, 1, 1, 1, 1}, ok_pad = 1;
        double worst = 0.0;
        nk = kern_list(t, ks);
        for (ri = 0; ri < 4; ri++)
            for (ci = 0; ci < 3; ci++)
                for (mi = 0; mi < 3; mi++) {
                    int64_t N = rows_[ri], K = cols_[ci], M = Ms[mi], ldx = K + 3, ldy = N + 2, i;
                    pt_qmat w;
                    unsigned char *wd;
                    float *x, *bias, *y0, *y1;
                    int use_bias = (ri + ci + mi) & 1;
                    if (tu_quick && N * K * M > 300000) continue;
                    wd = make_mat(t, N, K, &r, &w);
                    x = (float *)malloc((size_t)(M * ldx) * 4);
                    bias = (float *)malloc((size_t)N * 4);
                    y0 = (float *)malloc((size_t)(M * ldy) * 4);
                    y1 = (float *)malloc((size_t)(M * ldy) * 4);
                    for (i = 0; i < M * ldx; i++) x[i] = tu_uniform(&r, -2.0f, 2.0f);
                    for (i = 0; i < N; i++) bias[i] = tu_uniform(&r, -1.0f, 1.0f);
                    for (i = 0; i < M * ldy; i++) y0[i] = y1[i] = 1234.5f;
                    pt__qmm_force(ctx, PT__QMM_KERN_C);
                    pt__qmm(ctx, &w, x, ldx, M, use_bias ? bias : NULL, y0, ldy);
                    {
                        double e = check_ref(&w, x, ldx, M, use_bias ? bias : NULL, y0, ldy);
                        if (e > worst) worst = e;
                        if (e > 1e-5) {
                            if (ok_ref) printf("  %s ref: N %lld K %lld M %lld rel error %g\n", pt_wtype_name(t), (long long)N, (long long)K, (long long)M, e);
                            ok_ref = 0;
                        }
                    }
                    for (i = 0; i < M; i++) {
                        int64_t n;
                        for (n = N; n < ldy; n++) ok_pad &= y0[i * ldy + n] == 1234.5f;
                    }
                    for (kk = 0; kk < nk; kk++) {
                        if (ks[kk] == PT__QMM_KERN_C) continue;
                        pt__qmm_force(ctx, ks[kk]);
                        for (i = 0; i < M * ldy; i++) y1[i] = 1234.5f;
                        pt__qmm(ctx, &w, x, ldx, M, use_bias ? bias : NULL, y1, ldy);
                        if (memcmp(y0, y1, (size_t)(M * ldy) * 4) != 0) {
                            if (ok_bits[ks[kk]]) {
                                for (i = 0; i < M * ldy && y0[i] == y1[i]; i++) {}
                                printf("  %s %s: N %lld K %lld M %lld: element %lld %.9g vs C %.9g\n", pt_wtype_name(t), pt__qmm_kname(ks[kk], t),
                                       (long long)N, (long long)K, (long long)M, (long long)i, y1[i], y0[i]);
                            }
                            ok_bits[ks[kk]] = 0;
                        }
                    }
                    free(wd), free(x), free(bias), free(y0), free(y1);
                }
        pt__qmm_force(ctx, PT__QMM_KERN_AUTO);
        CHECKF(ok_ref, tu_name("%s C reference = double-precision product (odd shapes, bias, strides)", tname(t)), "worst rel %g", worst);
        CHECK(ok_pad, tu_name("%s: y's padding untouched", tname(t)));
        for (kk = 0; kk < nk; kk++)
            if (ks[kk] != PT__QMM_KERN_C)
                CHECK(ok_bits[ks[kk]], tu_name("%s %s kernel = C reference bit for bit (rows 1 7 33 257, cols 32 96 800, M 1 3 17)", tname(t),
                                                pt__qmm_kname(ks[kk], t)));
        if (nk < 3) printf("  %s: %d kernel(s) run on this CPU (of C, AVX2, AVX-512 on x86-64; C, NEON on AArch64)\n", pt_wtype_name(t), nk);
    }
}

/* float weights with K not a multiple of 16 (the SIMD kernels' zero-padded last vector): every kernel
   this CPU runs = the C reference bit for bit */
static void test_float_tail(pt_ctx *ctx) {
    static const int64_t Ks[] = {1, 5, 37, 100};
    tu_rng r = {5};
    int ti, kk, nk, ks[4], ki;
    for (ti = 0; ti < 3; ti++) {
        pt_wtype t = all_types[ti];
        int ok = 1;
        nk = kern_list(t, ks);
        for (ki = 0; ki < 4; ki++) {
            const int64_t K = Ks[ki], N = 9, M = 2;
            pt_qmat w;
            unsigned char *wd = make_mat(t, N, K, &r, &w);
            float x[200], y0[18], y1[18];
            int64_t i;
            for (i = 0; i < M * K; i++) x[i] = tu_uniform(&r, -2.0f, 2.0f);
            pt__qmm_force(ctx, PT__QMM_KERN_C);
            pt__qmm(ctx, &w, x, K, M, NULL, y0, N);
            for (kk = 0; kk < nk; kk++) {
                pt__qmm_force(ctx, ks[kk]);
                pt__qmm(ctx, &w, x, K, M, NULL, y1, N);
                if (memcmp(y0, y1, sizeof y0) != 0) ok = 0;
            }
            free(wd);
        }
        pt__qmm_force(ctx, PT__QMM_KERN_AUTO);
        CHECK(ok, tu_name("%s: K = 1, 5, 37, 100 (a partial last vector): every kernel here (%d) = C reference bit for bit", tname(t), nk));
    }
}

/* a row's output alone = inside M = 16 (bitwise), and 1, 2, 3 threads give the same bits */
static void test_invariance(pt_ctx *ctx) {
    tu_rng r = {23};
    int ti, kk, nk, ks[4];
    const int64_t N = 300, K = 1184, M = 16; /* 37 blocks; K > 1024: the AVX-512 float kernels take K in blocks at M > 1 */
    for (ti = 0; ti < NTYPES; ti++) {
        pt_wtype t = all_types[ti];
        pt_qmat w;
        unsigned char *wd = make_mat(t, N, K, &r, &w);
        float *x = (float *)malloc((size_t)(M * K) * 4), *yb = (float *)malloc((size_t)(M * N) * 4), *y1 = (float *)malloc((size_t)N * 4);
        float *yt = (float *)malloc((size_t)(M * N) * 4), *yc = (float *)malloc((size_t)(M * N) * 4);
        int64_t i, m;
        for (i = 0; i < M * K; i++) x[i] = tu_uniform(&r, -2.0f, 2.0f);
        nk = kern_list(t, ks);
        pt__qmm_force(ctx, PT__QMM_KERN_C);
        pt__qmm(ctx, &w, x, K, M, NULL, yc, N);
        for (kk = 0; kk < nk; kk++) {
            int ok = 1, okt = 1, th;
            pt__qmm_force(ctx, ks[kk]);
            pt_set_threads(ctx, 2);
            pt__qmm(ctx, &w, x, K, M, NULL, yb, N);
            CHECK(!memcmp(yb, yc, (size_t)(M * N) * 4), tu_name("%s %s: 300 x 1184, M 16 = C reference bit for bit", tname(t), pt__qmm_kname(ks[kk], t)));
            for (m = 0; m < M; m++) {
                pt__qmm(ctx, &w, x + m * K, K, 1, NULL, y1, N);
                ok &= memcmp(y1, yb + m * N, (size_t)N * 4) == 0;
            }
            pt__qmm(ctx, &w, x + 5 * K, K, 3, NULL, yt, N); /* rows 5..7 as a batch of 3 */
            ok &= memcmp(yt, yb + 5 * N, (size_t)(3 * N) * 4) == 0;
            CHECK(ok, tu_name("%s %s: a row alone = inside M 16 = inside M 3 (bitwise)", tname(t), pt__qmm_kname(ks[kk], t)));
            for (th = 1; th <= 3; th += 2) {
                pt_set_threads(ctx, th);
                pt__qmm(ctx, &w, x, K, M, NULL, yt, N);
                okt &= memcmp(yt, yb, (size_t)(M * N) * 4) == 0;
                pt__qmm(ctx, &w, x, K, 1, NULL, y1, N);
                okt &= memcmp(y1, yb, (size_t)N * 4) == 0;
            }
            CHECK(okt, tu_name("%s %s: 1, 2, 3 threads give the same bits (M 16 and M 1)", tname(t), pt__qmm_kname(ks[kk], t)));
        }
        pt_set_threads(ctx, 2);
        pt__qmm_force(ctx, PT__QMM_KERN_AUTO);
        free(wd), free(x), free(yb), free(y1), free(yt), free(yc);
    }
}

/* quantized blocks have no alignment (34- and 18-byte blocks): a matrix at an odd address gives the same bits */
static void test_unaligned(pt_ctx *ctx) {
    tu_rng r = {31};
    int ti, kk, nk, ks[4];
    for (ti = 3; ti < 5; ti++) {
        pt_wtype t = all_types[ti];
        pt_qmat w, wu;
        unsigned char *wd = make_mat(t, 37, 96, &r, &w), *odd = (unsigned char *)malloc((size_t)(37 * pt_wtype_row_bytes(t, 96) + 1));
        float x[3 * 96], y0[3 * 37], y1[3 * 37];
        int i, ok = 1;
        memcpy(odd + 1, wd, (size_t)(37 * pt_wtype_row_bytes(t, 96)));
        wu = w, wu.data = odd + 1;
        for (i = 0; i < 3 * 96; i++) x[i] = tu_uniform(&r, -1.0f, 1.0f);
        nk = kern_list(t, ks);
        for (kk = 0; kk < nk; kk++) {
            pt__qmm_force(ctx, ks[kk]);
            pt__qmm(ctx, &w, x, 96, 3, NULL, y0, 37);
            pt__qmm(ctx, &wu, x, 96, 3, NULL, y1, 37);
            ok &= !memcmp(y0, y1, sizeof y0);
        }
        pt__qmm_force(ctx, PT__QMM_KERN_AUTO);
        CHECK(ok, tu_name("%s at an odd address: the same bits, every kernel", tname(t)));
        free(wd), free(odd);
    }
}

static void test_alloc_errors(pt_ctx *ctx) {
    tu_rng r = {5};
    pt_qmat w;
    unsigned char *wd = make_mat(PT_W_Q4_0, 64, 256, &r, &w);
    float x[4 * 256], y[4 * 64];
    long before;
    int i;
    for (i = 0; i < 4 * 256; i++) x[i] = tu_uniform(&r, -1.0f, 1.0f);
    pt__qmm(ctx, &w, x, 256, 4, NULL, y, 64);
    before = g_nmalloc;
    for (i = 0; i < 10; i++) pt__qmm(ctx, &w, x, 256, 1 + i % 4, NULL, y, 64);
    CHECKF(g_nmalloc == before, "pt__qmm allocates nothing once its workspace has grown", "%ld allocations", g_nmalloc - before);
    CHECK(pt_status_get(ctx) == PT_OK, "no error so far");
    w.cols = 100;
    y[0] = 7.0f;
    pt__qmm(ctx, &w, x, 256, 1, NULL, y, 64);
    CHECK(pt_status_get(ctx) == PT_ERR_ARG && strstr(pt_error(ctx), "q4_0") && strstr(pt_error(ctx), "100") && y[0] == 7.0f,
          "a q4_0 matrix of 100 columns: PT_ERR_ARG naming type and columns, y untouched");
    printf("  (%s)\n", pt_error(ctx));
    pt_error_clear(ctx);
    w.cols = 256, w.type = (pt_wtype)3;
    pt__qmm(ctx, &w, x, 256, 1, NULL, y, 64);
    CHECK(pt_status_get(ctx) == PT_ERR_ARG && strstr(pt_error(ctx), "unknown"), "an unknown type: PT_ERR_ARG");
    pt_error_clear(ctx);
    free(wd);
}

static int g_released;
static void release_fn(void *owner) { g_released += *(int *)owner; }
static void test_weights(pt_ctx *ctx) {
    pt_gpt_weights *w = (pt_gpt_weights *)pt__alloc(ctx, sizeof *w);
    static float vec[4 * 64 * 16];
    static unsigned char mat[1 << 16];
    int owner = 5, l;
    memset(w, 0, sizeof *w);
    w->cfg.vocab = 60, w->cfg.max_seq = 16, w->cfg.layers = 2, w->cfg.width = 64, w->cfg.heads = 4;
    w->ctx = ctx;
    w->wte.type = PT_W_Q8_0, w->wte.rows = 64, w->wte.cols = 64, w->wte.data = mat;
    w->head = w->wte; /* tied */
    w->wpe = vec, w->lnf_w = vec, w->lnf_b = vec;
    w->layer = (pt_gpt_layer_w *)pt__alloc(ctx, 2 * sizeof(pt_gpt_layer_w));
    memset(w->layer, 0, 2 * sizeof(pt_gpt_layer_w));
    for (l = 0; l < 2; l++) {
        pt_gpt_layer_w *L = &w->layer[l];
        L->ln1_w = L->ln1_b = L->ln2_w = L->ln2_b = vec;
        L->qkv_b = L->proj_b = L->fc_b = L->fproj_b = vec;
        L->qkv.type = PT_W_Q4_0, L->qkv.rows = 192, L->qkv.cols = 64, L->qkv.data = mat;
        L->proj.type = PT_W_BF16, L->proj.rows = 64, L->proj.cols = 64, L->proj.data = mat;
        L->fc.type = PT_W_F16, L->fc.rows = 256, L->fc.cols = 64, L->fc.data = mat;
        L->fproj.type = PT_W_F32, L->fproj.rows = 64, L->fproj.cols = 256, L->fproj.data = mat;
    }
    {
        int64_t C = 64, want = 64 * 2 * 34 + 16 * C * 4 + 2 * C * 4 +
                               2 * (192 * 2 * 18 + 64 * C * 2 + 256 * C * 2 + 64 * 256 * 4 + (4 + 3 + 1 + 4 + 1) * C * 4);
        CHECKF(pt_gpt_weights_bytes(w) == want, "pt_gpt_weights_bytes: matrices as stored (tied head once) and f32 vectors", "%lld vs %lld",
               (long long)pt_gpt_weights_bytes(w), (long long)want);
        w->head.type = PT_W_F32, w->head.data = vec;
        CHECKF(pt_gpt_weights_bytes(w) == want + 64 * 64 * 4, "pt_gpt_weights_bytes: an untied head counted", "%lld", (long long)pt_gpt_weights_bytes(w));
    }
    w->mem[0] = pt__alloc(ctx, 100), w->mem[3] = pt__alloc(ctx, 10);
    w->owner = &owner, w->release = release_fn;
    g_released = 0;
    pt_gpt_weights_free(w);
    CHECK(g_released == 5, "pt_gpt_weights_free calls release(owner) (owned blocks freed: see ASan's leak check)");
    pt_gpt_weights_free(NULL);
    CHECK(pt_gpt_weights_bytes(NULL) == -1, "pt_gpt_weights_bytes(NULL) = -1");
}

int main(int argc, char **argv) {
    pt_ctx *ctx;
    pt_desc d;
    tu_init(argc, argv);
    memset(&d, 0, sizeof d);
    d.threads = 2;
    ctx = pt_init(&d);
    if (!ctx) return 1;
    test_names();
    test_table();
    test_quantizers();
    test_roundtrip();
    test_quant_x();
    test_kernels(ctx);
    test_float_tail(ctx);
    test_invariance(ctx);
    test_unaligned(ctx);
    test_alloc_errors(ctx);
    test_weights(ctx);
    pt_shutdown(ctx);
    return tu_summary();
}

/* bench_qmm.c - the inference matrix kernel pt__qmm (see quant in ptrain.h): for each weight type
   (f32, f16, bf16, q8_0, q4_0), the GPT-2 small MLP shapes 3072 x 768 (rows x cols: the up projection,
   768 inputs) and 768 x 3072 (the down projection), and M = 1, 4, 16, 256 rows of x: time per call,
   GB/s of weights read and GFLOP/s (2 M rows cols). The weights rotate over copies of the matrix filling
   at least 384 MiB (more than the L3 of the machine), so each call streams its weights from memory as
   decode does (a 85M-parameter model's 48 matrices); "hot" repeats one matrix (cache-resident when it
   fits). One JSON line per measurement; cpu_us_per_call is the process's CPU time per call (all threads), and
   gb_per_s_per_cpu the weights' bytes per second of CPU time: on a machine shared with other busy processes
   the wall times swing, the CPU times much less.
   Usage: bench_qmm [threads (default 2)] [seconds per point (default 0.3)] [kernel c|avx2|avx512|best] [types, e.g. q8_0,q4_0 (default all)]
          [M values, e.g. 1,16 (default 1,4,16,256)]
   Build: cc -O2 -march=native -fopenmp -I. bench/bench_qmm.c -o build/bench_qmm -lm */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "bench_util.h"
#include <time.h>

/* 1 when item is one of the comma-separated list */
static int in_list(const char *list, const char *item) {
    size_t n = strlen(item);
    const char *p = list;
    while ((p = strstr(p, item)) != NULL) {
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
        p++;
    }
    return 0;
}

int main(int argc, char **argv) {
    static const pt_wtype types[] = {PT_W_F32, PT_W_F16, PT_W_BF16, PT_W_Q8_0, PT_W_Q4_0};
    static const int64_t shapes[2][2] = {{3072, 768}, {768, 3072}};
    static const int64_t Ms[] = {1, 4, 16, 256};
    int threads = argc > 1 ? atoi(argv[1]) : 2, ti, si, mi, kern = PT__QMM_KERN_AUTO;
    double secs = argc > 2 ? atof(argv[2]) : 0.3;
    pt_desc d;
    pt_ctx *ctx;
    float *x, *y;
    const char *tsel = argc > 4 ? argv[4] : NULL, *msel = argc > 5 ? argv[5] : NULL;
    if (argc > 3) kern = !strcmp(argv[3], "c") ? PT__QMM_KERN_C : !strcmp(argv[3], "avx2") ? PT__QMM_KERN_AVX2
                       : !strcmp(argv[3], "avx512") ? PT__QMM_KERN_AVX512 : PT__QMM_KERN_AUTO;
    memset(&d, 0, sizeof d);
    d.threads = threads > 0 ? threads : 1;
    ctx = pt_init(&d);
    if (!ctx) return 1;
    pt__qmm_force(ctx, kern);
    x = (float *)malloc((size_t)256 * 3072 * 4);
    y = (float *)malloc((size_t)256 * 3072 * 4);
    for (si = 0; si < 256 * 3072; si++) x[si] = (float)(((int64_t)si * 7919) % 2001 - 1000) / 1000.0f;
    for (ti = 0; ti < 5; ti++)
        for (si = 0; si < 2; si++) {
            const pt_wtype t = types[ti];
            const int64_t N = shapes[si][0], K = shapes[si][1], rb = pt_wtype_row_bytes(t, K), bytes = rb * N;
            const int ncopy = (int)((85000000 + N * K - 1) / (N * K)); /* the weights of a 85M-parameter GPT */
            unsigned char *w = (unsigned char *)malloc((size_t)(bytes * ncopy));
            float *row = (float *)malloc((size_t)K * 4);
            int64_t n, k;
            int c, hot;
            if (tsel && strcmp(tsel, "all") && !in_list(tsel, pt_wtype_name(t))) continue;
            for (n = 0; n < N; n++) {
                for (k = 0; k < K; k++) row[k] = (float)(((n * 31 + k * 17) % 255) - 127) / 127.0f;
                pt_quantize_row(t, row, w + n * rb, K);
            }
            for (c = 1; c < ncopy; c++) memcpy(w + (int64_t)c * bytes, w, (size_t)bytes);
            for (mi = 0; mi < 4; mi++)
                for (hot = 0; hot < 2; hot++) {
                    const int64_t M = Ms[mi];
                    double tm[5], tc[5], t0, el, us, cus;
                    clock_t c0;
                    int rep, calls;
                    pt_qmat m;
                    m.type = t, m.rows = N, m.cols = K, m.data = w;
                    char mbuf[32];
                    if (hot && M > 1) continue; /* hot: M = 1 only */
                    snprintf(mbuf, sizeof mbuf, "%lld", (long long)M);
                    if (msel && !in_list(msel, mbuf)) continue;
                    pt__qmm(ctx, &m, x, K, M, NULL, y, N); /* warm the workspace */
                    for (rep = 0; rep < 5; rep++) {
                        calls = 0;
                        t0 = pt_time();
                        c0 = clock();
                        do {
                            m.data = w + (hot ? 0 : (int64_t)(calls % ncopy) * bytes);
                            pt__qmm(ctx, &m, x, K, M, NULL, y, N);
                            calls++;
                            el = pt_time() - t0;
                        } while (el < secs / 5 || calls < 3);
                        tm[rep] = el / calls;
                        tc[rep] = (double)(clock() - c0) / CLOCKS_PER_SEC / calls;
                    }
                    us = median(tm, 5) * 1e6;
                    cus = median(tc, 5) * 1e6;
                    printf("{\"bench\":\"qmm\",\"type\":\"%s\",\"kernel\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"M\":%lld,\"threads\":%d,\"weights\":\"%s\","
                           "\"us_per_call\":%.2f,\"weights_gb_per_s\":%.2f,\"gflop_per_s\":%.2f,\"cpu_us_per_call\":%.2f,\"gb_per_s_per_cpu\":%.2f}\n",
                           pt_wtype_name(t), pt__qmm_kname(pt__qmm_resolve(kern, t), t), (long long)N, (long long)K, (long long)M, d.threads,
                           hot ? "hot" : "model", us, (double)bytes / us * 1e-3, 2.0 * (double)M * N * K / us * 1e-3, cus,
                           (double)bytes / cus * 1e-3);
                    fflush(stdout);
                }
            free(w);
            free(row);
        }
    if (pt_status_get(ctx) != PT_OK) fprintf(stderr, "bench_qmm: %s\n", pt_error(ctx));
    free(x);
    free(y);
    pt_shutdown(ctx);
    return 0;
}

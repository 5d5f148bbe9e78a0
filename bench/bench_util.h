/* bench_util.h - shared by the benchmark programs: the median of repeated timings, and (after
   ptrain.h) the GPT loss of one batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the 1-minute load average (what else runs on the machine), -1 where unknown */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
static double bench_loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* sorts v in place */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* a comma-separated list ("f32,q8_0", "1,16") into at most max words of up to 15 bytes; returns the count */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
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

#ifdef PTRAIN_H
/* the GPT's loss on a B x T batch of input ids x and target ids y, recorded on g after a reset */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
static pt_tensor *gpt_batch_loss(pt_graph *g, const pt_gpt *m, const int32_t *x, const int32_t *y, int B, int T) {
    pt_tensor *tx, *ty;
    pt_graph_reset(g);
    tx = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
    ty = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
    pt_tensor_write(tx, x);
    pt_tensor_write(ty, y);
    return pt_gpt_loss(g, m, tx, ty);
}
#endif

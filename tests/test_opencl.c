/* test_opencl.c - the OpenCL backend (>>opencl) against the CPU reference.
   Build: cc -std=c99 -O2 -DPTRAIN_OPENCL -I. tests/test_opencl.c -o test_opencl -lm
   Every op is run through the public API on a CPU context and on an OpenCL context with the same
   seed and inputs: forward output and the gradient of every input (pt_backward_from with the same
   output gradient) are compared, on several shapes including odd ones (not multiples of the work-group
   size); a parity table (op, max abs error, max relative error, tolerance) is printed. Also: the
   optimizers and the gradient norm, a small MLP trained for a few steps, the built-in GPT trained
   20 AdamW steps (per-step losses within 1e-4; ms per step printed), a CNN step (conv, maxpool,
   linear), bf16/i8 layout moves, casts to bf16 and f16 and back (bit-equal; f16 storage through
   vload_half / vstore_half, core OpenCL), the transfer counts of a tiny forward/backward, the program binary
   cache (a second context loads it, a corrupt entry is rebuilt), the error paths (malformed device,
   bad platform / device index, an accumulating move of a storage type). KV-cached inference on the
   device (pt_infer on an OpenCL context): the tutorial-sized GPT in f32, bf16 and f16 (q8_0: widened
   on the device, against the CPU on its f32 widening), every step's logits
   within 1e-4 of the CPU's, greedy tokens equal, a batch of two sequences of different lengths, a
   fork's copy on write, a swap out and in, the engine, all-rows logits, the transfers of a decode
   step (--infer: those checks alone).
   Without -DPTRAIN_OPENCL it checks only that asking for "opencl" fails with a clear message.
   Env: PTRAIN_CL_CACHE is set by the test to a fresh directory under the build directory (argv[1]
   or build/tests). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

static char last_err[2048];
static void on_err(void *u, pt_status st, const char *msg) {
    (void)u, (void)st;
    snprintf(last_err, sizeof last_err, "%s", msg);
}
static const char *errmsg(void) { return last_err; }
static void quiet_log(void *u, int level, const char *msg) { (void)u, (void)level, (void)msg; }

static pt_ctx *open_ctx(const char *device, uint64_t seed) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = seed;
    d.threads = 1;
    d.device = device;
    d.on_error = on_err;
    d.log = quiet_log;
    last_err[0] = 0;
    return pt_init(&d);
}

#ifndef PTRAIN_OPENCL
int main(int argc, char **argv) {
    pt_ctx *c;
    char buf[512];
    tu_init(argc, argv);
    c = open_ctx("opencl", 1);
    CHECK(c == NULL, "opencl without PTRAIN_OPENCL: pt_init returns NULL");
    CHECK_HAS(errmsg(), "-DPTRAIN_OPENCL", "opencl without PTRAIN_OPENCL: the message says how to build it in");
    CHECK(pt_device_list(buf, sizeof buf) == 0, "pt_device_list: no OpenCL device without PTRAIN_OPENCL");
    CHECK(strstr(buf, "cpu") != NULL, "pt_device_list names cpu");
    c = open_ctx("gpu", 1);
    CHECK(c == NULL, "unknown device: pt_init returns NULL");
    CHECK_HAS(errmsg(), "unknown device 'gpu'", "unknown device: named in the message");
    return tu_summary();
}
#else

/* ---- the two contexts and parity bookkeeping -------------------------------------------------- */
static pt_ctx *C_CPU, *C_CL;
static pt_graph *G_CPU, *G_CL;

typedef struct row { char op[48]; double abs, rel, tol; long n; } row;
static row rows[128];
static int nrows;

/* records the worst error of one op over all its shapes */
static void note(const char *op, double abs_err, double rel_err, double tol, long n) {
    int i;
    for (i = 0; i < nrows; i++)
        if (!strcmp(rows[i].op, op)) break;
    if (i == nrows) {
        if (nrows == 128) return;
        memset(&rows[nrows], 0, sizeof rows[0]);
        snprintf(rows[nrows++].op, sizeof rows[0].op, "%s", op);
    }
    if (abs_err > rows[i].abs) rows[i].abs = abs_err;
    if (rel_err > rows[i].rel) rows[i].rel = rel_err;
    rows[i].tol = tol;
    rows[i].n += n;
}

/* the denominator's floor as a fraction of the tensor's largest magnitude (0: none); set per op */
static double cur_floor;

/* compares n floats: relative error |a-b| / max(1e-3, |a|, |b|, cur_floor * max_i |a_i|) must be <= tol */
static void compare(const char *op, const char *what, const float *a, const float *b, long n, double tol) {
    double worst_abs = 0, worst_rel = 0, lo = 1e-3, amax = 0;
    long i, at = 0;
    for (i = 0; i < n; i++)
        if (fabs((double)a[i]) > amax) amax = fabs((double)a[i]);
    if (cur_floor * amax > lo) lo = cur_floor * amax;
    for (i = 0; i < n; i++) {
        double x = a[i], y = b[i], m = fabs(x) > fabs(y) ? fabs(x) : fabs(y), d = fabs(x - y), r;
        if (x != x || y != y) d = (x != x && y != y) ? 0 : INFINITY;
        r = d / (m > lo ? m : lo);
        if (d > worst_abs) worst_abs = d;
        if (r > worst_rel) worst_rel = r, at = i;
    }
    note(op, worst_abs, worst_rel, tol, n);
    CHECKF(worst_rel <= tol, tu_name("%s: %s equal on cpu and opencl (%ld values, tol %.0e)", op, what, n, tol),
           "max rel err %.3g at %ld (cpu %.9g, opencl %.9g), max abs err %.3g", worst_rel, at, n ? (double)a[at] : 0.0,
           n ? (double)b[at] : 0.0, worst_abs);
}

static float *read_all(const pt_tensor *t) {
    long n = (long)pt_numel(t);
    float *p = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    memset(p, 0, (size_t)(n ? n : 1) * sizeof(float));
    if (t) pt_tensor_read(t, p);
    return p;
}
static void compare_t(const char *op, const char *what, const pt_tensor *a, const pt_tensor *b, double tol) {
    float *x, *y;
    if (!a || !b || pt_numel(a) != pt_numel(b)) {
        CHECKF(0, tu_name("%s: %s exists on both", op, what), "cpu %p opencl %p (%s / %s)", (const void *)a, (const void *)b,
               pt_error(C_CPU), pt_error(C_CL));
        return;
    }
    x = read_all(a), y = read_all(b);
    compare(op, what, x, y, (long)pt_numel(a), tol);
    free(x), free(y);
}

/* random data */
static float *rnd(tu_rng *r, long n, float lo, float hi) {
    float *p = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    long i;
    for (i = 0; i < n; i++) p[i] = tu_uniform(r, lo, hi);
    return p;
}

/* An op under test: builds the output from up to 3 float inputs (and optional int data) on g. */
typedef struct optest {
    const char *name;
    int nin;
    int ndim[3];
    int64_t shape[3][4];
    float lo, hi;        /* input range */
    double tol_fwd, tol_bwd; /* relative tolerances (0: bit-equal) */
    pt_tensor *(*fn)(pt_graph *g, pt_tensor **x, const struct optest *t, pt_tensor *ids);
    int param;           /* int parameter of the op (transpose flags, ...) */
    int nids;            /* i32 ids input of this many elements, values in [0, idmax) */
    int idmax;
    int grad_mask;       /* inputs that need a gradient (bit i); 0 = all */
    double floor;        /* relative errors of values below floor * max |value| are taken at that size (0: 1e-3) */
} optest;

static void run_optest(const optest *t, tu_rng *r) {
    pt_tensor *xc[3], *xl[3], *yc, *yl, *idc = NULL, *idl = NULL, *dyc, *dyl;
    float *data[3], *dy;
    int32_t *ids = NULL;
    int i;
    pt_graph_reset(G_CPU);
    pt_graph_reset(G_CL);
    for (i = 0; i < t->nin; i++) {
        long n = 1;
        int d;
        for (d = 0; d < t->ndim[i]; d++) n *= (long)t->shape[i][d];
        data[i] = rnd(r, n, t->lo, t->hi);
        xc[i] = pt_tensor_from(G_CPU, PT_F32, t->ndim[i], t->shape[i], data[i]);
        xl[i] = pt_tensor_from(G_CL, PT_F32, t->ndim[i], t->shape[i], data[i]);
        if (!t->grad_mask || (t->grad_mask >> i & 1)) pt_requires_grad(xc[i]), pt_requires_grad(xl[i]);
    }
    if (t->nids) {
        int64_t n = t->nids;
        ids = (int32_t *)malloc((size_t)n * sizeof *ids);
        for (i = 0; i < t->nids; i++) ids[i] = (int32_t)(tu_next(r) % (unsigned long long)t->idmax);
        if (t->nids > 3) ids[1] = -100; /* an ignored target / (for embeddings the op refuses negatives: fixed below) */
        if (!strncmp(t->name, "embedding", 9)) ids[1] = 0;
        idc = pt_tensor_from(G_CPU, PT_I32, 1, &n, ids);
        idl = pt_tensor_from(G_CL, PT_I32, 1, &n, ids);
    }
    cur_floor = t->floor;
    yc = t->fn(G_CPU, xc, t, idc);
    yl = t->fn(G_CL, xl, t, idl);
    if (!yc || !yl) {
        CHECKF(0, tu_name("%s: runs", t->name), "cpu: %s / opencl: %s", pt_error(C_CPU), pt_error(C_CL));
        goto done;
    }
    compare_t(tu_name("%s fwd", t->name), "output", yc, yl, t->tol_fwd);
    if (t->tol_bwd >= 0) {
        long n = (long)pt_numel(yc);
        dy = rnd(r, n, -1, 1);
        dyc = pt_tensor_from(G_CPU, PT_F32, yc->ndim, yc->shape, dy);
        dyl = pt_tensor_from(G_CL, PT_F32, yl->ndim, yl->shape, dy);
        free(dy);
        if (pt_backward_from(G_CPU, yc, dyc) != PT_OK || pt_backward_from(G_CL, yl, dyl) != PT_OK) {
            CHECKF(0, tu_name("%s: backward runs", t->name), "cpu: %s / opencl: %s", pt_error(C_CPU), pt_error(C_CL));
            goto done;
        }
        for (i = 0; i < t->nin; i++)
            if (xc[i]->grad) compare_t(tu_name("%s bwd", t->name), tu_name("d input %d", i), xc[i]->grad, xl[i]->grad, t->tol_bwd);
    }
done:
    cur_floor = 0;
    CHECKF(pt_status_get(C_CL) == PT_OK && pt_status_get(C_CPU) == PT_OK, tu_name("%s: no error", t->name), "cpu: %s / opencl: %s",
           pt_error(C_CPU), pt_error(C_CL));
    pt_error_clear(C_CPU), pt_error_clear(C_CL);
    for (i = 0; i < t->nin; i++) free(data[i]);
    free(ids);
}

/* ---- the ops ---------------------------------------------------------------------------------- */
static pt_tensor *f_add(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_add(g, x[0], x[1]); }
static pt_tensor *f_sub(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_sub(g, x[0], x[1]); }
static pt_tensor *f_mul(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_mul(g, x[0], x[1]); }
static pt_tensor *f_scale(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_scale(g, x[0], -1.7f); }
static pt_tensor *f_relu(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_relu(g, x[0]); }
static pt_tensor *f_gelu(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_gelu(g, x[0]); }
static pt_tensor *f_dropout(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    pt_graph_set_sample_offset(g, 12345);
    return pt_dropout(g, x[0], t->param / 100.0f, 77);
}
static pt_tensor *f_sum(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_sum(g, x[0]); }
static pt_tensor *f_mean(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_mean(g, x[0]); }
static pt_tensor *f_matmul(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    return pt_matmul(g, x[0], x[1], t->param & 1, (t->param >> 1) & 1);
}
static pt_tensor *f_linear(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    return pt_linear(g, x[0], x[1], t->nin > 2 ? x[2] : NULL);
}
static pt_tensor *f_softmax(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t, (void)ids; return pt_softmax(g, x[0]); }
static pt_tensor *f_log_softmax(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)t, (void)ids;
    return pt_log_softmax(g, x[0]);
}
static pt_tensor *f_xent(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    return t->param ? pt_cross_entropy_ex(g, x[0], ids, -100, t->param) : pt_cross_entropy(g, x[0], ids, -100);
}
static pt_tensor *f_layernorm(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    return pt_layernorm(g, x[0], x[1], t->nin > 2 ? x[2] : NULL, 1e-5f);
}
static pt_tensor *f_embedding(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)t; return pt_embedding(g, x[0], ids); }
static pt_tensor *f_transpose(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)t, (void)ids;
    return pt_transpose(g, x[0], 0, x[0]->ndim - 1);
}
static pt_tensor *f_permute(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    static const int perm[4] = {2, 0, 3, 1};
    (void)t, (void)ids;
    return pt_permute(g, x[0], perm);
}
static pt_tensor *f_concat(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    return pt_concat(g, 2, x, t->param);
}
static pt_tensor *f_slice(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)t, (void)ids;
    return pt_slice(g, x[0], 1, 2, x[0]->shape[1] - 3);
}

static pt_tensor *f_attn(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)ids; return pt_attention(g, x[0], t->param); }
/* param: stride * 10 + pad */
static pt_tensor *f_conv(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    (void)ids;
    return pt_conv2d(g, x[0], x[1], t->nin > 2 ? x[2] : NULL, t->param / 10, t->param % 10);
}
/* param: k * 10 + stride */
/* f32 -> 16 bits -> f32 (param: PT_BF16 or PT_F16), squared so the gradient depends on the rounded value */
static pt_tensor *f_cast(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) {
    pt_tensor *y = pt_cast(g, pt_cast(g, x[0], (pt_dtype)t->param), PT_F32);
    (void)ids;
    return pt_mul(g, y, y);
}
static pt_tensor *f_maxpool(pt_graph *g, pt_tensor **x, const optest *t, pt_tensor *ids) { (void)ids; return pt_maxpool2d(g, x[0], t->param / 10, t->param % 10); }

static void test_ops(void) {
    tu_rng r = {42};
    static const optest T[] = {
        /* elementwise: 1e-6 (the same float operations in the same order; GELU uses the same exp) */
        {"add", 2, {2, 2}, {{37, 53}, {37, 53}}, -2, 2, 1e-6, 1e-6, f_add, 0, 0, 0, 0, 0},
        {"add (broadcast rows)", 2, {3, 1}, {{5, 7, 301}, {301}}, -2, 2, 1e-6, 1e-5, f_add, 0, 0, 0, 0, 0},
        {"add (broadcast, 3 cols)", 2, {2, 1}, {{999, 3}, {3}}, -2, 2, 1e-6, 1e-5, f_add, 0, 0, 0, 0, 0},
        {"sub (broadcast)", 2, {2, 1}, {{6, 67}, {67}}, -2, 2, 1e-6, 1e-5, f_sub, 0, 0, 0, 0, 0},
        {"mul", 2, {1, 1}, {{1025}, {1025}}, -2, 2, 1e-6, 1e-6, f_mul, 0, 0, 0, 0, 0},
        {"mul (broadcast)", 2, {2, 1}, {{129, 33}, {33}}, -2, 2, 1e-6, 1e-5, f_mul, 0, 0, 0, 0, 0},
        {"scale", 1, {3}, {{3, 5, 7}}, -3, 3, 1e-6, 1e-6, f_scale, 0, 0, 0, 0, 0},
        {"relu", 1, {1}, {{4099}}, -3, 3, 1e-6, 1e-6, f_relu, 0, 0, 0, 0, 0},
        {"gelu", 1, {2}, {{33, 257}}, -6, 6, 1e-6, 1e-6, f_gelu, 0, 0, 0, 0, 0},
        {"dropout p=0.3", 1, {2}, {{19, 131}}, -2, 2, 1e-6, 1e-6, f_dropout, 30, 0, 0, 0, 0},
        {"dropout p=0.9", 1, {1}, {{777}}, -2, 2, 1e-6, 1e-6, f_dropout, 90, 0, 0, 0, 0},
        /* reductions: 1e-5 */
        {"sum", 1, {2}, {{3, 5}}, -1, 1, 1e-5, 1e-6, f_sum, 0, 0, 0, 0, 0},
        {"sum (3 chunks)", 1, {1}, {{4096 * 2 + 77}}, -1, 1, 1e-5, 1e-6, f_sum, 0, 0, 0, 0, 0},
        {"mean", 1, {3}, {{7, 11, 13}}, -1, 1, 1e-5, 1e-6, f_mean, 0, 0, 0, 0, 0},
        /* matrix products through CLBlast: 1e-5 */
        {"matmul", 2, {2, 2}, {{17, 31}, {31, 9}}, -1, 1, 1e-5, 1e-5, f_matmul, 0, 0, 0, 0, 0},
        {"matmul ta", 2, {2, 2}, {{31, 17}, {31, 9}}, -1, 1, 1e-5, 1e-5, f_matmul, 1, 0, 0, 0, 0},
        {"matmul tb", 2, {2, 2}, {{17, 31}, {9, 31}}, -1, 1, 1e-5, 1e-5, f_matmul, 2, 0, 0, 0, 0},
        {"matmul ta tb", 2, {2, 2}, {{31, 17}, {9, 31}}, -1, 1, 1e-5, 1e-5, f_matmul, 3, 0, 0, 0, 0},
        {"matmul batched", 2, {3, 3}, {{3, 13, 20}, {3, 20, 7}}, -1, 1, 1e-5, 1e-5, f_matmul, 0, 0, 0, 0, 0},
        {"matmul batched, shared b", 2, {3, 2}, {{4, 5, 33}, {33, 6}}, -1, 1, 1e-5, 1e-5, f_matmul, 0, 0, 0, 0, 0},
        {"linear", 3, {2, 2, 1}, {{29, 65}, {47, 65}, {47}}, -1, 1, 1e-5, 1e-5, f_linear, 0, 0, 0, 0, 0},
        {"linear (no bias)", 2, {3, 2}, {{2, 3, 16}, {5, 16}}, -1, 1, 1e-5, 1e-5, f_linear, 0, 0, 0, 0, 0},
        /* row-wise: 1e-6 forward (same lanes and accumulation order), 1e-5 backward */
        {"softmax", 1, {2}, {{7, 33}}, -5, 5, 1e-6, 1e-5, f_softmax, 0, 0, 0, 0, 0},
        {"softmax (wide)", 1, {2}, {{3, 2049}}, -5, 5, 1e-6, 1e-5, f_softmax, 0, 0, 0, 0, 0},
        {"log_softmax", 1, {3}, {{2, 5, 101}}, -5, 5, 1e-6, 1e-5, f_log_softmax, 0, 0, 0, 0, 0},
        {"cross_entropy", 1, {2}, {{37, 61}}, -4, 4, 1e-5, 1e-5, f_xent, 0, 37, 61, 1, 0},
        {"cross_entropy (V 3000)", 1, {2}, {{5, 3000}}, -4, 4, 1e-5, 1e-5, f_xent, 0, 5, 3000, 1, 0},
        {"cross_entropy_ex nvalid", 1, {2}, {{9, 70}}, -4, 4, 1e-5, 1e-5, f_xent, 64, 9, 64, 1, 0},
        {"layernorm", 3, {2, 1, 1}, {{13, 67}, {67}, {67}}, -2, 2, 1e-5, 1e-5, f_layernorm, 0, 0, 0, 0, 0},
        {"layernorm (no bias)", 2, {3, 1}, {{2, 3, 130}, {130}}, -2, 2, 1e-5, 1e-5, f_layernorm, 0, 0, 0, 0, 0},
        {"embedding", 1, {2}, {{50, 37}}, -1, 1, 1e-6, 1e-6, f_embedding, 0, 301, 50, 1, 0},
        /* layout: exact copies */
        {"transpose", 1, {3}, {{5, 7, 9}}, -1, 1, 0, 0, f_transpose, 0, 0, 0, 0, 0},
        {"permute", 1, {4}, {{3, 4, 5, 6}}, -1, 1, 0, 0, f_permute, 0, 0, 0, 0, 0},
        {"concat", 2, {3, 3}, {{2, 3, 5}, {2, 3, 7}}, -1, 1, 0, 0, f_concat, 2, 0, 0, 0, 0},
        {"slice", 1, {3}, {{4, 11, 3}}, -1, 1, 0, 0, f_slice, 0, 0, 0, 0, 0},
        /* attention: qkv [B, T, 3C], param = heads; T not a multiple of 16, head sizes 8..72 (72: the
           kernels' 64-dim slices twice). The same formulas, but the CPU's AVX-512 tiles use FMA and a
           polynomial exp, and outputs are weighted sums that cancel: errors are relative to the
           tensor's largest value (normwise), 1e-5 */
        {"attention H1 hs8", 1, {3}, {{1, 17, 24}}, -2, 2, 1e-5, 1e-5, f_attn, 1, 0, 0, 0, 1.0},
        {"attention H2 hs16", 1, {3}, {{2, 37, 96}}, -2, 2, 1e-5, 1e-5, f_attn, 2, 0, 0, 0, 1.0},
        {"attention H3 hs24", 1, {3}, {{2, 45, 216}}, -2, 2, 1e-5, 1e-5, f_attn, 3, 0, 0, 0, 1.0},
        {"attention H4 hs16 T70", 1, {3}, {{3, 70, 192}}, -2, 2, 1e-5, 1e-5, f_attn, 4, 0, 0, 0, 1.0},
        {"attention H1 hs72", 1, {3}, {{1, 23, 216}}, -2, 2, 1e-5, 1e-5, f_attn, 1, 0, 0, 0, 1.0},
        /* images: im2col, col2im, the channel bias and max pooling are bit-equal; the products CLBlast */
        {"conv2d 3x3 s1 p1", 3, {4, 4, 1}, {{2, 3, 9, 11}, {4, 3, 3, 3}, {4}}, -1, 1, 1e-5, 1e-5, f_conv, 11, 0, 0, 0, 0},
        {"conv2d 3x3 s2 p0", 3, {4, 4, 1}, {{3, 2, 10, 7}, {5, 2, 3, 3}, {5}}, -1, 1, 1e-5, 1e-5, f_conv, 20, 0, 0, 0, 0},
        {"conv2d 5x5 s2 p2 (no bias)", 2, {4, 4}, {{1, 3, 13, 9}, {2, 3, 5, 5}}, -1, 1, 1e-5, 1e-5, f_conv, 22, 0, 0, 0, 0},
        {"conv2d 1x1", 3, {4, 4, 1}, {{2, 5, 3, 7}, {3, 5, 1, 1}, {3}}, -1, 1, 1e-5, 1e-5, f_conv, 10, 0, 0, 0, 0},
        {"cast bf16 round trip", 1, {2}, {{37, 129}}, -70000, 70000, 0, 0, f_cast, PT_BF16, 0, 0, 0, 0},
        {"cast f16 round trip (storage: no cl_khr_fp16 needed)", 1, {2}, {{37, 129}}, -70000, 70000, 0, 0, f_cast, PT_F16, 0, 0, 0, 0},
        {"cast f16 small (subnormals)", 1, {1}, {{5001}}, -1e-4f, 1e-4f, 0, 0, f_cast, PT_F16, 0, 0, 0, 0},
        {"maxpool 2 s2", 1, {4}, {{2, 3, 9, 11}}, -1, 1, 0, 0, f_maxpool, 22, 0, 0, 0, 0},
        {"maxpool 3 s2 (overlapping)", 1, {4}, {{1, 4, 10, 7}}, -1, 1, 0, 0, f_maxpool, 32, 0, 0, 0, 0},
        {"maxpool 3 s1", 1, {4}, {{2, 2, 6, 5}}, -1, 1, 0, 0, f_maxpool, 31, 0, 0, 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof T / sizeof T[0]; i++) run_optest(&T[i], &r);
}

/* ---- a small MLP trained on both backends: optimizers, gradient norm, parameter init ---------- */
enum { MB = 6, MD = 13, MH = 37, MO = 11 };
static pt_tensor *mlp_loss(pt_graph *g, const float *x, const int32_t *y) {
    pt_ctx *c = pt_graph_ctx(g);
    int64_t xs[2] = {MB, MD}, ys[1] = {MB};
    pt_tensor *xt = pt_tensor_from(g, PT_F32, 2, xs, x), *yt = pt_tensor_from(g, PT_I32, 1, ys, y), *h;
    h = pt_gelu(g, pt_linear(g, xt, &pt_param_find(c, "w1")->value, &pt_param_find(c, "b1")->value));
    h = pt_layernorm(g, h, &pt_param_find(c, "ln.w")->value, &pt_param_find(c, "ln.b")->value, 1e-5f);
    h = pt_linear(g, h, &pt_param_find(c, "w2")->value, &pt_param_find(c, "b2")->value);
    return pt_cross_entropy(g, h, yt, -100);
}
static void mlp_params(pt_ctx *c) {
    int64_t s1[2] = {MH, MD}, s2[1] = {MH}, s3[2] = {MO, MH}, s4[1] = {MO};
    pt_param_new(c, "w1", 2, s1, PT_INIT_NORMAL, 0.3f, 0);
    pt_param_new(c, "b1", 1, s2, PT_INIT_UNIFORM, 0.1f, 0);
    pt_param_new(c, "ln.w", 1, s2, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
    pt_param_new(c, "ln.b", 1, s2, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    pt_param_new(c, "w2", 2, s3, PT_INIT_NORMAL, 0.2f, 0);
    pt_param_new(c, "b2", 1, s4, PT_INIT_CONST, 0.05f, 0);
}

static void test_train(int kind) {
    const char *kn = kind == PT_OPTIM_ADAMW ? "adamw" : "sgd";
    pt_ctx *c[2];
    pt_graph *g[2];
    pt_optim *o[2];
    pt_optim_desc od;
    float x[MB * MD], losses[2][8], norms[2][8];
    int32_t y[MB];
    tu_rng r = {7};
    int k, step, i, nsteps = 6;
    memset(&od, 0, sizeof od);
    od.kind = (pt_optim_kind)kind;
    od.lr = kind == PT_OPTIM_ADAMW ? 0.01f : 0.1f;
    od.weight_decay = 0.1f;
    od.momentum = kind == PT_OPTIM_SGD ? 0.9f : 0.0f;
    od.clip_norm = 0.5f;
    for (k = 0; k < 2; k++) {
        c[k] = open_ctx(k ? "opencl" : "cpu", 99);
        if (!c[k]) {
            CHECKF(0, tu_name("%s: contexts", kn), "%s", last_err);
            return;
        }
        mlp_params(c[k]);
        o[k] = pt_optim_new(c[k], &od);
        g[k] = pt_graph_new(c[k]);
    }
    {
        pt_tensor a = pt_param_slab(c[0]), b = pt_param_slab(c[1]);
        compare_t("param init", "parameter slab", &a, &b, 0);
    }
    for (step = 0; step < nsteps; step++) {
        for (i = 0; i < MB * MD; i++) x[i] = tu_uniform(&r, -1, 1);
        for (i = 0; i < MB; i++) y[i] = (int32_t)(tu_next(&r) % MO);
        for (k = 0; k < 2; k++) {
            pt_tensor *loss;
            pt_graph_reset(g[k]);
            loss = mlp_loss(g[k], x, y);
            losses[k][step] = pt_item(loss);
            pt_zero_grad(c[k]);
            pt_backward(g[k], loss);
            norms[k][step] = pt_optim_step(o[k], od.lr);
        }
    }
    compare(tu_name("%s training", kn), "losses of 6 steps", losses[0], losses[1], nsteps, 1e-5);
    compare(tu_name("%s grad norm", kn), "gradient norms of 6 steps", norms[0], norms[1], nsteps, 1e-5);
    {
        pt_tensor a = pt_param_slab(c[0]), b = pt_param_slab(c[1]);
        compare_t(tu_name("%s update", kn), "parameters after 6 steps", &a, &b, 1e-4);
    }
    CHECKF(pt_status_get(c[1]) == PT_OK, tu_name("%s training on opencl: no error", kn), "%s", pt_error(c[1]));
    /* the transfers of one training step (after the first: nothing is allocated any more) */
    if (kind == PT_OPTIM_ADAMW) {
        pt_transfers t;
        pt_device_info di = pt_device_info_get(c[1]);
        int64_t scal = 0;
        pt_transfer_reset(c[1]);
        pt_graph_reset(g[1]);
        {
            pt_tensor *loss = mlp_loss(g[1], x, y);
            (void)pt_item(loss);
            pt_zero_grad(c[1]);
            pt_backward(g[1], loss);
            pt_optim_step(o[1], od.lr);
        }
        t = pt_transfer_stats(c[1]);
        printf("transfers of one step (B=%d, D=%d):", MB, MD);
        for (k = 0; k < PT_XFER_KINDS; k++)
            if (t.h2d_count[k] || t.d2h_count[k])
                printf(" %s h2d %lld x (%lld B) d2h %lld x (%lld B);", pt_xfer_kind_name(k), (long long)t.h2d_count[k], (long long)t.h2d_bytes[k],
                       (long long)t.d2h_count[k], (long long)t.d2h_bytes[k]);
        printf("\n");
        scal = t.d2h_bytes[PT_XFER_SCALAR];
        CHECKF(t.h2d_count[PT_XFER_IO] == 2 && t.h2d_bytes[PT_XFER_IO] == (MB * MD + MB) * 4, "transfers: the batch in (x and y: 2 writes)",
               "%lld writes, %lld bytes", (long long)t.h2d_count[PT_XFER_IO], (long long)t.h2d_bytes[PT_XFER_IO]);
        CHECKF(t.d2h_count[PT_XFER_IO] == 1 && t.d2h_bytes[PT_XFER_IO] == 4, "transfers: the loss out (1 read of 4 bytes)", "%lld reads, %lld bytes",
               (long long)t.d2h_count[PT_XFER_IO], (long long)t.d2h_bytes[PT_XFER_IO]);
        CHECKF(t.d2h_count[PT_XFER_CHECK] == 1 && t.d2h_bytes[PT_XFER_CHECK] == MB * 4, "transfers: the targets' range check (1 read)",
               "%lld reads, %lld bytes", (long long)t.d2h_count[PT_XFER_CHECK], (long long)t.d2h_bytes[PT_XFER_CHECK]);
        CHECKF(t.d2h_count[PT_XFER_SCALAR] == 1 && (scal == 8 || scal == 4), "transfers: the gradient norm (1 scalar read)", "%lld reads, %lld bytes",
               (long long)t.d2h_count[PT_XFER_SCALAR], (long long)scal);
        CHECKF(t.h2d_total_count == 2 && t.d2h_total_count == 3, "transfers: nothing else (2 writes, 3 reads per step)", "%lld writes, %lld reads",
               (long long)t.h2d_total_count, (long long)t.d2h_total_count);
        t = pt_transfer_stats(c[0]);
        CHECK(t.h2d_total_count == 0 && t.d2h_total_count == 0, "transfers: the CPU backend counts none");
        (void)di;
    }
    for (k = 0; k < 2; k++) pt_shutdown(c[k]);
}

/* ---- the built-in GPT trained for 20 steps with AdamW on both backends (the 1e-4 bar) ---- */
enum { GV = 64, GT = 32, GB = 4, GSTEPS = 20 };
/* the GPT on both backends in precision prec (pt_set_precision); its losses into out (may be NULL) */
static void test_gpt(pt_dtype prec, float *out) {
    const char *pn = prec == PT_BF16 ? "bf16" : prec == PT_F16 ? "fp16" : "f32";
    char what[64];
    pt_ctx *c[2];
    pt_graph *g[2];
    pt_optim *o[2];
    pt_gpt *m[2];
    pt_gpt_config cfg;
    pt_optim_desc od;
    float losses[2][GSTEPS];
    double ms[2] = {0, 0}, worst = 0;
    int32_t ids[GB * GT], tg[GB * GT], inc = 1;
    int64_t s2[2] = {GB, GT};
    tu_rng r = {11};
    int k, step, i;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = GV, cfg.max_seq = GT, cfg.layers = 2, cfg.width = 64, cfg.heads = 4;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    for (k = 0; k < 2; k++) {
        c[k] = open_ctx(k ? "opencl" : "cpu", 2024);
        if (!c[k]) {
            CHECKF(0, "gpt: contexts", "%s", last_err);
            return;
        }
        if (pt_set_precision(c[k], prec) != PT_OK) {
            CHECKF(0, "gpt: precision", "%s", pt_error(c[k]));
            return;
        }
        m[k] = pt_gpt_new(c[k], &cfg);
        o[k] = pt_optim_new(c[k], &od);
        g[k] = pt_graph_new(c[k]);
    }
    for (step = 0; step < GSTEPS; step++) {
        /* learnable rows: each row counts up from a random token by a random step 1..3 */
        for (i = 0; i < GB * GT; i++) {
            if (i % GT == 0) ids[i] = (int32_t)(tu_next(&r) % GV), inc = (int32_t)(1 + tu_next(&r) % 3);
            else ids[i] = (ids[i - 1] + inc) % GV;
            if (i % GT) tg[i - 1] = ids[i];
            if (i % GT == GT - 1) tg[i] = (ids[i] + inc) % GV;
        }
        for (k = 0; k < 2; k++) {
            double t0 = pt_time();
            pt_tensor *loss;
            pt_graph_reset(g[k]);
            loss = pt_gpt_loss(g[k], m[k], pt_tensor_from(g[k], PT_I32, 2, s2, ids), pt_tensor_from(g[k], PT_I32, 2, s2, tg));
            losses[k][step] = pt_item(loss);
            pt_zero_grad(c[k]);
            pt_backward(g[k], loss);
            pt_optim_step(o[k], od.lr);
            if (step >= 2) ms[k] += (pt_time() - t0) * 1e3; /* past the first steps' allocations */
        }
    }
    for (step = 0; step < GSTEPS; step++) {
        double d = fabs((double)losses[0][step] - losses[1][step]) / fabs((double)losses[0][step]);
        if (d > worst) worst = d;
    }
    printf("gpt %s (vocab %d, T %d, B %d, 2 layers, width 64, 4 heads), %d AdamW steps: loss %.6f -> %.6f (cpu) %.6f -> %.6f (opencl), "
           "max rel loss difference %.3g; ms per step (steps 3..%d): cpu %.2f opencl %.2f\n",
           pn, GV, GT, GB, GSTEPS, losses[0][0], losses[0][GSTEPS - 1], losses[1][0], losses[1][GSTEPS - 1], worst, GSTEPS, ms[0] / (GSTEPS - 2),
           ms[1] / (GSTEPS - 2));
    snprintf(what, sizeof what, prec == PT_F32 ? "gpt training" : "gpt training, %s", pn);
    /* bf16: an operand a few ulps apart on the two backends may round to another bf16 (2^-8 apart), and
       20 steps at lr 1e-2 carry that on (measured on PoCL: 2e-3 at the last step, while bf16 and f32 on
       one backend end 3% apart) */
    compare(what, "losses of 20 AdamW steps", losses[0], losses[1], GSTEPS, prec == PT_F32 ? 1e-4 : 5e-3);
    if (out) memcpy(out, losses[1], sizeof losses[1]);
    CHECKF(losses[0][GSTEPS - 1] < losses[0][0] - 0.1f, "gpt training: the loss goes down", "%g -> %g", losses[0][0], losses[0][GSTEPS - 1]);
    CHECKF(pt_status_get(c[0]) == PT_OK && pt_status_get(c[1]) == PT_OK, "gpt training: no error", "cpu: %s / opencl: %s", pt_error(c[0]),
           pt_error(c[1]));
    for (k = 0; k < 2; k++) {
        pt_graph_free(g[k]);
        pt_optim_free(o[k]);
        pt_gpt_free(m[k]);
        pt_shutdown(c[k]);
    }
}

/* ---- a small CNN step (conv, bias, relu, maxpool, linear) with SGD on both backends ------------- */
static void test_cnn(void) {
    enum { N = 3, CI = 2, H = 11, W = 10, CO = 4, K = 3, NC = 5 };
    pt_ctx *c[2];
    pt_graph *g[2];
    pt_optim *o[2];
    pt_optim_desc od;
    float x[N * CI * H * W], losses[2][3];
    int32_t y[N];
    int64_t xs[4] = {N, CI, H, W}, ys[1] = {N}, ws[4] = {CO, CI, K, K}, bs[1] = {CO}, ls[2] = {NC, CO * 5 * 5}, lb[1] = {NC}, fl[2] = {N, -1};
    tu_rng r = {5};
    int k, step, i;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD, od.lr = 0.05f, od.momentum = 0.9f;
    for (k = 0; k < 2; k++) {
        c[k] = open_ctx(k ? "opencl" : "cpu", 31);
        if (!c[k]) {
            CHECKF(0, "cnn: contexts", "%s", last_err);
            return;
        }
        pt_param_new(c[k], "conv.w", 4, ws, PT_INIT_NORMAL, 0.3f, 0);
        pt_param_new(c[k], "conv.b", 1, bs, PT_INIT_UNIFORM, 0.1f, 0);
        pt_param_new(c[k], "fc.w", 2, ls, PT_INIT_NORMAL, 0.2f, 0);
        pt_param_new(c[k], "fc.b", 1, lb, PT_INIT_ZEROS, 0, 0);
        o[k] = pt_optim_new(c[k], &od);
        g[k] = pt_graph_new(c[k]);
    }
    for (step = 0; step < 3; step++) {
        for (i = 0; i < N * CI * H * W; i++) x[i] = tu_uniform(&r, -1, 1);
        for (i = 0; i < N; i++) y[i] = (int32_t)(tu_next(&r) % NC);
        for (k = 0; k < 2; k++) {
            pt_ctx *cc = c[k];
            pt_graph *gg = g[k];
            pt_tensor *h, *loss;
            pt_graph_reset(gg);
            /* [3, 2, 11, 10] -conv 3x3 p1-> [3, 4, 11, 10] -pool 2 s2-> [3, 4, 5, 5] ... flattened 100; pool 2 s2 of 11x10 is 5x5 */
            h = pt_conv2d(gg, pt_tensor_from(gg, PT_F32, 4, xs, x), &pt_param_find(cc, "conv.w")->value, &pt_param_find(cc, "conv.b")->value, 1, 1);
            h = pt_maxpool2d(gg, pt_relu(gg, h), 2, 2);
            h = pt_reshape(gg, h, 2, fl);
            h = pt_linear(gg, h, &pt_param_find(cc, "fc.w")->value, &pt_param_find(cc, "fc.b")->value);
            loss = pt_cross_entropy(gg, h, pt_tensor_from(gg, PT_I32, 1, ys, y), -100);
            losses[k][step] = pt_item(loss);
            pt_zero_grad(cc);
            pt_backward(gg, loss);
            pt_optim_step(o[k], od.lr);
        }
    }
    compare("cnn training", "losses of 3 SGD steps", losses[0], losses[1], 3, 1e-5);
    {
        pt_tensor a = pt_param_slab(c[0]), b = pt_param_slab(c[1]);
        compare_t("cnn update", "parameters after 3 steps", &a, &b, 1e-5);
    }
    CHECKF(pt_status_get(c[0]) == PT_OK && pt_status_get(c[1]) == PT_OK, "cnn: no error", "cpu: %s / opencl: %s", pt_error(c[0]),
           pt_error(c[1]));
    for (k = 0; k < 2; k++) {
        pt_graph_free(g[k]);
        pt_optim_free(o[k]);
        pt_shutdown(c[k]);
    }
}

/* ---- layout moves of 2- and 1-byte storage types are byte-exact copies ----------------------- */
/* sum through both OpenCL reduction kernels (PTRAIN_CL_REDUCE=lanes / groups): bit-equal to each
   other and to the CPU backend on sizes around the 4096-element chunk */
static void test_reduce_kernels(void) {
    static const int64_t sizes[] = {1, 63, 4095, 4096, 4096 * 3 + 77, 100003};
    const char *mode[2] = {"lanes", "groups"};
    pt_ctx *c[3];
    int i, k;
    c[0] = open_ctx("cpu", 5);
    for (k = 0; k < 2; k++) {
        setenv("PTRAIN_CL_REDUCE", mode[k], 1);
        c[k + 1] = open_ctx("opencl", 5);
    }
    unsetenv("PTRAIN_CL_REDUCE");
    if (!c[0] || !c[1] || !c[2]) {
        CHECKF(0, "contexts for the reduction kernels", "%s", last_err);
        return;
    }
    for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
        int64_t n = sizes[i], j;
        float *h = (float *)malloc(sizeof(float) * (size_t)n), r[3];
        char name[96];
        pt_rng rng = pt_rng_seed((uint64_t)n);
        for (j = 0; j < n; j++) h[j] = pt_rng_float(&rng) * 2.0f - 0.7f;
        for (k = 0; k < 3; k++) {
            pt_graph *g = pt_graph_new(c[k]);
            pt_tensor *x = pt_tensor_new(g, PT_F32, 1, n, 0, 0, 0);
            pt_graph_set_grad(g, 0);
            pt_tensor_write(x, h);
            r[k] = pt_item(pt_sum(g, x));
            pt_graph_free(g);
        }
        snprintf(name, sizeof name, "sum of %lld: lanes and groups kernels bit-equal to the CPU", (long long)n);
        CHECKF(!memcmp(&r[0], &r[1], 4) && !memcmp(&r[0], &r[2], 4), name, "cpu %.9g lanes %.9g groups %.9g", r[0], r[1], r[2]);
        free(h);
    }
    for (k = 0; k < 3; k++) pt_shutdown(c[k]);
}

static void test_storage_layout(void) {
    static const int perm[3] = {2, 0, 1};
    int64_t s[3] = {3, 5, 7};
    unsigned char raw[3 * 5 * 7 * 2], out[2][3 * 5 * 7 * 2 * 2];
    tu_rng r = {3};
    int d, k, i;
    pt_dtype dts[2] = {PT_BF16, PT_I8};
    for (i = 0; i < (int)sizeof raw; i++) raw[i] = (unsigned char)(tu_next(&r) & 0xff);
    for (d = 0; d < 2; d++) {
        int64_t esz = pt_dtype_size(dts[d]), n = 3 * 5 * 7;
        for (k = 0; k < 2; k++) {
            pt_graph *g = k ? G_CL : G_CPU;
            pt_tensor *a, *p, *cat, *sl, *xs[2];
            pt_graph_reset(g);
            a = pt_tensor_from(g, dts[d], 3, s, raw);
            p = pt_permute(g, a, perm);
            xs[0] = p, xs[1] = p;
            sl = pt_slice(g, a, 1, 1, 3);
            cat = pt_concat(g, 2, xs, 0);
            memset(out[k], 0, sizeof out[k]);
            if (cat) pt_tensor_read(cat, out[k]);
            if (sl) pt_tensor_read(sl, out[k] + 2 * n * esz - 3 * 3 * 7 * esz); /* overwrites the tail: a second check */
            (void)p;
        }
        CHECKF(!memcmp(out[0], out[1], (size_t)(2 * n * esz)) && pt_status_get(C_CL) == PT_OK,
               tu_name("%s permute, concat, slice: the same bytes on cpu and opencl", d ? "i8" : "bf16"), "%s / %s", pt_error(C_CPU),
               pt_error(C_CL));
        pt_error_clear(C_CPU), pt_error_clear(C_CL);
    }
}

/* parameter init transfers: one write per parameter, its bytes */
static void test_param_transfers(void) {
    pt_ctx *c = open_ctx("opencl", 5);
    pt_transfers t;
    int64_t n = (MH * MD + MH + MH + MH + MO * MH + MO) * 4;
    if (!c) {
        CHECKF(0, "param transfers: context", "%s", last_err);
        return;
    }
    mlp_params(c);
    t = pt_transfer_stats(c);
    CHECKF(t.h2d_count[PT_XFER_PARAM] == 6 && t.h2d_bytes[PT_XFER_PARAM] == n && t.h2d_total_count == 6 && t.d2h_total_count == 0,
           "transfers: parameter init writes each parameter once", "%lld writes of %lld bytes (expected 6 of %lld), %lld in all",
           (long long)t.h2d_count[PT_XFER_PARAM], (long long)t.h2d_bytes[PT_XFER_PARAM], (long long)n, (long long)t.h2d_total_count);
    pt_shutdown(c);
}

/* ---- the program binary cache ------------------------------------------------------------------- */
static void test_cache(void) {
    pt_ctx *c;
    pt_device_info d;
    char path[512];
    FILE *f;
    long size = 0;
    c = open_ctx("opencl", 1);
    if (!c) {
        CHECKF(0, "cache: first context", "%s", last_err);
        return;
    }
    d = pt_device_info_get(c);
    snprintf(path, sizeof path, "%s", d.cache_file);
    printf("device: %s / %s (driver %s), opencl:%d:%d, cache %s\n", d.platform, d.device, d.driver, d.platform_index, d.device_index, path);
    CHECKF(d.program_builds == 1 && d.program_cache_loads == 0, "cache: an empty cache builds from source", "builds %d loads %d", d.program_builds,
           d.program_cache_loads);
    pt_shutdown(c);
    f = fopen(path, "rb");
    if (f) fseek(f, 0, SEEK_END), size = ftell(f), fclose(f);
    CHECKF(size > 32, "cache: the binary was written", "%s: %ld bytes", path, size);
    c = open_ctx("opencl", 1);
    d = c ? pt_device_info_get(c) : d;
    CHECKF(c && d.program_builds == 0 && d.program_cache_loads == 1, "cache: a second context loads it (no build)", "builds %d loads %d (%s)",
           d.program_builds, d.program_cache_loads, last_err);
    pt_shutdown(c);
    /* corrupt the middle of the binary: the hash no longer matches, the entry is rebuilt */
    f = fopen(path, "r+b");
    if (f) {
        int i;
        fseek(f, size / 2, SEEK_SET);
        for (i = 0; i < 16; i++) fputc(0x5a ^ i, f);
        fclose(f);
    }
    c = open_ctx("opencl", 1);
    d = c ? pt_device_info_get(c) : d;
    CHECKF(c && d.program_builds == 1 && d.program_cache_loads == 0, "cache: a corrupted entry is rebuilt, not loaded", "builds %d loads %d (%s)",
           d.program_builds, d.program_cache_loads, last_err);
    pt_shutdown(c);
    /* a truncated entry too */
    f = fopen(path, "wb");
    if (f) fputs("PTCLBIN1", f), fclose(f);
    c = open_ctx("opencl", 1);
    d = c ? pt_device_info_get(c) : d;
    CHECKF(c && d.program_builds == 1, "cache: a truncated entry is rebuilt", "builds %d loads %d", d.program_builds, d.program_cache_loads);
    pt_shutdown(c);
    c = open_ctx("opencl", 1);
    d = c ? pt_device_info_get(c) : d;
    CHECKF(c && d.program_cache_loads == 1, "cache: the rewritten entry loads again", "builds %d loads %d", d.program_builds, d.program_cache_loads);
    pt_shutdown(c);
}

/* ---- error paths -------------------------------------------------------------------------------- */
static void test_errors(void) {
    pt_ctx *c;
    pt_graph *g;
    char list[1024];
    int n = pt_device_list(list, sizeof list);
    CHECKF(n >= 1 && strstr(list, "opencl:0:0"), "pt_device_list lists opencl:0:0", "%d devices: %s", n, list);
    c = open_ctx("opencl:0:99", 1);
    CHECK(c == NULL, "bad device index: pt_init returns NULL");
    CHECK_HAS(errmsg(), "has no device 99", "bad device index: named in the message");
    CHECK_HAS(errmsg(), "opencl:0:0", "bad device index: the message lists what exists");
    c = open_ctx("opencl:9", 1);
    CHECK(c == NULL, "bad platform index: pt_init returns NULL");
    CHECK_HAS(errmsg(), "no OpenCL platform 9", "bad platform index: named in the message");
    c = open_ctx("opencl:x", 1);
    CHECK(c == NULL && strstr(last_err, "malformed"), "malformed device string: refused");
    c = open_ctx("cuda", 1);
    CHECK(c == NULL && strstr(last_err, "unknown device 'cuda'"), "unknown device: refused");
    /* env PTRAIN_DEVICE when desc.device is NULL */
    setenv("PTRAIN_DEVICE", "opencl:0", 1);
    c = open_ctx(NULL, 1);
    CHECKF(c && !strcmp(pt_backend_name(c), "opencl"), "PTRAIN_DEVICE=opencl:0 selects OpenCL", "%s", c ? pt_backend_name(c) : last_err);
    unsetenv("PTRAIN_DEVICE");
    if (!c) return;
    /* storage types: an accumulating layout move is refused as on the CPU (no kernel adds bf16) */
    g = pt_graph_new(c);
    {
        int64_t s[2] = {3, 4};
        pt_tensor *a = pt_tensor_from(g, PT_BF16, 2, s, NULL), *b = pt_tensor_from(g, PT_BF16, 2, s, NULL);
        c->be->copy_block(c, b, 4, 0, a, 4, 0, 4, 3, 1, 1); /* the kernel table directly (the ops never ask this) */
        CHECK(pt_status_get(c) == PT_ERR_DTYPE, "accumulating copy_block of bf16 on OpenCL: PT_ERR_DTYPE");
        CHECK_HAS(pt_error(c), "non-f32/i32", "accumulating copy_block of bf16 on OpenCL: says why");
    }
    pt_shutdown(c);
    /* a kernel build that fails: pt_init returns NULL with the build log in the message */
    setenv("PTRAIN_CL_OPTIONS", "-DPT_CL_FORCE_BUILD_ERROR", 1);
    c = open_ctx("opencl", 1);
    CHECK(c == NULL, "a failing kernel build: pt_init returns NULL");
    CHECK_HAS(errmsg(), "build log", "a failing kernel build: the message carries the build log");
    CHECK_HAS(errmsg(), "forced by PTRAIN_CL_OPTIONS", "a failing kernel build: the compiler's own words are in it");
    setenv("PTRAIN_CL_OPTIONS", "-cl-fast-relaxed-math", 1);
    c = open_ctx("opencl", 1);
    CHECK(c == NULL && strstr(errmsg(), "relaxed-math options are refused"), "PTRAIN_CL_OPTIONS with relaxed math: refused");
    unsetenv("PTRAIN_CL_OPTIONS");
    /* an allocation the device cannot hold: an error with the sizes, no crash, the context usable */
    c = open_ctx("opencl", 1);
    if (!c) return;
    g = pt_graph_new(c);
    {
        pt_tensor *big = pt_tensor_new(g, PT_F32, 2, (int64_t)1 << 20, (int64_t)1 << 20, 0, 0); /* 4 TiB */
        int64_t s1[1] = {5};
        CHECK(big == NULL && pt_status_get(c) == PT_ERR_OOM, "a 4 TiB tensor on OpenCL: NULL and PT_ERR_OOM");
        CHECK_HAS(pt_error(c), "bytes", "a 4 TiB tensor on OpenCL: the message gives the sizes");
        pt_error_clear(c);
        pt_graph_reset(g);
        CHECK(pt_full(g, 1, s1, 2.0f) != NULL && pt_status_get(c) == PT_OK, "after the failed allocation the context still works");
    }
    pt_shutdown(c);
}

/* ---- KV-cached inference on the device (infer's "the step on a device") ---------------------------
   The tutorial-sized model (4 layers, width 256, 8 heads, context 256, 256 tokens; random weights) in
   f32, bf16, f16 or q8_0 (the CPU on its f32 widening) on a CPU and an OpenCL pt_infer side by side:
   every step's logits within 1e-4 relative (max |cpu - opencl| / max |cpu| over the step), greedy
   tokens equal: two sequences of different lengths prefilled in one step, then decoded in one batch; a fork (its shared, partly filled last block copied on write); a
   swap out and in; the engine (pt_generate, two greedy requests); pt_infer_nll (every row's logits). */
static int amax(const float *x, int n) {
    int i, b = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
/* one step on both: same sequences, counts and tokens; logits compared; returns 0 on an error */
static int inf_both(pt_infer *ic, pt_infer *il, int32_t n, const int32_t *sc, const int32_t *sl, const int32_t *nt, const int32_t *tok,
                    float *lc, float *ll, const char *what, int V) {
    pt_status a = pt_infer_step(ic, n, sc, nt, tok, lc, 0), b = pt_infer_step(il, n, sl, nt, tok, ll, 0);
    if (a != PT_OK || b != PT_OK) {
        CHECKF(0, tu_name("%s: a step runs on cpu and opencl", what), "cpu %d opencl %d: %s", (int)a, (int)b, errmsg());
        return 0;
    }
    cur_floor = 1.0; /* relative to the largest logit of the step */
    compare(what, "logits", lc, ll, (long)n * V, 1e-4);
    cur_floor = 0;
    return 1;
}
static void test_infer(pt_wtype wt) {
    enum { V = 256, NA = 19, NB = 7, DEC = 24 };
    pt_ctx *cc = open_ctx("cpu", 7), *cl = open_ctx("opencl", 7);
    pt_gpt_config cfg;
    pt_gpt *m = NULL;
    pt_gpt_weights *w32 = NULL, *w = NULL, *wd = NULL;
    pt_infer *ic = NULL, *il = NULL;
    pt_infer_desc d;
    char what[64];
    float *lc = (float *)malloc(sizeof(float) * 64 * V), *ll = (float *)malloc(sizeof(float) * 64 * V);
    int32_t tok[64], sc[2], sl[2], nt[2], i, k, same = 1;
    tu_rng r;
    snprintf(what, sizeof what, "infer %s", pt_wtype_name(wt));
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = V, cfg.max_seq = 256, cfg.layers = 4, cfg.width = 256, cfg.heads = 8;
    if (cc && cl && (m = pt_gpt_new(cc, &cfg)) != NULL) /* the token table (the tied head) 5x its init: logits of a few units, as trained */
        for (i = 0; i < (int32_t)pt_numel(m->wte); i++) pt_f32(m->wte)[i] *= 5.0f;
    if (!cc || !cl || !m || !(w32 = pt_gpt_weights_from(m, PT_W_F32)) ||
        !(w = wt == PT_W_F32 ? w32 : pt_gpt_weights_convert(w32, wt)) || (wt == PT_W_Q8_0 && !(wd = pt_gpt_weights_convert(w, PT_W_F32)))) {
        CHECKF(0, tu_name("%s: the model", what), "%s", errmsg());
        goto done;
    }
    memset(&d, 0, sizeof d);
    d.max_seqs = 4, d.block_tokens = 16;
    ic = pt_infer_new(cc, wd ? wd : w, &d), il = pt_infer_new(cl, w, &d); /* q8_0: widened to f32 on the device, the CPU on those f32 */
    CHECKF(ic && il, tu_name("%s: pt_infer_new on cpu and opencl", what), "%s", errmsg());
    if (!ic || !il) goto done;
    r.s = 11;
    for (i = 0; i < NA + NB; i++) tok[i] = (int32_t)(tu_next(&r) % V);
    /* two sequences of different lengths in one prefill step, then decoded together */
    sc[0] = pt_infer_seq_new(ic), sc[1] = pt_infer_seq_new(ic), sl[0] = pt_infer_seq_new(il), sl[1] = pt_infer_seq_new(il);
    nt[0] = NA, nt[1] = NB;
    if (!inf_both(ic, il, 2, sc, sl, nt, tok, lc, ll, what, V)) goto done;
    nt[0] = nt[1] = 1;
    for (k = 0; k < DEC; k++) {
        for (i = 0; i < 2; i++) {
            tok[i] = amax(lc + i * V, V);
            same &= tok[i] == amax(ll + i * V, V);
        }
        if (!inf_both(ic, il, 2, sc, sl, nt, tok, lc, ll, what, V)) goto done;
    }
    CHECKF(same, tu_name("%s: greedy tokens of a batch of two sequences (%d and %d prompt tokens, %d steps) equal on cpu and opencl", what, NA, NB,
                         DEC), "a token differs");
    {   /* what a decode step of the two moves: its integers and the logits rows' map in, two rows of logits out */
        pt_transfers x;
        pt_transfer_reset(cl);
        tok[0] = 1, tok[1] = 2;
        if (!inf_both(ic, il, 2, sc, sl, nt, tok, lc, ll, what, V)) goto done;
        x = pt_transfer_stats(cl);
        CHECKF(x.h2d_total_count == 2 && x.d2h_total_count == 1 && x.d2h_total_bytes == 2 * V * 4 && x.h2d_total_bytes < 1024,
               tu_name("%s: a decode step of two sequences writes 2 small arrays to the device, reads 2 rows of logits back", what),
               "h2d %lld copies %lld bytes, d2h %lld copies %lld bytes", (long long)x.h2d_total_count, (long long)x.h2d_total_bytes,
               (long long)x.d2h_total_count, (long long)x.d2h_total_bytes);
    }
    {   /* a fork of sequence 0 (43 tokens: its last block shared and partly filled): both written in one step */
        int32_t fc = pt_infer_seq_fork(ic, sc[0]), fl = pt_infer_seq_fork(il, sl[0]), s2c[2], s2l[2];
        s2c[0] = sc[0], s2c[1] = fc, s2l[0] = sl[0], s2l[1] = fl, tok[0] = 5, tok[1] = 77;
        if (!inf_both(ic, il, 2, s2c, s2l, nt, tok, lc, ll, what, V)) goto done;
        CHECKF(pt_infer_kv_stats(il).cow == 1 && pt_infer_check(il) == PT_OK, tu_name("%s: a forked sequence's shared last block copied on write on opencl", what),
               "cow %lld: %s", (long long)pt_infer_kv_stats(il).cow, errmsg());
        same = amax(lc, V) == amax(ll, V) && amax(lc + V, V) == amax(ll + V, V);
        CHECK(same && memcmp(lc, lc + V, sizeof(float) * V) != 0, tu_name("%s: the fork and its source, other tokens: other logits, each as on cpu", what));
        pt_infer_seq_free(ic, fc), pt_infer_seq_free(il, fl);
    }
    {   /* sequence 1 swapped out, freed, swapped in (its blocks read from and written to the device), decoded on */
        pt__infer_swap *wc = pt__infer_swap_out(ic, sc[1]), *wl = pt__infer_swap_out(il, sl[1]);
        pt_infer_seq_free(ic, sc[1]), pt_infer_seq_free(il, sl[1]);
        tok[0] = 9;
        if (!inf_both(ic, il, 1, sc, sl, nt, tok, lc, ll, what, V)) goto done; /* another sequence takes free blocks meanwhile */
        sc[1] = pt__infer_swap_in(ic, wc), sl[1] = pt__infer_swap_in(il, wl);
        pt__infer_swap_free(ic, wc), pt__infer_swap_free(il, wl);
        same = 1;
        for (k = 0; k < 8; k++) {
            tok[0] = amax(lc, V);
            if (!inf_both(ic, il, 1, sc + 1, sl + 1, nt, tok, lc, ll, what, V)) goto done;
            same &= amax(lc, V) == amax(ll, V);
        }
        CHECKF(same && pt_infer_check(il) == PT_OK, tu_name("%s: a sequence swapped out and in decodes on as on cpu", what), "%s", errmsg());
    }
    pt_infer_seq_free(ic, sc[0]), pt_infer_seq_free(il, sl[0]), pt_infer_seq_free(ic, sc[1]), pt_infer_seq_free(il, sl[1]);
    {   /* the engine: two greedy requests */
        pt_gen_request rq[2];
        pt_gen_result rc[2], rl[2];
        int32_t out[4][16];
        pt_status a, b;
        memset(rq, 0, sizeof rq), memset(rc, 0, sizeof rc), memset(rl, 0, sizeof rl);
        for (i = 0; i < 2; i++) {
            rq[i].prompt = tok + 10 * i, rq[i].nprompt = 5 + 9 * i, rq[i].max_tokens = 16;
            rc[i].tokens = out[i], rl[i].tokens = out[2 + i];
        }
        for (i = 0; i < 24; i++) tok[i] = (int32_t)(tu_next(&r) % V);
        a = pt_generate(ic, 2, rq, rc, NULL, NULL), b = pt_generate(il, 2, rq, rl, NULL, NULL);
        CHECKF(a == PT_OK && b == PT_OK && rc[0].ntokens == 16 && rl[1].ntokens == 16 && !memcmp(out[0], out[2], sizeof out[0]) &&
                   !memcmp(out[1], out[3], sizeof out[1]),
               tu_name("%s: pt_generate (the engine), two greedy requests: the same tokens on cpu and opencl", what), "%d %d %s", (int)a, (int)b, errmsg());
    }
    {   /* every row's logits: the negative log-likelihood of 40 tokens */
        double nc = 0, nl = 0;
        int64_t cc_ = 0, cl_ = 0;
        pt_status a = pt_infer_nll(ic, tok, 24, &nc, &cc_), b = pt_infer_nll(il, tok, 24, &nl, &cl_);
        CHECKF(a == PT_OK && b == PT_OK && cc_ == cl_ && fabs(nc - nl) <= 1e-4 * fabs(nc), tu_name("%s: pt_infer_nll (all rows' logits) as on cpu", what),
               "cpu %.8g (%lld) opencl %.8g (%lld): %s", nc, (long long)cc_, nl, (long long)cl_, errmsg());
    }
    if (wt == PT_W_F32) {
        d.kv_type = PT_W_Q8_0;
        pt_infer *q = pt_infer_new(cl, w, &d);
        CHECK(!q && strstr(errmsg(), "q8_0") && strstr(errmsg(), "opencl"), "infer: a q8_0 KV cache on opencl is refused, naming the type and the backend");
        pt_infer_free(q);
    }
done:
    pt_infer_free(ic), pt_infer_free(il);
    if (w != w32) pt_gpt_weights_free(w);
    pt_gpt_weights_free(wd);
    pt_gpt_weights_free(w32);
    pt_gpt_free(m);
    pt_shutdown(cc), pt_shutdown(cl);
    free(lc), free(ll);
}

/* run with OCL_ICD_VENDORS pointing at an empty directory: no platform at all */
static int no_platform(void) {
    pt_ctx *c = open_ctx("opencl", 1);
    CHECK(c == NULL, "no OpenCL platform: pt_init returns NULL");
    CHECK_HAS(errmsg(), "no OpenCL platform found", "no OpenCL platform: the message says so");
    CHECK_HAS(errmsg(), "pocl-opencl-icd", "no OpenCL platform: the message says what to install");
    return tu_summary();
}

int main(int argc, char **argv) {
    char dir[512];
    const char *build = "build/tests";
    int i, infer_only = 0;
    tu_init(argc, argv);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-platform")) return no_platform();
        if (!strcmp(argv[i], "--infer")) infer_only = 1;
        else if (argv[i][0] != '-') build = argv[i];
    }
    snprintf(dir, sizeof dir, "%s/clcache", build);
    setenv("PTRAIN_CL_CACHE", dir, 1);
    {   /* start from an empty cache: remove the entry a previous run left */
        pt_ctx *c = open_ctx("opencl", 1);
        if (!c) {
            CHECKF(0, "an OpenCL context opens", "%s", last_err);
            return tu_summary();
        }
        remove(pt_device_info_get(c).cache_file);
        pt_shutdown(c);
    }
    if (infer_only) { /* --infer: the inference checks alone */
        test_infer(PT_W_F32);
        test_infer(PT_W_BF16);
        test_infer(PT_W_F16);
        test_infer(PT_W_Q8_0);
        for (i = 0; i < nrows; i++) printf("%-36s %12.3g %12.3g %8.0e %9ld\n", rows[i].op, rows[i].abs, rows[i].rel, rows[i].tol, rows[i].n);
        return tu_summary();
    }
    test_cache();
    test_errors();
    C_CPU = open_ctx("cpu", 3);
    C_CL = open_ctx("opencl", 3);
    if (!C_CPU || !C_CL) {
        CHECKF(0, "contexts for the op tests", "%s", last_err);
        return tu_summary();
    }
    G_CPU = pt_graph_new(C_CPU);
    G_CL = pt_graph_new(C_CL);
    test_ops();
    test_storage_layout();
    test_reduce_kernels();
    pt_shutdown(C_CPU);
    pt_shutdown(C_CL);
    test_param_transfers();
    test_train(PT_OPTIM_ADAMW);
    test_train(PT_OPTIM_SGD);
    {   /* bf16 precision: the operands rounded on the device, the same GPT within 1e-3 of the CPU's bf16 run and
           not the f32 run; fp16 needs cl_khr_fp16 (PoCL has none: then refused, naming it) */
        float l32[GSTEPS], l16[GSTEPS];
        int k, differs = 0;
        pt_ctx *c = open_ctx("opencl", 1);
        test_gpt(PT_F32, l32);
        test_gpt(PT_BF16, l16);
        for (k = 0; k < GSTEPS; k++) differs |= l32[k] != l16[k];
        CHECK(differs, "gpt training, bf16 on opencl: not the f32 losses (the rounding reaches the device GEMM)");
        if (c && pt_set_precision(c, PT_F16) != PT_OK) {
            printf("fp16 on this device: %s\n", pt_error(c));
            CHECK(pt_status_get(c) == PT_ERR_DEVICE && strstr(pt_error(c), "cl_khr_fp16") && strstr(pt_error(c), pt_device_info_get(c).device),
                  "fp16 on a device without cl_khr_fp16 is refused, naming the extension and the device");
        } else if (c) test_gpt(PT_F16, NULL);
        pt_shutdown(c);
    }
    test_cnn();
    test_infer(PT_W_F32);
    test_infer(PT_W_BF16);
    test_infer(PT_W_F16);
    test_infer(PT_W_Q8_0);
    printf("\nparity table (cpu vs opencl; rel = |a-b| / max(1e-3, |a|, |b|))\n");
    printf("%-36s %12s %12s %8s %9s\n", "op", "max abs err", "max rel err", "tol", "values");
    for (i = 0; i < nrows; i++) printf("%-36s %12.3g %12.3g %8.0e %9ld\n", rows[i].op, rows[i].abs, rows[i].rel, rows[i].tol, rows[i].n);
    return tu_summary();
}
#endif

/* ptcl.c - OpenCL devices for ptrain.h: list them, check one against the CPU backend, tune CLBlast's
   GEMM for it.

   Build: cc -O2 -fopenmp -DPTRAIN_OPENCL -I. tools/ptcl.c -o build/ptcl -lm
   (or `make tools`)

   ptcl list                     every OpenCL platform and device: its PTRAIN_DEVICE string, name,
                                 driver, memory, compute units
   ptcl check [opencl:P:D]       a few ops forward and backward (matmul, bias, GELU, layernorm,
                                 softmax, cross-entropy) and a GEMM on the device vs the CPU backend;
                                 PASS/FAIL lines with errors and times. Exit 0 when all pass, 1 when
                                 one fails, 2 when the device cannot be used.
   ptcl tune [-o FILE] [-n N] [-t SECONDS] [opencl:P:D]
                                 searches CLBlast's GEMM kernel parameters (Xgemm and XgemmDirect)
                                 for the device by timing an N x N x N product (default 512) through
                                 ptrain's matmul; each candidate is checked against the CPU. Writes
                                 the best to FILE (default ptrain_cl_tune.txt) for pt_cl_tune_load /
                                 env PTRAIN_CL_TUNE. Stops searching after SECONDS (default 600).

   The device defaults to env PTRAIN_DEVICE if it names OpenCL, else "opencl" (first platform with a
   device). */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench_util.h"
#include "ptflags.h"

static const char usage_text[] = "usage: ptcl list | ptcl check [opencl:P:D] | ptcl tune [-o FILE] [-n N] [-t SECONDS] [opencl:P:D]\n";
static int usage(void) {
    fputs(usage_text, stderr);
    return 2;
}

static const char *default_device(void) {
    const char *e = getenv("PTRAIN_DEVICE");
    return e && !strncmp(e, "opencl", 6) ? e : "opencl";
}

/* ---- list ------------------------------------------------------------------------------------- */
static int cmd_list(void) {
    pt_device_info di;
    int32_t p, d;
    int nd, total = 0;
    if (pt_device_query(0, -1, &di) < 0) {
        char list[1024];
        pt_device_list(list, sizeof list);
        fprintf(stderr, "ptcl: no OpenCL platform found: install an OpenCL driver, e.g. pocl-opencl-icd (make deps); devices of this build:\n%s", list);
        return 1;
    }
    for (p = 0; (nd = pt_device_query(p, -1, &di)) >= 0; p++) {
        printf("platform %d: %s (%s)\n", (int)p, di.platform, di.platform_version);
        if (nd == 0) printf("  (no devices)\n");
        for (d = 0; d < nd; d++, total++) {
            pt_device_query(p, d, &di);
            printf("  opencl:%d:%d  %s\n      driver %s, memory %.0f MiB (largest buffer %.0f MiB), %d compute units, work groups up to %lld\n",
                   (int)p, (int)d, di.device, di.driver, di.global_mem / 1048576.0, di.max_alloc / 1048576.0,
                   (int)di.compute_units, (long long)di.max_work_group);
        }
    }
    printf("%d OpenCL device%s\n", total, total == 1 ? "" : "s");
    return total ? 0 : 1;
}

/* ---- contexts ---------------------------------------------------------------------------------- */
static pt_ctx *open_ctx(const char *dev) {
    pt_desc d;
    pt_ctx *ctx;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    d.device = dev;
    ctx = pt_init(&d); /* on failure pt_init has logged why */
    if (!ctx) fprintf(stderr, "ptcl: cannot use device '%s' (see the message above; `ptcl list` shows the devices)\n", dev);
    return ctx;
}

static void print_device(pt_ctx *ctx) {
    pt_device_info di = pt_device_info_get(ctx);
    printf("device: opencl:%d:%d  %s / %s (driver %s)\n", di.platform_index, di.device_index, di.platform, di.device, di.driver);
}

static void fill(float *v, int64_t n, uint64_t seed, float scale) {
    pt_rng r = pt_rng_seed(seed);
    int64_t i;
    for (i = 0; i < n; i++) v[i] = (pt_rng_float(&r) * 2.0f - 1.0f) * scale;
}

/* max |a - b| / max |b| (b the reference) */
static double rel_err(const float *a, const float *b, int64_t n) {
    double md = 0, mb = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= md)) md = d; /* NaN propagates */
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return mb > 0 ? md / mb : md;
}

/* ---- check ------------------------------------------------------------------------------------- */
enum { CM = 37, CK = 45, CN = 29, CV = 53 }; /* odd sizes: not multiples of work-group sizes */
typedef struct net_io {
    float x[CM * CK], w[CK * CN], b[CN], lw[CN], lb[CN], w2[CN * CV];
    int32_t y[CM];
    float loss, probs[CM * CV], dx[CM * CK], dw[CK * CN], db[CN], dlw[CN], dlb[CN], dw2[CN * CV];
    double ms;
} net_io;

/* loss = cross_entropy(layernorm(gelu(x @ w + b)) @ w2, y); also softmax of the logits; gradients of every input */
static int run_net(pt_ctx *ctx, net_io *io) {
    pt_graph *g = pt_graph_new(ctx);
    int64_t sx[2] = {CM, CK}, sw[2] = {CK, CN}, sb[1] = {CN}, sw2[2] = {CN, CV}, sy[1] = {CM};
    pt_tensor *x, *w, *b, *lw, *lb, *w2, *y, *logits, *p, *loss;
    double t0 = pt_time();
    int ok;
    if (!g) return 0;
    x = pt_tensor_from(g, PT_F32, 2, sx, io->x), w = pt_tensor_from(g, PT_F32, 2, sw, io->w), b = pt_tensor_from(g, PT_F32, 1, sb, io->b);
    lw = pt_tensor_from(g, PT_F32, 1, sb, io->lw), lb = pt_tensor_from(g, PT_F32, 1, sb, io->lb);
    w2 = pt_tensor_from(g, PT_F32, 2, sw2, io->w2), y = pt_tensor_from(g, PT_I32, 1, sy, io->y);
    pt_requires_grad(x), pt_requires_grad(w), pt_requires_grad(b), pt_requires_grad(lw), pt_requires_grad(lb), pt_requires_grad(w2);
    logits = pt_matmul(g, pt_layernorm(g, pt_gelu(g, pt_add(g, pt_matmul(g, x, w, 0, 0), b)), lw, lb, 1e-5f), w2, 0, 0);
    p = pt_softmax(g, logits);
    loss = pt_cross_entropy(g, logits, y, -1);
    ok = loss && p && pt_backward(g, loss) == PT_OK;
    if (ok) {
        io->loss = pt_item(loss);
        ok = pt_tensor_read(p, io->probs) == PT_OK && pt_tensor_read(x->grad, io->dx) == PT_OK && pt_tensor_read(w->grad, io->dw) == PT_OK &&
             pt_tensor_read(b->grad, io->db) == PT_OK && pt_tensor_read(lw->grad, io->dlw) == PT_OK && pt_tensor_read(lb->grad, io->dlb) == PT_OK &&
             pt_tensor_read(w2->grad, io->dw2) == PT_OK;
    }
    io->ms = (pt_time() - t0) * 1e3;
    if (!ok) fprintf(stderr, "ptcl: the check network failed on %s: %s\n", pt_backend_name(ctx), pt_error(ctx));
    pt_graph_free(g);
    return ok;
}

static int npass, nfail;
static void verdict(int ok, const char *what, double err, double tol) {
    printf("%s %-44s max rel err %.2e (tolerance %.0e)\n", ok ? "PASS" : "FAIL", what, err, tol);
    if (ok) npass++;
    else nfail++;
}
static void compare(const char *what, const float *dev, const float *cpu, int64_t n, double tol) {
    double e = rel_err(dev, cpu, n);
    verdict(e <= tol, what, e, tol);
}

/* GFLOP/s of ptrain's matmul (n x n x n) on ctx, median of reps after a warm-up; the product into c */
static double gemm_gflops(pt_ctx *ctx, int n, const float *a, const float *b, float *c, int reps) {
    pt_graph *g = pt_graph_new(ctx), *gc = pt_graph_new(ctx);
    int64_t s[2] = {n, n};
    pt_tensor *ta, *tb, *tc = NULL;
    double t[32], r = 0;
    int i;
    if (!g || !gc) return 0;
    if (reps > 32) reps = 32;
    pt_graph_set_grad(g, 0), pt_graph_set_grad(gc, 0);
    ta = pt_tensor_from(g, PT_F32, 2, s, a), tb = pt_tensor_from(g, PT_F32, 2, s, b);
    for (i = -1; i < reps; i++) {
        double t0;
        pt_graph_reset(gc);
        pt_sync(ctx);
        t0 = pt_time();
        tc = pt_matmul(gc, ta, tb, 0, 0);
        pt_sync(ctx);
        if (i >= 0) t[i] = pt_time() - t0;
        if (!tc) break;
    }
    if (tc && pt_status_get(ctx) == PT_OK && (!c || pt_tensor_read(tc, c) == PT_OK)) r = 2.0 * n * n * (double)n / median(t, reps) * 1e-9;
    pt_graph_free(gc);
    pt_graph_free(g);
    return r;
}

static int cmd_check(const char *dev) {
    pt_ctx *cl = open_ctx(dev), *cpu;
    net_io *a, *b;
    int n = 256, i;
    float *ga, *gb, *gc, *gr;
    double gf_cl, gf_cpu, first_ms;
    if (!cl) return 2;
    cpu = open_ctx("cpu");
    if (!cpu) return 2;
    print_device(cl);
    a = (net_io *)calloc(1, sizeof *a), b = (net_io *)calloc(1, sizeof *b);
    if (!a || !b) return 2;
    fill(a->x, CM * CK, 1, 1.0f), fill(a->w, CK * CN, 2, 0.3f), fill(a->b, CN, 3, 0.1f), fill(a->lw, CN, 4, 1.0f), fill(a->lb, CN, 5, 0.1f);
    fill(a->w2, CN * CV, 6, 0.3f);
    for (i = 0; i < CM; i++) a->y[i] = (int32_t)((i * 7 + 3) % CV);
    memcpy(b, a, sizeof *a);
    if (!run_net(cl, a)) nfail++;
    first_ms = a->ms;
    if (!run_net(cl, a) || !run_net(cpu, b)) nfail++;
    else {
        const double tol = 1e-4;
        double e = fabs((double)a->loss - b->loss) / fabs((double)b->loss);
        printf("       cross-entropy loss: opencl %.7g, cpu %.7g\n", a->loss, b->loss);
        verdict(e <= tol, "forward: loss (matmul, bias, gelu, layernorm)", e, tol);
        compare("forward: softmax of the logits", a->probs, b->probs, CM * CV, tol);
        compare("backward: d loss / d x", a->dx, b->dx, CM * CK, tol);
        compare("backward: d loss / d w (matmul)", a->dw, b->dw, CK * CN, tol);
        compare("backward: d loss / d b (bias)", a->db, b->db, CN, tol);
        compare("backward: d loss / d layernorm weight", a->dlw, b->dlw, CN, tol);
        compare("backward: d loss / d layernorm bias", a->dlb, b->dlb, CN, tol);
        compare("backward: d loss / d w2 (matmul)", a->dw2, b->dw2, CN * CV, tol);
        printf("       forward + backward: opencl %.1f ms (first run, with kernel builds: %.1f ms), cpu %.1f ms\n", a->ms, first_ms, b->ms);
    }
    ga = (float *)malloc(sizeof(float) * (size_t)n * n * 4);
    if (!ga) return 2;
    gb = ga + n * n, gc = gb + n * n, gr = gc + n * n;
    fill(ga, n * n, 7, 1.0f), fill(gb, n * n, 8, 1.0f);
    gf_cl = gemm_gflops(cl, n, ga, gb, gc, 5);
    gf_cpu = gemm_gflops(cpu, n, ga, gb, gr, 5);
    if (gf_cl <= 0 || gf_cpu <= 0) {
        printf("FAIL gemm %d: %s\n", n, pt_error(gf_cl <= 0 ? cl : cpu));
        nfail++;
    } else {
        char what[64];
        snprintf(what, sizeof what, "gemm %d x %d x %d", n, n, n);
        compare(what, gc, gr, (int64_t)n * n, 1e-5);
        printf("       gemm %d: opencl %.1f GFLOP/s, cpu %.1f GFLOP/s (%d threads)\n", n, gf_cl, gf_cpu, pt_threads(cpu));
    }
    printf("check: %s (%d passed, %d failed)\n", nfail ? "FAIL" : "PASS", npass, nfail);
    free(ga), free(a), free(b);
    pt_shutdown(cpu);
    pt_shutdown(cl);
    return nfail ? 1 : 0;
}

/* ---- tune -------------------------------------------------------------------------------------- */
/* parameter indices, in the order of pt_cl_tune_params("Xgemm") / ("XgemmDirect") */
enum { GEMMK, KREG, KWG, KWI, MDIMA, MDIMC, MWG, NDIMB, NDIMC, NWG, SA, SB, STRM, STRN, VWM, VWN, NX };
enum { KWID, MDIMAD, MDIMCD, NDIMBD, NDIMCD, PADA, PADB, VWMD, VWND, WGD, ND };

typedef struct tuner {
    pt_ctx *ctx;
    int n, evals, rejected;
    const float *a, *b, *ref;
    float *c;
    size_t maxwg, lmem;
    double deadline;
} tuner;

static int xgemm_valid(const size_t *v, const tuner *t) {
    size_t wg = v[MDIMC] * v[NDIMC];
    if (v[GEMMK] != 0 || v[KREG] != 1 || !v[MDIMA] || !v[NDIMB] || !v[KWI] || wg > t->maxwg) return 0;
    if ((v[MWG] / v[MDIMC]) * (v[NWG] / v[NDIMC]) > 64) return 0; /* outputs per work item: larger tiles take minutes to compile */
    if (v[MWG] % (v[MDIMC] * v[VWM]) || v[NWG] % (v[NDIMC] * v[VWN]) || v[MWG] % (v[MDIMA] * v[VWM]) || v[NWG] % (v[NDIMB] * v[VWN])) return 0;
    if (wg % v[MDIMA] || wg % v[NDIMB] || v[KWG] % (wg / v[MDIMA]) || v[KWG] % (wg / v[NDIMB]) || v[KWG] % v[KWI]) return 0;
    return (v[SA] * v[KWG] * v[MWG] + v[SB] * v[KWG] * v[NWG]) * 4 <= t->lmem;
}
static int direct_valid(const size_t *v, const tuner *t) {
    size_t wg = v[MDIMCD] * v[NDIMCD];
    if (!v[MDIMAD] || !v[NDIMBD] || !v[KWID] || wg > t->maxwg || wg % v[MDIMAD] || wg % v[NDIMBD]) return 0;
    if ((v[WGD] / v[MDIMCD]) * (v[WGD] / v[NDIMCD]) > 64) return 0;
    if (v[WGD] % (v[MDIMCD] * v[VWMD]) || v[WGD] % (v[NDIMCD] * v[VWND]) || v[WGD] % (v[MDIMAD] * v[VWMD]) || v[WGD] % (v[NDIMBD] * v[VWND])) return 0;
    if (v[WGD] % (wg / v[MDIMAD]) || v[WGD] % (wg / v[NDIMBD]) || v[WGD] % v[KWID]) return 0;
    return (v[WGD] * (v[WGD] + v[PADA]) + v[WGD] * (v[WGD] + v[PADB])) * 4 <= t->lmem;
}

/* GemmRoutine's threshold: products with m*n*k below its cube use the direct kernel */
static int set_threshold(tuner *t, size_t s) {
    const char *name = "XGEMM_MIN_INDIRECT_SIZE";
    return pt_cl_tune_set(t->ctx, "GemmRoutine", 1, &name, &s) == PT_OK;
}

/* applies kernel's parameters and times the GEMM; 0 when CLBlast refuses them or the result is wrong */
static double evaluate(tuner *t, const char *kernel, const size_t *v, int nv) {
    double gf, e;
    t->evals++;
    if (pt_cl_tune_set(t->ctx, kernel, nv, pt_cl_tune_params(kernel), v) != PT_OK) {
        pt_error_clear(t->ctx);
        t->rejected++;
        return 0;
    }
    gf = gemm_gflops(t->ctx, t->n, t->a, t->b, t->c, 5);
    if (gf <= 0) {
        pt_error_clear(t->ctx);
        t->rejected++;
        return 0;
    }
    e = rel_err(t->c, t->ref, (int64_t)t->n * t->n);
    if (e > 1e-5) t->rejected++;
    return e <= 1e-5 ? gf : 0;
}

static void print_params(FILE *f, int file, const char *kernel, const size_t *v) {
    const char *const *names = pt_cl_tune_params(kernel);
    int i;
    for (i = 0; names[i]; i++) {
        if (file) fprintf(f, "%s.%s = %zu\n", kernel, names[i], v[i]);
        else fprintf(f, "%s=%zu ", names[i], v[i]);
    }
}

/* coordinate search: for each axis in turn, try its values with the others fixed, keep the best */
typedef struct axis {
    int idx, tie; /* the parameter, and one set to the same value (-1: none) */
    size_t vals[6];
} axis;
static double search1(tuner *t, const char *kernel, size_t *best, int nv, const axis *ax, int nax, int (*valid)(const size_t *, const tuner *));
static double search(tuner *t, const char *kernel, size_t *best, int nv, const axis *ax, int nax, int (*valid)(const size_t *, const tuner *)) {
    int e0 = t->evals, r0 = t->rejected;
    double gf = search1(t, kernel, best, nv, ax, nax, valid);
    printf("  %-12s best   %7.2f GFLOP/s after %d candidates (%d refused by CLBlast, failed or wrong)\n", kernel, gf, t->evals - e0, t->rejected - r0);
    return gf;
}
static double search1(tuner *t, const char *kernel, size_t *best, int nv, const axis *ax, int nax, int (*valid)(const size_t *, const tuner *)) {
    double bgf;
    int a, k, pass;
    evaluate(t, kernel, best, nv); /* the first timing after a switch of kernel runs slow: discard it */
    bgf = evaluate(t, kernel, best, nv);
    printf("  %-12s start  %7.2f GFLOP/s ", kernel, bgf);
    print_params(stdout, 0, kernel, best);
    printf("\n");
    fflush(stdout);
    for (pass = 0; pass < 2; pass++) {
        int improved = 0;
        for (a = 0; a < nax; a++)
            for (k = 0; k < 6 && ax[a].vals[k]; k++) {
                size_t v[32];
                double gf;
                if (pt_time() > t->deadline) return bgf;
                memcpy(v, best, sizeof(size_t) * (size_t)nv);
                v[ax[a].idx] = ax[a].vals[k] == 99 ? 0 : ax[a].vals[k];
                if (ax[a].tie >= 0) v[ax[a].tie] = v[ax[a].idx];
                if (!memcmp(v, best, sizeof(size_t) * (size_t)nv) || !valid(v, t)) continue;
                gf = evaluate(t, kernel, v, nv);
                if (gf > bgf * 1.03) { /* above the noise of a shared machine */
                    bgf = gf, improved = 1;
                    memcpy(best, v, sizeof(size_t) * (size_t)nv);
                    printf("  %-12s better %7.2f GFLOP/s %s=%zu\n", kernel, gf, pt_cl_tune_params(kernel)[ax[a].idx], v[ax[a].idx]);
                    fflush(stdout);
                }
            }
        if (!improved) break;
    }
    return bgf;
}

static int cmd_tune(const char *dev, const char *out, int n, double seconds) {
    /* 99 stands for 0 in the value lists (0 ends a list) */
    static const axis xax[] = {{MWG, -1, {16, 32, 64, 128}}, {NWG, -1, {16, 32, 64, 128}}, {MDIMC, MDIMA, {4, 8, 16, 32}},
                               {NDIMC, NDIMB, {4, 8, 16, 32}}, {VWM, -1, {1, 2, 4, 8}},     {VWN, -1, {1, 2, 4, 8}},
                               {KWG, -1, {8, 16, 32}},         {KWI, -1, {1, 2, 8}},        {SA, -1, {99, 1}},
                               {SB, -1, {99, 1}},              {STRM, -1, {99, 1}},         {STRN, -1, {99, 1}}};
    static const axis dax[] = {{WGD, -1, {8, 16, 32, 64}},  {MDIMCD, MDIMAD, {4, 8, 16, 32}}, {NDIMCD, NDIMBD, {4, 8, 16, 32}},
                               {VWMD, -1, {1, 2, 4, 8}},    {VWND, -1, {1, 2, 4, 8}},        {KWID, -1, {1, 2, 8}},
                               {PADA, -1, {99, 1}},         {PADB, -1, {99, 1}}};
    size_t xbest[NX] = {0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 4};
    size_t dbest[ND] = {2, 8, 8, 8, 8, 1, 1, 1, 1, 32};
    tuner t;
    pt_ctx *cpu;
    pt_device_info di;
    float *buf;
    double untuned, xgf, dgf, tuned;
    int direct, ok;
    size_t threshold;
    FILE *f;
    memset(&t, 0, sizeof t);
    if (!(t.ctx = open_ctx(dev)) || !(cpu = open_ctx("cpu"))) return 2;
    print_device(t.ctx);
    di = pt_device_info_get(t.ctx);
    t.maxwg = (size_t)di.max_work_group;
    t.lmem = (size_t)di.local_mem;
    t.n = n;
    t.deadline = pt_time() + seconds;
    buf = (float *)malloc(sizeof(float) * (size_t)n * n * 4);
    if (!buf) return 2;
    t.a = buf, t.b = buf + n * n, t.c = buf + 2 * n * n, t.ref = buf + 3 * n * n;
    fill(buf, n * n, 11, 1.0f), fill(buf + n * n, n * n, 12, 1.0f);
    if (gemm_gflops(cpu, n, t.a, t.b, buf + 3 * n * n, 1) <= 0) return 2;
    pt_shutdown(cpu);
    untuned = gemm_gflops(t.ctx, n, t.a, t.b, t.c, 5);
    printf("untuned: gemm %d: %.2f GFLOP/s (CLBlast's defaults for this device)\n", n, untuned);
    if (untuned <= 0 || rel_err(t.c, t.ref, (int64_t)n * n) > 1e-5) {
        fprintf(stderr, "ptcl tune: the untuned GEMM fails or disagrees with the CPU: %s\n", pt_error(t.ctx));
        return 1;
    }
    printf("searching (work groups up to %zu, %zu bytes of local memory, at most %.0f s)\n", t.maxwg, t.lmem, seconds);
    if (!set_threshold(&t, 1)) return 1; /* indirect kernel (Xgemm) for every size */
    xgf = search(&t, "Xgemm", xbest, NX, xax, (int)(sizeof xax / sizeof *xax), xgemm_valid);
    if (!set_threshold(&t, 100000)) return 1; /* direct kernel for every size */
    dgf = search(&t, "XgemmDirect", dbest, ND, dax, (int)(sizeof dax / sizeof *dax), direct_valid);
    direct = dgf > xgf;
    /* the threshold: the smallest of n/2, n, 2n where Xgemm beats XgemmDirect (both with their best parameters) */
    threshold = 4 * (size_t)n;
    if (pt_cl_tune_set(t.ctx, "Xgemm", NX, pt_cl_tune_params("Xgemm"), xbest) != PT_OK ||
        pt_cl_tune_set(t.ctx, "XgemmDirect", ND, pt_cl_tune_params("XgemmDirect"), dbest) != PT_OK)
        return 1;
    {
        float *big = (float *)malloc(sizeof(float) * (size_t)n * n * 8);
        int s, k;
        if (!big) return 2;
        fill(big, (int64_t)n * n * 8, 13, 1.0f);
        for (k = 0; k < 3; k++) {
            double gd, gi;
            s = k == 0 ? n / 2 : k == 1 ? n : 2 * n;
            gd = set_threshold(&t, 100000) ? gemm_gflops(t.ctx, s, big, big + (size_t)s * s, NULL, 3) : 0;
            gi = set_threshold(&t, 1) ? gemm_gflops(t.ctx, s, big, big + (size_t)s * s, NULL, 3) : 0;
            printf("  gemm %d: Xgemm %.2f GFLOP/s, XgemmDirect %.2f GFLOP/s\n", s, gi, gd);
            if (gi > gd && threshold == 4 * (size_t)n) threshold = (size_t)s;
        }
        free(big);
    }
    f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "ptcl tune: cannot write %s\n", out);
        return 2;
    }
    fprintf(f, "# CLBlast GEMM parameters for %s / %s (driver %s), found by `ptcl tune -n %d`\n", di.platform, di.device, di.driver, n);
    fprintf(f, "# gemm %d: untuned %.2f GFLOP/s, Xgemm %.2f, XgemmDirect %.2f (%d candidates timed)\n", n, untuned, xgf, dgf, t.evals);
    fprintf(f, "# apply with pt_cl_tune_load(ctx, file) or env PTRAIN_CL_TUNE=file; products with m*n*k below\n");
    fprintf(f, "# XGEMM_MIN_INDIRECT_SIZE cubed use XgemmDirect, the others Xgemm\n");
    fprintf(f, "GemmRoutine.XGEMM_MIN_INDIRECT_SIZE = %zu\n", threshold);
    print_params(f, 1, "Xgemm", xbest);
    print_params(f, 1, "XgemmDirect", dbest);
    if (fclose(f) != 0) return 2;
    /* the file as a user applies it */
    if (pt_cl_tune_load(t.ctx, out) != PT_OK) {
        fprintf(stderr, "ptcl tune: %s\n", pt_error(t.ctx));
        return 1;
    }
    tuned = gemm_gflops(t.ctx, n, t.a, t.b, t.c, 5);
    printf("tuned: gemm %d: %.2f GFLOP/s (untuned %.2f, %.2fx; %s was the faster kernel at %d, Xgemm from m*n*k >= %zu^3); %d candidates timed; wrote %s\n",
           n, tuned, untuned, tuned / untuned, direct ? "XgemmDirect" : "Xgemm", n, threshold, t.evals, out);
    printf("use it: PTRAIN_CL_TUNE=%s or pt_cl_tune_load(ctx, \"%s\")\n", out, out);
    ok = tuned > 0 && rel_err(t.c, t.ref, (int64_t)n * n) <= 1e-5;
    if (!ok) fprintf(stderr, "ptcl tune: the GEMM with the written file fails or disagrees with the CPU: %s\n", pt_error(t.ctx));
    free(buf);
    pt_shutdown(t.ctx);
    return ok ? 0 : 1;
}

/* the flags of ptcl tune */
typedef struct tune_opts {
    const char *out, *dev;
    int n;
    double secs;
} tune_opts;

static int flag_device(void *dst, const char *tool, const char *flag, const char *v) { /* opencl:P:D */
    (void)flag;
    if (strncmp(v, "opencl", 6)) return fprintf(stderr, "%s: expected a device opencl:P:D, found '%s'\n", tool, v), usage();
    *(const char **)dst = v;
    return 0;
}

/* tune_flags: ptcl tune's flags (argv[0] is "tune") into o; PTF_GO, or the exit status */
static int tune_flags(tune_opts *o, int argc, char **argv) {
    const ptf_flag flags[] = {PTF_ARG(flag_device, &o->dev), PTF_STR("-o", &o->out), PTF_INT("-n", &o->n, 16, 8192),
                              PTF_REAL_X("-t", &o->secs, 0, 1e9, PTF_OPEN_LO, "a positive number of seconds"), PTF_END};
    o->out = "ptrain_cl_tune.txt", o->dev = default_device(), o->n = 512, o->secs = 600;
    return ptf_parse("ptcl tune", usage_text, flags, argc, argv);
}

int main(int argc, char **argv) {
    tune_opts o;
    int rc;
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "list") && argc == 2) return cmd_list();
    if (!strcmp(argv[1], "check") && argc <= 3) return cmd_check(argc == 3 ? argv[2] : default_device());
    if (strcmp(argv[1], "tune")) return usage();
    if ((rc = tune_flags(&o, argc - 1, argv + 1)) != PTF_GO) return rc;
    return cmd_tune(o.dev, o.out, o.n, o.secs);
}

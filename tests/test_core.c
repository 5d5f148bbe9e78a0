/* test_core.c - the core of ptrain.h: allocation-free steady state, bit-exact determinism,
   initialization as a pure function, error reporting, gradient-ready hooks, pipeline-style
   backward, several graphs at once, optimizers and schedules, and a training sanity run.
   Usage: test_core [--quick]   (--quick: smaller sizes for sanitizer builds) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

/* ---- counting allocator (must be defined before the implementation) ------------------------- */
static long cnt_malloc, cnt_realloc, cnt_free;
static void *count_malloc(size_t n) {
    cnt_malloc++;
    return malloc(n);
}
static long cnt_realloc_new; /* realloc(NULL, n): a new block */
static void *count_realloc(void *p, size_t n) {
    cnt_realloc++;
    if (!p) cnt_realloc_new++;
    return realloc(p, n);
}
static void count_free(void *p) {
    if (p) cnt_free++;
    free(p);
}
#define PT_MALLOC(sz) count_malloc(sz)
#define PT_REALLOC(p, sz) count_realloc((p), (sz))
#define PT_FREE(p) count_free(p)
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "../ptrain.h"
#include "test_util.h"

/* ---- error capture ---------------------------------------------------------------------------- */
static char err_msg[2048];
static int err_count;
static pt_status err_status;
static void on_error(void *user, pt_status st, const char *msg) {
    (void)user;
    err_count++;
    err_status = st;
    snprintf(err_msg, sizeof err_msg, "%s", msg);
}
static void quiet_log(void *user, int level, const char *msg) {
    (void)user;
    if (level >= PT_LOG_ERROR) fprintf(stderr, "[ptrain] %s\n", msg);
}
static pt_ctx *new_ctx(uint64_t seed, int threads) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = seed;
    d.threads = threads;
    d.on_error = on_error;
    d.log = quiet_log;
    d.log_level = PT_LOG_WARN;
    return pt_init(&d);
}
static void err_reset(pt_ctx *ctx) {
    err_msg[0] = 0;
    err_count = 0;
    err_status = PT_OK;
    if (ctx) pt_error_clear(ctx);
}

/* ---- small helpers ---------------------------------------------------------------------------- */
static pt_tensor *leaf_f32(pt_graph *g, int ndim, const int64_t *shape, const float *data, int grad) {
    pt_tensor *t = pt_tensor_from(g, PT_F32, ndim, shape, data);
    if (grad) pt_requires_grad(t);
    return t;
}
static pt_tensor *tensor_i32(pt_graph *g, int ndim, const int64_t *shape, const int32_t *data) {
    return pt_tensor_from(g, PT_I32, ndim, shape, data);
}
static float *param_val(pt_ctx *ctx, const char *name) {
    pt_param *p = pt_param_find(ctx, name);
    return p ? pt_f32(&p->value) : NULL;
}
static float *param_grad(pt_ctx *ctx, const char *name) {
    pt_param *p = pt_param_find(ctx, name);
    (void)pt_grad_slab(ctx); /* the gradient slab is made at its first use */
    return p ? pt_f32(&p->grad) : NULL;
}
/* copies of the whole parameter (or gradient) slab */
static float *slab_copy(pt_ctx *ctx, int grad) {
    pt_tensor s = grad ? pt_grad_slab(ctx) : pt_param_slab(ctx);
    int64_t n = pt_numel(&s);
    float *c = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    if (n) memcpy(c, pt_f32(&s), (size_t)n * sizeof(float));
    return c;
}
/* max over all parameters of max|a-b| / max|b| (per parameter), gradients of two contexts with the
   same parameters */
static double grads_rel_diff(pt_ctx *a, pt_ctx *b, const char **worst) {
    double w = 0;
    int i;
    *worst = "";
    for (i = 0; i < pt_param_count(a); i++) {
        pt_param *pa = pt_param_at(a, i), *pb = pt_param_find(b, pa->spec.name);
        const float *ga = pt_f32(&pa->grad), *gb;
        double md = 0, mb = 0;
        int64_t k, n = pt_numel(&pa->grad);
        if (!pb) return INFINITY;
        gb = pt_f32(&pb->grad);
        for (k = 0; k < n; k++) {
            double d = fabs((double)ga[k] - gb[k]);
            if (d > md || d != d) md = d != d ? INFINITY : d;
            if (fabs(gb[k]) > mb) mb = fabs(gb[k]);
        }
        if (mb == 0) mb = 1e-30;
        if (md / mb > w) {
            w = md / mb;
            *worst = pa->spec.name;
        }
    }
    return w;
}

/* a GPT configuration and random token data (targets = the next token of a random stream) */
static pt_gpt_config gpt_cfg(int vocab, int layers, int width, int heads, int seq, float dropout) {
    pt_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab = vocab;
    c.max_seq = seq;
    c.layers = layers;
    c.width = width;
    c.heads = heads;
    c.dropout = dropout;
    return c;
}
static void random_tokens(int32_t *ids, int32_t *tg, int64_t n, int vocab, uint64_t seed) {
    tu_rng r;
    int64_t i;
    int32_t prev;
    r.s = seed;
    prev = (int32_t)(tu_next(&r) % (unsigned)vocab);
    for (i = 0; i < n; i++) {
        int32_t nx = (int32_t)(tu_next(&r) % (unsigned)vocab);
        ids[i] = prev;
        tg[i] = nx;
        prev = nx;
    }
}
/* one training step; returns the loss (NAN on failure) */
static float gpt_step(pt_graph *g, const pt_gpt *m, pt_optim *o, const int32_t *ids, const int32_t *tg, int64_t B, int64_t T,
                      float lr) {
    int64_t s[2];
    pt_tensor *ti, *tt, *loss;
    float l;
    s[0] = B, s[1] = T;
    pt_graph_reset(g);
    ti = tensor_i32(g, 2, s, ids);
    tt = tensor_i32(g, 2, s, tg);
    loss = pt_gpt_loss(g, m, ti, tt);
    if (!loss) return NAN;
    l = pt_item(loss);
    pt_zero_grad(pt_graph_ctx(g));
    if (pt_backward(g, loss) != PT_OK) return NAN;
    if (o) pt_optim_step(o, lr);
    return l;
}

/* =================================================================================================
   1. no allocation in the steady state
   ================================================================================================= */
static void test_alloc_gpt(void) {
    pt_ctx *ctx = new_ctx(42, 0);
    pt_gpt_config c = gpt_cfg(64, 2, 32, 4, 16, 0.1f);
    pt_gpt *m = pt_gpt_new(ctx, &c);
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g;
    const int64_t B = 4, T = 16;
    int32_t ids[64], tg[64];
    long before, per[6];
    int step, ok = 1;
    float loss[6];
    char detail[256] = "";
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = 1e-3f;
    od.weight_decay = 0.1f;
    od.clip_norm = 1.0f;
    o = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    if (!CHECKF(ctx && m && o && g, "alloc: GPT setup", "setup failed: %s", ctx ? pt_error(ctx) : "no ctx")) return;
    for (step = 0; step < 6; step++) {
        random_tokens(ids, tg, B * T, 64, 100 + (uint64_t)step);
        before = cnt_malloc + cnt_realloc;
        loss[step] = gpt_step(g, m, o, ids, tg, B, T, 1e-3f);
        per[step] = cnt_malloc + cnt_realloc - before;
        if (loss[step] != loss[step]) ok = 0;
    }
    CHECKF(ok, "alloc: GPT training steps run", "a step failed: %s", pt_error(ctx));
    snprintf(detail, sizeof detail, "allocations per step: %ld %ld %ld %ld %ld %ld", per[0], per[1], per[2], per[3], per[4], per[5]);
    CHECKF(per[2] == 0 && per[3] == 0 && per[4] == 0 && per[5] == 0, "alloc: GPT+AdamW+clip steps 3..6 call malloc/realloc 0 times",
           "%s", detail);
    CHECKF(per[0] > 0, "alloc: the counting allocator sees the library's allocations", "%s", detail);
    pt_graph_free(g);
    pt_optim_free(o);
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

static void test_alloc_cnn(void) {
    pt_ctx *ctx = new_ctx(7, 0);
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g;
    pt_tensor *cw, *cb, *lw, *lb;
    const int64_t N = 4, sx[4] = {4, 1, 8, 8}, sw[4] = {6, 1, 3, 3}, sb[1] = {6}, slw[2] = {10, 6 * 4 * 4}, slb[1] = {10}, st[1] = {4};
    const int64_t flat[2] = {4, 6 * 4 * 4};
    float x[4 * 64];
    int32_t tg[4];
    long per[6], before;
    int step, i, ok = 1;
    tu_rng r;
    r.s = 3;
    cw = pt_param_new(ctx, "conv.w", 4, sw, PT_INIT_NORMAL, 0.3f, 0);
    cb = pt_param_new(ctx, "conv.b", 1, sb, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    lw = pt_param_new(ctx, "fc.w", 2, slw, PT_INIT_NORMAL, 0.1f, 0);
    lb = pt_param_new(ctx, "fc.b", 1, slb, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD;
    od.lr = 0.05f;
    od.momentum = 0.9f;
    od.weight_decay = 1e-4f;
    o = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    if (!CHECKF(cw && cb && lw && lb && o && g, "alloc: CNN setup", "setup failed: %s", pt_error(ctx))) return;
    for (step = 0; step < 6; step++) {
        pt_tensor *tx, *tt, *h, *loss;
        for (i = 0; i < 4 * 64; i++) x[i] = tu_uniform(&r, -1, 1);
        for (i = 0; i < 4; i++) tg[i] = (int32_t)(tu_next(&r) % 10);
        before = cnt_malloc + cnt_realloc;
        pt_graph_reset(g);
        tx = pt_tensor_from(g, PT_F32, 4, sx, x);
        tt = tensor_i32(g, 1, st, tg);
        h = pt_conv2d(g, tx, cw, cb, 1, 1);
        h = pt_relu(g, h);
        h = pt_maxpool2d(g, h, 2, 2);
        h = pt_reshape(g, h, 2, flat);
        h = pt_linear(g, h, lw, lb);
        loss = pt_cross_entropy(g, h, tt, -1);
        pt_zero_grad(ctx);
        if (!loss || pt_backward(g, loss) != PT_OK) ok = 0;
        pt_optim_step(o, 0.05f);
        per[step] = cnt_malloc + cnt_realloc - before;
    }
    (void)N;
    CHECKF(ok, "alloc: CNN training steps run", "%s", pt_error(ctx));
    CHECKF(per[2] == 0 && per[3] == 0 && per[4] == 0 && per[5] == 0, "alloc: CNN+SGD-momentum steps 3..6 call malloc/realloc 0 times",
           "allocations per step: %ld %ld %ld %ld %ld %ld", per[0], per[1], per[2], per[3], per[4], per[5]);
    pt_graph_free(g);
    pt_optim_free(o);
    pt_shutdown(ctx);
}

static void test_alloc_balance(void) {
    long m0 = cnt_malloc + cnt_realloc_new, f0 = cnt_free;
    pt_ctx *ctx = new_ctx(1, 1);
    pt_gpt_config c = gpt_cfg(32, 1, 16, 2, 8, 0.0f);
    pt_gpt *m = pt_gpt_new(ctx, &c);
    pt_graph *g = pt_graph_new(ctx);
    int32_t ids[16], tg[16];
    random_tokens(ids, tg, 16, 32, 5);
    gpt_step(g, m, NULL, ids, tg, 2, 8, 0);
    pt_graph_free(g);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    CHECKF(cnt_malloc + cnt_realloc_new - m0 == cnt_free - f0, "alloc: everything allocated is freed by pt_gpt_free/pt_graph_free/pt_shutdown",
           "%ld allocations, %ld frees", cnt_malloc + cnt_realloc_new - m0, cnt_free - f0);
}

/* =================================================================================================
   2. bit-identical results
   ================================================================================================= */
typedef struct run_result {
    float loss[3];
    float *params;
    int64_t n;
} run_result;

static run_result run_gpt3(uint64_t seed, int threads, int vocab, int width, int seq, int batch) {
    run_result rr;
    pt_ctx *ctx = new_ctx(seed, 1);
    pt_gpt_config c = gpt_cfg(vocab, 2, width, 4, seq, 0.1f);
    pt_gpt *m;
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g;
    int32_t *ids = (int32_t *)malloc((size_t)(batch * seq) * 4), *tg = (int32_t *)malloc((size_t)(batch * seq) * 4);
    int s;
    memset(&rr, 0, sizeof rr);
    pt_set_threads(ctx, threads);
    m = pt_gpt_new(ctx, &c);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = 1e-3f;
    od.weight_decay = 0.1f;
    od.clip_norm = 0.5f;
    o = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    for (s = 0; s < 3; s++) {
        random_tokens(ids, tg, (int64_t)batch * seq, vocab, 1000 + (uint64_t)s);
        rr.loss[s] = m && o && g ? gpt_step(g, m, o, ids, tg, batch, seq, 1e-3f) : NAN;
    }
    rr.params = slab_copy(ctx, 0);
    rr.n = pt_param_slab(ctx).shape[0];
    pt_graph_free(g);
    pt_optim_free(o);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    return rr;
}
static int same_run(const run_result *a, const run_result *b, char *why, size_t n) {
    int64_t i;
    if (memcmp(a->loss, b->loss, sizeof a->loss)) {
        snprintf(why, n, "losses differ: %.9g %.9g %.9g vs %.9g %.9g %.9g", a->loss[0], a->loss[1], a->loss[2], b->loss[0], b->loss[1],
                 b->loss[2]);
        return 0;
    }
    if (a->n != b->n) {
        snprintf(why, n, "slab sizes differ: %lld vs %lld", (long long)a->n, (long long)b->n);
        return 0;
    }
    for (i = 0; i < a->n; i++)
        if (memcmp(&a->params[i], &b->params[i], sizeof(float))) {
            snprintf(why, n, "parameter slab element %lld differs: %.9g vs %.9g", (long long)i, a->params[i], b->params[i]);
            return 0;
        }
    if (a->loss[0] != a->loss[0]) {
        snprintf(why, n, "loss is NaN");
        return 0;
    }
    return 1;
}
static void test_bitwise(void) {
    char why[256];
    /* small: the sizes of the allocation test; large: kernels take their multi-threaded paths */
    int big = !tu_quick;
    int V = big ? 256 : 64, C = big ? 64 : 32, T = big ? 64 : 16, B = big ? 8 : 4;
    run_result a = run_gpt3(11, 2, V, C, T, B), b = run_gpt3(11, 2, V, C, T, B), c1 = run_gpt3(11, 1, V, C, T, B),
               c3 = run_gpt3(11, 3, V, C, T, B), d = run_gpt3(12, 2, V, C, T, B);
    CHECKF(same_run(&a, &b, why, sizeof why), tu_name("bitwise: same seed and data, two contexts: identical losses and params after 3 steps (V%d C%d T%d B%d)", V, C, T, B), "%s", why);
    CHECKF(same_run(&c1, &a, why, sizeof why), "bitwise: threads 1 vs 2 identical (3 GPT steps)", "%s", why);
    CHECKF(same_run(&c3, &a, why, sizeof why), "bitwise: threads 3 vs 2 identical (3 GPT steps)", "%s", why);
    CHECK(!same_run(&d, &a, why, sizeof why), "bitwise: a different seed gives a different run");
    free(a.params), free(b.params), free(c1.params), free(c3.params), free(d.params);
}

/* single ops on sizes above the parallel threshold: forward and gradients identical for 1, 2, 3 threads */
static void op_run(int threads, int which, float **out, int64_t *nout) {
    pt_ctx *ctx = new_ctx(5, 1);
    pt_graph *g;
    pt_tensor *x, *w, *y = NULL, *loss;
    int64_t s3[3] = {2, 128, 3 * 64}, s2[2] = {300, 257}, sw[2] = {96, 257};
    int64_t n, i;
    float *buf;
    tu_rng r;
    r.s = 77;
    pt_set_threads(ctx, threads);
    g = pt_graph_new(ctx);
    if (which == 0) { /* attention */
        n = s3[0] * s3[1] * s3[2];
        buf = (float *)malloc((size_t)n * 4);
        for (i = 0; i < n; i++) buf[i] = tu_uniform(&r, -1, 1);
        x = leaf_f32(g, 3, s3, buf, 1);
        y = pt_attention(g, x, 4);
        free(buf);
    } else { /* linear + layernorm + gelu + softmax + sum */
        n = s2[0] * s2[1];
        buf = (float *)malloc((size_t)n * 4);
        for (i = 0; i < n; i++) buf[i] = tu_uniform(&r, -1, 1);
        x = leaf_f32(g, 2, s2, buf, 1);
        free(buf);
        buf = (float *)malloc((size_t)(sw[0] * sw[1]) * 4);
        for (i = 0; i < sw[0] * sw[1]; i++) buf[i] = tu_uniform(&r, -0.1f, 0.1f);
        w = leaf_f32(g, 2, sw, buf, 1);
        free(buf);
        y = pt_layernorm(g, x, pt_full(g, 1, &s2[1], 1.5f), NULL, 1e-5f);
        y = pt_gelu(g, pt_linear(g, y, w, NULL));
        y = pt_softmax(g, y);
    }
    {
        pt_tensor *rr = pt_tensor_from(g, PT_F32, y ? y->ndim : 1, y ? y->shape : s2, NULL);
        float *rp = pt_f32(rr);
        for (i = 0; rp && i < pt_numel(rr); i++) rp[i] = tu_uniform(&r, -1, 1);
        loss = pt_sum(g, pt_mul(g, y, rr));
    }
    pt_backward(g, loss);
    *nout = pt_numel(y) + pt_numel(x) + 1;
    *out = (float *)malloc((size_t)*nout * 4);
    if (y && x->grad) {
        memcpy(*out, pt_f32(y), (size_t)pt_numel(y) * 4);
        memcpy(*out + pt_numel(y), pt_f32(x->grad), (size_t)pt_numel(x) * 4);
        (*out)[*nout - 1] = pt_item(loss);
    } else {
        for (i = 0; i < *nout; i++) (*out)[i] = NAN;
    }
    pt_graph_free(g);
    pt_shutdown(ctx);
}
static void test_bitwise_ops(void) {
    int which, t;
    const char *names[2] = {"attention [2,128,192] 4 heads", "layernorm+linear+gelu+softmax [300,257]"};
    if (tu_quick) return;
    for (which = 0; which < 2; which++) {
        float *ref, *o;
        int64_t n, n2, i, bad = -1;
        op_run(1, which, &ref, &n);
        for (t = 2; t <= 3; t++) {
            op_run(t, which, &o, &n2);
            bad = -1;
            for (i = 0; i < n && n2 == n; i++)
                if (memcmp(&o[i], &ref[i], 4) || o[i] != o[i]) {
                    bad = i;
                    break;
                }
            CHECKF(bad < 0 && n2 == n, tu_name("bitwise: %s forward+backward, threads %d vs 1", names[which], t),
                   "element %lld of %lld differs: %.9g vs %.9g", (long long)bad, (long long)n, bad >= 0 ? o[bad] : 0.f,
                   bad >= 0 ? ref[bad] : 0.f);
            free(o);
        }
        free(ref);
    }
}

/* =================================================================================================
   3. initialization is a pure function of (seed, name, index)
   ================================================================================================= */
static void test_init(void) {
    const int64_t sa[2] = {4, 5}, sb[1] = {7}, sz[1] = {3}, sw[2] = {6, 8};
    pt_ctx *c1 = new_ctx(99, 1), *c2 = new_ctx(99, 1), *c3 = new_ctx(100, 1), *c4 = new_ctx(99, 1), *c5 = new_ctx(99, 1);
    pt_spec sp;
    float *w, *half;
    int i, j, ok;
    pt_param_new(c1, "a", 2, sa, PT_INIT_NORMAL, 0.5f, 0);
    pt_param_new(c1, "b", 1, sb, PT_INIT_UNIFORM, 2.0f, 0);
    pt_param_new(c2, "zzz", 1, sz, PT_INIT_NORMAL, 1.0f, 0);
    pt_param_new(c2, "b", 1, sb, PT_INIT_UNIFORM, 2.0f, 0);
    pt_param_new(c2, "a", 2, sa, PT_INIT_NORMAL, 0.5f, 0);
    pt_param_new(c3, "a", 2, sa, PT_INIT_NORMAL, 0.5f, 0);
    CHECK(param_val(c1, "a") && param_val(c2, "a") && !memcmp(param_val(c1, "a"), param_val(c2, "a"), 20 * 4),
          "init: same seed, other creation order: normal param 'a' identical");
    CHECK(param_val(c1, "b") && param_val(c2, "b") && !memcmp(param_val(c1, "b"), param_val(c2, "b"), 7 * 4),
          "init: same seed, other creation order: uniform param 'b' identical");
    CHECK(param_val(c3, "a") && memcmp(param_val(c1, "a"), param_val(c3, "a"), 20 * 4),
          "init: a different seed gives different values");
    {
        const float *a = param_val(c1, "a"), *b = param_val(c1, "b");
        double s = 0, s2 = 0;
        ok = 1;
        for (i = 0; i < 20; i++) s += a[i], s2 += a[i] * a[i];
        for (i = 0; i < 7; i++) ok &= b[i] >= -2.0f && b[i] <= 2.0f;
        CHECKF(ok && s2 / 20 > 0.05 && s2 / 20 < 0.6, "init: normal std and uniform range plausible", "mean sq %.4g (std 0.5 -> 0.25)",
               s2 / 20);
    }
    /* split_dim 1 into 2 parts, part 1: the right half of the unsplit parameter */
    pt_param_new(c4, "w", 2, sw, PT_INIT_NORMAL, 1.0f, 0);
    memset(&sp, 0, sizeof sp);
    snprintf(sp.name, sizeof sp.name, "w");
    sp.ndim = 2;
    sp.global_shape[0] = 6, sp.global_shape[1] = 8, sp.global_shape[2] = sp.global_shape[3] = 1;
    sp.split_dim = 1, sp.split_parts = 2, sp.split_index = 1;
    sp.stage = -1;
    sp.init = PT_INIT_NORMAL;
    sp.init_scale = 1.0f;
    {
        pt_tensor *t = pt_param_from_spec(c5, &sp);
        w = param_val(c4, "w");
        half = t ? pt_f32(t) : NULL;
        ok = t && w && half && t->ndim == 2 && t->shape[0] == 6 && t->shape[1] == 4;
        for (i = 0; ok && i < 6; i++)
            for (j = 0; j < 4; j++)
                if (memcmp(&half[i * 4 + j], &w[i * 8 + 4 + j], 4)) ok = 0;
        CHECKF(ok, "init: split_dim=1 parts=2 index=1 holds exactly the right half of the unsplit parameter", "shape %s, %s",
               t ? pt_shape_str(t, err_msg, 64) : "NULL", pt_error(c5));
    }
    {
        pt_ctx *c6 = new_ctx(99, 1);
        pt_tensor *t;
        sp.split_dim = 0, sp.split_parts = 3, sp.split_index = 2;
        t = pt_param_from_spec(c6, &sp);
        ok = t && t->shape[0] == 2 && t->shape[1] == 8 && !memcmp(pt_f32(t), w + 4 * 8, 16 * 4);
        CHECK(ok, "init: split_dim=0 parts=3 index=2 holds exactly rows 4..5 of the unsplit parameter");
        pt_shutdown(c6);
    }
    {
        const int64_t s1[1] = {5};
        pt_ctx *c7 = new_ctx(1, 1);
        float *z, *o, *k;
        pt_param_new(c7, "z", 1, s1, PT_INIT_ZEROS, 3, 0);
        pt_param_new(c7, "o", 1, s1, PT_INIT_ONES, 3, 0);
        pt_param_new(c7, "k", 1, s1, PT_INIT_CONST, 0.25f, 0);
        z = param_val(c7, "z"), o = param_val(c7, "o"), k = param_val(c7, "k");
        ok = z && o && k;
        for (i = 0; ok && i < 5; i++) ok = z[i] == 0 && o[i] == 1 && k[i] == 0.25f;
        CHECK(ok, "init: zeros, ones, const");
        CHECK(pt_param_count(c7) == 3 && pt_param_numel(c7) == 15 && pt_param_at(c7, 1) == pt_param_find(c7, "o") &&
                  pt_param_find(c7, "nope") == NULL,
              "params: count, numel, at, find");
        pt_shutdown(c7);
    }
    pt_shutdown(c1), pt_shutdown(c2), pt_shutdown(c3), pt_shutdown(c4), pt_shutdown(c5);
}

/* =================================================================================================
   4. errors
   ================================================================================================= */
/* checks one failing call: result NULL, one callback with status != OK, the message holding every
   expected substring, and pt_error/pt_status_get agreeing */
static void expect_error(pt_ctx *ctx, const void *result, const char *name, const char *s1, const char *s2, const char *s3) {
    const char *subs[3];
    int i, ok = result == NULL && err_count == 1 && err_status != PT_OK && pt_status_get(ctx) == err_status &&
                !strcmp(pt_error(ctx), err_msg);
    subs[0] = s1, subs[1] = s2, subs[2] = s3;
    for (i = 0; i < 3; i++)
        if (subs[i] && !strstr(err_msg, subs[i])) ok = 0;
    CHECKF(ok, tu_name("error: %s", name), "result %s, %d callbacks, status %d, message '%s' (want '%s' '%s' '%s'), pt_error '%s'",
           result ? "non-NULL" : "NULL", err_count, (int)err_status, err_msg, s1 ? s1 : "", s2 ? s2 : "", s3 ? s3 : "", pt_error(ctx));
    err_reset(ctx);
}
static void test_errors(void) {
    pt_ctx *ctx = new_ctx(1, 1);
    pt_graph *g = pt_graph_new(ctx);
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s2[1] = {2}, s24[2] = {2, 4}, s3[1] = {3}, s43[2] = {4, 3}, s42[2] = {4, 2};
    const int64_t s25[2] = {2, 5}, sq[3] = {1, 2, 12}, sx[4] = {1, 3, 5, 5}, sw[4] = {2, 4, 3, 3};
    const int32_t tg_bad[2] = {1, 5}, id_bad[2] = {0, 4};
    pt_tensor *a23 = pt_full(g, 2, s23, 1.0f), *b45 = pt_full(g, 2, s45, 1.0f), *t;
    pt_status st;
    err_reset(ctx);
    t = pt_matmul(g, a23, b45, 0, 0);
    expect_error(ctx, t, "pt_matmul [2,3]x[4,5]", "pt_matmul", "[2,3]", "[4,5]");
    t = pt_matmul(g, a23, tensor_i32(g, 2, s45, NULL), 0, 0);
    CHECKF(!t && pt_status_get(ctx) == PT_ERR_DTYPE, "error: pt_matmul with an i32 operand is PT_ERR_DTYPE", "status %d '%s'",
           (int)pt_status_get(ctx), err_msg);
    err_reset(ctx);
    t = pt_add(g, a23, pt_full(g, 1, s2, 1.0f));
    expect_error(ctx, t, "pt_add [2,3] + [2] (broadcast mismatch)", "pt_add", "[2,3]", "[2]");
    t = pt_mul(g, pt_full(g, 1, s3, 1.0f), a23);
    expect_error(ctx, t, "pt_mul [3] * [2,3] (b larger than a)", "pt_mul", "[3]", "[2,3]");
    t = pt_linear(g, a23, b45, NULL);
    expect_error(ctx, t, "pt_linear x [2,3] with w [4,5]", "pt_linear", "[2,3]", "[4,5]");
    t = pt_linear(g, a23, pt_full(g, 2, s43, 1.0f), pt_full(g, 1, s3, 0.0f));
    expect_error(ctx, t, "pt_linear bias [3] for w [4,3]", "pt_linear", "[3]", "[4,3]");
    t = pt_cross_entropy(g, pt_full(g, 2, s25, 0.0f), tensor_i32(g, 1, s2, tg_bad), -100);
    expect_error(ctx, t, "pt_cross_entropy target 5 out of range for V=5", "pt_cross_entropy", "5", NULL);
    t = pt_cross_entropy(g, a23, tensor_i32(g, 1, s3, NULL), -100);
    expect_error(ctx, t, "pt_cross_entropy targets [3] for logits [2,3]", "pt_cross_entropy", "[3]", "[2,3]");
    t = pt_embedding(g, pt_full(g, 2, s43, 1.0f), tensor_i32(g, 1, s2, id_bad));
    expect_error(ctx, t, "pt_embedding id 4 out of range for 4 rows", "pt_embedding", "4", NULL);
    t = pt_attention(g, pt_full(g, 3, sq, 0.0f), 3);
    expect_error(ctx, t, "pt_attention 3 heads do not divide width 4", "pt_attention", "[1,2,12]", "3");
    t = pt_reshape(g, a23, 2, s42);
    expect_error(ctx, t, "pt_reshape [2,3] to [4,2]", "pt_reshape", "[2,3]", "[4,2]");
    t = pt_dropout(g, a23, 1.5f, 1);
    expect_error(ctx, t, "pt_dropout p=1.5", "pt_dropout", "1.5", NULL);
    t = pt_layernorm(g, pt_full(g, 2, s24, 1.0f), pt_full(g, 1, s3, 1.0f), NULL, 1e-5f);
    expect_error(ctx, t, "pt_layernorm w [3] for x [2,4]", "pt_layernorm", "[3]", "[2,4]");
    t = pt_conv2d(g, pt_full(g, 4, sx, 1.0f), pt_full(g, 4, sw, 1.0f), NULL, 1, 0);
    expect_error(ctx, t, "pt_conv2d channel mismatch", "pt_conv2d", "[1,3,5,5]", "[2,4,3,3]");
    t = pt_maxpool2d(g, a23, 2, 2);
    expect_error(ctx, t, "pt_maxpool2d on a 2-D tensor", "pt_maxpool2d", "[2,3]", NULL);
    t = pt_slice(g, a23, 1, 2, 2);
    expect_error(ctx, t, "pt_slice past the end", "pt_slice", "[2,3]", NULL);
    {
        pt_tensor *xs[2];
        xs[0] = a23, xs[1] = pt_full(g, 2, s24, 1.0f);
        t = pt_concat(g, 2, xs, 0);
        expect_error(ctx, t, "pt_concat [2,3] and [2,4] along dim 0", "pt_concat", "[2,3]", "[2,4]");
    }
    {
        int perm[2] = {0, 0};
        t = pt_permute(g, a23, perm);
        expect_error(ctx, t, "pt_permute with a repeated dim", "pt_permute", "[2,3]", NULL);
    }
    {
        pt_tensor *outs[2];
        const int64_t sizes[2] = {1, 1};
        st = pt_split(g, a23, 1, 2, sizes, outs);
        expect_error(ctx, st == PT_OK ? (void *)a23 : NULL, "pt_split sizes 1+1 for dim of 3", "pt_split", "[2,3]", NULL);
    }
    t = pt_cross_entropy(g, a23, pt_full(g, 1, s2, 0.0f), -1);
    CHECKF(!t && err_count == 1 && pt_status_get(ctx) == PT_ERR_DTYPE && strstr(err_msg, "pt_cross_entropy"),
           "error: pt_cross_entropy with f32 targets is PT_ERR_DTYPE", "status %d '%s'", (int)pt_status_get(ctx), err_msg);
    err_reset(ctx);
    t = pt_embedding(g, pt_full(g, 2, s43, 1.0f), pt_full(g, 1, s2, 0.0f));
    CHECKF(!t && err_count == 1 && pt_status_get(ctx) == PT_ERR_DTYPE && strstr(err_msg, "pt_embedding"),
           "error: pt_embedding with f32 ids is PT_ERR_DTYPE", "status %d '%s'", (int)pt_status_get(ctx), err_msg);
    err_reset(ctx);
    {
        pt_gpt_config bad = gpt_cfg(64, 2, 30, 4, 16, 0.0f);
        pt_gpt *gm = pt_gpt_new(ctx, &bad);
        expect_error(ctx, gm, "pt_gpt_new with heads 4 not dividing width 30", "pt_gpt_new", "30", NULL);
        if (gm) pt_gpt_free(gm);
    }
    t = pt_tensor_from(g, PT_F32, 2, (const int64_t[]){2, -1}, NULL);
    expect_error(ctx, t, "pt_tensor_from with a negative size", "pt_tensor_from", "-1", NULL);
    /* NULL inputs propagate without a new error */
    err_reset(ctx);
    t = pt_relu(g, pt_add(g, NULL, a23));
    t = t ? t : pt_linear(g, NULL, b45, NULL);
    t = t ? t : pt_sum(g, pt_softmax(g, pt_layernorm(g, NULL, a23, NULL, 1e-5f)));
    t = t ? t : pt_attention(g, pt_cross_entropy(g, NULL, NULL, 0), 1);
    CHECKF(!t && err_count == 0 && pt_status_get(ctx) == PT_OK, "error: NULL inputs propagate NULL without a new error",
           "result %p, %d callbacks, status %d '%s'", (void *)t, err_count, (int)pt_status_get(ctx), err_msg);
    /* the first error is kept, later ones still reach the callback */
    err_reset(ctx);
    t = pt_relu(g, pt_matmul(g, a23, b45, 0, 0));
    pt_reshape(g, a23, 2, s42);
    CHECKF(!t && err_count == 2 && pt_status_get(ctx) == PT_ERR_SHAPE && strstr(pt_error(ctx), "pt_matmul") &&
               strstr(err_msg, "pt_reshape"),
           "error: pt_error keeps the first error, the callback sees each", "%d callbacks, pt_error '%s', last '%s'", err_count,
           pt_error(ctx), err_msg);
    pt_error_clear(ctx);
    CHECK(pt_status_get(ctx) == PT_OK && pt_error(ctx) && pt_error(ctx)[0] == 0, "error: pt_error_clear resets status and message");
    /* backward on a non-scalar */
    err_reset(ctx);
    {
        pt_tensor *x = leaf_f32(g, 2, s23, NULL, 1);
        pt_tensor *y = pt_scale(g, x, 2.0f);
        st = pt_backward(g, y);
        CHECKF(st != PT_OK && err_count == 1 && strstr(err_msg, "pt_backward") && strstr(err_msg, "[2,3]"),
               "error: pt_backward on a [2,3] tensor", "status %d, %d callbacks, '%s'", (int)st, err_count, err_msg);
        err_reset(ctx);
        st = pt_backward(g, NULL);
        CHECKF(st != PT_OK && err_count == 1 && strstr(err_msg, "pt_backward"), "error: pt_backward(NULL loss)", "status %d '%s'", (int)st,
               err_msg);
        err_reset(ctx);
        st = pt_backward_from(g, y, a23 /* [2,3] ok */);
        CHECKF(st == PT_OK && err_count == 0, "pt_backward_from with a matching dout works", "status %d '%s'", (int)st, err_msg);
        st = pt_backward_from(g, y, b45);
        CHECKF(st != PT_OK && strstr(err_msg, "pt_backward_from") && strstr(err_msg, "[4,5]"), "error: pt_backward_from dout [4,5] for out [2,3]",
               "status %d '%s'", (int)st, err_msg);
        err_reset(ctx);
    }
    /* parameters */
    {
        pt_ctx *c2 = new_ctx(1, 1);
        pt_optim_desc od;
        pt_optim *o;
        err_reset(c2);
        t = pt_param_new(c2, "p", 1, s3, PT_INIT_ONES, 0, 0);
        CHECK(t && err_count == 0, "params: pt_param_new works");
        t = pt_param_new(c2, "p", 1, s3, PT_INIT_ONES, 0, 0);
        expect_error(c2, t, "duplicate parameter name 'p'", "'p'", NULL, NULL);
        t = pt_param_new(c2, "neg", 1, (const int64_t[]){-3}, PT_INIT_ONES, 0, 0);
        expect_error(c2, t, "parameter of negative size", "neg", NULL, NULL);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_SGD;
        od.lr = 0.1f;
        o = pt_optim_new(c2, &od);
        CHECK(o != NULL, "optim: pt_optim_new works");
        t = pt_param_new(c2, "late", 1, s3, PT_INIT_ONES, 0, 0);
        expect_error(c2, t, "pt_param_new after pt_optim_new", "late", NULL, NULL);
        t = pt_param_new(c2, "late2", 1, s3, PT_INIT_ONES, 0, 0);
        CHECK(!t && pt_status_get(c2) == PT_ERR_STATE, "error: a parameter after the optimizer is PT_ERR_STATE");
        err_reset(c2);
        od.momentum = 1.5f;
        expect_error(c2, pt_optim_new(c2, &od), "pt_optim_new momentum 1.5", "pt_optim_new", NULL, NULL);
        pt_optim_free(o);
        pt_shutdown(c2);
    }
    /* pt_init with an unknown device */
    {
        pt_desc d;
        pt_ctx *c3;
        memset(&d, 0, sizeof d);
        d.device = "nosuch";
        d.on_error = on_error;
        d.log = quiet_log;
        err_reset(NULL);
        c3 = pt_init(&d);
        CHECKF(c3 == NULL && err_count >= 1 && strstr(err_msg, "nosuch"), "error: pt_init device \"nosuch\" returns NULL with a message",
               "ctx %p, %d callbacks, '%s'", (void *)c3, err_count, err_msg);
        if (c3) pt_shutdown(c3);
    }
    /* pt_error_set: the first error is kept, the callback hears each, the status comes back */
    {
        pt_desc d;
        pt_ctx *c4;
        memset(&d, 0, sizeof d);
        d.on_error = on_error;
        d.log = quiet_log;
        err_reset(NULL);
        c4 = pt_init(&d);
        CHECK(c4 != NULL, "pt_error_set: a context");
        if (c4) {
            pt_status a = pt_error_set(c4, PT_ERR_SHAPE, "first %d", 1), b = pt_error_set(c4, PT_ERR_IO, "second");
            CHECKF(a == PT_ERR_SHAPE && b == PT_ERR_IO && pt_status_get(c4) == PT_ERR_SHAPE && !strcmp(pt_error(c4), "first 1") && err_count == 2,
                   "pt_error_set: returns its status, keeps the first error, calls on_error for each", "%d %d '%s' %d callbacks", (int)a, (int)b,
                   pt_error(c4), err_count);
            CHECK(pt_ctx_dist(c4) == NULL, "pt_ctx_dist: NULL without a grid");
            pt_shutdown(c4);
        }
    }
#if defined(__unix__) || defined(__APPLE__)
    /* pt_mkdirs: parents made, an existing directory is fine, a file in the way is refused */
    {
        char base[64], deep[128];
        FILE *f;
        snprintf(base, sizeof base, "/tmp/pt_core_mkdirs_%d", (int)getpid());
        snprintf(deep, sizeof deep, "%s/a/b/c", base);
        CHECK(pt_mkdirs(deep) == 1 && pt_mkdirs(deep) == 1, "pt_mkdirs: makes a/b/c with its parents, and again when it exists");
        snprintf(deep, sizeof deep, "%s/file", base);
        f = fopen(deep, "w");
        if (f) fclose(f);
        snprintf(deep, sizeof deep, "%s/file/sub", base);
        CHECK(pt_mkdirs(deep) == 0 && pt_mkdirs("") == 0, "pt_mkdirs: 0 under a file and for an empty name");
        snprintf(deep, sizeof deep, "rm -rf %s", base);
        if (system(deep) != 0) printf("note: could not remove %s\n", base);
    }
#endif
    /* pt_args_parse */
    {
        char a0[] = "prog", a1[] = "--steps", a2[] = "abc";
        char *argv[4];
        char err[256] = "";
        pt_args args;
        int rc;
        memset(&args, 0, sizeof args);
        argv[0] = a0, argv[1] = a1, argv[2] = a2, argv[3] = NULL;
        rc = pt_args_parse(&args, 3, argv, err, sizeof err);
        CHECKF(rc == -1 && strstr(err, "--steps"), "error: pt_args_parse --steps abc returns -1 naming the flag", "rc %d, '%s'", rc, err);
    }
    {
        char a0[] = "prog", a1[] = "--steps", a2[] = "10", a3[] = "--foo", a4[] = "--lr", a5[] = "0.25", a6[] = "x", a7[] = "--device",
             a8[] = "cpu", a9[] = "--seed", a10[] = "0";
        char *argv[12];
        char err[256] = "";
        pt_args args;
        int rc;
        memset(&args, 0, sizeof args);
        args.batch = 8;
        argv[0] = a0, argv[1] = a1, argv[2] = a2, argv[3] = a3, argv[4] = a4, argv[5] = a5, argv[6] = a6, argv[7] = a7, argv[8] = a8;
        argv[9] = a9, argv[10] = a10, argv[11] = NULL;
        rc = pt_args_parse(&args, 11, argv, err, sizeof err);
        CHECKF(rc == 3 && !strcmp(argv[1], "--foo") && !strcmp(argv[2], "x") && args.steps == 10 && args.lr == 0.25f && args.batch == 8 &&
                   args.seed == 0 && args.device && !strcmp(args.device, "cpu"),
               "pt_args_parse: known flags parsed, unknown ones kept and compacted, defaults kept",
               "rc %d, steps %lld, lr %g, batch %lld, argv[1] %s, err '%s'", rc, (long long)args.steps, (double)args.lr,
               (long long)args.batch, rc > 1 ? argv[1] : "-", err);
    }
    {
        char a0[] = "prog", a1[] = "--lr", a2[] = "-1";
        char *argv[4];
        char err[256] = "";
        pt_args args;
        int rc;
        memset(&args, 0, sizeof args);
        argv[0] = a0, argv[1] = a1, argv[2] = a2, argv[3] = NULL;
        rc = pt_args_parse(&args, 3, argv, err, sizeof err);
        CHECKF(rc == -1 && strstr(err, "--lr"), "error: pt_args_parse --lr -1 returns -1 naming the flag", "rc %d, '%s'", rc, err);
        argv[1] = a1, argv[2] = NULL;
        rc = pt_args_parse(&args, 2, argv, err, sizeof err);
        CHECKF(rc == -1 && strstr(err, "--lr"), "error: pt_args_parse --lr without a value returns -1", "rc %d, '%s'", rc, err);
    }
    {   /* out of range (also past int64: ERANGE), non-finite: refused naming the flag and the range */
        static const char *const bad[][3] = {{"--steps", "99999999999999999999", "1..1099511627776"}, {"--steps", "1099511627777", "1..1099511627776"},
                                             {"--seed", "99999999999999999999", "0..9223372036854775807"}, {"--batch", "16777217", "1..16777216"},
                                             {"--seq", "4294967297", "1..16777216"}, {"--layers", "65537", "1..65536"}, {"--width", "1048577", "1..1048576"},
                                             {"--heads", "-1", "1..65536"}, {"--stop-after", "99999999999999999999", "0..1099511627776"},
                                             {"--lr", "inf", "finite"}, {"--lr", "nan", "finite"}, {"--lr", "1e300", "finite"}, {"--lr", "1e-300", "finite"},
                                             {"--ckpt-every", "99999999999999999999", "0..1099511627776"}};
        int k, ok = 1;
        for (k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
            char a0[] = "prog", a1[32], a2[32];
            char *argv[4];
            char err[256] = "";
            pt_args args;
            pt_run run;
            int rc;
            memset(&args, 0, sizeof args), memset(&run, 0, sizeof run);
            snprintf(a1, sizeof a1, "%s", bad[k][0]), snprintf(a2, sizeof a2, "%s", bad[k][1]);
            argv[0] = a0, argv[1] = a1, argv[2] = a2, argv[3] = NULL;
            rc = strcmp(bad[k][0], "--ckpt-every") ? pt_args_parse(&args, 3, argv, err, sizeof err) : pt_run_parse(&run, 3, argv, err, sizeof err);
            if (rc != -1 || !strstr(err, bad[k][0]) || !strstr(err, bad[k][2]) || !strstr(err, bad[k][1])) {
                printf("  %s %s: rc %d, '%s' (expected '%s')\n", bad[k][0], bad[k][1], rc, err, bad[k][2]);
                ok = 0;
            }
        }
        CHECK(ok, "pt_args_parse / pt_run_parse: values out of range (ERANGE included) and a non-finite --lr refused, naming flag, range and value");
    }
    pt_graph_free(g);
    pt_shutdown(ctx);
}

/* =================================================================================================
   5. gradient-ready hook
   ================================================================================================= */
#define HOOK_MAX 64
typedef struct hook_rec {
    pt_ctx *ctx;
    int fired[HOOK_MAX];
    float *snap[HOOK_MAX]; /* the gradient when the hook fired */
    int order[HOOK_MAX], norder;
} hook_rec;
static void grad_hook(void *user, pt_param *p) {
    hook_rec *h = (hook_rec *)user;
    int64_t n = pt_numel(&p->grad);
    if (p->id < 0 || p->id >= HOOK_MAX) return;
    h->fired[p->id]++;
    if (h->norder < HOOK_MAX) h->order[h->norder++] = p->id;
    free(h->snap[p->id]);
    h->snap[p->id] = (float *)malloc((size_t)n * sizeof(float));
    memcpy(h->snap[p->id], pt_f32(&p->grad), (size_t)n * sizeof(float));
}
static void test_hook(void) {
    pt_ctx *ctx = new_ctx(3, 0);
    pt_gpt_config c = gpt_cfg(40, 2, 16, 2, 8, 0.0f);
    pt_gpt *m = pt_gpt_new(ctx, &c);
    pt_graph *g = pt_graph_new(ctx);
    hook_rec h;
    int32_t ids[16], tg[16];
    int round, i, np = pt_param_count(ctx);
    memset(&h, 0, sizeof h);
    h.ctx = ctx;
    if (!CHECK(m && g && np <= HOOK_MAX && m->lm_head == m->wte, "hook: tied GPT setup")) return;
    pt_set_grad_hook(ctx, grad_hook, &h);
    for (round = 0; round < 2; round++) {
        int once = 1, exact = 1, wte_id = pt_param_find(ctx, "wte")->id, nbad = -1;
        memset(h.fired, 0, sizeof h.fired);
        h.norder = 0;
        random_tokens(ids, tg, 16, 40, 9 + (uint64_t)round);
        gpt_step(g, m, NULL, ids, tg, 2, 8, 0);
        for (i = 0; i < np; i++) {
            pt_param *p = pt_param_at(ctx, i);
            if (h.fired[i] != 1) {
                once = 0;
                nbad = i;
            } else if (memcmp(h.snap[i], pt_f32(&p->grad), (size_t)pt_numel(&p->grad) * 4)) {
                exact = 0;
                nbad = i;
            }
        }
        CHECKF(h.fired[wte_id] == 1, tu_name("hook: 'wte' (tied: embedding and LM head) fires exactly once per backward (round %d)", round + 1),
               "fired %d times", h.fired[wte_id]);
        CHECKF(h.snap[wte_id] && !memcmp(h.snap[wte_id], param_grad(ctx, "wte"), (size_t)pt_numel(m->wte) * 4),
               tu_name("hook: when 'wte' fires its gradient is final (both uses done) (round %d)", round + 1), "%s",
               "the gradient changed after the hook fired");
        CHECKF(once, tu_name("hook: every trainable parameter fires exactly once (round %d, %d params)", round + 1, np),
               "param '%s' fired %d times", nbad >= 0 ? pt_param_at(ctx, nbad)->spec.name : "?", nbad >= 0 ? h.fired[nbad] : -1);
        CHECKF(exact, tu_name("hook: every parameter's gradient is final when its hook fires (round %d)", round + 1), "param '%s'",
               nbad >= 0 ? pt_param_at(ctx, nbad)->spec.name : "?");
    }
    /* the hook for wte comes after the LM head and the embedding: it is the last to fire */
    CHECKF(h.norder == np && h.order[np - 1] == pt_param_find(ctx, "wte")->id, "hook: 'wte' fires last (its first use is the embedding)",
           "last fired: '%s'", h.norder ? pt_param_at(ctx, h.order[h.norder - 1])->spec.name : "none");
    {
        /* a frozen parameter gets no hook and no gradient */
        pt_ctx *c2 = new_ctx(3, 1);
        const int64_t s[1] = {4};
        pt_tensor *a = pt_param_new(c2, "a", 1, s, PT_INIT_ONES, 0, 0), *f = pt_param_new(c2, "f", 1, s, PT_INIT_ONES, 0, PT_PARAM_FROZEN);
        pt_graph *g2 = pt_graph_new(c2);
        hook_rec h2;
        memset(&h2, 0, sizeof h2);
        pt_set_grad_hook(c2, grad_hook, &h2);
        pt_backward(g2, pt_sum(g2, pt_mul(g2, a, f)));
        CHECKF(h2.fired[0] == 1 && param_grad(c2, "a")[0] == 1.0f && param_grad(c2, "f")[0] == 0.0f,
               "hook: a frozen parameter gets no gradient (the trainable one does, and its hook fires)", "fired a %d, grad a %g f %g",
               h2.fired[0], (double)param_grad(c2, "a")[0], (double)param_grad(c2, "f")[0]);
        CHECKF(h2.fired[1] == 0, "hook: no gradient-ready hook for a frozen parameter (it has no gradient)",
               "the hook fired %d times for the frozen parameter", h2.fired[1]);
        for (i = 0; i < HOOK_MAX; i++) free(h2.snap[i]);
        pt_graph_free(g2);
        pt_shutdown(c2);
    }
    for (i = 0; i < HOOK_MAX; i++) free(h.snap[i]);
    pt_graph_free(g);
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

/* =================================================================================================
   6. pt_backward_from across two graphs == one graph
   ================================================================================================= */
static void test_backward_from(void) {
    pt_gpt_config c = gpt_cfg(50, 2, 16, 4, 8, 0.1f);
    pt_ctx *c1 = new_ctx(21, 0), *c2 = new_ctx(21, 0);
    pt_gpt *m1 = pt_gpt_new(c1, &c), *m2 = pt_gpt_new(c2, &c);
    pt_graph *g = pt_graph_new(c1), *ga = pt_graph_new(c2), *gb = pt_graph_new(c2);
    const int64_t B = 3, T = 8, s[2] = {3, 8};
    int32_t ids[24], tg[24];
    pt_tensor *loss1, *h, *hin, *loss2;
    const char *worst;
    double d;
    float l1, l2;
    random_tokens(ids, tg, B * T, 50, 77);
    /* one graph */
    loss1 = pt_gpt_loss(g, m1, tensor_i32(g, 2, s, ids), tensor_i32(g, 2, s, tg));
    pt_zero_grad(c1);
    pt_backward(g, loss1);
    l1 = pt_item(loss1);
    /* two graphs: embedding + block 0 | block 1 + head + loss */
    h = pt_gpt_block(ga, m2, 0, pt_gpt_embed(ga, m2, tensor_i32(ga, 2, s, ids)));
    hin = h ? leaf_f32(gb, 3, h->shape, pt_f32(h), 1) : NULL;
    loss2 = pt_cross_entropy_ex(gb, pt_gpt_head(gb, m2, pt_gpt_block(gb, m2, 1, hin)), tensor_i32(gb, 2, s, tg), -1, c.vocab);
    pt_zero_grad(c2);
    if (!CHECKF(loss1 && loss2 && h, "backward_from: both forwards run", "%s %s", pt_error(c1), pt_error(c2))) return;
    l2 = pt_item(loss2);
    pt_backward(gb, loss2);
    pt_backward_from(ga, h, hin->grad);
    CHECKF(l1 == l2, "backward_from: split forward gives the same loss", "%.9g vs %.9g", l1, l2);
    d = grads_rel_diff(c2, c1, &worst);
    CHECKF(d <= 1e-6, "backward_from: two graphs (g2 backward, then pt_backward_from g1) == one graph, all param grads",
           "max rel diff %.3g at '%s'", d, worst);
    pt_graph_free(g), pt_graph_free(ga), pt_graph_free(gb);
    pt_gpt_free(m1), pt_gpt_free(m2);
    pt_shutdown(c1), pt_shutdown(c2);
}

/* =================================================================================================
   7. several graphs alive: 3 micro-batches backward in reverse order == one batch
   ================================================================================================= */
static void test_microbatches(void) {
    pt_gpt_config c = gpt_cfg(50, 2, 16, 4, 8, 0.1f);
    pt_ctx *c1 = new_ctx(31, 0), *c2 = new_ctx(31, 0);
    pt_gpt *m1 = pt_gpt_new(c1, &c), *m2 = pt_gpt_new(c2, &c);
    pt_graph *g = pt_graph_new(c1), *gm[3];
    const int64_t sfull[2] = {6, 8}, smb[2] = {2, 8};
    int32_t ids[48], tg[48];
    pt_tensor *loss, *lm[3];
    const char *worst;
    double d, lsum = 0;
    int k, ok = 1;
    random_tokens(ids, tg, 48, 50, 55);
    loss = pt_gpt_loss(g, m1, tensor_i32(g, 2, sfull, ids), tensor_i32(g, 2, sfull, tg));
    pt_zero_grad(c1);
    pt_backward(g, loss);
    pt_zero_grad(c2);
    for (k = 0; k < 3; k++) {
        gm[k] = pt_graph_new(c2);
        pt_graph_set_sample_offset(gm[k], 2 * k); /* the same dropout masks as the whole batch */
        lm[k] = pt_scale(gm[k], pt_gpt_loss(gm[k], m2, tensor_i32(gm[k], 2, smb, ids + 16 * k), tensor_i32(gm[k], 2, smb, tg + 16 * k)),
                         1.0f / 3.0f);
        if (!lm[k]) ok = 0;
        else lsum += pt_item(lm[k]);
    }
    for (k = 2; k >= 0; k--)
        if (!lm[k] || pt_backward(gm[k], lm[k]) != PT_OK) ok = 0;
    CHECKF(ok, "microbatch: three graphs alive at once run forward and backward", "%s", pt_error(c2));
    CHECK_NEAR(lsum, pt_item(loss), 1e-5, "microbatch: mean of micro-batch losses == whole-batch loss (dropout masks follow the sample offset)");
    d = grads_rel_diff(c2, c1, &worst);
    CHECKF(d <= 1e-5, "microbatch: 3 graphs backward in reverse order, summed grads == grads of one graph over the batch",
           "max rel diff %.3g at '%s'", d, worst);
    for (k = 0; k < 3; k++) pt_graph_free(gm[k]);
    pt_graph_free(g);
    pt_gpt_free(m1), pt_gpt_free(m2);
    pt_shutdown(c1), pt_shutdown(c2);
}

/* gradients accumulate across backward passes until pt_zero_grad */
static void test_accumulate(void) {
    pt_ctx *ctx = new_ctx(1, 1);
    const int64_t s[1] = {3};
    const float xv[3] = {1, -2, 3};
    pt_tensor *w = pt_param_new(ctx, "w", 1, s, PT_INIT_CONST, 0.5f, 0);
    pt_graph *g = pt_graph_new(ctx);
    float *gw;
    int k;
    for (k = 0; k < 2; k++) {
        pt_graph_reset(g);
        pt_backward(g, pt_sum(g, pt_mul(g, w, pt_tensor_from(g, PT_F32, 1, s, xv))));
    }
    gw = param_grad(ctx, "w");
    CHECKF(gw[0] == 2 && gw[1] == -4 && gw[2] == 6, "autograd: parameter gradients accumulate over two backward passes", "%g %g %g",
           (double)gw[0], (double)gw[1], (double)gw[2]);
    pt_zero_grad(ctx);
    CHECK(gw[0] == 0 && gw[1] == 0 && gw[2] == 0, "autograd: pt_zero_grad zeroes them");
    {
        pt_tensor *x, *y;
        pt_graph_reset(g);
        x = leaf_f32(g, 1, s, xv, 0);
        y = pt_sum(g, pt_scale(g, x, 2.0f));
        CHECK(y && !(y->flags & PT_TENSOR_REQUIRES_GRAD) && y->node == NULL && pt_item(y) == 4.0f,
              "autograd: nothing is recorded when no input needs a gradient");
        pt_graph_set_grad(g, 0);
        y = pt_sum(g, pt_mul(g, w, x));
        CHECK(y && y->node == NULL, "autograd: pt_graph_set_grad(0) records nothing");
        pt_graph_set_grad(g, 1);
    }
    pt_graph_free(g);
    pt_shutdown(ctx);
}

/* =================================================================================================
   8. optimizers and schedules
   ================================================================================================= */
static void set_grad(pt_ctx *ctx, const char *name, const float *v, int n) { memcpy(param_grad(ctx, name), v, (size_t)n * 4); }
static void set_val(pt_ctx *ctx, const char *name, const float *v, int n) { memcpy(param_val(ctx, name), v, (size_t)n * 4); }
static double max_abs_diff(const float *a, const double *b, int n) {
    double m = 0;
    int i;
    for (i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > m || a[i] != a[i]) m = a[i] != a[i] ? INFINITY : fabs(a[i] - b[i]);
    return m;
}
static void test_adamw(void) {
    pt_ctx *ctx = new_ctx(1, 1);
    const int64_t sw[1] = {3}, sb[1] = {2};
    const float w0[3] = {0.5f, -1.0f, 2.0f}, b0[2] = {0.3f, -0.7f};
    const float gw[2][3] = {{0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.0f}}, gb[2][2] = {{1.0f, -2.0f}, {0.5f, 0.25f}};
    const double lr = 0.01, b1 = 0.8, b2 = 0.9, eps = 1e-6, wd = 0.1;
    double pw[3], pb[2], mw[3] = {0}, vw[3] = {0}, mb[2] = {0}, vb[2] = {0};
    pt_optim_desc od;
    pt_optim *o;
    int t, i;
    pt_param_new(ctx, "w", 1, sw, PT_INIT_ZEROS, 0, 0);
    pt_param_new(ctx, "b", 1, sb, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    set_val(ctx, "w", w0, 3);
    set_val(ctx, "b", b0, 2);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = (float)lr;
    od.beta1 = (float)b1, od.beta2 = (float)b2, od.eps = (float)eps, od.weight_decay = (float)wd;
    o = pt_optim_new(ctx, &od);
    for (i = 0; i < 3; i++) pw[i] = w0[i];
    for (i = 0; i < 2; i++) pb[i] = b0[i];
    for (t = 1; t <= 2; t++) {
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        set_grad(ctx, "w", gw[t - 1], 3);
        set_grad(ctx, "b", gb[t - 1], 2);
        pt_optim_step(o, (float)lr);
        for (i = 0; i < 3; i++) {
            double g = gw[t - 1][i];
            mw[i] = b1 * mw[i] + (1 - b1) * g, vw[i] = b2 * vw[i] + (1 - b2) * g * g;
            pw[i] -= lr * ((mw[i] / bc1) / (sqrt(vw[i] / bc2) + eps) + wd * pw[i]);
        }
        for (i = 0; i < 2; i++) {
            double g = gb[t - 1][i];
            mb[i] = b1 * mb[i] + (1 - b1) * g, vb[i] = b2 * vb[i] + (1 - b2) * g * g;
            pb[i] -= lr * ((mb[i] / bc1) / (sqrt(vb[i] / bc2) + eps));
        }
        CHECKF(max_abs_diff(param_val(ctx, "w"), pw, 3) < 2e-7, tu_name("adamw: step %d matches the hand computation (bias correction, decoupled decay)", t),
               "w = %.8f %.8f %.8f, want %.8f %.8f %.8f", (double)param_val(ctx, "w")[0], (double)param_val(ctx, "w")[1],
               (double)param_val(ctx, "w")[2], pw[0], pw[1], pw[2]);
        CHECKF(max_abs_diff(param_val(ctx, "b"), pb, 2) < 2e-7, tu_name("adamw: step %d: no weight decay on a PT_PARAM_NO_DECAY param", t),
               "b = %.8f %.8f, want %.8f %.8f", (double)param_val(ctx, "b")[0], (double)param_val(ctx, "b")[1], pb[0], pb[1]);
    }
    CHECK(pt_optim_steps(o) == 2, "adamw: pt_optim_steps counts updates");
    pt_optim_free(o);
    pt_shutdown(ctx);
    {
        /* defaults: beta1 0.9, beta2 0.95, eps 1e-8 when 0; first step moves each weight by ~lr */
        pt_ctx *c2 = new_ctx(1, 1);
        const float g1[3] = {0.3f, -0.001f, 5.0f};
        pt_param_new(c2, "w", 1, sw, PT_INIT_ZEROS, 0, 0);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW;
        o = pt_optim_new(c2, &od);
        set_grad(c2, "w", g1, 3);
        pt_optim_step(o, 0.5f);
        {
            double want[3] = {-0.5, 0.5, -0.5};
            CHECKF(max_abs_diff(param_val(c2, "w"), want, 3) < 1e-5, "adamw: defaults (first step moves by lr*sign(g))", "w = %g %g %g",
                   (double)param_val(c2, "w")[0], (double)param_val(c2, "w")[1], (double)param_val(c2, "w")[2]);
        }
        pt_optim_free(o);
        pt_shutdown(c2);
    }
}
/* the gradient slab and the optimizer's moments are made at their first use, not at creation */
static void test_lazy_state(void) {
    pt_ctx *ctx = new_ctx(1, 1);
    const int64_t s[1] = {3};
    const float xv[3] = {1, -2, 3};
    pt_tensor *w = pt_param_new(ctx, "w", 1, s, PT_INIT_CONST, 0.5f, 0);
    pt_graph *g = pt_graph_new(ctx);
    pt_optim_desc od;
    pt_optim *o;
    pt_mem_stats m0, m1, m2;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 0.1f;
    o = pt_optim_new(ctx, &od);
    m0 = pt_mem(ctx);
    CHECKF(o && m0.grads == 0 && m0.optim == 0 && !w->param->grad.st && pt_optim_state_bytes(o) == 2 * 16 * 4,
           "lazy state: no gradient slab or moments before their first use", "grads %lld, optim %lld, state bytes %lld",
           (long long)m0.grads, (long long)m0.optim, (long long)pt_optim_state_bytes(o));
    pt_backward(g, pt_sum(g, pt_mul(g, w, pt_tensor_from(g, PT_F32, 1, s, xv))));
    m1 = pt_mem(ctx);
    CHECKF(m1.grads == 16 * 4 && m1.optim == 0 && w->param->grad.st && pt_f32(&w->param->grad)[1] == -2,
           "lazy state: the first backward makes the gradient slab", "grads %lld, optim %lld", (long long)m1.grads, (long long)m1.optim);
    pt_optim_step(o, 0.1f);
    m2 = pt_mem(ctx);
    CHECKF(m2.optim == pt_optim_state_bytes(o) && pt_f32(w)[0] < 0.5f, "lazy state: the first step makes the moments (and updates)",
           "optim %lld of %lld, w[0] %g", (long long)m2.optim, (long long)pt_optim_state_bytes(o), (double)pt_f32(w)[0]);
    pt_graph_free(g);
    pt_shutdown(ctx);
}

/* the parameter slab grows in place: on Linux (glibc remaps a block that large) its peak resident set
   stays at what the parameters use, where a doubling copy held the used part twice; values and
   alignment survive every growth */
static long vm_kb(const char *key) {
    long v = -1;
#if defined(__linux__)
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    size_t n = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atol(line + n);
    fclose(f);
#else
    (void)key;
#endif
    return v;
}
#if defined(__SANITIZE_ADDRESS__)
#define CORE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORE_ASAN 1
#endif
#endif
/* 16-bit storage of saved activations (bf16 / fp16 precision, desc.act_f32 = 0): the forward is f32's
   (the loss bit-identical to act_f32), the block's kept activations are stored in 16 bits (the arena
   pass far smaller), backward reads them widened (gradients close to act_f32's, not equal), twice the
   same; full recomputation packs nothing (bit-identical to act_f32), selective packs its GEMM outputs */
static pt_ctx *prec_ctx(pt_dtype prec, int act_f32) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 41, d.threads = 1, d.on_error = on_error, d.log = quiet_log, d.log_level = PT_LOG_WARN;
    d.precision = prec, d.act_f32 = act_f32;
    return pt_init(&d);
}
static float act16_step(pt_ctx *ctx, pt_gpt *m, pt_graph *g, const int32_t *ids, const int32_t *tg, int64_t *pass) {
    const int64_t s[2] = {4, 32};
    pt_tensor *loss;
    float l;
    pt_graph_reset(g);
    pt_zero_grad(ctx);
    loss = pt_gpt_loss(g, m, tensor_i32(g, 2, s, ids), tensor_i32(g, 2, s, tg));
    l = loss && pt_backward(g, loss) == PT_OK ? pt_item(loss) : NAN;
    *pass = pt_graph_pass_bytes(g);
    return l;
}
static void test_act16(void) {
    pt_gpt_config c = gpt_cfg(64, 4, 64, 4, 32, 0.1f);
    int32_t ids[128], tg[128];
    int p, rc;
    random_tokens(ids, tg, 128, 64, 5);
    for (p = 0; p < 2; p++) {
        pt_dtype dt = p ? PT_F16 : PT_BF16;
        const char *pn = p ? "fp16" : "bf16";
        for (rc = 0; rc < 3; rc++) {
            pt_ctx *c1, *c2;
            pt_gpt *m1, *m2;
            pt_graph *g1, *g2;
            int64_t pass1, pass2, pass3;
            float l1, l2, l3;
            const char *worst;
            double d, d2;
            if (p && rc) break; /* fp16: without recomputation */
            c.recompute = (pt_recompute)rc;
            c1 = prec_ctx(dt, 1), c2 = prec_ctx(dt, 0);
            m1 = c1 ? pt_gpt_new(c1, &c) : NULL, m2 = c2 ? pt_gpt_new(c2, &c) : NULL;
            g1 = pt_graph_new(c1), g2 = pt_graph_new(c2);
            if (!CHECKF(m1 && m2 && g1 && g2, tu_name("act16 %s: contexts and models", pn), "%s %s", c1 ? pt_error(c1) : "-", c2 ? pt_error(c2) : "-")) return;
            l1 = act16_step(c1, m1, g1, ids, tg, &pass1);
            l2 = act16_step(c2, m2, g2, ids, tg, &pass2);
            d = grads_rel_diff(c2, c1, &worst);
            CHECKF(l1 == l2, tu_name("act16 %s recompute %d: the forward is f32's (loss bit-identical to act_f32)", pn, rc), "%.9g vs %.9g", l1, l2);
            if (rc == PT_RECOMPUTE_FULL) {
                CHECKF(d == 0, tu_name("act16 %s recompute full: nothing is packed (gradients bit-identical to act_f32)", pn),
                       "max rel diff %.3g at '%s'", d, worst);
            } else {
                CHECKF(d > 0 && d < 3e-2, tu_name("act16 %s recompute %d: gradients from the widened 16-bit activations are close to act_f32's", pn, rc),
                       "max rel diff %.3g at '%s' (0 would mean nothing was packed)", d, worst);
                CHECKF(pass2 < 0.6 * pass1, tu_name("act16 %s recompute %d: the graph's arena pass holds far fewer bytes", pn, rc),
                       "%lld bytes against act_f32's %lld", (long long)pass2, (long long)pass1);
            }
            { /* the same step again (a consolidated arena, a rewound scratch): bit for bit */
                pt_ctx *c3 = prec_ctx(dt, 0);
                pt_gpt *m3 = c3 ? pt_gpt_new(c3, &c) : NULL;
                pt_graph *g3 = pt_graph_new(c3);
                if (m3 && g3) {
                    l3 = act16_step(c3, m3, g3, ids, tg, &pass3);
                    l3 = act16_step(c3, m3, g3, ids, tg, &pass3);
                    d2 = grads_rel_diff(c3, c2, &worst);
                    CHECKF(l3 == l2 && d2 == 0, tu_name("act16 %s recompute %d: a second pass is bit-identical to the first", pn, rc),
                           "loss %.9g vs %.9g, max rel diff %.3g at '%s'", l3, l2, d2, worst);
                }
                pt_graph_free(g3);
                pt_gpt_free(m3);
                pt_shutdown(c3);
            }
            pt_graph_free(g1), pt_graph_free(g2);
            pt_gpt_free(m1), pt_gpt_free(m2);
            pt_shutdown(c1), pt_shutdown(c2);
        }
    }
}

static void test_slab_growth(void) {
    pt_ctx *ctx = new_ctx(3, 1);
    const int64_t first[1] = {5}, s[2] = {1000, 4000};
    const int n = tu_quick ? 3 : 25; /* 25 x 16 MB: the slab grows from 64 MiB through 256 to 512 MiB */
    pt_tensor *w0 = pt_param_new(ctx, "first", 1, first, PT_INIT_CONST, 0.25f, 0);
    long rss0, hwm;
    int i, ok = 1;
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5" resets VmHWM (Linux 4.0 on) */
    int reset = f && fputs("5", f) >= 0;
    if (f && fclose(f) != 0) reset = 0;
    rss0 = vm_kb("VmRSS:");
    for (i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        pt_param_new(ctx, name, 2, s, PT_INIT_ZEROS, 0, 0);
    }
    hwm = vm_kb("VmHWM:");
    for (i = 0; i < 5; i++) ok &= pt_f32(w0)[i] == 0.25f;
    CHECKF(pt_status_get(ctx) == PT_OK && ok && ((uintptr_t)pt_f32(w0) & 63) == 0 && pt_mem(ctx).params == 16 * 4 + (int64_t)n * 16000000,
           "slab growth: parameters keep their values and 64-byte alignment", "status %d, first %g, params %lld", (int)pt_status_get(ctx),
           (double)pt_f32(w0)[0], (long long)pt_mem(ctx).params);
#if defined(__linux__) && defined(__GLIBC__) && !defined(CORE_ASAN)
    if (!tu_quick && reset && rss0 > 0 && hwm > 0) {
        double grew = (double)(hwm - rss0) * 1024.0, used = (double)n * 16e6;
        CHECKF(grew < 1.05 * used + 16e6, "slab growth: the peak resident set stays at the parameters' bytes (no copy)",
               "the high-water mark grew %.1f MB for %.1f MB of parameters", grew / 1e6, used / 1e6);
    }
#else
    (void)rss0, (void)hwm, (void)reset;
#endif
    pt_shutdown(ctx);
}

static void test_sgd(void) {
    pt_ctx *ctx = new_ctx(1, 1);
    const int64_t s[1] = {3}, sf[1] = {2};
    const float w0[3] = {1.0f, -2.0f, 0.5f}, g[2][3] = {{0.5f, 1.0f, -1.0f}, {0.25f, -0.5f, 2.0f}}, f0[2] = {1, 1}, gf[2] = {1, 1};
    const double lr = 0.1, mom = 0.9, wd = 0.01;
    double p[3], m[3] = {0};
    pt_optim_desc od;
    pt_optim *o;
    int t, i;
    pt_param_new(ctx, "w", 1, s, PT_INIT_ZEROS, 0, 0);
    pt_param_new(ctx, "frozen", 1, sf, PT_INIT_ZEROS, 0, PT_PARAM_FROZEN);
    set_val(ctx, "w", w0, 3);
    set_val(ctx, "frozen", f0, 2);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD;
    od.lr = (float)lr, od.momentum = (float)mom, od.weight_decay = (float)wd;
    o = pt_optim_new(ctx, &od);
    for (i = 0; i < 3; i++) p[i] = w0[i];
    for (t = 0; t < 2; t++) {
        set_grad(ctx, "w", g[t], 3);
        set_grad(ctx, "frozen", gf, 2);
        pt_optim_step(o, (float)lr);
        for (i = 0; i < 3; i++) {
            double gg = g[t][i] + wd * p[i];
            m[i] = mom * m[i] + gg;
            p[i] -= lr * m[i];
        }
        CHECKF(max_abs_diff(param_val(ctx, "w"), p, 3) < 1e-6, tu_name("sgd: momentum step %d matches the hand computation", t + 1),
               "w = %.8f %.8f %.8f, want %.8f %.8f %.8f", (double)param_val(ctx, "w")[0], (double)param_val(ctx, "w")[1],
               (double)param_val(ctx, "w")[2], p[0], p[1], p[2]);
    }
    CHECK(param_val(ctx, "frozen")[0] == 1.0f && param_val(ctx, "frozen")[1] == 1.0f, "sgd: a frozen parameter is not updated");
    pt_optim_free(o);
    pt_shutdown(ctx);
    {
        /* plain SGD and clipping: grads (3, 4) have norm 5; clip 1 -> update lr * g / 5 */
        pt_ctx *c2 = new_ctx(1, 1);
        const int64_t s2[1] = {2};
        const float gg[2] = {3, 4}, small[2] = {0.3f, 0.4f};
        float norm, *w;
        pt_param_new(c2, "w", 1, s2, PT_INIT_ZEROS, 0, 0);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_SGD;
        od.lr = 1.0f;
        od.clip_norm = 1.0f;
        o = pt_optim_new(c2, &od);
        set_grad(c2, "w", gg, 2);
        CHECK_NEAR(pt_grad_norm(c2), 5.0, 1e-6, "optim: pt_grad_norm of (3, 4) is 5");
        norm = pt_optim_step(o, 1.0f);
        w = param_val(c2, "w");
        CHECK_NEAR(norm, 5.0, 1e-6, "optim: pt_optim_step returns the norm before clipping");
        CHECKF(fabs(w[0] + 0.6) < 1e-5 && fabs(w[1] + 0.8) < 1e-5, "optim: clipping scales the gradient to clip_norm",
               "w = %.7f %.7f, want -0.6 -0.8 (update norm %.7f)", (double)w[0], (double)w[1], sqrt((double)w[0] * w[0] + (double)w[1] * w[1]));
        set_grad(c2, "w", small, 2);
        pt_optim_step(o, 1.0f);
        CHECKF(fabs(w[0] + 0.9) < 1e-5 && fabs(w[1] + 1.2) < 1e-5, "optim: no clipping below clip_norm (plain SGD)", "w = %.7f %.7f",
               (double)w[0], (double)w[1]);
        pt_optim_free(o);
        pt_shutdown(c2);
    }
}
static void test_lr(void) {
    pt_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = PT_LR_COSINE;
    s.lr = 1.0f, s.min_lr = 0.1f, s.warmup = 10, s.total = 110;
    CHECK_NEAR(pt_lr_at(&s, 0), 0.1, 1e-6, "lr: cosine warmup step 0 = lr/10");
    CHECK_NEAR(pt_lr_at(&s, 4), 0.5, 1e-6, "lr: cosine warmup step 4 = lr*5/10");
    CHECK_NEAR(pt_lr_at(&s, 9), 1.0, 1e-6, "lr: cosine warmup reaches lr at its last step");
    CHECK_NEAR(pt_lr_at(&s, 10), 1.0, 1e-6, "lr: cosine starts at lr after warmup");
    CHECK_NEAR(pt_lr_at(&s, 60), 0.55, 1e-6, "lr: cosine midpoint = (lr+min)/2");
    CHECK_NEAR(pt_lr_at(&s, 35), 0.1 + 0.5 * (1 + cos(3.14159265358979323846 * 0.25)) * 0.9, 1e-6, "lr: cosine at a quarter");
    CHECK_NEAR(pt_lr_at(&s, 110), 0.1, 1e-6, "lr: cosine reaches min_lr at total");
    CHECK_NEAR(pt_lr_at(&s, 500), 0.1, 1e-6, "lr: cosine stays at min_lr after total");
    s.kind = PT_LR_LINEAR;
    CHECK_NEAR(pt_lr_at(&s, 5), 0.6, 1e-6, "lr: linear warmup step 5");
    CHECK_NEAR(pt_lr_at(&s, 35), 0.775, 1e-6, "lr: linear decay at a quarter");
    CHECK_NEAR(pt_lr_at(&s, 60), 0.55, 1e-6, "lr: linear decay midpoint");
    CHECK_NEAR(pt_lr_at(&s, 110), 0.1, 1e-6, "lr: linear reaches min_lr at total");
    s.kind = PT_LR_CONST;
    s.warmup = 0;
    CHECK_NEAR(pt_lr_at(&s, 0), 1.0, 1e-6, "lr: constant without warmup");
    CHECK_NEAR(pt_lr_at(&s, 1000), 1.0, 1e-6, "lr: constant stays");
}

/* =================================================================================================
   9. training sanity: a tiny GPT learns a repeating sequence
   ================================================================================================= */
static void test_training(void) {
    pt_ctx *ctx = new_ctx(1234, 1); /* one thread: threads do not change results (see bitwise), and it is faster on a loaded machine */
    pt_gpt_config c = gpt_cfg(16, 2, 32, 4, 16, 0.0f);
    pt_gpt *m = pt_gpt_new(ctx, &c);
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g = pt_graph_new(ctx);
    const int B = 8, T = 16, P = 7; /* period-7 sequence 3 1 4 1 5 9 2 (ambiguous after "1": needs 2 tokens of context) */
    const int32_t pat[7] = {3, 1, 4, 1, 5, 9, 2};
    int32_t ids[128], tg[128];
    float first = 0, last = 0;
    int step, b, t;
    tu_rng r;
    r.s = 8;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = 3e-3f;
    od.weight_decay = 0.01f;
    od.clip_norm = 1.0f;
    o = pt_optim_new(ctx, &od);
    for (step = 0; step < 100; step++) {
        for (b = 0; b < B; b++) {
            int off = (int)(tu_next(&r) % P);
            for (t = 0; t < T; t++) ids[b * T + t] = pat[(off + t) % P], tg[b * T + t] = pat[(off + t + 1) % P];
        }
        last = gpt_step(g, m, o, ids, tg, B, T, 3e-3f);
        if (step == 0) first = last;
    }
    CHECKF(first > 2.0f && last < 0.2f * first, "train: tiny GPT on a repeating sequence: loss < 20% of the initial within 100 steps",
           "initial %.4f, after 100 steps %.4f (%s)", first, last, pt_error(ctx));
    {
        /* greedy generation continues the pattern */
        int32_t out[12], prompt[4] = {3, 1, 4, 1};
        int ok;
        pt_status st = pt_gpt_generate(m, g, prompt, 4, 8, 0.0f, 1, out);
        ok = st == PT_OK;
        for (t = 4; ok && t < 12; t++) ok = out[t] == pat[t % P];
        CHECKF(ok, "train: greedy pt_gpt_generate continues the learned pattern", "status %d, got %d %d %d %d %d %d %d %d", (int)st,
               out[4], out[5], out[6], out[7], out[8], out[9], out[10], out[11]);
    }
    {
        /* sampling: a pure function of the seed; tokens within the real vocabulary */
        int32_t o1[24], o2[24], prompt[2] = {5, 9};
        int ok = pt_gpt_generate(m, g, prompt, 2, 22, 1.5f, 99, o1) == PT_OK && pt_gpt_generate(m, g, prompt, 2, 22, 1.5f, 99, o2) == PT_OK;
        ok = ok && !memcmp(o1, o2, sizeof o1) && o1[0] == 5 && o1[1] == 9;
        for (t = 0; ok && t < 24; t++) ok = o1[t] >= 0 && o1[t] < 16;
        CHECK(ok, "generate: temperature sampling is reproducible for a seed and stays in the vocabulary");
    }
    pt_graph_free(g);
    pt_optim_free(o);
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

/* misc small API: shapes, memory stats, items, dtypes */
static void test_misc(void) {
    pt_ctx *ctx = new_ctx(1, 2);
    pt_graph *g = pt_graph_new(ctx);
    const int64_t s[3] = {2, 3, 4};
    char buf[64];
    pt_tensor *t = pt_full(g, 3, s, 2.5f), *sc;
    pt_mem_stats ms;
    CHECK(pt_threads(ctx) == 2, "ctx: pt_threads reports the desc's thread count");
    pt_set_threads(ctx, 1);
    CHECK(pt_threads(ctx) == 1, "ctx: pt_set_threads");
    CHECK(!strcmp(pt_backend_name(ctx), "cpu"), "ctx: backend is cpu");
    CHECK(!strcmp(pt_shape_str(t, buf, sizeof buf), "[2,3,4]") && pt_numel(t) == 24 && pt_f32(t)[23] == 2.5f && pt_i32(t) == NULL,
          "tensor: pt_full, pt_shape_str, pt_numel, pt_f32/pt_i32");
    sc = pt_sum(g, t);
    CHECK(sc && sc->ndim == 0 && pt_item(sc) == 60.0f && pt_item(t) != pt_item(t), "tensor: scalar pt_item; NaN for a non-scalar");
    CHECK(pt_dtype_size(PT_F32) == 4 && pt_dtype_size(PT_BF16) == 2 && pt_dtype_size(PT_I8) == 1 && pt_dtype_size(PT_I32) == 4,
          "tensor: pt_dtype_size");
    ms = pt_mem(ctx);
    CHECK(ms.activations > 0 && pt_graph_bytes(g) > 0 && ms.peak_total >= ms.activations && ms.allocs > 0, "ctx: pt_mem counts activations");
    {
        float rd[24];
        float wr[24];
        int i;
        for (i = 0; i < 24; i++) wr[i] = (float)i;
        pt_tensor_write(t, wr);
        pt_tensor_read(t, rd);
        CHECK(!memcmp(rd, wr, sizeof rd), "tensor: write then read round-trips");
    }
    {
        pt_rng r1 = pt_rng_seed(5), r2 = pt_rng_seed(5);
        int i, ok = 1;
        for (i = 0; i < 100; i++) {
            float f = pt_rng_float(&r1);
            ok &= f >= 0 && f < 1 && pt_rng_u32(&r2) >> 8 == (uint32_t)(f * 16777216.0f);
        }
        CHECK(ok && pt_hash_str("abc") != pt_hash_str("abd") && pt_hash64(0) != 0, "util: rng and hashes");
    }
    {
        int dummy = 3;
        void *p;
        int64_t n;
        CHECK(pt_state_register(ctx, "x", &dummy, 4) == PT_OK && pt_state_count(ctx) == 1 && !strcmp(pt_state_at(ctx, 0, &p, &n), "x") &&
                  p == &dummy && n == 4,
              "state: register and list");
        err_reset(ctx);
        CHECK(pt_state_register(ctx, "x", &dummy, 4) != PT_OK && strstr(err_msg, "'x'"), "state: duplicate name is an error");
        err_reset(ctx);
    }
    {
        pt_gpt_config c = gpt_cfg(100, 2, 64, 4, 32, 0);
        int64_t Vp = 128, C = 64, want = 2 * 12 * C * C + Vp * C;
        CHECKF(pt_gpt_matmul_params(&c) == want, "gpt: pt_gpt_matmul_params", "%lld vs %lld", (long long)pt_gpt_matmul_params(&c),
               (long long)want);
        CHECK_NEAR(pt_gpt_flops(&c, 2, 32), 6.0 * want * 64 + 12.0 * 2 * 2 * 32.0 * 32 * 64, 1e-12, "gpt: pt_gpt_flops");
    }
    {
        /* padded vocabulary: logits are [B, T, vocab_padded]; padded columns do not change the loss */
        pt_ctx *c2 = new_ctx(2, 1);
        pt_gpt_config c = gpt_cfg(50, 1, 16, 2, 8, 0);
        pt_gpt *m = pt_gpt_new(c2, &c);
        pt_graph *g2 = pt_graph_new(c2);
        const int64_t si[2] = {1, 8};
        int32_t ids[8], tg[8];
        pt_tensor *lg;
        random_tokens(ids, tg, 8, 50, 4);
        lg = pt_gpt_forward(g2, m, tensor_i32(g2, 2, si, ids));
        CHECK(m && m->cfg.vocab_padded == 64 && lg && lg->shape[2] == 64 && pt_param_find(c2, "wte")->value.shape[0] == 64,
              "gpt: vocab 50 pads to 64 rows / logits");
        pt_graph_free(g2);
        pt_gpt_free(m);
        pt_shutdown(c2);
    }
    pt_graph_free(g);
    pt_shutdown(ctx);
}

/* runs one test function and notes its wall time (lines starting with '#' are comments) */
#define RUN(fn)                                                        \
    do {                                                               \
        double t0_ = pt_time();                                        \
        fn();                                                          \
        printf("# %s: %.2fs\n", #fn, pt_time() - t0_);                \
    } while (0)

int main(int argc, char **argv) {
    tu_init(argc, argv);
    RUN(test_alloc_gpt);
    RUN(test_alloc_cnn);
    RUN(test_alloc_balance);
    RUN(test_bitwise);
    RUN(test_bitwise_ops);
    RUN(test_init);
    RUN(test_errors);
    RUN(test_hook);
    RUN(test_backward_from);
    RUN(test_microbatches);
    RUN(test_accumulate);
    RUN(test_adamw);
    RUN(test_lazy_state);
    RUN(test_slab_growth);
    RUN(test_act16);
    RUN(test_sgd);
    RUN(test_lr);
    RUN(test_training);
    RUN(test_misc);
    return tu_summary();
}

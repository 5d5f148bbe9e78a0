/* test_recompute.c - activation recomputation (pt_recompute, pt_gpt_set_recompute) in one process:
   - selective and full recomputation, per pipeline stage and mixed, give bit-identical losses,
     gradients, parameters and gradient-ready hook order to none: with and without dropout, with
     accumulation, with the sample offset moved between forward and backward, and with the stages in
     graphs of their own run in a pipeline order (micro-batch 1's forwards between micro-batch 0's
     forward and backward, backwards in another order than the forwards);
   - a forward-only evaluation gives the same loss;
   - the activation memory (pt_mem activations, pt_graph_bytes, peak) of a 12-layer GPT whose pass
     exceeds the arena's first chunk: full < selective < none;
   - from the third step on a step allocates nothing (pt_mem allocs), recomputation on;
   - bad modes and stages are refused with a message naming them.
   The same on dp x tp x pp layouts: tests/test_equiv.c --recompute (tests/recompute_test.sh).
   Usage: test_recompute [--quick]. Prints PASS/FAIL lines and "N passed, N failed". */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V = 100, T = 16, B = 8, STEPS = 3, MAXHOOK = 4096 };

typedef struct {
    int mode[2];   /* pt_recompute of stage 0 (layers 0-1) and stage 1 (layers 2-3) */
    float dropout;
    int accum;     /* passes per step, B / accum rows each */
    int pipe;      /* 1: two micro-batches per pass, each stage in a graph of its own, pipeline order */
} setup;

typedef struct {
    float loss[STEPS * 4];
    float *grads;  /* [STEPS][n]: the gradient slab before each optimizer step */
    float *params; /* [n] after the last step */
    int64_t n;
    int hook[MAXHOOK], nhook;
    long allocs_last; /* allocations during the last step */
    int ok;
} result;

static void on_grad(void *user, pt_param *p) {
    result *r = (result *)user;
    if (r->nhook < MAXHOOK) r->hook[r->nhook++] = p->id;
}

static void batch(int step, int32_t *ids, int32_t *tgt) {
    tu_rng r;
    int b, t;
    r.s = 77 + (unsigned long long)step;
    for (b = 0; b < B; b++) {
        int a = (int)(tu_next(&r) % V), d = 1 + (int)(tu_next(&r) % 5);
        for (t = 0; t < T; t++) ids[b * T + t] = (a + d * t) % V, tgt[b * T + t] = (a + d * (t + 1)) % V;
    }
}

/* one pass over rows [r0, r0 + rows): loss (already backpropagated); the stages in one graph g[0]
   or, with pipe, two micro-batches with each stage in a graph of its own (g[mb * 2 + stage]) */
static float pass(pt_gpt *m, pt_graph **g, const setup *su, const int32_t *ids, const int32_t *tgt, int r0, int rows, int *ok) {
    int64_t shp[2];
    float loss = 0;
    if (!su->pipe) {
        pt_tensor *x, *l;
        shp[0] = rows, shp[1] = T;
        pt_graph_reset(g[0]);
        pt_graph_set_sample_offset(g[0], r0);
        x = pt_gpt_stage_fwd(g[0], m, 0, NULL, pt_tensor_from(g[0], PT_I32, 2, shp, ids + r0 * T), NULL);
        l = pt_gpt_stage_fwd(g[0], m, 1, x, NULL, pt_tensor_from(g[0], PT_I32, 2, shp, tgt + r0 * T));
        loss = pt_item(l);
        pt_graph_set_sample_offset(g[0], 1000003); /* the masks are keyed when drawn, not when recomputed */
        *ok &= pt_backward(g[0], l) == PT_OK;
        return loss;
    } else {
        pt_tensor *y0[2], *x1[2], *l[2];
        float *buf = (float *)malloc((size_t)rows * T * 32 * sizeof(float));
        int mb, h = rows / 2;
        shp[0] = h, shp[1] = T;
        for (mb = 0; mb < 4; mb++) pt_graph_reset(g[mb]);
        for (mb = 0; mb < 2; mb++) { /* F(0,0) F(1,0) */
            pt_graph_set_sample_offset(g[mb * 2], r0 + mb * h);
            y0[mb] = pt_gpt_stage_fwd(g[mb * 2], m, 0, NULL, pt_tensor_from(g[mb * 2], PT_I32, 2, shp, ids + (r0 + mb * h) * T), NULL);
        }
        for (mb = 0; mb < 2; mb++) { /* F(0,1) F(1,1): the received activation, needing a gradient */
            pt_graph *gs = g[mb * 2 + 1];
            *ok &= y0[mb] && pt_tensor_read(y0[mb], buf) == PT_OK;
            if (!*ok) break;
            pt_graph_set_sample_offset(gs, r0 + mb * h);
            x1[mb] = pt_tensor_from(gs, PT_F32, y0[mb]->ndim, y0[mb]->shape, buf);
            pt_requires_grad(x1[mb]);
            l[mb] = pt_gpt_stage_fwd(gs, m, 1, x1[mb], NULL, pt_tensor_from(gs, PT_I32, 2, shp, tgt + (r0 + mb * h) * T));
            loss += pt_item(l[mb]) / 2;
        }
        for (mb = 1; *ok && mb >= 0; mb--) { /* B(1,1) B(1,0) B(0,1) B(0,0), each mean loss halved */
            pt_graph *gs = g[mb * 2 + 1], *g0 = g[mb * 2];
            pt_tensor *half = pt_full(gs, 0, NULL, 0.5f), *dx;
            *ok &= pt_backward_from(gs, l[mb], half) == PT_OK && x1[mb]->grad && pt_tensor_read(x1[mb]->grad, buf) == PT_OK;
            if (!*ok) break;
            dx = pt_tensor_from(g0, PT_F32, y0[mb]->ndim, y0[mb]->shape, buf);
            *ok &= pt_backward_from(g0, y0[mb], dx) == PT_OK;
        }
        free(buf);
        return loss;
    }
}

/* trains a 4-layer GPT (two stages of 2 layers, both held here) for STEPS steps with SGD */
static void train(const setup *su, result *r) {
    pt_desc desc;
    pt_gpt_config c;
    pt_optim_desc od;
    int32_t first[3] = {0, 2, 4}, mine[2] = {0, 1};
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_graph *g[4];
    int s, k, i;
    memset(r, 0, sizeof *r);
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.threads = 1;
    memset(&c, 0, sizeof c);
    c.vocab = V, c.max_seq = T, c.layers = 4, c.width = 32, c.heads = 4, c.dropout = su->dropout;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD, od.lr = 0.05f, od.momentum = 0.9f;
    ctx = pt_init(&desc);
    m = pt_gpt_new_stages(ctx, &c, 2, first, 2, mine);
    r->ok = m && pt_gpt_set_recompute(m, 0, (pt_recompute)su->mode[0]) == PT_OK && pt_gpt_set_recompute(m, 1, (pt_recompute)su->mode[1]) == PT_OK;
    opt = pt_optim_new(ctx, &od);
    for (i = 0; i < 4; i++) g[i] = pt_graph_new(ctx);
    pt_set_grad_hook(ctx, on_grad, r);
    {
        pt_tensor gs0 = pt_grad_slab(ctx);
        r->n = pt_numel(&gs0);
    }
    r->grads = (float *)calloc((size_t)(STEPS * r->n), sizeof(float));
    r->params = (float *)calloc((size_t)r->n, sizeof(float));
    for (s = 0; r->ok && s < STEPS; s++) {
        int32_t ids[B * T], tgt[B * T];
        long a0 = (long)pt_mem(ctx).allocs;
        pt_tensor gs = pt_grad_slab(ctx);
        batch(s, ids, tgt);
        pt_zero_grad(ctx);
        for (k = 0; k < su->accum; k++) r->loss[s * 4 + k] = pass(m, g, su, ids, tgt, k * (B / su->accum), B / su->accum, &r->ok);
        r->ok &= pt_tensor_read(&gs, r->grads + s * r->n) == PT_OK;
        pt_optim_step(opt, od.lr);
        r->allocs_last = (long)pt_mem(ctx).allocs - a0;
    }
    {
        pt_tensor ps = pt_param_slab(ctx);
        r->ok &= pt_tensor_read(&ps, r->params) == PT_OK && pt_status_get(ctx) == PT_OK;
    }
    if (pt_status_get(ctx) != PT_OK) printf("  error: %s\n", pt_error(ctx));
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

static const char *mode_name(int m) { return m == PT_RECOMPUTE_FULL ? "full" : m == PT_RECOMPUTE_SELECTIVE ? "selective" : "none"; }

/* each setup against the same one without recomputation, bit for bit */
static void check_bit_identical(void) {
    static const int modes[][2] = {{1, 1}, {2, 2}, {2, 1}, {0, 2}};
    int d, a, p, k;
    for (p = 0; p < 2; p++)
        for (d = 0; d < 2; d++)
            for (a = 1; a <= 2; a++) {
                setup su;
                result ref, r;
                su.mode[0] = su.mode[1] = 0, su.dropout = d ? 0.1f : 0.0f, su.accum = a, su.pipe = p;
                train(&su, &ref);
                for (k = 0; k < (int)(sizeof modes / sizeof modes[0]); k++) {
                    const char *what;
                    su.mode[0] = modes[k][0], su.mode[1] = modes[k][1];
                    train(&su, &r);
                    what = tu_name("recompute %s/%s, dropout %g, accum %d%s", mode_name(su.mode[0]), mode_name(su.mode[1]), (double)su.dropout, a,
                                   p ? ", stages in their own graphs, pipeline order" : "");
                    CHECKF(r.ok && ref.ok && !memcmp(r.loss, ref.loss, sizeof r.loss), tu_name("%s: losses bit-identical to none", what),
                           "step 0 loss %.9g vs %.9g, last %.9g vs %.9g", (double)r.loss[0], (double)ref.loss[0], (double)r.loss[(STEPS - 1) * 4],
                           (double)ref.loss[(STEPS - 1) * 4]);
                    {
                        long at = 0;
                        double e = tu_max_rel(r.grads, ref.grads, (long)(STEPS * r.n), 1e-30, &at);
                        CHECKF(r.ok && !memcmp(r.grads, ref.grads, (size_t)(STEPS * r.n) * sizeof(float)) &&
                                   !memcmp(r.params, ref.params, (size_t)r.n * sizeof(float)),
                               tu_name("%s: gradients and parameters bit-identical to none", what),
                               "largest relative gradient difference %.3g at step %ld element %ld", e, at / (long)r.n, at % (long)r.n);
                    }
                    CHECKF(r.nhook == ref.nhook && !memcmp(r.hook, ref.hook, (size_t)r.nhook * sizeof(int)),
                           tu_name("%s: gradient-ready hooks fire in the same order", what), "%d hooks vs %d", r.nhook, ref.nhook);
                    CHECKF(r.allocs_last == 0, tu_name("%s: the last step allocates nothing", what), "%ld allocations", r.allocs_last);
                    free(r.grads), free(r.params);
                }
                free(ref.grads), free(ref.params);
            }
}

/* forward-only (no tape): the same loss, bit for bit */
static void check_eval(void) {
    pt_desc desc;
    pt_gpt_config c;
    float l[3];
    int mode;
    memset(&desc, 0, sizeof desc);
    desc.seed = 3, desc.threads = 1;
    memset(&c, 0, sizeof c);
    c.vocab = V, c.max_seq = T, c.layers = 3, c.width = 32, c.heads = 2, c.dropout = 0.1f;
    for (mode = 0; mode < 3; mode++) {
        pt_ctx *ctx = pt_init(&desc);
        pt_gpt *m;
        pt_graph *g;
        int32_t ids[B * T], tgt[B * T];
        int64_t shp[2] = {B, T};
        c.recompute = mode;
        m = pt_gpt_new(ctx, &c);
        g = pt_graph_new(ctx);
        batch(5, ids, tgt);
        pt_graph_set_grad(g, 0);
        pt_graph_set_training(g, 0);
        l[mode] = pt_item(pt_gpt_loss(g, m, pt_tensor_from(g, PT_I32, 2, shp, ids), pt_tensor_from(g, PT_I32, 2, shp, tgt)));
        pt_gpt_free(m);
        pt_shutdown(ctx);
    }
    CHECKF(l[0] == l[0] && !memcmp(&l[0], &l[1], 4) && !memcmp(&l[0], &l[2], 4), "forward-only evaluation: the same loss with every mode",
           "none %.9g, selective %.9g, full %.9g", (double)l[0], (double)l[1], (double)l[2]);
}

/* a 12-layer GPT whose pass spills past the arena's first 64 MiB chunk: activations by mode */
static void check_memory(void) {
    int L = tu_quick ? 4 : 12, Bm = tu_quick ? 16 : 128, Tm = 64, mode, s;
    long long act[3], peak[3], gb[3], allocs[3];
    float loss[3];
    for (mode = 0; mode < 3; mode++) {
        pt_desc desc;
        pt_gpt_config c;
        pt_optim_desc od;
        pt_ctx *ctx;
        pt_gpt *m;
        pt_optim *opt;
        pt_graph *g;
        int32_t *ids = (int32_t *)malloc((size_t)Bm * Tm * sizeof(int32_t)), *tgt = (int32_t *)malloc((size_t)Bm * Tm * sizeof(int32_t));
        int64_t shp[2];
        long a0 = 0;
        shp[0] = Bm, shp[1] = Tm;
        memset(&desc, 0, sizeof desc);
        desc.seed = 11, desc.threads = 1;
        memset(&c, 0, sizeof c);
        c.vocab = 256, c.max_seq = Tm, c.layers = L, c.width = 32, c.heads = 4, c.recompute = mode;
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_SGD, od.lr = 0.01f;
        ctx = pt_init(&desc);
        m = pt_gpt_new(ctx, &c);
        opt = pt_optim_new(ctx, &od);
        g = pt_graph_new(ctx);
        for (s = 0; s < Bm * Tm; s++) ids[s] = (s * 7 + s / Tm) % 256, tgt[s] = (s * 7 + s / Tm + 7) % 256;
        for (s = 0; s < 3; s++) {
            pt_tensor *l;
            if (s == 2) a0 = (long)pt_mem(ctx).allocs;
            pt_graph_reset(g);
            l = pt_gpt_loss(g, m, pt_tensor_from(g, PT_I32, 2, shp, ids), pt_tensor_from(g, PT_I32, 2, shp, tgt));
            loss[mode] = pt_item(l);
            pt_zero_grad(ctx);
            pt_backward(g, l);
            pt_optim_step(opt, od.lr);
        }
        act[mode] = (long long)pt_mem(ctx).activations;
        peak[mode] = (long long)pt_mem(ctx).peak_total;
        gb[mode] = (long long)pt_graph_bytes(g);
        allocs[mode] = (long long)pt_mem(ctx).allocs - a0;
        if (pt_status_get(ctx) != PT_OK) printf("  error: %s\n", pt_error(ctx));
        printf("  %d layers, width 32, %d x %d tokens, recompute %-9s: activations %.1f MiB (the graph's own %.1f MiB, the rest the "
               "recompute scratch), peak total %.1f MiB\n",
               L, Bm, Tm, mode_name(mode), act[mode] / 1048576.0, gb[mode] / 1048576.0, peak[mode] / 1048576.0);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        free(ids), free(tgt);
    }
    CHECKF(!memcmp(&loss[0], &loss[1], 4) && !memcmp(&loss[0], &loss[2], 4), "memory run: the third step's loss is the same with every mode",
           "%.9g %.9g %.9g", (double)loss[0], (double)loss[1], (double)loss[2]);
    CHECKF(allocs[0] == 0 && allocs[1] == 0 && allocs[2] == 0, "memory run: the third step allocates nothing with every mode",
           "none %lld, selective %lld, full %lld allocations", allocs[0], allocs[1], allocs[2]);
    if (tu_quick) return; /* below the 64 MiB chunk every mode holds one chunk */
    CHECKF(act[1] <= act[0] * 0.8 && act[2] <= act[0] * 0.5 && act[2] < act[1],
           "memory: activations full < 0.5 x none, selective < 0.8 x none", "none %lld, selective %lld (%.2f), full %lld (%.2f)", act[0], act[1],
           (double)act[1] / (double)act[0], act[2], (double)act[2] / (double)act[0]);
    CHECKF(peak[2] < peak[1] && peak[1] < peak[0], "memory: peak total full < selective < none", "none %lld, selective %lld, full %lld", peak[0],
           peak[1], peak[2]);
}

static void check_errors(void) {
    pt_desc desc;
    pt_gpt_config c;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_graph *g;
    int32_t first[3] = {0, 1, 2}, mine[2] = {0, 1};
    memset(&desc, 0, sizeof desc);
    desc.threads = 1;
    memset(&c, 0, sizeof c);
    c.vocab = V, c.max_seq = T, c.layers = 2, c.width = 16, c.heads = 2, c.recompute = 3;
    ctx = pt_init(&desc);
    CHECK(pt_gpt_new(ctx, &c) == NULL, "config recompute 3 is refused");
    CHECK_HAS(pt_error(ctx), "recompute 3 (0 none, 1 selective, 2 full)", "the refusal names the field, the value and the modes");
    pt_error_clear(ctx);
    c.recompute = PT_RECOMPUTE_FULL;
    m = pt_gpt_new_stages(ctx, &c, 2, first, 2, mine);
    CHECK(m && m->recompute[0] == PT_RECOMPUTE_FULL && m->recompute[1] == PT_RECOMPUTE_FULL, "cfg.recompute sets every stage");
    CHECK(pt_gpt_set_recompute(m, 1, PT_RECOMPUTE_SELECTIVE) == PT_OK && m->recompute[0] == PT_RECOMPUTE_FULL &&
              m->recompute[1] == PT_RECOMPUTE_SELECTIVE,
          "pt_gpt_set_recompute sets one stage");
    CHECK(pt_gpt_set_recompute(m, 2, PT_RECOMPUTE_NONE) == PT_ERR_ARG, "stage 2 of 2 is refused");
    CHECK_HAS(pt_error(ctx), "stage 2 (expected -1 for all, or 0..1)", "the refusal names the stage and the range");
    pt_error_clear(ctx);
    CHECK(pt_gpt_set_recompute(m, -1, (pt_recompute)7) == PT_ERR_ARG && m->recompute[1] == PT_RECOMPUTE_SELECTIVE, "mode 7 is refused, nothing changes");
    CHECK_HAS(pt_error(ctx), "mode 7 (expected 0 none", "the refusal names the mode");
    pt_error_clear(ctx);
    g = pt_graph_new(ctx);
    CHECK(pt_block_fwd_ex(g, &m->blocks[0], pt_tensor_new(g, PT_F32, 3, 1, 4, 16, 0), 2, 0, 1, (pt_recompute)5) == NULL,
          "pt_block_fwd_ex with mode 5 returns NULL");
    CHECK_HAS(pt_error(ctx), "pt_block_fwd_ex: recompute mode 5 is not none (0), selective (1) or full (2)", "its message names the mode");
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    tu_init(argc, argv);
    check_errors();
    check_eval();
    check_bit_identical();
    check_memory();
    return tu_summary();
}

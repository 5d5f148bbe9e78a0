/* test_xent.c - the LM head and cross-entropy fused in chunks of rows (pt_linear_cross_entropy,
   pt_linear_cross_entropy_vp, pt_gpt_config.loss_chunk) against the unfused pair (pt_linear, then
   pt_cross_entropy_ex / pt_cross_entropy_vp). Build: cc -std=c99 -fopenmp -I. tests/test_xent.c -lm
   (tp = 1), and mpicc -DPTRAIN_MPI: run under mpirun -np 2 (layout tp = world size); -DPTRAIN_OPENCL
   with PTRAIN_DEVICE=opencl: every check on the OpenCL backend. tests/xent_test.sh does all three.
   Tolerances: the fused op runs the same kernels on the same rows, and a GEMM's rows do not depend on
   how many rows it is given, so the loss and dx are bit-identical to the unfused pair for every chunk
   size, and so is dW when one chunk holds every row. Smaller chunks sum dW over the rows in chunk
   order instead of the GEMM's K blocks: normwise relative difference <= 1e-6 (TOL). A TP run against
   one process: 1e-5 (the TP sums round differently), as tests/test_tp_gpt.c.
   Memory: a vocabulary-50257 head (padded 50304) on 1024 rows: the graph's bytes with chunks of 64
   rows are below the [rows, V] f32 logits alone; without chunks above them. */
#include "tp_common.h"

#define TOL 1e-6

/* ---- the op against the unfused pair ------------------------------------------------------------ */
typedef struct {
    float loss, *dx, *dw;
    int ok;
    char err[1024];
} res;

static void res_free(res *r) {
    free(r->dx);
    free(r->dw);
}

/* loss and gradients of x [rows, C] @ w [V, C]^T against tg: fused (chunk > 0) or the unfused pair;
   vp: the vocabulary-parallel ops with vocab_offset off (w holds rows [off, off + V)). The seed
   gradient is dl (not 1: the scaling is part of the backward). */
static void run_op(const float *xv, const float *wv, const int32_t *tg, int64_t rows, int64_t C, int64_t V, int64_t nvalid, int32_t ignore,
                   int64_t chunk, int vp, int64_t off, float dl, res *r) {
    pt_ctx *c = mk_ctx(vp ? g_d : NULL);
    pt_graph *g = c ? pt_graph_new(c) : NULL;
    pt_tensor *x, *w, *t, *loss = NULL, *seed;
    int64_t one = 1;
    memset(r, 0, sizeof *r);
    r->dx = (float *)calloc((size_t)(rows * C), sizeof(float));
    r->dw = (float *)calloc((size_t)(V * C), sizeof(float));
    if (!g) {
        snprintf(r->err, sizeof r->err, "no context");
        pt_shutdown(c);
        return;
    }
    x = pt_tensor_new(g, PT_F32, 2, rows, C, 0, 0);
    w = pt_tensor_new(g, PT_F32, 2, V, C, 0, 0);
    t = pt_tensor_new(g, PT_I32, 1, rows, 0, 0, 0);
    pt_tensor_write(x, xv);
    pt_tensor_write(w, wv);
    pt_tensor_write(t, tg);
    pt_requires_grad(x);
    pt_requires_grad(w);
    if (chunk > 0) loss = vp ? pt_linear_cross_entropy_vp(g, x, w, t, off, nvalid, chunk) : pt_linear_cross_entropy(g, x, w, t, ignore, nvalid, chunk);
    else if (vp) loss = pt_cross_entropy_vp(g, pt_linear(g, x, w, NULL), t, off, nvalid);
    else loss = pt_cross_entropy_ex(g, pt_linear(g, x, w, NULL), t, ignore, nvalid);
    seed = pt_full(g, 0, &one, dl);
    if (loss && seed && pt_backward_from(g, loss, seed) == PT_OK && x->grad && w->grad) {
        r->loss = pt_item(loss);
        pt_tensor_read(x->grad, r->dx);
        pt_tensor_read(w->grad, r->dw);
        r->ok = 1;
    }
    snprintf(r->err, sizeof r->err, "%s", pt_error(c));
    pt_graph_free(g);
    pt_shutdown(c);
}

/* compares a fused result with the unfused one: loss and dx bit-identical, dW bit-identical when
   exact, else within TOL */
static void cmp_res(const char *what, const res *f, const res *u, int64_t rows, int64_t C, int64_t V, int exact) {
    char why[300];
    double rw;
    if (!CHECK_WHY(f->ok && u->ok, tu_name("%s: both run", what), f->ok ? u->err : f->err)) return;
    snprintf(why, sizeof why, "fused %.9g, unfused %.9g", f->loss, u->loss);
    CHECK_WHY(memcmp(&f->loss, &u->loss, sizeof f->loss) == 0, tu_name("%s: loss bit-identical", what), why);
    snprintf(why, sizeof why, "relative difference %.3g", rel(f->dx, u->dx, (long)(rows * C)));
    CHECK_WHY(memcmp(f->dx, u->dx, (size_t)(rows * C) * sizeof(float)) == 0, tu_name("%s: dx bit-identical", what), why);
    rw = rel(f->dw, u->dw, (long)(V * C));
    snprintf(why, sizeof why, "relative difference %.3g (tolerance %s)", rw, exact ? "0: bit-identical" : "1e-6");
    if (exact) CHECK_WHY(memcmp(f->dw, u->dw, (size_t)(V * C) * sizeof(float)) == 0, tu_name("%s: dW bit-identical", what), why);
    else CHECK_WHY(rw <= TOL, tu_name("%s: dW within 1e-6", what), why);
}

/* random x, w (seeded) and targets in [0, nvalid) with every 5th row ignored */
static void fill(float *xv, float *wv, int32_t *tg, int64_t rows, int64_t C, int64_t V, int64_t nvalid, int32_t ignore) {
    int64_t i;
    for (i = 0; i < rows * C; i++) xv[i] = (float)((double)(pt_hash64(11u + (uint64_t)i) % 20001u) / 10000.0 - 1.0);
    for (i = 0; i < V * C; i++) wv[i] = (float)((double)(pt_hash64(12u + (uint64_t)i) % 20001u) / 10000.0 - 1.0);
    for (i = 0; i < rows; i++) tg[i] = i % 5 == 3 ? ignore : (int32_t)(pt_hash64(13u + (uint64_t)i) % (uint64_t)nvalid);
}

static void test_op(void) {
    enum { ROWS = 37, C = 24, V = 50, NV = 45 };
    static const int64_t chunks[] = {1, 7, ROWS, 64};
    float *xv = (float *)malloc(sizeof(float) * ROWS * C), *wv = (float *)malloc(sizeof(float) * V * C);
    int32_t tg[ROWS];
    res u, f;
    int k;
    fill(xv, wv, tg, ROWS, C, V, NV, -100);
    run_op(xv, wv, tg, ROWS, C, V, NV, -100, 0, 0, 0, 0.37f, &u);
    for (k = 0; k < 4; k++) {
        run_op(xv, wv, tg, ROWS, C, V, NV, -100, chunks[k], 0, 0, 0.37f, &f);
        cmp_res(tu_name("pt_linear_cross_entropy %d rows, V %d (nvalid %d, ignore_index -100), chunk %lld", ROWS, V, NV, (long long)chunks[k]), &f, &u,
                ROWS, C, V, chunks[k] >= ROWS);
        if (k == 1) { /* the padded columns get no gradient; ignored rows none */
            int ok = 1, i, j;
            for (i = NV; i < V; i++)
                for (j = 0; j < C; j++) ok &= f.dw[i * C + j] == 0.0f;
            for (j = 0; j < C; j++) ok &= f.dx[3 * C + j] == 0.0f;
            CHECK_WHY(ok, "pt_linear_cross_entropy chunk 7: rows >= nvalid of dW and the ignored rows of dx are 0", "non-zero gradient");
        }
        res_free(&f);
    }
    /* the loss gradient reaches the op: seed 1 gives dx / 0.37 (to rounding) */
    run_op(xv, wv, tg, ROWS, C, V, NV, -100, 7, 0, 0, 1.0f, &f);
    CHECK_NEAR(f.dx[0] * 0.37f, u.dx[0], 1e-5, "pt_linear_cross_entropy: the gradient of the loss scales dx");
    res_free(&f);
    res_free(&u);
    free(xv);
    free(wv);
}

/* refusals: each names the op, the argument and what it expected */
static void test_errors(void) {
    pt_ctx *c = mk_ctx(NULL);
    pt_graph *g = pt_graph_new(c);
    pt_tensor *x = pt_tensor_new(g, PT_F32, 2, 4, 8, 0, 0), *w = pt_tensor_new(g, PT_F32, 2, 10, 8, 0, 0), *w2 = pt_tensor_new(g, PT_F32, 2, 10, 6, 0, 0);
    pt_tensor *t = pt_tensor_new(g, PT_I32, 1, 4, 0, 0, 0), *t3 = pt_tensor_new(g, PT_I32, 1, 3, 0, 0, 0);
    int32_t bad[4] = {0, 1, 9, 2};
    pt_gpt_config cfg;
    static const struct { int w6, t3, nvalid, chunk; const char *what, *msg; } bads[] = {
        {0, 0, 10, 0, "chunk_rows 0", "chunk_rows 0 must be >= 1"},
        {1, 0, 10, 2, "w [10, 6] for x [4, 8]", "w [10,6] must be [V, 8] for x [4,8]"},
        {0, 1, 10, 2, "3 targets for 4 rows", "targets i32 [3] must be i32 with one id per row of x [4,8] (4 rows)"},
        {0, 0, 11, 2, "nvalid 11 > V 10", "nvalid 11 must be in [1, 10]"},
        {0, 0, 8, 2, "target 9 >= nvalid 8", "target 9 at row 2 is outside [0, 8)"}};
    int k;
    pt_tensor_write(t, bad);
    pt_requires_grad(x);
    for (k = 0; k < (int)(sizeof bads / sizeof bads[0]); k++) {
        CHECK(!pt_linear_cross_entropy(g, x, bads[k].w6 ? w2 : w, bads[k].t3 ? t3 : t, -1, bads[k].nvalid, bads[k].chunk),
              tu_name("pt_linear_cross_entropy: %s is refused", bads[k].what));
        CHECK_HAS(pt_error(c), bads[k].msg, tu_name("  ... the message says '%s'", bads[k].msg));
        pt_error_clear(c);
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 100, cfg.max_seq = 8, cfg.layers = 1, cfg.width = 16, cfg.heads = 2, cfg.loss_chunk = -1;
    CHECK(!pt_gpt_new(c, &cfg), "pt_gpt_new: loss_chunk -1 is refused");
    CHECK_HAS(pt_error(c), "loss_chunk -1 (expected rows per chunk >= 1, or 0 = no chunks)", "  ... the message names loss_chunk");
    pt_graph_free(g);
    pt_shutdown(c);
}

/* the vocabulary-parallel op on this rank's V/tp rows of one global head, against the unfused
   pt_cross_entropy_vp on the same rank (bit-identical loss and dx, dW within TOL) and against one
   process holding the whole head (TP: the loss to 1e-5; this rank's rows of dW). nvalid 22 of 32:
   with tp 2 each rank holds 16 columns, rank 1 only 6 valid; tp 4: ranks 2 and 3 hold 6 and 0. */
static void test_vp(void) {
    enum { ROWS = 29, C = 16, VG = 32, NV = 22 };
    int64_t Vl = VG / g_tp, off = (int64_t)g_tpr * Vl;
    float *xv = (float *)malloc(sizeof(float) * ROWS * C), *wv = (float *)malloc(sizeof(float) * VG * C);
    int32_t tg[ROWS];
    res u, f, s;
    char why[200];
    int k;
    static const int64_t chunks[] = {1, 7, ROWS, 64};
    fill(xv, wv, tg, ROWS, C, VG, NV, -1);
    run_op(xv, wv + off * C, tg, ROWS, C, Vl, NV, -1, 0, 1, off, 0.37f, &u);
    run_op(xv, wv, tg, ROWS, C, VG, NV, -1, 0, 0, 0, 0.37f, &s);
    for (k = 0; k < 4; k++) {
        run_op(xv, wv + off * C, tg, ROWS, C, Vl, NV, -1, chunks[k], 1, off, 0.37f, &f);
        cmp_res(tu_name("pt_linear_cross_entropy_vp (rank %d: %lld columns from %lld), chunk %lld", g_tpr, (long long)Vl, (long long)off,
                        (long long)chunks[k]),
                &f, &u, ROWS, C, Vl, chunks[k] >= ROWS);
        if (k == 1 && f.ok && s.ok) {
            double rl = fabs((double)f.loss - s.loss) / fabs((double)s.loss);
            snprintf(why, sizeof why, "loss %.9g vs %.9g (%.3g)", f.loss, s.loss, rl);
            CHECK_WHY(rl <= 1e-5, "pt_linear_cross_entropy_vp chunk 7: the loss equals one process's (1e-5)", why);
            cmp_tol("pt_linear_cross_entropy_vp chunk 7: this rank's rows of dW equal one process's (1e-5)", f.dw, s.dw + off * C, (long)(Vl * C), 1e-5);
        }
        res_free(&f);
    }
    res_free(&u);
    res_free(&s);
    free(xv);
    free(wv);
}

/* ---- the GPT --------------------------------------------------------------------------------- */
#define GB 4
#define GT 16
typedef struct {
    float loss, eval_loss;
    float *grads; /* the gradient slab */
    long n;
    int32_t gen[3 + 8];
    int ok;
    char err[1024];
} gpt_res;

/* one training step's loss and gradients of the GPT (vocab 100 -> 128, 2 layers, width 64) with
   loss_chunk ch, on grid d (NULL: one process); also the loss of a no-grad evaluation pass and 8
   greedy tokens */
static void run_gpt(const pt_dist *d, int ch, int untied, gpt_res *r) {
    pt_gpt_config cfg;
    pt_ctx *c = mk_ctx(d);
    pt_gpt *m;
    pt_graph *g;
    pt_tensor *x, *y, *loss;
    int32_t ids[GB * GT], tgt[GB * GT], prompt[3] = {5, 17, 42};
    int i;
    memset(r, 0, sizeof *r);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 100, cfg.max_seq = GT, cfg.layers = 2, cfg.width = 64, cfg.heads = 4, cfg.untied = untied, cfg.loss_chunk = ch;
    for (i = 0; i < GB * GT; i++) {
        ids[i] = (int32_t)(pt_hash64(77u + (uint64_t)i) % 100u);
        tgt[i] = i == 5 ? -1 : (int32_t)(pt_hash64(78u + (uint64_t)i) % 100u);
    }
    if (!c || !(m = pt_gpt_new(c, &cfg)) || !(g = pt_graph_new(c))) {
        snprintf(r->err, sizeof r->err, "%s", c ? pt_error(c) : "no context");
        pt_shutdown(c);
        return;
    }
    x = pt_tensor_new(g, PT_I32, 2, GB, GT, 0, 0);
    y = pt_tensor_new(g, PT_I32, 2, GB, GT, 0, 0);
    pt_tensor_write(x, ids);
    pt_tensor_write(y, tgt);
    pt_zero_grad(c);
    loss = pt_gpt_loss(g, m, x, y);
    if (loss && pt_backward(g, loss) == PT_OK) {
        pt_tensor slab = pt_param_slab(c), gs = pt_grad_slab(c);
        r->loss = pt_item(loss);
        r->n = (long)pt_numel(&slab);
        r->grads = (float *)malloc(sizeof(float) * (size_t)r->n);
        pt_tensor_read(&gs, r->grads);
        pt_graph_reset(g); /* evaluation: no tape */
        pt_graph_set_grad(g, 0);
        x = pt_tensor_new(g, PT_I32, 2, GB, GT, 0, 0);
        y = pt_tensor_new(g, PT_I32, 2, GB, GT, 0, 0);
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tgt);
        loss = pt_gpt_loss(g, m, x, y);
        r->eval_loss = loss ? pt_item(loss) : NAN;
        pt_graph_set_grad(g, 1);
        r->ok = loss && pt_gpt_generate(m, g, prompt, 3, 8, 0.0f, 9, r->gen) == PT_OK;
    }
    snprintf(r->err, sizeof r->err, "%s", pt_error(c));
    pt_graph_free(g);
    pt_gpt_free(m);
    pt_shutdown(c);
}

static void test_gpt(void) {
    static const int chunks[] = {1, 7, GB * GT, 100};
    gpt_res u, f, s;
    char why[300];
    int k, untied;
    for (untied = 0; untied < 2; untied++) {
        const char *head = untied ? "untied head" : "tied embedding";
        run_gpt(g_d, 0, untied, &u);
        if (!CHECK_WHY(u.ok, tu_name("GPT (%s), loss_chunk 0: trains, evaluates, generates", head), u.err)) continue;
        for (k = 0; k < 4; k++) {
            double rg;
            run_gpt(g_d, chunks[k], untied, &f);
            if (!CHECK_WHY(f.ok && f.n == u.n, tu_name("GPT (%s), loss_chunk %d: trains, evaluates, generates", head, chunks[k]), f.err)) continue;
            snprintf(why, sizeof why, "%.9g vs %.9g; evaluation %.9g vs %.9g", f.loss, u.loss, f.eval_loss, u.eval_loss);
            CHECK_WHY(f.loss == u.loss && f.eval_loss == u.eval_loss,
                      tu_name("GPT (%s), loss_chunk %d: training and evaluation losses bit-identical to loss_chunk 0", head, chunks[k]), why);
            rg = rel(f.grads, u.grads, f.n);
            snprintf(why, sizeof why, "relative difference %.3g", rg);
            if (chunks[k] >= GB * GT)
                CHECK_WHY(memcmp(f.grads, u.grads, sizeof(float) * (size_t)f.n) == 0,
                          tu_name("GPT (%s), loss_chunk %d >= rows: every gradient bit-identical", head, chunks[k]), why);
            else
                CHECK_WHY(rg <= TOL, tu_name("GPT (%s), loss_chunk %d: every gradient (wte, lm_head, blocks) within 1e-6", head, chunks[k]), why);
            {
                float fg[3 + 8];
                int i;
                for (i = 0; i < 3 + 8; i++) fg[i] = (float)f.gen[i];
                CHECK_WHY(memcmp(f.gen, u.gen, sizeof f.gen) == 0 && same_on_all_ranks(fg, 3 + 8),
                          tu_name("GPT (%s), loss_chunk %d: pt_gpt_generate gives the same tokens (on every rank)", head, chunks[k]), "tokens differ");
            }
            free(f.grads);
        }
        if (g_tp > 1) { /* the chunked TP GPT against one process without chunks */
            run_gpt(g_d, 7, untied, &f);
            run_gpt(NULL, 0, untied, &s);
            if (CHECK_WHY(f.ok && s.ok, tu_name("GPT (%s): tp %d loss_chunk 7 and one process run", head, g_tp), f.ok ? s.err : f.err)) {
                double rl = fabs((double)f.loss - s.loss) / fabs((double)s.loss);
                snprintf(why, sizeof why, "%.9g vs %.9g (%.3g)", f.loss, s.loss, rl);
                CHECK_WHY(rl <= 1e-5, tu_name("GPT (%s): tp %d loss_chunk 7 loss equals one process's (1e-5)", head, g_tp), why);
                CHECK_WHY(memcmp(f.gen, s.gen, sizeof f.gen) == 0, tu_name("GPT (%s): tp %d loss_chunk 7 generates one process's tokens", head, g_tp),
                          "tokens differ");
            }
            free(f.grads);
            free(s.grads);
        }
        free(u.grads);
    }
}

/* ---- memory: the [rows, V] logits are gone ----------------------------------------------------- */
static int64_t head_bytes(int64_t rows, int64_t C, int64_t V, int64_t chunk, float *loss) {
    pt_ctx *c = mk_ctx(NULL);
    pt_graph *g = pt_graph_new(c);
    pt_tensor *x = pt_tensor_new(g, PT_F32, 2, rows, C, 0, 0), *w = pt_tensor_new(g, PT_F32, 2, V, C, 0, 0), *t = pt_tensor_new(g, PT_I32, 1, rows, 0, 0, 0);
    pt_tensor *l;
    int32_t *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows);
    int64_t i, bytes = -1;
    for (i = 0; i < rows; i++) tg[i] = (int32_t)(pt_hash64(5u + (uint64_t)i) % 50257u);
    x = pt_full(g, 2, x->shape, 0.01f);
    w = pt_full(g, 2, w->shape, 0.02f);
    pt_tensor_write(t, tg);
    pt_requires_grad(x);
    pt_requires_grad(w);
    l = chunk > 0 ? pt_linear_cross_entropy(g, x, w, t, -1, 50257, chunk) : pt_cross_entropy_ex(g, pt_linear(g, x, w, NULL), t, -1, 50257);
    if (l && pt_backward(g, l) == PT_OK) bytes = pt_graph_bytes(g) - pt_numel(w) * 4; /* w's gradient is a leaf's, in the arena */
    *loss = l ? pt_item(l) : NAN;
    free(tg);
    pt_graph_free(g);
    pt_shutdown(c);
    return bytes;
}

static void test_memory(void) {
    int64_t rows = tu_quick ? 512 : 1024, C = 32, V = 50304, logits = rows * V * 4, bu, bf;
    float lu, lf;
    char why[200];
    bu = head_bytes(rows, C, V, 0, &lu);
    bf = head_bytes(rows, C, V, 64, &lf);
    snprintf(why, sizeof why, "graph bytes %lld (chunk 64) vs %lld (unfused); the logits %lld", (long long)bf, (long long)bu, (long long)logits);
    CHECK_WHY(bu >= logits, tu_name("vocab 50257 (50304), %lld rows, unfused: the graph holds the [rows, V] logits", (long long)rows), why);
    CHECK_WHY(bf > 0 && bf < logits && bf < bu / 2,
              tu_name("vocab 50257 (50304), %lld rows, chunks of 64: graph bytes below the [rows, V] f32 logits (and half the unfused)", (long long)rows),
              why);
    CHECK_WHY(lf == lu, "  ... and the same loss", why);
    if (tu_rank == 0) printf("  head + loss graph bytes, %lld rows x 50304: unfused %lld, chunks of 64 %lld\n", (long long)rows, (long long)bu, (long long)bf);
}

static void run(void) {
    pt_ctx *c = mk_ctx(NULL);
    if (tu_rank == 0) printf("  backend: %s (PTRAIN_DEVICE picks it)\n", c ? pt_backend_name(c) : "none");
    pt_shutdown(c);
    test_op();
    test_errors();
    test_vp();
    test_gpt();
    test_memory();
}

int main(int argc, char **argv) {
    tu_init(argc, argv);
    return tp_main(&argc, &argv, run);
}

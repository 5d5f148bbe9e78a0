/* test_tp_gpt.c - the tensor-parallel GPT (>>nn, >>tp) against one process. Build: mpicc -std=c99
   -DPTRAIN_MPI -fopenmp -I. tests/test_tp_gpt.c -lm, run under mpirun -np 2 or 4 (layout tp = world
   size); also builds and runs without MPI (tp = 1, where the model is the plain one).
   Every rank trains the GPT (vocab 100 -> padded 128, T 16, 2 layers, width 64, 4 heads) for 5 AdamW
   steps with clipping on one fixed global batch, sharded over TP in one context and unsplit in a
   second context without a grid, and compares per-step losses and gradient norms (1e-5 relative) and
   per tensor the final parameters, ||shard - matching slice of the reference|| / ||slice|| (squares
   summed over TP for split tensors) <= 1e-5, found with pt_spec_global_index. Runs: dropout 0 with a
   tied head, dropout 0.1 with an untied head; the first run repeated must be bit-identical. Also:
   grouped splits of pt_spec, pt_embedding_vp / pt_cross_entropy_vp against the plain ops (forward and
   gradients, including ranks without a valid column), refusals of heads % tp and vocab_padded % tp,
   and greedy pt_gpt_generate under TP against the reference's tokens. Sequence parallelism
   (seq_parallel = 1: the residual stream split along T over TP): both runs again against the single
   process (1e-5) and against TP without it, the norms' gradients summed by pt_tp_sync_grads (a
   control without the sum must differ), activation bytes below TP's, generation on the same model. */
#include "tp_common.h"

#define B 4
#define T 16
#define STEPS 5
#define TOL 1e-5
/* AdamW eps: Adam divides each gradient by its own running magnitude, so elements whose gradient is
   ~0 (the attention key bias: exactly 0 in exact arithmetic) turn the rounding differences of the TP
   reductions into parameter differences of about lr * noise / eps. Measured worst tensor after 5
   steps (tp 2 and 4): eps 1e-8: 1.4e-3, 1e-6: 2-3e-5, 1e-5: < 5e-6 (losses agree to ~1e-6 in all). */
#ifndef EPS
#define EPS 1e-5f
#endif

static int g_sp; /* gpt_cfg: seq_parallel */
typedef struct {
    int64_t act_bytes; /* the training graph's high water (pt_graph_bytes after the last step) */
    float loss[STEPS], norm[STEPS];
    pt_ctx *ctx;
    pt_gpt *m;
    int ok;
} run_out;

static void batch(int32_t *ids, int32_t *tgt) {
    int i;
    for (i = 0; i < B * T; i++) { /* a fixed pseudo-random batch; target = the next id */
        ids[i] = (int32_t)(pt_hash64(77u + (uint64_t)i) % 100u);
        tgt[i] = (int32_t)(pt_hash64(78u + (uint64_t)i) % 100u);
    }
    tgt[5] = -1; /* one ignored position */
}

static pt_gpt_config gpt_cfg(float dropout, int untied) {
    pt_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 100, cfg.max_seq = T, cfg.layers = 2, cfg.width = 64, cfg.heads = 4;
    cfg.dropout = dropout, cfg.untied = untied, cfg.seq_parallel = g_sp;
    return cfg;
}

/* trains STEPS AdamW steps (clip 1.0) in a new context on grid d (NULL = one process) */
static void train(const pt_dist *d, float dropout, int untied, run_out *o) {
    pt_gpt_config cfg = gpt_cfg(dropout, untied);
    pt_optim_desc od;
    pt_optim *opt;
    pt_graph *g;
    int32_t ids[B * T], tgt[B * T];
    int s;
    memset(o, 0, sizeof *o);
    if (!(o->ctx = mk_ctx(d))) return;
    o->m = pt_gpt_new(o->ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    od.eps = EPS;
    opt = pt_optim_new(o->ctx, &od);
    g = pt_graph_new(o->ctx);
    if (!o->m || !opt || !g) return;
    batch(ids, tgt);
    for (s = 0; s < STEPS; s++) {
        pt_tensor *x, *y, *loss;
        pt_graph_reset(g);
        pt_graph_set_sample_offset(g, (int64_t)s * B);
        x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tgt);
        loss = pt_gpt_loss(g, o->m, x, y);
        pt_zero_grad(o->ctx);
        if (!loss || pt_backward(g, loss) != PT_OK) return;
        o->loss[s] = pt_item(loss);
        o->norm[s] = pt_optim_step(opt, 1e-2f);
    }
    o->ok = pt_status_get(o->ctx) == PT_OK;
    o->act_bytes = pt_graph_pass_bytes(g);
    pt_graph_free(g);
    pt_optim_free(opt);
}

static void done(run_out *o) {
    pt_gpt_free(o->m);
    pt_shutdown(o->ctx);
}

/* sums n doubles over the TP ranks (in place) */
static void tp_sum(double *v, int n) {
#ifdef PTRAIN_MPI
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(g_d, PT_COMM_TP));
#else
    (void)v, (void)n;
#endif
}

/* worst ||shard - slice of ref|| / ||slice|| over the parameters of a (squares summed over TP for
   split ones); plain = 1 maps grouped splits as plain ones (the control); *worst_name gets the name */
static double param_diff(pt_ctx *a, pt_ctx *ref, int plain, const char **worst_name, int *missing) {
    double worst = 0;
    int i, j;
    *missing = 0;
    *worst_name = "";
    for (i = 0; i < pt_param_count(a); i++) {
        pt_param *p = pt_param_at(a, i), *q = pt_param_find(ref, p->spec.name);
        pt_spec sp = p->spec;
        double dn[2] = {0, 0}, r;
        const float *va = pt_f32(&p->value), *vb;
        if (!q) {
            (*missing)++;
            continue;
        }
        vb = pt_f32(&q->value);
        if (plain) sp.split_groups = 0;
        for (j = 0; j < pt_numel(&p->value); j++) {
            int64_t gi = pt_spec_global_index(&sp, j);
            double e = gi < 0 ? 1e30 : (double)va[j] - vb[gi];
            dn[0] += e * e;
            dn[1] += gi < 0 ? 0 : (double)vb[gi] * vb[gi];
        }
        if (p->spec.split_dim >= 0 && p->spec.split_parts > 1) tp_sum(dn, 2); /* every rank visits the same split params */
        r = dn[1] > 0 ? sqrt(dn[0] / dn[1]) : sqrt(dn[0]);
        if (!(r <= worst)) worst = r, *worst_name = p->spec.name;
    }
    return worst;
}

static void cmp_runs(const char *what, run_out *a, run_out *r) {
    char nm[200], why[300];
    const char *wn;
    int s, missing;
    double w, wl = 0, wg = 0;
    for (s = 0; s < STEPS; s++) {
        double el = fabs(a->loss[s] - r->loss[s]) / fabs(r->loss[s]), eg = fabs(a->norm[s] - r->norm[s]) / fabs(r->norm[s]);
        if (!(el <= wl)) wl = el;
        if (!(eg <= wg)) wg = eg;
    }
    snprintf(nm, sizeof nm, "%s: per-step losses equal the single process's (5 AdamW steps)", what);
    snprintf(why, sizeof why, "worst relative difference %.3g > %g (step 0: %.9g vs %.9g)", wl, TOL, a->loss[0], r->loss[0]);
    CHECK_WHY(wl <= TOL, nm, why);
    snprintf(nm, sizeof nm, "%s: per-step gradient norms (before clipping) equal the single process's", what);
    snprintf(why, sizeof why, "worst relative difference %.3g > %g (step 0: %.9g vs %.9g)", wg, TOL, a->norm[0], r->norm[0]);
    CHECK_WHY(wg <= TOL, nm, why);
    snprintf(nm, sizeof nm, "%s: clipping was active (norm > 1 at step 0)", what);
    CHECK_WHY(r->norm[0] > 1.0f, nm, "gradient norm below the clip norm: clipping is not exercised");
    w = param_diff(a->ctx, r->ctx, 0, &wn, &missing);
    snprintf(nm, sizeof nm, "%s: final parameters per tensor ||shard - slice|| / ||slice|| <= 1e-5", what);
    snprintf(why, sizeof why, "worst %.3g at '%s', %d missing in the reference", w, wn, missing);
    CHECK_WHY(w <= TOL && !missing, nm, why);
    if (g_rank == 0) printf("  %s: worst loss diff %.3g, param diff %.3g (%s)\n", what, wl, w, wn);
}

static void test_gpt(void) {
    run_out a, a2, r, bd, rd;
    char why[300];
    const char *wn;
    int missing, n, i, same;
    double w;
    train(g_d, 0.0f, 0, &a);
    train(NULL, 0.0f, 0, &r);
    if (!CHECK_WHY(a.ok && r.ok, "dropout 0: the TP GPT and the reference train", a.ctx ? pt_error(a.ctx) : "no context")) return;
    {
        pt_param *q = pt_param_find(a.ctx, "h.0.attn.w"), *e = pt_param_find(a.ctx, "wte"), *f = pt_param_find(a.ctx, "h.1.mlp.proj.w");
        snprintf(why, sizeof why, "h.0.attn.w [%lld,%lld] groups %d, wte [%lld,%lld], h.1.mlp.proj.w [%lld,%lld]", (long long)q->value.shape[0],
                 (long long)q->value.shape[1], q->spec.split_groups, (long long)e->value.shape[0], (long long)e->value.shape[1],
                 (long long)f->value.shape[0], (long long)f->value.shape[1]);
        CHECK_WHY(q->value.shape[0] == 192 / g_tp && (g_tp == 1 || q->spec.split_groups == 3) && e->value.shape[0] == 128 / g_tp &&
                      f->value.shape[1] == 256 / g_tp && pt_param_count(a.ctx) == pt_param_count(r.ctx),
                  "shards: qkv [192/tp, 64] in 3 groups, wte [128/tp, 64], mlp.proj [64, 256/tp]; the same parameter names", why);
    }
    cmp_runs("dropout 0, tied head", &a, &r);
    if (g_tp > 1) { /* control: the comparison detects a wrong slice (qkv read as a plain split) */
        w = param_diff(a.ctx, r.ctx, 1, &wn, &missing);
        snprintf(why, sizeof why, "worst %.3g: the check cannot tell q_r|k_r|v_r from a contiguous block", w);
        CHECK_WHY(w > 1e-2, "control: the shards compared as plain (ungrouped) splits differ", why);
    }
    /* the same run again: bit-identical */
    train(g_d, 0.0f, 0, &a2);
    {
        pt_tensor s1 = pt_param_slab(a.ctx), s2 = pt_param_slab(a2.ctx);
        n = (int)s1.shape[0];
        same = a2.ok && memcmp(a.loss, a2.loss, sizeof a.loss) == 0 && n == (int)s2.shape[0] &&
               memcmp(pt_f32(&s1), pt_f32(&s2), (size_t)n * sizeof(float)) == 0;
    }
    CHECK_WHY(same, "the same TP run twice: bit-identical losses and parameter slab", "they differ");
    done(&a2);
    /* greedy generation under TP gives the reference's tokens (and the same tokens on every rank) */
    {
        pt_graph *ga = pt_graph_new(a.ctx), *gr = pt_graph_new(r.ctx);
        int32_t prompt[3] = {5, 17, 42}, oa[3 + 10], orf[3 + 10];
        float fa[13];
        pt_status sa = pt_gpt_generate(a.m, ga, prompt, 3, 10, 0.0f, 9, oa), sr = pt_gpt_generate(r.m, gr, prompt, 3, 10, 0.0f, 9, orf);
        for (i = 0; i < 13; i++) fa[i] = (float)oa[i];
        snprintf(why, sizeof why, "status %d/%d, token 3..5: %d %d %d vs %d %d %d", sa, sr, oa[3], oa[4], oa[5], orf[3], orf[4], orf[5]);
        CHECK_WHY(sa == PT_OK && sr == PT_OK && memcmp(oa, orf, sizeof oa) == 0 && same_on_all_ranks(fa, 13),
                  "pt_gpt_generate (greedy, 10 tokens) under TP gives the reference's tokens on every rank", why);
        sa = pt_gpt_generate(a.m, ga, prompt, 3, 10, 1.0f, 9, oa);
        for (i = 0; i < 13; i++) fa[i] = (float)oa[i];
        CHECK_WHY(sa == PT_OK && same_on_all_ranks(fa, 13), "pt_gpt_generate (temperature 1) samples the same tokens on every TP rank",
                  "tokens differ between ranks");
        pt_graph_free(ga);
        pt_graph_free(gr);
    }
    done(&a);
    done(&r);
    train(g_d, 0.1f, 1, &bd);
    train(NULL, 0.1f, 1, &rd);
    if (CHECK_WHY(bd.ok && rd.ok, "dropout 0.1, untied head: the TP GPT and the reference train", bd.ctx ? pt_error(bd.ctx) : "no context")) {
        pt_param *h = pt_param_find(bd.ctx, "lm_head");
        CHECK_WHY(h && h->value.shape[0] == 128 / g_tp, "untied lm_head split over vocabulary rows [128/tp, 64]", "wrong shape");
        cmp_runs("dropout 0.1, untied head", &bd, &rd);
    }
    done(&bd);
    done(&rd);
    /* sequence parallelism: the same runs, against the reference and against TP without it */
    {
        run_out sa, ta;
        double wl = 0;
        g_sp = 1;
        train(g_d, 0.0f, 0, &sa);
        g_sp = 0;
        train(NULL, 0.0f, 0, &r);
        train(g_d, 0.0f, 0, &ta);
        if (CHECK_WHY(sa.ok && r.ok && ta.ok, "sequence parallel, dropout 0: trains", sa.ctx ? pt_error(sa.ctx) : "no context")) {
            cmp_runs("sequence parallel, dropout 0, tied head", &sa, &r);
            for (i = 0; i < STEPS; i++) wl = fmax(wl, fabs(sa.loss[i] - ta.loss[i]) / fabs(ta.loss[i]));
            for (w = 0, wn = "", i = 0; i < pt_param_count(sa.ctx); i++) { /* the same shards: element by element */
                pt_param *p = pt_param_at(sa.ctx, i), *q = pt_param_find(ta.ctx, p->spec.name);
                double dn[2] = {0, 0};
                int64_t j;
                for (j = 0; q && j < pt_numel(&p->value); j++) {
                    double e = (double)pt_f32(&p->value)[j] - pt_f32(&q->value)[j];
                    dn[0] += e * e, dn[1] += (double)pt_f32(&q->value)[j] * pt_f32(&q->value)[j];
                }
                if (!q || !(sqrt(dn[0] / (dn[1] > 0 ? dn[1] : 1)) <= w)) w = q ? sqrt(dn[0] / (dn[1] > 0 ? dn[1] : 1)) : 1e30, wn = p->spec.name;
            }
            snprintf(why, sizeof why, "losses %.3g, parameters %.3g (%s)", wl, w, wn);
            CHECK_WHY(wl <= TOL && w <= TOL, "sequence parallel = TP without it (losses, parameters 1e-5)", why);
            if (g_tp > 1) {
                pt_param *ln = pt_param_find(sa.ctx, "h.0.ln1.w"), *pb = pt_param_find(sa.ctx, "h.1.mlp.proj.b"), *qw = pt_param_find(sa.ctx, "h.0.attn.w");
                snprintf(why, sizeof why, "tp_partial: ln1.w %d, mlp.proj.b %d, attn.w %d; activation bytes %lld vs %lld", ln ? ln->tp_partial : -1,
                         pb ? pb->tp_partial : -1, qw ? qw->tp_partial : -1, (long long)sa.act_bytes, (long long)ta.act_bytes);
                CHECK_WHY(ln && ln->tp_partial && pb && pb->tp_partial && qw && !qw->tp_partial && sa.act_bytes < ta.act_bytes,
                          "sequence parallel: norms and row-parallel biases are tp_partial (not the split weights); the graph holds fewer bytes", why);
                if (g_rank == 0) printf("  sequence parallel: training graph %lld bytes, TP without it %lld\n", (long long)sa.act_bytes, (long long)ta.act_bytes);
                { /* control: the partial gradients without their sum over TP are not the full ones */
                    pt_graph *gg = pt_graph_new(sa.ctx);
                    int32_t ids[B * T], tgt[B * T];
                    pt_tensor *x = NULL, *y = NULL, *loss = NULL;
                    float before, after;
                    batch(ids, tgt);
                    if (gg) x = pt_tensor_new(gg, PT_I32, 2, B, T, 0, 0), y = pt_tensor_new(gg, PT_I32, 2, B, T, 0, 0);
                    if (x && y) pt_tensor_write(x, ids), pt_tensor_write(y, tgt), loss = pt_gpt_loss(gg, sa.m, x, y);
                    pt_zero_grad(sa.ctx);
                    if (loss) pt_backward(gg, loss);
                    before = pt_f32(&ln->grad)[0];
                    pt_tp_sync_grads(sa.ctx);
                    after = pt_f32(&ln->grad)[0];
                    pt_tp_sync_grads(sa.ctx); /* a second call: nothing */
                    snprintf(why, sizeof why, "h.0.ln1.w grad[0] %.9g before, %.9g after, %.9g after a second call", before, after, pt_f32(&ln->grad)[0]);
                    CHECK_WHY(loss && before != after && pt_f32(&ln->grad)[0] == after, "sequence parallel: pt_tp_sync_grads sums the partial gradients, once", why);
                    pt_graph_free(gg);
                }
            }
            { /* generation (no training graph: the plain TP path on the same weights) */
                pt_graph *ga = pt_graph_new(sa.ctx), *gt = pt_graph_new(ta.ctx);
                int32_t prompt[3] = {5, 17, 42}, oa[13], ot[13];
                pt_status s1 = pt_gpt_generate(sa.m, ga, prompt, 3, 10, 0.0f, 9, oa), s2 = pt_gpt_generate(ta.m, gt, prompt, 3, 10, 0.0f, 9, ot);
                CHECK_WHY(s1 == PT_OK && s2 == PT_OK && !memcmp(oa, ot, sizeof oa), "sequence parallel: generation gives TP's tokens", pt_error(sa.ctx));
                pt_graph_free(ga), pt_graph_free(gt);
            }
        }
        done(&sa), done(&ta), done(&r);
        g_sp = 1;
        train(g_d, 0.1f, 1, &sa);
        g_sp = 0;
        train(NULL, 0.1f, 1, &rd);
        if (CHECK_WHY(sa.ok && rd.ok, "sequence parallel, dropout 0.1, untied head: trains", sa.ctx ? pt_error(sa.ctx) : "no context"))
            cmp_runs("sequence parallel, dropout 0.1 (the masks of one process), untied head", &sa, &rd);
        done(&sa), done(&rd);
    }
}

/* grouped splits: pt_spec_global_index by hand, and refusals naming the dim */
static void test_spec(void) {
    pt_spec s;
    pt_ctx *c = mk_ctx(NULL);
    int ok = 1, j, k;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "fused");
    s.ndim = 2, s.global_shape[0] = 12, s.global_shape[1] = 2, s.global_shape[2] = s.global_shape[3] = 1;
    s.split_dim = 0, s.split_parts = 2, s.split_index = 1, s.split_groups = 3, s.stage = -1, s.init = PT_INIT_NORMAL, s.init_scale = 1;
    /* local rows j = 0..5: block j/2, global row = block*4 + 1*2 + j%2 */
    for (j = 0; j < 6; j++)
        for (k = 0; k < 2; k++) ok &= pt_spec_global_index(&s, j * 2 + k) == ((j / 2) * 4 + 2 + j % 2) * 2 + k;
    ok &= pt_spec_global_index(&s, 12) == -1 && pt_spec_global_index(&s, -1) == -1;
    CHECK_WHY(ok, "pt_spec_global_index: [12,2] in 3 groups of 2 parts, part 1 holds rows 2,3,6,7,10,11", "wrong index");
    s.split_groups = 0;
    for (ok = 1, j = 0; j < 12; j++) ok &= pt_spec_global_index(&s, j) == 12 + j;
    CHECK_WHY(ok, "pt_spec_global_index: a plain split (groups 0), part 1 holds the second half", "wrong index");
    { /* the shard's initial values are the slice of the unsplit parameter (same name, same seed) */
        pt_ctx *c2 = mk_ctx(NULL);
        pt_tensor *full, *part;
        s.split_groups = 3;
        part = pt_param_from_spec(c, &s);
        s.split_dim = -1, s.split_parts = 1, s.split_index = 0, s.split_groups = 0;
        full = pt_param_from_spec(c2, &s);
        ok = full && part && part->shape[0] == 6 && part->shape[1] == 2;
        s.split_dim = 0, s.split_parts = 2, s.split_index = 1, s.split_groups = 3;
        for (j = 0; ok && j < 12; j++) ok &= pt_f32(part)[j] == pt_f32(full)[pt_spec_global_index(&s, j)] && pt_f32(part)[j] != 0;
        CHECK_WHY(ok, "a grouped shard [6,2] holds exactly its rows of the unsplit parameter", pt_error(c));
        pt_shutdown(c2);
    }
    s.split_dim = 0, s.split_parts = 2, s.split_index = 0, s.split_groups = 3;
    s.global_shape[0] = 9;
    snprintf(s.name, sizeof s.name, "bad.fused");
    CHECK_WHY(!pt_param_from_spec(c, &s) && pt_status_get(c) == PT_ERR_SHAPE && strstr(pt_error(c), "dim 0 of size 9") &&
                  strstr(pt_error(c), "3 groups of 2 parts"),
              "a grouped split that does not divide is refused, naming the dim", pt_error(c));
    pt_shutdown(c);
}

/* heads % tp and vocab_padded % tp refused with messages naming them */
static void test_refusal(void) {
    pt_ctx *c = mk_ctx(g_d);
    pt_gpt_config cfg = gpt_cfg(0, 0);
    char want[128];
    if (g_tp == 1) {
        pt_shutdown(c);
        return;
    }
    cfg.heads = g_tp + 1, cfg.width = 16 * (g_tp + 1);
    snprintf(want, sizeof want, "pt_gpt_new: heads=%d does not split evenly over tp=%d", cfg.heads, g_tp);
    CHECK_WHY(!pt_gpt_new(c, &cfg) && pt_status_get(c) == PT_ERR_SHAPE && strstr(pt_error(c), want) && pt_param_count(c) == 0,
              "pt_gpt_new refuses heads % tp != 0, naming heads and tp, creating nothing", pt_error(c));
    pt_error_clear(c);
    cfg = gpt_cfg(0, 0);
    cfg.vocab_padded = 101;
    snprintf(want, sizeof want, "pt_gpt_new: vocab_padded=101 does not split evenly over tp=%d", g_tp);
    CHECK_WHY(!pt_gpt_new(c, &cfg) && pt_status_get(c) == PT_ERR_SHAPE && strstr(pt_error(c), want) && pt_param_count(c) == 0,
              "pt_gpt_new refuses vocab_padded % tp != 0, naming vocab_padded and tp", pt_error(c));
    pt_shutdown(c);
}

/* the vocabulary-parallel ops on random data against the plain ops on the whole tensors */
static void test_vp_ops(int nvalid_case) {
    enum { R = 6, C = 5 };
    int V = 8 * g_tp, Vl = 8, off = g_tpr * Vl, nvalid = nvalid_case ? Vl - 1 : V - 3, i, j;
    pt_ctx *a = mk_ctx(g_d), *b = mk_ctx(NULL);
    pt_graph *ga = pt_graph_new(a), *gb = pt_graph_new(b);
    float *lg = (float *)malloc(sizeof(float) * (size_t)(R * V * 3 + V * C * 2)), *sl = lg + R * V, *gsl = sl + R * V, *tb = gsl + R * V,
          *tsl = tb + V * C;
    float ea[R * C], eb[R * C], rr[R * C];
    int32_t tg[R], ids[R];
    int64_t sh[2] = {R, 0}, tsh[1] = {R};
    pt_tensor *la, *lb, *xa, *xb, *ta, *tbt, *oa, *ob, *sa, *sb;
    char nm[200];
    for (i = 0; i < R * V; i++) lg[i] = 2.0f * sinf(0.7f * (float)i + 0.3f) + 0.5f * cosf(1.3f * (float)i);
    for (i = 0; i < R; i++) tg[i] = (int32_t)((7 * i + 3) % nvalid), ids[i] = (int32_t)((5 * i + 2) % V);
    tg[2] = -1;
    for (i = 0; i < R; i++)
        for (j = 0; j < Vl; j++) sl[i * Vl + j] = lg[i * V + off + j];
    for (i = 0; i < V * C; i++) tb[i] = cosf(0.37f * (float)i);
    for (i = 0; i < Vl * C; i++) tsl[i] = tb[off * C + i];
    for (i = 0; i < R * C; i++) rr[i] = sinf(0.9f * (float)i) - 0.1f;
    sh[1] = Vl;
    xa = pt_tensor_from(ga, PT_F32, 2, sh, sl);
    sh[1] = V;
    xb = pt_tensor_from(gb, PT_F32, 2, sh, lg);
    pt_requires_grad(xa);
    pt_requires_grad(xb);
    la = pt_cross_entropy_vp(ga, xa, pt_tensor_from(ga, PT_I32, 1, tsh, tg), off, nvalid);
    lb = pt_cross_entropy_ex(gb, xb, pt_tensor_from(gb, PT_I32, 1, tsh, tg), -1, nvalid);
    snprintf(nm, sizeof nm, "pt_cross_entropy_vp [6,%d/tp] nvalid %d runs%s", V, nvalid, nvalid_case ? " (ranks > 0 hold no valid column)" : "");
    if (CHECK_WHY(la && lb && pt_backward(ga, la) == PT_OK && pt_backward(gb, lb) == PT_OK && xa->grad && xb->grad, nm, pt_error(a))) {
        float fa = pt_item(la), fb = pt_item(lb);
        snprintf(nm, sizeof nm, "pt_cross_entropy_vp nvalid %d: loss equals pt_cross_entropy_ex's on the whole logits", nvalid);
        cmp_tol(nm, &fa, &fb, 1, 1e-6);
        for (i = 0; i < R; i++)
            for (j = 0; j < Vl; j++) gsl[i * Vl + j] = pt_f32(xb->grad)[i * V + off + j];
        snprintf(nm, sizeof nm, "pt_cross_entropy_vp nvalid %d: local gradient equals the slice of the full one", nvalid);
        cmp_tol(nm, pt_f32(xa->grad), gsl, R * Vl, 1e-6);
    }
    /* embedding: pt_tp_reduce(pt_embedding_vp(local rows)) vs pt_embedding */
    pt_graph_reset(ga);
    pt_graph_reset(gb);
    sh[0] = Vl, sh[1] = C;
    ta = pt_tensor_from(ga, PT_F32, 2, sh, tsl);
    sh[0] = V;
    tbt = pt_tensor_from(gb, PT_F32, 2, sh, tb);
    pt_requires_grad(ta);
    pt_requires_grad(tbt);
    oa = pt_tp_reduce(ga, pt_embedding_vp(ga, ta, pt_tensor_from(ga, PT_I32, 1, tsh, ids), off));
    ob = pt_embedding(gb, tbt, pt_tensor_from(gb, PT_I32, 1, tsh, ids));
    sh[0] = R;
    sa = pt_sum(ga, pt_mul(ga, oa, pt_tensor_from(ga, PT_F32, 2, sh, rr)));
    sb = pt_sum(gb, pt_mul(gb, ob, pt_tensor_from(gb, PT_F32, 2, sh, rr)));
    if (nvalid_case && CHECK_WHY(sa && sb && pt_backward(ga, sa) == PT_OK && pt_backward(gb, sb) == PT_OK && ta->grad && tbt->grad,
                                 "pt_embedding_vp + pt_tp_reduce runs", pt_error(a))) {
        pt_tensor_read(oa, ea);
        pt_tensor_read(ob, eb);
        cmp_tol("pt_tp_reduce(pt_embedding_vp) equals pt_embedding of the whole table", ea, eb, R * C, 0);
        cmp_tol("pt_embedding_vp: the local table gradient equals the slice of the full one", pt_f32(ta->grad), pt_f32(tbt->grad) + off * C, Vl * C, 0);
    }
    free(lg);
    pt_graph_free(ga);
    pt_graph_free(gb);
    pt_shutdown(a);
    pt_shutdown(b);
}

static void run(void) {
    test_spec();
    test_refusal();
    test_vp_ops(0);
    test_vp_ops(1);
    test_gpt();
}

int main(int argc, char **argv) { return tp_main(&argc, &argv, run); }

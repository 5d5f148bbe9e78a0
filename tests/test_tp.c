/* test_tp.c - tensor parallelism (>>tp): pt_tp_copy/pt_tp_reduce and the parallel linears/MLP against
   the unsplit model. Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_tp.c -lm, run under
   mpirun -np 2 or 4 (layout tp = world size); also builds and runs without MPI (tp = 1).
   Every rank builds the MLP 16 -> 32 -> 8 (GELU) with pt_mlp_tp_new (its shards) in one context and
   the same MLP unsplit (pt_mlp_new, same names and seed) in a second context, then compares forward
   outputs, loss, the shard gradients with the slices of the full gradients, x's gradient, and the
   parameters after 3 SGD steps. Every check is agreed across ranks (test_util.h); rank 0 prints PASS/FAIL
   and "N passed, N failed". */
#include "tp_common.h"

#define IN 16
#define HID 32
#define OUT 8
#define NB 4
#define STEPS 3
#define TOL 1e-5

/* rows [r0, r0+nr) x cols [c0, c0+nc) of a row-major matrix with ld columns, into dst */
static void slice2(float *dst, const float *src, long ld, long r0, long nr, long c0, long nc) {
    long r, c;
    for (r = 0; r < nr; r++)
        for (c = 0; c < nc; c++) dst[r * nc + c] = src[(r0 + r) * ld + c0 + c];
}

static void cmp(const char *name, const float *got, const float *want, long n) { cmp_tol(name, got, want, n, TOL); }

/* compares the shards of ctx a (TP) with the slices of the full parameters (values or grads) of b */
static void cmp_params(pt_ctx *a, pt_ctx *b, int grads, const char *when) {
    static float buf[HID * IN];
    char nm[160];
    const char *names[4] = {"mlp.fc.w", "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"};
    int k;
    for (k = 0; k < 4; k++) {
        pt_param *pa = pt_param_find(a, names[k]), *pb = pt_param_find(b, names[k]);
        const float *va, *vb;
        if (!pa || !pb) {
            CHECK_WHY(0, names[k], "parameter missing");
            continue;
        }
        va = pt_f32(grads ? &pa->grad : &pa->value);
        vb = pt_f32(grads ? &pb->grad : &pb->value);
        if (k == 0) slice2(buf, vb, IN, (long)g_tpr * HID / g_tp, HID / g_tp, 0, IN);              /* rows */
        else if (k == 1) slice2(buf, vb, 1, (long)g_tpr * HID / g_tp, HID / g_tp, 0, 1);         /* rows */
        else if (k == 2) slice2(buf, vb, HID, 0, OUT, (long)g_tpr * HID / g_tp, HID / g_tp);     /* columns */
        else slice2(buf, vb, 1, 0, OUT, 0, 1);                                                    /* replicated */
        snprintf(nm, sizeof nm, "%s: %s %s equals the %s of the unsplit one", when, names[k], grads ? "gradient" : "value",
                 k == 3 ? "whole" : "slice");
        cmp(nm, va, buf, (long)pt_numel(&pa->value));
    }
}

/* values identical (bitwise) on every rank of the world */
static void same_everywhere(const char *name, const float *v, int n) { CHECK_WHY(same_on_all_ranks(v, n), name, "values differ between TP ranks"); }

static void test_mlp(void) {
    pt_ctx *a = mk_ctx(g_d), *b = mk_ctx(NULL);
    pt_mlp ma, mb;
    pt_optim_desc od;
    pt_optim *oa, *ob;
    pt_graph *ga, *gb;
    float x[NB * IN], r[NB * OUT], fb[HID], outa[NB * OUT], outb[NB * OUT];
    int64_t xs[2] = {NB, IN}, rs[2] = {NB, OUT};
    int i, s;
    char nm[160], why[160];
    if (!a || !b) {
        CHECK_WHY(0, "contexts", "pt_init failed");
        return;
    }
    ma = pt_mlp_tp_new(a, "mlp", IN, HID, OUT, 1, 0.3f);
    mb = pt_mlp_new(b, "mlp", IN, HID, OUT, 1, 0.3f);
    CHECK_WHY(ma.fc.w && ma.fc.b && ma.proj.w && ma.proj.b && pt_status_get(a) == PT_OK, "pt_mlp_tp_new creates its parameters", pt_error(a));
    if (!ma.fc.w || !ma.fc.b || !ma.proj.w || !ma.proj.b || !mb.fc.b || !mb.proj.b) return;
    snprintf(why, sizeof why, "fc.w [%lld,%lld] fc.b [%lld] proj.w [%lld,%lld] proj.b [%lld]", (long long)ma.fc.w->shape[0],
             (long long)ma.fc.w->shape[1], (long long)ma.fc.b->shape[0], (long long)ma.proj.w->shape[0], (long long)ma.proj.w->shape[1],
             (long long)ma.proj.b->shape[0]);
    CHECK_WHY(ma.fc.w->shape[0] == HID / g_tp && ma.fc.w->shape[1] == IN && ma.fc.b->shape[0] == HID / g_tp && ma.proj.w->shape[0] == OUT &&
                  ma.proj.w->shape[1] == HID / g_tp && ma.proj.b->shape[0] == OUT,
              "shard shapes: fc.w [32/tp,16], fc.b [32/tp], proj.w [8,32/tp], proj.b [8]", why);
    /* non-zero biases (their init is zeros), written as the full vector and its slice */
    for (i = 0; i < HID; i++) fb[i] = 0.1f * sinf(1.0f + (float)i);
    memcpy(pt_f32(mb.fc.b), fb, sizeof fb);
    memcpy(pt_f32(ma.fc.b), fb + (long)g_tpr * HID / g_tp, sizeof(float) * HID / g_tp);
    for (i = 0; i < OUT; i++) pt_f32(mb.proj.b)[i] = pt_f32(ma.proj.b)[i] = 0.05f * cosf((float)i);
    cmp_params(a, b, 0, "init");
    for (i = 0; i < NB * IN; i++) x[i] = sinf(0.37f * (float)i) + 0.1f;
    for (i = 0; i < NB * OUT; i++) r[i] = cosf(0.71f * (float)i) - 0.2f;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD;
    od.lr = 0.1f;
    oa = pt_optim_new(a, &od);
    ob = pt_optim_new(b, &od);
    ga = pt_graph_new(a);
    gb = pt_graph_new(b);
    for (s = 0; s < STEPS; s++) {
        pt_tensor *xa, *xb, *ya, *yb, *la, *lb;
        pt_graph_reset(ga);
        pt_graph_reset(gb);
        pt_zero_grad(a);
        pt_zero_grad(b);
        xa = pt_tensor_from(ga, PT_F32, 2, xs, x);
        xb = pt_tensor_from(gb, PT_F32, 2, xs, x);
        pt_requires_grad(xa);
        pt_requires_grad(xb);
        ya = pt_mlp_tp_fwd(ga, &ma, xa);
        yb = pt_mlp_fwd(gb, &mb, xb);
        la = pt_sum(ga, pt_mul(ga, ya, pt_tensor_from(ga, PT_F32, 2, rs, r)));
        lb = pt_sum(gb, pt_mul(gb, yb, pt_tensor_from(gb, PT_F32, 2, rs, r)));
        snprintf(nm, sizeof nm, "step %d: forward and backward run", s);
        if (!CHECK_WHY(la && lb && pt_backward(ga, la) == PT_OK && pt_backward(gb, lb) == PT_OK, nm,
                       pt_status_get(a) ? pt_error(a) : pt_error(b)))
            break;
        pt_tensor_read(ya, outa);
        pt_tensor_read(yb, outb);
        snprintf(nm, sizeof nm, "step %d: forward output [4,8] equals the unsplit MLP's", s);
        cmp(nm, outa, outb, NB * OUT);
        snprintf(nm, sizeof nm, "step %d: forward output identical on every TP rank", s);
        same_everywhere(nm, outa, NB * OUT);
        snprintf(nm, sizeof nm, "step %d: loss equals the unsplit loss", s);
        {
            float l1 = pt_item(la), l2 = pt_item(lb);
            snprintf(why, sizeof why, "%.9g vs %.9g", l1, l2);
            CHECK_WHY(fabs(l1 - l2) <= TOL * (fabs(l2) > 1 ? fabs(l2) : 1), nm, why);
        }
        snprintf(nm, sizeof nm, "step %d", s);
        cmp_params(a, b, 1, nm);
        snprintf(nm, sizeof nm, "step %d: x's gradient equals the unsplit one", s);
        if (xa->grad && xb->grad) cmp(nm, pt_f32(xa->grad), pt_f32(xb->grad), NB * IN);
        else CHECK_WHY(0, nm, "no gradient for x");
        { /* clipping needs the model's norm: shards summed over TP, the replicated bias once */
            float na = pt_grad_norm(a), nb = pt_grad_norm(b);
            snprintf(nm, sizeof nm, "step %d: pt_grad_norm over the TP shards equals the unsplit model's", s);
            snprintf(why, sizeof why, "%.9g vs %.9g", na, nb);
            CHECK_WHY(fabs(na - nb) <= TOL * (nb > 1 ? nb : 1), nm, why);
        }
        if (s == 0 && g_tp > 1) { /* the test can fail: the shards without the reduction are not the answer */
            pt_graph *gc = pt_graph_new(a);
            pt_tensor *xc = pt_tensor_from(gc, PT_F32, 2, xs, x);
            pt_tensor *h = pt_gelu(gc, pt_linear(gc, xc, ma.fc.w, ma.fc.b));
            pt_tensor *yc = pt_bias_add(gc, pt_linear(gc, h, ma.proj.w, NULL), ma.proj.b);
            float outc[NB * OUT];
            pt_tensor_read(yc, outc);
            CHECK_WHY(rel(outc, outb, NB * OUT) > 1e-3, "control: the shards' partial output without pt_tp_reduce differs from the unsplit one",
                      "it does not: the comparison cannot detect a missing reduction");
            pt_graph_free(gc);
        }
        pt_optim_step(oa, 0.1f);
        pt_optim_step(ob, 0.1f);
        snprintf(nm, sizeof nm, "after SGD step %d", s + 1);
        cmp_params(a, b, 0, nm);
    }
    pt_graph_free(ga);
    pt_graph_free(gb);
    pt_optim_free(oa);
    pt_optim_free(ob);
    pt_shutdown(a);
    pt_shutdown(b);
}

/* f and g directly: rank-dependent inputs, sums known in closed form */
static void test_ops(void) {
    pt_ctx *c = mk_ctx(g_d);
    pt_graph *g = pt_graph_new(c);
    int64_t sh[2] = {3, 5};
    float x[15], r[15], got[15], want[15];
    int i, q;
    pt_tensor *xt, *y, *loss;
    for (i = 0; i < 15; i++) x[i] = (float)(g_tpr + 1) * (0.5f + (float)i), r[i] = (float)(g_tpr + 1) * 0.25f - 0.01f * (float)i;
    xt = pt_tensor_from(g, PT_F32, 2, sh, x);
    pt_requires_grad(xt);
    y = pt_tp_reduce(g, xt);
    pt_tensor_read(y, got);
    for (i = 0; i < 15; i++)
        for (want[i] = 0, q = 0; q < g_tp; q++) want[i] += (float)(q + 1) * (0.5f + (float)i);
    cmp("pt_tp_reduce forward: sum over the TP ranks", got, want, 15);
    /* loss = sum(copy(x) * r_rank): d/dx = sum over ranks of r_rank (f's backward); g's backward adds
       sum(y * r) -> r_rank, so x's gradient = sum_q r_q + r_rank */
    loss = pt_add(g, pt_sum(g, pt_mul(g, pt_tp_copy(g, xt), pt_tensor_from(g, PT_F32, 2, sh, r))),
                  pt_sum(g, pt_mul(g, y, pt_tensor_from(g, PT_F32, 2, sh, r))));
    CHECK_WHY(loss && pt_backward(g, loss) == PT_OK, "pt_tp_copy/pt_tp_reduce backward runs", pt_error(c));
    for (i = 0; i < 15; i++) {
        for (want[i] = r[i], q = 0; q < g_tp; q++) want[i] += (float)(q + 1) * 0.25f - 0.01f * (float)i;
    }
    if (xt->grad) cmp("pt_tp_copy backward sums the gradient over TP; pt_tp_reduce backward is the identity", pt_f32(xt->grad), want, 15);
    else CHECK_WHY(0, "pt_tp_copy backward", "no gradient");
    pt_graph_free(g);
    pt_shutdown(c);
}

/* finite differences at tp = 1 (a context without a grid): loss = sum(copy(x) * reduce(x) * r) */
static float fd_loss(pt_graph *g, const float *x, const float *r, pt_tensor **xt_out) {
    int64_t sh[2] = {3, 4};
    pt_tensor *xt = pt_tensor_from(g, PT_F32, 2, sh, x), *l;
    pt_requires_grad(xt);
    l = pt_sum(g, pt_mul(g, pt_mul(g, pt_tp_copy(g, xt), pt_tp_reduce(g, xt)), pt_tensor_from(g, PT_F32, 2, sh, r)));
    if (xt_out) *xt_out = xt;
    return l ? pt_item(l) : NAN;
}
static void test_fd(void) {
    pt_ctx *c = mk_ctx(NULL);
    pt_graph *g = pt_graph_new(c);
    float x[12], r[12], an[12], worst = 0;
    int64_t sh[2] = {3, 4};
    int i;
    pt_tensor *xt, *y;
    char why[128];
    for (i = 0; i < 12; i++) x[i] = 0.3f * sinf((float)i) + 0.2f, r[i] = cosf(0.5f * (float)i);
    CHECK_WHY(pt_tp_size(c) == 1 && pt_tp_rank(c) == 0, "pt_tp_size/pt_tp_rank without a grid: 1 and 0", "wrong");
    xt = pt_tensor_from(g, PT_F32, 2, sh, x);
    pt_requires_grad(xt);
    y = pt_tp_copy(g, xt);
    CHECK_WHY(y && y->node && pt_f32(y) && memcmp(pt_f32(y), x, sizeof x) == 0, "tp=1: pt_tp_copy is a recorded identity", "not");
    y = pt_tp_reduce(g, xt);
    CHECK_WHY(y && y->node && pt_f32(y) && memcmp(pt_f32(y), x, sizeof x) == 0, "tp=1: pt_tp_reduce is a recorded identity", "not");
    {
        pt_tensor *loss;
        pt_graph_reset(g);
        xt = pt_tensor_from(g, PT_F32, 2, sh, x);
        pt_requires_grad(xt);
        loss = pt_sum(g, pt_mul(g, pt_mul(g, pt_tp_copy(g, xt), pt_tp_reduce(g, xt)), pt_tensor_from(g, PT_F32, 2, sh, r)));
        if (!loss || pt_backward(g, loss) != PT_OK || !xt->grad) {
            CHECK_WHY(0, "finite differences of pt_tp_copy/pt_tp_reduce (tp=1)", pt_error(c));
            pt_shutdown(c);
            return;
        }
        memcpy(an, pt_f32(xt->grad), sizeof an);
    }
    for (i = 0; i < 12; i++) {
        float xp[12], h = 1e-2f, fp, fm, num, e;
        memcpy(xp, x, sizeof xp);
        xp[i] = x[i] + h;
        pt_graph_reset(g);
        fp = fd_loss(g, xp, r, NULL);
        xp[i] = x[i] - h;
        pt_graph_reset(g);
        fm = fd_loss(g, xp, r, NULL);
        num = (fp - fm) / (2 * h);
        e = fabsf(num - an[i]) / (fabsf(an[i]) > 1 ? fabsf(an[i]) : 1);
        if (!(e <= worst)) worst = e;
    }
    snprintf(why, sizeof why, "worst relative error %.3g > 1e-3", worst);
    CHECK_WHY(worst <= 1e-3f, "finite differences of pt_tp_copy/pt_tp_reduce (tp=1): analytic gradient 2*x*r matches", why);
    pt_graph_free(g);
    pt_shutdown(c);
}

/* uneven splits refused with a message naming the dimension; nothing created */
static void test_refusal(void) {
    pt_ctx *c = mk_ctx(g_d);
    char want[128];
    pt_linear_layer l;
    pt_mlp m;
    int n0;
    if (g_tp == 1) { /* everything splits over one part: a zero size is still refused */
        l = pt_linear_col_new(c, "bad", 16, 0, 1, 0.02f);
        CHECK_WHY(!l.w && pt_status_get(c) == PT_ERR_SHAPE && strstr(pt_error(c), "pt_linear_col_new: out=0 does not split evenly over tp=1"),
                  "tp=1: pt_linear_col_new refuses out=0 with a message", pt_error(c));
        pt_shutdown(c);
        return;
    }
    n0 = pt_param_count(c);
    l = pt_linear_col_new(c, "bad.col", 16, 2 * g_tp + 2 - (g_tp == 2 ? 1 : 0), 1, 0.02f);
    snprintf(want, sizeof want, "pt_linear_col_new: out=%d does not split evenly over tp=%d", 2 * g_tp + 2 - (g_tp == 2 ? 1 : 0), g_tp);
    CHECK_WHY(!l.w && !l.b && pt_status_get(c) == PT_ERR_SHAPE && strstr(pt_error(c), want) && pt_param_count(c) == n0,
              "pt_linear_col_new refuses an uneven out, names it, creates nothing", pt_error(c));
    pt_error_clear(c);
    l = pt_linear_row_new(c, "bad.row", 2 * g_tp + 1, 16, 1, 0.02f);
    snprintf(want, sizeof want, "pt_linear_row_new: in=%d does not split evenly over tp=%d", 2 * g_tp + 1, g_tp);
    CHECK_WHY(!l.w && !l.b && strstr(pt_error(c), want) && pt_param_count(c) == n0, "pt_linear_row_new refuses an uneven in, names it",
              pt_error(c));
    pt_error_clear(c);
    m = pt_mlp_tp_new(c, "bad.mlp", 16, 2 * g_tp + 1, 8, 1, 0.02f);
    snprintf(want, sizeof want, "pt_mlp_tp_new: hidden=%d does not split evenly over tp=%d", 2 * g_tp + 1, g_tp);
    CHECK_WHY(!m.fc.w && !m.proj.w && strstr(pt_error(c), want) && pt_param_count(c) == n0, "pt_mlp_tp_new refuses an uneven hidden, names it",
              pt_error(c));
    pt_error_clear(c);
    l = pt_linear_row_new(c, "ok.row", 4 * g_tp, 10, 1, 0.02f); /* out need not split for a row-parallel layer */
    CHECK_WHY(l.w && l.b && l.b->shape[0] == 10 && l.w->shape[1] == 4, "pt_linear_row_new accepts any out (its bias is replicated)", pt_error(c));
    pt_shutdown(c);
}

static void run(void) {
    pt_ctx *c = mk_ctx(g_d);
    CHECK_WHY(c && pt_tp_size(c) == g_tp && g_tp == pt_dist_size(g_d) && pt_tp_rank(c) == g_tpr && g_tpr == g_rank,
              "pt_tp_size/pt_tp_rank follow the grid (tp = world size)", "mismatch");
    pt_shutdown(c);
    test_mlp();
    test_ops();
    test_fd();
    test_refusal();
}

int main(int argc, char **argv) { return tp_main(&argc, &argv, run); }

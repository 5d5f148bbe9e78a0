/* test_equiv.c - the correctness bar of parallel training: a small GPT trained on a layout
   (dp x tp x pp, pipeline schedule, micro-batches, accumulation, ZeRO) gives the per-step losses,
   gradient norms and final parameters of the same GPT trained by one process on the whole batch.
   Every rank trains that single-process reference itself (a context without a grid), then compares
   its own parameters (its shards, its stages) with the matching slices of the reference.
   Usage: mpirun -np N test_equiv [--dp D] [--tp T] [--pp P] [--schedule gpipe|1f1b|interleaved]
          [--v V] [--m M] [--accum K] [--zero Z] [--dropout P] [--balanced] [--steps S] [--tol X]
          [--device cpu|opencl] [--recompute none|selective|full|mixed]
   --device opencl runs the parallel training with every rank on OpenCL (the reference stays on the
   CPU, so the comparison is also one between the backends). --recompute trains the parallel runs
   with activation recomputation (mixed: stage s takes mode s % 3) and checks them bit-identical to
   the same layout without it (losses, norms, parameters, DP reductions started during backward). Prints PASS/FAIL lines and "N passed, N failed" (rank 0). */
#define _POSIX_C_SOURCE 200112L /* setenv */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "param_check.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSTEPS 13 /* 12 steps and the evaluation */
enum { GB = 8, TT = 16, VOCAB = 100 };

typedef struct {
    pt_layout lay;
    int kind, v, m, accum, zero, steps, balanced, hier, compress;
    int recompute; /* pt_recompute of every stage; 3: stage s takes s % 3 */
    const char *device; /* the parallel run's backend (pt_desc.device) */
    float dropout, tol, tol_norm, tol_param; /* losses; gradient norms; SGD parameters (AdamW: 10x) */
} opts;

typedef struct {
    pt_gpt *model;
    const int32_t *ids, *tgt; /* this step's global batch [GB, TT] */
    int row0, rows;           /* this round's rows of the global batch: [row0, row0 + rows) */
    int m;
    int fail_stage; /* > 0: that stage's function fails (error-path test) */
} stage_user;

static int world_rank;
static pt_dist *grid;
static int64_t dp_started; /* the last parallel run's bucket reductions started during backward */
static int64_t z3_held, z3_slab, z3_gathers; /* ZeRO-3: the last parallel run's parameter bytes held between steps, parameter bytes, gathers */

static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    stage_user *u = (stage_user *)user;
    int rows = u->rows / u->m, r0 = u->row0 + mb * rows;
    int64_t shp[2];
    pt_tensor *ids = NULL, *tgt = NULL;
    shp[0] = rows, shp[1] = TT;
    if (u->fail_stage > 0 && stage == u->fail_stage) return NULL;
    pt_graph_set_sample_offset(g, r0);
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, u->ids + (size_t)r0 * TT);
    if (stage == u->model->nstages - 1) tgt = pt_tensor_from(g, PT_I32, 2, shp, u->tgt + (size_t)r0 * TT);
    return pt_gpt_stage_fwd(g, u->model, stage, x, ids, tgt);
}

static pt_gpt_config config(const opts *o) {
    pt_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab = VOCAB, c.max_seq = TT, c.layers = 4, c.width = 32, c.heads = 4, c.dropout = o->dropout;
    return c;
}
/* AdamW eps 1e-5 rather than 1e-8: some gradients are exactly 0 in exact arithmetic (the attention
   key bias: adding a constant to every score of a query leaves its softmax unchanged), so what they
   hold is rounding noise, ~1e-10, whose value depends on the summation order of the layout. Adam
   divides by sqrt(v) + eps, turning such noise into steps of ~lr when eps is tiny: 1e-8 gives
   differences of 1e-3 between layouts, 1e-6 about 2e-5 under TP, 1e-5 well under 1e-5. It is the
   optimizer amplifying rounding, not a difference in the computed gradients (the losses and norms
   agree to ~1e-7 with any eps). */
static int use_sgd; /* 1: SGD with momentum, whose update is linear in the gradient */
static pt_optim_desc optim_desc(void) {
    pt_optim_desc od;
    memset(&od, 0, sizeof od);
    if (use_sgd) od.kind = PT_OPTIM_SGD, od.lr = 0.05f, od.momentum = 0.9f, od.weight_decay = 0.1f, od.clip_norm = 0.5f;
    else od.kind = PT_OPTIM_ADAMW, od.lr = 3e-3f, od.eps = 1e-5f, od.weight_decay = 0.1f, od.clip_norm = 0.5f;
    return od;
}

static void batch(int step, int32_t *ids, int32_t *tgt) {
    pt_rng r = pt_rng_seed(1000 + (uint64_t)step);
    int i;
    int b, t;
    for (b = 0; b < GB; b++) { /* learnable: arithmetic sequences modulo the vocabulary */
        int a = (int)(pt_rng_u32(&r) % VOCAB), d = 1 + (int)(pt_rng_u32(&r) % 5);
        for (t = 0; t < TT; t++) ids[b * TT + t] = (a + d * t) % VOCAB, tgt[b * TT + t] = (a + d * (t + 1)) % VOCAB;
    }
    (void)i;
}

/* the single-process reference: whole batch, one backward per step */
static pt_ctx *reference(const opts *o, float *loss, float *gnorm) {
    pt_desc desc;
    pt_gpt_config c = config(o);
    pt_optim_desc od = optim_desc();
    pt_ctx *ctx;
    pt_gpt *m;
    pt_graph *g;
    pt_optim *opt;
    int s;
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.threads = 1;
    ctx = pt_init(&desc);
    m = pt_gpt_new(ctx, &c);
    opt = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    for (s = 0; s < o->steps; s++) {
        int32_t ids[GB * TT], tgt[GB * TT];
        int64_t shp[2] = {GB, TT};
        pt_tensor *x, *y, *l;
        batch(s, ids, tgt);
        pt_graph_reset(g);
        x = pt_tensor_from(g, PT_I32, 2, shp, ids);
        y = pt_tensor_from(g, PT_I32, 2, shp, tgt);
        l = pt_gpt_loss(g, m, x, y);
        loss[s] = pt_item(l);
        pt_zero_grad(ctx);
        pt_backward(g, l);
        gnorm[s] = pt_optim_step(opt, od.lr);
    }
    { /* evaluation on a further batch */
        int32_t ids[GB * TT], tgt[GB * TT];
        int64_t shp[2] = {GB, TT};
        batch(99, ids, tgt);
        pt_graph_reset(g);
        pt_graph_set_grad(g, 0);
        pt_graph_set_training(g, 0);
        loss[o->steps] = pt_item(pt_gpt_loss(g, m, pt_tensor_from(g, PT_I32, 2, shp, ids), pt_tensor_from(g, PT_I32, 2, shp, tgt)));
    }
    pt_gpt_free(m);
    return ctx;
}

/* the run on the grid; returns its context (parameters compared by the caller) */
static pt_ctx *parallel(const opts *o, float *loss, float *gnorm, pt_pp_stats *st, char *err, size_t errlen, int fail_stage) {
    pt_desc desc;
    pt_gpt_config c = config(o);
    pt_optim_desc od = optim_desc();
    pt_ctx *ctx;
    pt_gpt *m = NULL;
    pt_optim *opt = NULL;
    pt_pp *pp = NULL;
    pt_dp *dp = NULL;
    pt_pp_desc pd;
    stage_user u;
    pt_layout lay = pt_dist_layout(grid);
    pt_coords me = pt_dist_coords(grid);
    int nst = lay.pp * o->v, i, s, mine[64], nmine = 0;
    int32_t first[65];
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.threads = 1, desc.dist = grid, desc.device = o->device;
    ctx = pt_init(&desc);
    if (pt_status_get(ctx) != PT_OK) {
        snprintf(err, errlen, "%s", pt_error(ctx));
        return ctx;
    }
    if (o->balanced) {
        double cost[64], fe, le;
        pt_gpt_stage_costs(&c, GB, TT, cost, &fe, &le);
        if (pt_pp_split(c.layers, nst, cost, fe, le, first, err, errlen) != PT_OK) return ctx;
    } else if (pt_pp_split(c.layers, nst, NULL, 0, 0, first, err, errlen) != PT_OK) {
        return ctx;
    }
    for (i = 0; i < o->v; i++) mine[nmine++] = i * lay.pp + me.pp;
    m = pt_gpt_new_stages(ctx, &c, nst, first, nmine, mine);
    for (i = 0; m && i < nst; i++) pt_gpt_set_recompute(m, i, (pt_recompute)(o->recompute == 3 ? i % 3 : o->recompute));
    opt = pt_optim_new(ctx, &od);
    if (lay.dp > 1) {
        pt_dp_options dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.bucket_bytes = 2048; /* small buckets: several per stage */
        dopt.hier = o->hier, dopt.compress = o->compress;
        dp = pt_dp_new_opts(ctx, grid, &dopt);
        if (dp && o->zero) pt_dp_zero(dp, opt, o->zero);
    }
    memset(&pd, 0, sizeof pd);
    pd.kind = o->kind, pd.micro_batches = o->m, pd.virtual_stages = o->v, pd.forward = stage_fn, pd.user = &u;
    if (m && opt) pp = pt_pp_new(ctx, &pd);
    if (pp) pt_pp_set_dp(pp, dp);
    if (!pp) {
        snprintf(err, errlen, "%s", pt_error(ctx));
        goto out;
    }
    u.model = m, u.m = o->m, u.fail_stage = fail_stage;
    for (s = 0; s < o->steps; s++) {
        int32_t ids[GB * TT], tgt[GB * TT];
        int k, per = GB / lay.dp;
        float sum = 0;
        batch(s, ids, tgt);
        u.ids = ids, u.tgt = tgt;
        pt_zero_grad(ctx);
        for (k = 0; k < o->accum; k++) {
            u.rows = per / o->accum;
            u.row0 = me.dp * per + k * u.rows;
            sum += pt_pp_step(pp, k, o->accum);
        }
        loss[s] = sum / (float)o->accum;
        if (fail_stage) break;
        gnorm[s] = pt_optim_step(opt, od.lr);
    }
    *st = pt_pp_stats_get(pp);
    dp_started = dp ? pt_dp_stats_get(dp).started_before_end : 0;
    if (dp && o->zero == 2 && me.tp == 0 && me.dp == 0)
        printf("  ZeRO-2, pipeline rank %d: %lld bucket buffers for %lld buckets, pt_mem grads %lld bytes of a %lld-byte slab\n", me.pp,
               (long long)pt_dp_stats_get(dp).grad_buffers, (long long)pt_dp_stats_get(dp).buckets, (long long)pt_mem(ctx).grads,
               4 * (long long)pt_param_slab(ctx).shape[0]);
    if (dp && o->zero == 3) /* between uses (after the update) this rank holds its range of the parameters, not the slab */
        z3_held = pt_mem(ctx).params, z3_slab = 4 * pt_param_numel(ctx), z3_gathers = pt_dp_stats_get(dp).gathers;
    { /* evaluation: the forward-only schedule on a further batch */
        int32_t ids[GB * TT], tgt[GB * TT];
        batch(99, ids, tgt);
        u.ids = ids, u.tgt = tgt, u.rows = GB / lay.dp, u.row0 = me.dp * u.rows;
        loss[o->steps] = pt_pp_eval(pp);
    }
    if (pt_status_get(ctx) != PT_OK) snprintf(err, errlen, "%s", pt_error(ctx));
out:
    pt_pp_free(pp);
    if (dp && o->zero) pt_dp_zero(dp, opt, 0); /* full state again before the reducer goes */
    pt_dp_free(dp);
    pt_gpt_free(m);
    return ctx;
}

static int parse(int argc, char **argv, opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->lay.dp = 0, o->lay.tp = 1, o->lay.pp = 1; /* dp: the rest of the world */
    o->kind = PT_PP_1F1B, o->v = 1, o->m = 0, o->accum = 1, o->steps = 5, o->tol = 1e-5f, o->device = "cpu";
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--dp")) o->lay.dp = atoi(v), i++;
        else if (!strcmp(a, "--tp")) o->lay.tp = atoi(v), i++;
        else if (!strcmp(a, "--pp")) o->lay.pp = atoi(v), i++;
        else if (!strcmp(a, "--v")) o->v = atoi(v), i++;
        else if (!strcmp(a, "--m")) o->m = atoi(v), i++;
        else if (!strcmp(a, "--accum")) o->accum = atoi(v), i++;
        else if (!strcmp(a, "--zero")) o->zero = atoi(v), i++;
        else if (!strcmp(a, "--steps")) o->steps = atoi(v), i++;
        else if (!strcmp(a, "--dropout")) o->dropout = (float)atof(v), i++;
        else if (!strcmp(a, "--tol")) o->tol = (float)atof(v), i++;
        else if (!strcmp(a, "--device")) o->device = v, i++;
        else if (!strcmp(a, "--recompute")) o->recompute = !strcmp(v, "selective") ? 1 : !strcmp(v, "full") ? 2 : !strcmp(v, "mixed") ? 3 : 0, i++;
        else if (!strcmp(a, "--balanced")) o->balanced = 1;
        else if (!strcmp(a, "--hier")) o->hier = 1;
        else if (!strcmp(a, "--compress")) o->compress = 1;
        else if (!strcmp(a, "--fake-node-size")) setenv("PTRAIN_FAKE_NODE_SIZE", v, 1), i++;
        else if (!strcmp(a, "--coll-check")) setenv("PTRAIN_COLL_CHECK", "1", 1); /* debug mode: every collective agreed */
        else if (!strcmp(a, "--schedule")) {
            o->kind = !strcmp(v, "gpipe") ? PT_PP_GPIPE : !strcmp(v, "interleaved") ? PT_PP_INTERLEAVED : PT_PP_1F1B;
            i++;
        } else {
            fprintf(stderr, "test_equiv: unknown flag %s\n", a);
            return 0;
        }
    }
    if (o->kind != PT_PP_INTERLEAVED) o->v = 1;
    /* bf16 gradients on the wire (error feedback): a looser, stated bound */
    o->tol_norm = o->compress ? 1e-2f : o->tol, o->tol_param = o->compress ? 1e-2f : o->tol;
    if (o->compress) o->tol = 1e-3f;
    if (o->steps > MAXSTEPS - 1) o->steps = MAXSTEPS - 1;
    return 1;
}

int main(int argc, char **argv) {
    opts o;
    char err[1024], name[256], worst[256];
    float rl[MAXSTEPS], rg[MAXSTEPS], l1[MAXSTEPS], g1[MAXSTEPS], l2[MAXSTEPS], g2[MAXSTEPS];
    double dl = 0, dg = 0, dpar;
    pt_ctx *ref, *a, *b;
    pt_pp_stats st;
    pt_layout lay;
    int s, same = 1;
    if (!parse(argc, argv, &o)) return 2;
    grid = pt_dist_init(&argc, &argv, &o.lay, err, sizeof err);
    if (!grid) {
        fprintf(stderr, "test_equiv: %s\n", err);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    world_rank = pt_dist_rank(grid);
    tu_mpi_init(NULL);
    lay = pt_dist_layout(grid);
    if (o.m == 0) o.m = lay.pp;
    if ((GB / lay.dp) % (o.accum * o.m) != 0) {
        if (world_rank == 0) printf("FAIL configuration: the batch per DP rank (%d) must split into accum x micro-batches (%d x %d)\n0 passed, 1 failed\n", GB / lay.dp, o.accum, o.m);
        pt_dist_finalize(grid);
        return 1;
    }
    snprintf(name, sizeof name, "dp%d tp%d pp%d %s v%d m%d accum%d zero%d%s%s%s%s%s%s%.16s", lay.dp, lay.tp, lay.pp,
             o.kind == PT_PP_GPIPE ? "gpipe" : o.kind == PT_PP_INTERLEAVED ? "interleaved" : "1f1b", o.v, o.m, o.accum, o.zero,
             o.dropout > 0 ? " dropout" : "", o.balanced ? " balanced" : "", o.hier ? " hier" : "", o.compress ? " bf16" : "",
             o.recompute ? (o.recompute == 1 ? " recompute selective" : o.recompute == 2 ? " recompute full" : " recompute mixed") : "",
             strcmp(o.device, "cpu") ? " on " : "", strcmp(o.device, "cpu") ? o.device : "");
    if (world_rank == 0) printf("layout: %s\n", name);
    ref = reference(&o, rl, rg);
    err[0] = 0;
    a = parallel(&o, l1, g1, &st, err, sizeof err, 0);
    CHECK_WHY(pt_status_get(a) == PT_OK && !err[0], "parallel run completes", err);
    if (tu_nfail) goto done;
    if (o.zero == 3 && lay.dp > 1) {
        if (world_rank == 0)
            printf("  ZeRO-3: rank 0 holds %lld parameter bytes between steps of %lld (dp %d), %lld bucket gathers\n", (long long)z3_held,
                   (long long)z3_slab, lay.dp, (long long)z3_gathers);
        snprintf(err, sizeof err, "pt_mem params %lld bytes, parameters %lld bytes over dp %d, %lld gathers", (long long)z3_held, (long long)z3_slab,
                 lay.dp, (long long)z3_gathers);
        CHECK_WHY(z3_held * lay.dp < 5 * z3_slab / 4 && z3_gathers > 0, "ZeRO-3: between steps a rank holds about 1/dp of the parameters", err);
    }
    for (s = 0; s < o.steps; s++) {
        double e = fabs((double)l1[s] - rl[s]) / fabs((double)rl[s]), f = fabs((double)g1[s] - rg[s]) / fabs((double)rg[s]);
        if (!(e <= dl)) dl = e; /* NaN sticks */
        if (!(f <= dg)) dg = f;
    }
    if (world_rank == 0) {
        printf("  step 0 loss %.7f (reference %.7f), step %d loss %.7f (reference %.7f)\n", l1[0], rl[0], o.steps - 1, l1[o.steps - 1],
               rl[o.steps - 1]);
        printf("  max rel loss diff %.3g, max rel grad-norm diff %.3g, bubble %.3f, graphs %d\n", dl, dg, st.bubble, st.graphs);
    }
    snprintf(err, sizeof err, "max relative loss difference %.3g > %.3g", dl, (double)o.tol);
    CHECK_WHY(dl <= o.tol, "per-step losses equal the single process", err);
    snprintf(err, sizeof err, "max relative grad-norm difference %.3g > %.3g", dg, (double)o.tol_norm);
    CHECK_WHY(dg <= o.tol_norm, "per-step global gradient norms equal the single process", err);
    {
        double e = fabs((double)l1[o.steps] - rl[o.steps]) / fabs((double)rl[o.steps]);
        if (world_rank == 0) printf("  eval loss %.7f (reference %.7f)\n", l1[o.steps], rl[o.steps]);
        snprintf(err, sizeof err, "relative difference %.3g > %.3g", e, (double)o.tol);
        CHECK_WHY(e <= o.tol, "forward-only evaluation equals the single process", err);
    }
    dpar = param_diff(grid, a, ref, worst, sizeof worst);
#ifdef PTRAIN_MPI
    MPI_Allreduce(MPI_IN_PLACE, &dpar, 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(grid, PT_COMM_WORLD));
#endif
    if (world_rank == 0) printf("  AdamW: max per-tensor rel param diff %.3g (%s)\n", dpar, worst);
    /* Adam normalizes each element's step, so near-zero gradients (sums over tokens that cancel)
       turn rounding differences into visible parameter differences: 1e-4 here; the 1e-5 bar on
       parameters is checked below with SGD, whose update is linear in the gradient */
    snprintf(err, sizeof err, "per-tensor relative parameter difference %.3g > %.3g (%s)", dpar, 10.0 * o.tol_param, worst);
    snprintf(name, sizeof name, "AdamW: final parameters equal the single process (%.0e)", 10.0 * o.tol_param);
    CHECK_WHY(dpar <= 10.0 * o.tol_param, name, err);
    {
        float sl[MAXSTEPS], sg[MAXSTEPS], pl[MAXSTEPS], pg[MAXSTEPS];
        pt_ctx *sref, *spar;
        double e = 0;
        use_sgd = 1;
        sref = reference(&o, sl, sg);
        spar = parallel(&o, pl, pg, &st, err, sizeof err, 0);
        for (s = 0; s < o.steps; s++) {
            double f = fabs((double)pl[s] - sl[s]) / fabs((double)sl[s]);
            if (!(f <= e)) e = f;
        }
        dpar = param_diff(grid, spar, sref, worst, sizeof worst);
#ifdef PTRAIN_MPI
        MPI_Allreduce(MPI_IN_PLACE, &dpar, 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(grid, PT_COMM_WORLD));
#endif
        if (world_rank == 0) printf("  SGD: max rel loss diff %.3g, max per-tensor rel param diff %.3g (%s)\n", e, dpar, worst);
        snprintf(err, sizeof err, "loss %.3g, per-tensor parameter %.3g > %.3g (%s)", e, dpar, (double)o.tol_param, worst);
        snprintf(name, sizeof name, "SGD: per-step losses (%.0e) and final parameters (%.0e) equal the single process", (double)o.tol,
                 (double)o.tol_param);
        CHECK_WHY(e <= o.tol && dpar <= o.tol_param, name, err);
        use_sgd = 0;
        pt_shutdown(spar);
        pt_shutdown(sref);
    }
    b = parallel(&o, l2, g2, &st, err, sizeof err, 0);
    for (s = 0; s < o.steps; s++) same &= memcmp(&l1[s], &l2[s], sizeof(float)) == 0 && memcmp(&g1[s], &g2[s], sizeof(float)) == 0;
    CHECK_WHY(same, "the same layout twice is bit-identical", "losses or norms differ between two runs");
    pt_shutdown(b);
    if (o.recompute) { /* the same layout without recomputation: bit for bit */
        opts on = o;
        int64_t started = dp_started;
        pt_tensor pa = pt_param_slab(a), pb;
        float *va = (float *)malloc((size_t)pt_numel(&pa) * 4), *vb = (float *)malloc((size_t)pt_numel(&pa) * 4);
        int eq;
        on.recompute = 0;
        b = parallel(&on, l2, g2, &st, err, sizeof err, 0);
        pb = pt_param_slab(b);
        eq = va && vb && pt_numel(&pa) == pt_numel(&pb) && pt_tensor_read(&pa, va) == PT_OK && pt_tensor_read(&pb, vb) == PT_OK &&
             memcmp(va, vb, (size_t)pt_numel(&pa) * 4) == 0;
        for (s = 0; s <= o.steps; s++) eq &= memcmp(&l1[s], &l2[s], sizeof(float)) == 0 && (s == o.steps || memcmp(&g1[s], &g2[s], sizeof(float)) == 0);
#ifdef PTRAIN_MPI
        MPI_Allreduce(MPI_IN_PLACE, &eq, 1, MPI_INT, MPI_MIN, *(MPI_Comm *)pt_dist_comm(grid, PT_COMM_WORLD));
#endif
        if (world_rank == 0) printf("  DP reductions started during backward: %lld (without recomputation %lld)\n", (long long)started, (long long)dp_started);
        CHECK_WHY(eq, "recompute: losses, norms, eval loss and parameters bit-identical to no recomputation",
                  "a loss, norm or parameter differs from the run without recomputation");
        snprintf(err, sizeof err, "DP reductions started during backward: %lld with recomputation, %lld without", (long long)started,
                 (long long)dp_started);
        CHECK_WHY(started == dp_started && (lay.dp == 1 || started > 0), "recompute: the DP overlap starts the same reductions during backward", err);
        free(va);
        free(vb);
        pt_shutdown(b);
    }
    if (lay.pp > 1) { /* a stage that fails: every rank returns NaN and the failing rank's message */
        err[0] = 0;
        b = parallel(&o, l2, g2, &st, err, sizeof err, 1);
        snprintf(name, sizeof name, "stage 1's function failing: NaN and one message on every rank (got %g, '%s')", l2[0], err);
        CHECK_WHY(l2[0] != l2[0] && strstr(err, "micro-batch 0, stage 1") != NULL, "a failing stage is reported on every rank, no hang", name);
        pt_shutdown(b);
    }
done:
    pt_shutdown(a);
    pt_shutdown(ref);
    s = tu_summary();
    pt_dist_finalize(grid);
    return s;
}

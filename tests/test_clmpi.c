/* test_clmpi.c - data, tensor and pipeline parallelism with the ranks on a device backend (OpenCL),
   on a model without attention: a vocabulary-parallel embedding (tied with the head on the last
   pipeline stage), one tensor-parallel MLP block per stage (pt_mlp_tp, residual), a vocabulary-
   parallel cross-entropy. Every rank first trains the whole model in one context on the CPU (the
   single-process reference, whole batch), then the same model on the grid on --device, through
   pt_pp (any stage count, micro-batches), pt_dp (plain, ZeRO-1/2, bf16, hierarchical) and the TP
   ops, and compares per-step losses, gradient norms and final parameters. Then it counts the host
   <-> device transfers of one training step by kind (pt_transfer_stats) and checks them against the
   numbers computed here from the model and the batch (exact counts and bytes per kind).
   Usage: mpirun -np N test_clmpi [--dp D] [--tp T] [--pp P] [--m M] [--zero Z] [--compress] [--hier]
          [--fake-node-size K] [--device cpu|opencl] [--steps S] [--sgd]
   Prints PASS/FAIL lines and "N passed, N failed" (rank 0). */
#define _POSIX_C_SOURCE 200112L /* setenv */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "param_check.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GB = 8, TT = 4, VOCAB = 60, VP = 64, CW = 16, HID = 32, MAXST = 8, MAXSTEPS = 12 };

typedef struct {
    pt_layout lay;
    int m, zero, compress, hier, steps, sgd;
    const char *device;
} opts;

typedef struct {
    pt_tensor *wte;          /* [VP/tp, CW] (vocabulary rows split over TP), NULL where no stage uses it */
    pt_mlp mlp[MAXST];       /* per stage; fc.w NULL when not held here */
    int nst;
    const int32_t *ids, *tgt; /* the global batch [GB, TT] */
    int row0, rows, m;        /* this rank's rows; micro-batches */
} model;

static int world_rank;
static pt_dist *grid;

/* the model's parameters for the stages in mine[0..n) (creation order: the tied copy first on the last stage) */
static void build(pt_ctx *ctx, model *md, int nst, const int *mine, int n) {
    int tp = pt_tp_size(ctx), i, first = 0, last = 0;
    memset(md, 0, sizeof *md);
    md->nst = nst;
    for (i = 0; i < n; i++) first |= mine[i] == 0, last |= mine[i] == nst - 1;
    if (first || last) {
        pt_spec s;
        memset(&s, 0, sizeof s);
        snprintf(s.name, sizeof s.name, "wte");
        s.ndim = 2, s.global_shape[0] = VP, s.global_shape[1] = CW, s.global_shape[2] = s.global_shape[3] = 1;
        s.split_dim = tp > 1 ? 0 : -1, s.split_parts = tp, s.split_index = pt_tp_rank(ctx), s.stage = -1;
        s.init = PT_INIT_NORMAL, s.init_scale = 0.3f;
        md->wte = pt_param_from_spec(ctx, &s);
    }
    for (i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "mlp.%d", mine[i]);
        md->mlp[mine[i]] = pt_mlp_tp_new(ctx, nm, CW, HID, CW, 1, 0.2f);
    }
}

/* stage function: embedding on stage 0, an MLP block on every stage, tied head and loss on the last */
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    model *md = (model *)user;
    pt_ctx *ctx = pt_graph_ctx(g);
    int tp = pt_tp_size(ctx), rows = md->rows / md->m, r0 = md->row0 + mb * rows;
    int64_t shp[2], off = (int64_t)pt_tp_rank(ctx) * (VP / tp);
    pt_tensor *h = x;
    shp[0] = rows, shp[1] = TT;
    if (stage == 0) {
        pt_tensor *ids = pt_tensor_from(g, PT_I32, 2, shp, md->ids + (size_t)r0 * TT);
        h = tp > 1 ? pt_tp_reduce(g, pt_embedding_vp(g, md->wte, ids, off)) : pt_embedding(g, md->wte, ids);
    }
    h = pt_add(g, h, pt_mlp_tp_fwd(g, &md->mlp[stage], h));
    if (stage == md->nst - 1) {
        pt_tensor *tgt = pt_tensor_from(g, PT_I32, 2, shp, md->tgt + (size_t)r0 * TT);
        pt_tensor *logits = pt_linear(g, pt_tp_copy(g, h), md->wte, NULL);
        return tp > 1 ? pt_cross_entropy_vp(g, logits, tgt, off, VOCAB) : pt_cross_entropy_ex(g, logits, tgt, -1, VOCAB);
    }
    return h;
}

static pt_optim_desc optim_desc(const opts *o) {
    pt_optim_desc od;
    memset(&od, 0, sizeof od);
    if (o->sgd) od.kind = PT_OPTIM_SGD, od.lr = 0.1f, od.momentum = 0.9f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    else od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.eps = 1e-5f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    return od;
}

static void batch(int step, int32_t *ids, int32_t *tgt) {
    pt_rng r = pt_rng_seed(500 + (uint64_t)step);
    int b, t;
    for (b = 0; b < GB; b++) {
        int a = (int)(pt_rng_u32(&r) % VOCAB), d = 1 + (int)(pt_rng_u32(&r) % 7);
        for (t = 0; t < TT; t++) ids[b * TT + t] = (a + d * t) % VOCAB, tgt[b * TT + t] = (a + d * (t + 1)) % VOCAB;
    }
}

/* the single-process reference on the CPU: all stages in one graph, the whole batch */
static pt_ctx *reference(const opts *o, int nst, float *loss, float *gnorm) {
    pt_desc desc;
    pt_optim_desc od = optim_desc(o);
    pt_ctx *ctx;
    pt_graph *g;
    pt_optim *opt;
    model md;
    int s, k, all[MAXST];
    memset(&desc, 0, sizeof desc);
    desc.seed = 11, desc.threads = 1, desc.device = "cpu";
    ctx = pt_init(&desc);
    for (k = 0; k < nst; k++) all[k] = k;
    build(ctx, &md, nst, all, nst);
    opt = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    md.row0 = 0, md.rows = GB, md.m = 1;
    for (s = 0; s < o->steps; s++) {
        int32_t ids[GB * TT], tgt[GB * TT];
        pt_tensor *y = NULL;
        batch(s, ids, tgt);
        md.ids = ids, md.tgt = tgt;
        pt_graph_reset(g);
        for (k = 0; k < nst; k++) y = stage_fn(g, k, 0, y, &md);
        loss[s] = pt_item(y);
        pt_zero_grad(ctx);
        pt_backward(g, y);
        gnorm[s] = pt_optim_step(opt, od.lr);
    }
    return ctx;
}

/* expected transfers of one training step on this rank (see the file comment); [kind][0 = h2d, 1 = d2h] */
typedef struct {
    int64_t cnt[PT_XFER_KINDS][2], bytes[PT_XFER_KINDS][2];
} xfers;
static void add(xfers *x, int kind, int d2h, int64_t count, int64_t bytes) {
    x->cnt[kind][d2h] += count, x->bytes[kind][d2h] += count * bytes;
}
static void expected(const opts *o, pt_ctx *ctx, const model *md, int step, const pt_dp_stats *dps, xfers *x) {
    pt_layout lay = pt_dist_layout(grid);
    pt_coords me = pt_dist_coords(grid);
    int tp = lay.tp, pp = lay.pp, m = o->m, rows = md->rows / m, mb, i, held = 0, scal = 0, tied = 0;
    int64_t n = (int64_t)rows * TT, act = n * CW * 4;
    int32_t ids[GB * TT], tgt[GB * TT];
    int first = me.pp == 0, last = me.pp == pp - 1;
    memset(x, 0, sizeof *x);
    batch(step, ids, tgt);
    for (mb = 0; mb < m; mb++) {
        if (first) {
            add(x, PT_XFER_IO, 0, 1, n * 4);    /* the ids */
            add(x, PT_XFER_CHECK, 1, 1, n * 4); /* their range check */
            if (tp > 1) {
                add(x, PT_XFER_TP, 0, 1, n * 4);                              /* ids mapped to local rows */
                add(x, PT_XFER_TP, 1, 1, act), add(x, PT_XFER_TP, 0, 1, act); /* the embedding's reduction */
            }
        }
        if (tp > 1) add(x, PT_XFER_TP, 1, 2, act), add(x, PT_XFER_TP, 0, 2, act); /* the MLP: g forward, f backward */
        if (!first) add(x, PT_XFER_PP, 0, 1, act), add(x, PT_XFER_PP, 1, 1, act); /* activation in, its gradient out */
        if (!last) add(x, PT_XFER_PP, 1, 1, act), add(x, PT_XFER_PP, 0, 1, act);  /* activation out, gradient in */
        if (last) {
            add(x, PT_XFER_IO, 0, 1, n * 4);    /* the targets */
            add(x, PT_XFER_CHECK, 1, 1, n * 4); /* their range check */
            add(x, PT_XFER_IO, 1, 1, 4);        /* the loss */
            if (tp > 1) {
                int64_t off = (int64_t)me.tp * (VP / tp);
                for (i = 0; i < n; i++) held += tgt[(md->row0 + mb * rows) * TT + i] >= off && tgt[(md->row0 + mb * rows) * TT + i] < off + VP / tp;
                add(x, PT_XFER_TP, 1, 1, act), add(x, PT_XFER_TP, 0, 1, act); /* the head's f backward */
                add(x, PT_XFER_TP, 0, 3, n * 4);                              /* local targets, lse, row losses */
                add(x, PT_XFER_TP, 1, 1, n * 4);                              /* the local lse */
            }
        }
    }
    if (held) add(x, PT_XFER_TP, 1, held, 4); /* the target logits held here */
    if (pp > 1 && (first || last)) add(x, PT_XFER_PP, 1, 1, (int64_t)(VP / tp) * CW * 4), add(x, PT_XFER_PP, 0, 1, (int64_t)(VP / tp) * CW * 4);
    /* the gradient norm: one sum of squares (one scalar) per parameter when TP splits some or this
       rank holds a tied copy (not counted), else one for the whole slab */
    for (i = 0; i < pt_param_count(ctx); i++) tied |= (pt_param_at(ctx, i)->spec.flags & PT_PARAM_TIED_COPY) != 0;
    if (tp > 1 || tied) {
        for (i = 0; i < pt_param_count(ctx); i++) scal += !(pt_param_at(ctx, i)->spec.flags & PT_PARAM_TIED_COPY);
    } else {
        scal = 1;
    }
    add(x, PT_XFER_SCALAR, 1, scal, 8);
    if (lay.dp > 1 && !o->zero && !o->compress) { /* every bucket read once and written back once: the whole slab */
        int64_t slab = pt_param_slab(ctx).shape[0];
        add(x, PT_XFER_DP, 1, dps->buckets, 0), add(x, PT_XFER_DP, 0, dps->buckets, 0);
        x->bytes[PT_XFER_DP][0] = x->bytes[PT_XFER_DP][1] = slab * 4;
    }
}

/* the run on the grid; returns its context */
static pt_ctx *parallel(const opts *o, float *loss, float *gnorm, int count_step, char *err, size_t errlen, int *xfer_ok, char *xmsg, size_t xlen) {
    pt_desc desc;
    pt_optim_desc od = optim_desc(o);
    pt_layout lay = pt_dist_layout(grid);
    pt_coords me = pt_dist_coords(grid);
    pt_ctx *ctx;
    pt_optim *opt;
    pt_pp *pp = NULL;
    pt_dp *dp = NULL;
    pt_pp_desc pd;
    model md;
    int s, mine = me.pp;
    memset(&desc, 0, sizeof desc);
    desc.seed = 11, desc.threads = 1, desc.dist = grid, desc.device = o->device;
    ctx = pt_init(&desc);
    if (!ctx || pt_status_get(ctx) != PT_OK) {
        snprintf(err, errlen, "pt_init on %.16s: %.900s", o->device, ctx ? pt_error(ctx) : "NULL");
        return ctx;
    }
    build(ctx, &md, lay.pp, &mine, 1);
    opt = pt_optim_new(ctx, &od);
    if (lay.dp > 1) {
        pt_dp_options dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.bucket_bytes = 4096; /* several buckets */
        dopt.hier = o->hier, dopt.compress = o->compress;
        dp = pt_dp_new_opts(ctx, grid, &dopt);
        if (dp && o->zero) pt_dp_zero(dp, opt, o->zero);
    }
    memset(&pd, 0, sizeof pd);
    pd.kind = PT_PP_1F1B, pd.micro_batches = o->m, pd.virtual_stages = 1, pd.forward = stage_fn, pd.user = &md;
    if (opt) pp = pt_pp_new(ctx, &pd);
    if (pp) pt_pp_set_dp(pp, dp);
    if (!pp) {
        snprintf(err, errlen, "%s", pt_error(ctx));
        goto out;
    }
    md.m = o->m, md.rows = GB / lay.dp, md.row0 = me.dp * md.rows;
    for (s = 0; s < o->steps; s++) {
        int32_t ids[GB * TT], tgt[GB * TT];
        pt_dp_stats d0 = pt_dp_stats_get(dp), d1;
        batch(s, ids, tgt);
        md.ids = ids, md.tgt = tgt;
        if (s == count_step) pt_transfer_reset(ctx);
        pt_zero_grad(ctx);
        loss[s] = pt_pp_step(pp, 0, 1);
        gnorm[s] = pt_optim_step(opt, od.lr);
        if (s == count_step && xfer_ok) { /* compare every kind, both directions */
            pt_transfers t = pt_transfer_stats(ctx);
            xfers x;
            int k, ok = 1;
            size_t w = 0;
            d1 = pt_dp_stats_get(dp);
            d1.bytes_reduced -= d0.bytes_reduced;
            expected(o, ctx, &md, s, &d1, &x);
            xmsg[0] = 0;
            for (k = 0; k < PT_XFER_KINDS; k++) {
                int64_t sb = t.d2h_bytes[k], eb = x.bytes[k][1];
                if (k == PT_XFER_SCALAR && sb * 2 == eb) sb = eb; /* a device without fp64 reads floats */
                if (t.h2d_count[k] != x.cnt[k][0] || t.h2d_bytes[k] != x.bytes[k][0] || t.d2h_count[k] != x.cnt[k][1] || sb != eb) {
                    ok = 0;
                    if (w < xlen)
                        w += (size_t)snprintf(xmsg + w, xlen - w, " [rank %d %s: h2d %lld/%lldB expected %lld/%lldB, d2h %lld/%lldB expected %lld/%lldB]",
                                              world_rank, pt_xfer_kind_name(k), (long long)t.h2d_count[k], (long long)t.h2d_bytes[k],
                                              (long long)x.cnt[k][0], (long long)x.bytes[k][0], (long long)t.d2h_count[k],
                                              (long long)t.d2h_bytes[k], (long long)x.cnt[k][1], (long long)x.bytes[k][1]);
                }
            }
            if (world_rank == 0) {
                printf("  transfers of step %d on rank 0 (count/bytes):", s);
                for (k = 0; k < PT_XFER_KINDS; k++)
                    if (t.h2d_count[k] || t.d2h_count[k])
                        printf(" %s h2d %lld/%lld d2h %lld/%lld;", pt_xfer_kind_name(k), (long long)t.h2d_count[k], (long long)t.h2d_bytes[k],
                               (long long)t.d2h_count[k], (long long)t.d2h_bytes[k]);
                printf("\n");
            }
            *xfer_ok = ok;
        }
    }
    if (pt_status_get(ctx) != PT_OK) snprintf(err, errlen, "%s", pt_error(ctx));
out:
    pt_pp_free(pp);
    if (dp && o->zero) pt_dp_zero(dp, opt, 0); /* full state again before the reducer goes (the stage-0 gather) */
    pt_dp_free(dp);
    return ctx;
}

static int parse(int argc, char **argv, opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->lay.dp = 0, o->lay.tp = 1, o->lay.pp = 1;
    o->steps = 4, o->device = "opencl";
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--dp")) o->lay.dp = atoi(v), i++;
        else if (!strcmp(a, "--tp")) o->lay.tp = atoi(v), i++;
        else if (!strcmp(a, "--pp")) o->lay.pp = atoi(v), i++;
        else if (!strcmp(a, "--m")) o->m = atoi(v), i++;
        else if (!strcmp(a, "--zero")) o->zero = atoi(v), i++;
        else if (!strcmp(a, "--steps")) o->steps = atoi(v), i++;
        else if (!strcmp(a, "--device")) o->device = v, i++;
        else if (!strcmp(a, "--compress")) o->compress = 1;
        else if (!strcmp(a, "--hier")) o->hier = 1;
        else if (!strcmp(a, "--sgd")) o->sgd = 1;
        else if (!strcmp(a, "--fake-node-size")) setenv("PTRAIN_FAKE_NODE_SIZE", v, 1), i++;
        else {
            fprintf(stderr, "test_clmpi: unknown flag %s\n", a);
            return 0;
        }
    }
    if (o->steps < 2) o->steps = 2;
    if (o->steps > MAXSTEPS) o->steps = MAXSTEPS;
    return 1;
}

int main(int argc, char **argv) {
    opts o;
    char err[1024], name[256], worst[256], xmsg[2048];
    float rl[MAXSTEPS], rg[MAXSTEPS], l1[MAXSTEPS], g1[MAXSTEPS], l2[MAXSTEPS], g2[MAXSTEPS];
    double dl = 0, dg = 0, dpar, tol, tol_p;
    pt_ctx *ref, *a, *b;
    pt_layout lay;
    int s, same = 1, xok = 0;
    if (!parse(argc, argv, &o)) return 2;
    grid = pt_dist_init(&argc, &argv, &o.lay, err, sizeof err);
    if (!grid) {
        fprintf(stderr, "test_clmpi: %s\n", err);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    world_rank = pt_dist_rank(grid);
    tu_mpi_init(NULL);
    lay = pt_dist_layout(grid);
    if (o.m == 0) o.m = lay.pp;
    if (lay.pp > MAXST || (GB / lay.dp) % o.m != 0 || VP % lay.tp || HID % lay.tp) {
        if (world_rank == 0) printf("FAIL configuration: pp <= %d, the batch per DP rank (%d) must split into %d micro-batches\n0 passed, 1 failed\n", MAXST, GB / lay.dp, o.m);
        pt_dist_finalize(grid);
        return 1;
    }
    snprintf(name, sizeof name, "dp%d tp%d pp%d m%d zero%d%s%s%s on %s", lay.dp, lay.tp, lay.pp, o.m, o.zero, o.compress ? " bf16" : "",
             o.hier ? " hier" : "", o.sgd ? " sgd" : " adamw", o.device);
    if (world_rank == 0) printf("layout: %s\n", name);
    tol = o.compress ? 1e-3 : 1e-5, tol_p = o.compress ? 3e-2 : o.sgd ? 1e-5 : 1e-4;
    ref = reference(&o, lay.pp, rl, rg);
    err[0] = 0;
    a = parallel(&o, l1, g1, 1, err, sizeof err, &xok, xmsg, sizeof xmsg);
    CHECK_WHY(pt_status_get(a) == PT_OK && !err[0], "parallel run completes", err);
    if (tu_nfail) goto done;
    snprintf(err, sizeof err, "backend '%s', asked for %s", pt_backend_name(a), o.device);
    CHECK_WHY(!strcmp(o.device, "cpu") || strcmp(pt_backend_name(a), "cpu") != 0, "the parallel run is on the asked device", err);
    for (s = 0; s < o.steps; s++) {
        double e = fabs((double)l1[s] - rl[s]) / fabs((double)rl[s]), f = fabs((double)g1[s] - rg[s]) / fabs((double)rg[s]);
        if (!(e <= dl)) dl = e;
        if (!(f <= dg)) dg = f;
    }
    if (world_rank == 0)
        printf("  step 0 loss %.7f (reference %.7f), step %d loss %.7f (reference %.7f); max rel loss diff %.3g, grad-norm diff %.3g\n", l1[0],
               rl[0], o.steps - 1, l1[o.steps - 1], rl[o.steps - 1], dl, dg);
    snprintf(err, sizeof err, "max relative loss difference %.3g > %.3g", dl, tol);
    CHECK_WHY(dl <= tol, "per-step losses equal the single CPU process", err);
    snprintf(err, sizeof err, "max relative grad-norm difference %.3g > %.3g", dg, o.compress ? 1e-2 : tol);
    CHECK_WHY(dg <= (o.compress ? 1e-2 : tol), "per-step global gradient norms equal the single CPU process", err);
    dpar = param_diff(grid, a, ref, worst, sizeof worst);
    MPI_Allreduce(MPI_IN_PLACE, &dpar, 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(grid, PT_COMM_WORLD));
    if (world_rank == 0) printf("  max per-tensor rel param diff %.3g (%s)\n", dpar, worst);
    snprintf(err, sizeof err, "per-tensor relative parameter difference %.3g > %.3g (%s)", dpar, tol_p, worst);
    snprintf(name, sizeof name, "final parameters equal the single CPU process (%.0e)", tol_p);
    CHECK_WHY(dpar <= tol_p, name, err);
    if (strcmp(o.device, "cpu") != 0 && !o.zero && !o.compress && !o.hier) {
        snprintf(name, sizeof name, "transfers of one step by kind: exact counts and bytes");
        CHECK_WHY(xok, name, xmsg[0] ? xmsg : "see the other ranks");
    }
    b = parallel(&o, l2, g2, -1, err, sizeof err, NULL, NULL, 0);
    for (s = 0; s < o.steps; s++) same &= memcmp(&l1[s], &l2[s], sizeof(float)) == 0 && memcmp(&g1[s], &g2[s], sizeof(float)) == 0;
    CHECK_WHY(same, "the same layout twice is bit-identical", "losses or norms differ between two runs");
    pt_shutdown(b);
done:
    pt_shutdown(a);
    pt_shutdown(ref);
    s = tu_summary();
    pt_dist_finalize(grid);
    return s;
}

/* dp_common.h - shared by test_dp.c and test_zero.c: the implementation, the parameters of the
   small data-parallel GPT run and its single-process reference (checks: test_util.h, agreed by every rank). */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 16
#define T 16
#define STEPS 6
#ifndef LR
#define LR 1e-2f
#endif
/* AdamW eps 1e-6, not the default 1e-8: with 1e-8, elements whose true gradient is ~0 (e.g. the
   attention key bias, whose gradient is exactly 0 in exact arithmetic) get rounding noise that Adam
   turns into full +-lr steps, so even one rank with 2 micro-batches vs 1 differs by ~2e-5 */
#define MAXMICRO 4
#ifndef EPS
#define EPS 1e-6f
#endif

typedef struct {
    pt_dist *d;
    int rank, dpn, dprank;
    int32_t ids[STEPS][B * T], tgt[STEPS][B * T];
} tctx;

/* ---- the training run shared by the DP and ZeRO tests ---- */
typedef struct {
    int use_dp;         /* 0 = no pt_dp */
    int whole;          /* 1 = the whole batch (reference), 0 = this rank's slice */
    int64_t bucket;     /* pt_dp_new bucket_bytes */
    int micro;          /* micro-batches per step (1 or 2) */
    int extras;         /* 1 = a frozen and an unused parameter created before the model, 2 = after */
    int zero_at;        /* step before which pt_dp_zero(dp, opt, 1) is called; -1 = never (set it: 0 = step 0) */
    int unzero_at;      /* step before which pt_dp_zero(dp, opt, 0) is called; -1 = never */
    int no_gather;      /* control: ZeRO-1 with the parameter allgather detached */
    int stage;          /* ZeRO stage set at zero_at (0 = 1) */
    int step_api;       /* 1 = pt_dp_begin_step(dp, micro) once per step (else pt_dp_begin per pass) */
    int split;          /* 1 = the model in two parts (embedding + block 0 | block 1 + head), backward passes
                           interleaved as in a pipeline: B0 B1 A0 B2 A1 B3 A2 A3 (implies step_api, untied) */
    int untied;         /* separate LM head (the reference of split runs) */
    int hier, compress; /* pt_dp_new_opts options */
    float clip;         /* clip_norm (0 = 0.5: active in the first steps) */
} run_cfg;

typedef struct {
    float loss[STEPS];
    pt_ctx *ctx;        /* kept alive to compare parameters by name */
    int ok;
    char err[512];
    int64_t state_bytes;   /* pt_optim_state_bytes while sharded (or at the end) */
    int64_t mem_optim;     /* pt_mem(ctx).optim at the same time */
    int64_t mem_grads;     /* pt_mem(ctx).grads after the last step (before pt_dp_free) */
    int64_t mem_params;    /* pt_mem(ctx).params after the last step (before pt_dp_free) */
    float frozen0, frozen1; /* the frozen parameter's first element before and after */
    pt_dp_stats st;         /* pt_dp_stats_get at the end */
    float norm[STEPS];      /* gradient norm of each step (pt_optim_step's return: before clipping) */
} run_out;

static void extras(pt_ctx *ctx) {
    int64_t s[2] = {40, 24};
    pt_param_new(ctx, "x.frozen", 2, s, PT_INIT_NORMAL, 0.02f, PT_PARAM_FROZEN);
    pt_param_new(ctx, "x.unused", 2, s, PT_INIT_NORMAL, 0.02f, 0);
}

/* One step of the split model: forward every micro-batch through part A (embedding, block 0; graph
   gs[k]) and part B (block 1, head, loss; graph gs[MAXMICRO + k], fed by a copy of A's output), then
   the backward passes interleaved as in a pipeline: B0 B1 A0 B2 A1 B3 A2 A3 (part B's parameters
   fire twice before part A's first). Returns the sum of the scaled losses. */
static double split_step(tctx *t, const run_cfg *c, pt_gpt *m, pt_graph **gs, int s, int r0, int mr) {
    pt_tensor *ha[MAXMICRO], *xb[MAXMICRO], *loss[MAXMICRO];
    static float buf[B * T * 32];
    double lsum = 0;
    int k, i, order[2 * MAXMICRO], n = 0, nb = 0, na = 0;
    for (k = 0; k < c->micro; k++) {
        pt_graph *ga = gs[k], *gb = gs[MAXMICRO + k];
        pt_tensor *ids, *tg;
        int row = r0 + k * mr;
        pt_graph_reset(ga), pt_graph_reset(gb);
        ids = pt_tensor_new(ga, PT_I32, 2, mr, T, 0, 0);
        tg = pt_tensor_new(gb, PT_I32, 2, mr, T, 0, 0);
        if (!ids || !tg) return NAN;
        pt_tensor_write(ids, t->ids[s] + row * T);
        pt_tensor_write(tg, t->tgt[s] + row * T);
        ha[k] = pt_gpt_block(ga, m, 0, pt_gpt_embed(ga, m, ids));
        xb[k] = pt_tensor_new(gb, PT_F32, 3, mr, T, 32, 0);
        if (!ha[k] || !xb[k]) return NAN;
        pt_requires_grad(xb[k]);
        pt_tensor_read(ha[k], buf);
        pt_tensor_write(xb[k], buf);
        loss[k] = pt_cross_entropy_ex(gb, pt_gpt_head(gb, m, pt_gpt_block(gb, m, 1, xb[k])), tg, -1, 64);
        loss[k] = pt_scale(gb, loss[k], 1.0f / (float)c->micro);
        if (!loss[k]) return NAN;
        lsum += pt_item(loss[k]);
    }
    /* B0 B1 A0 B2 A1 ... A(m-1): part B runs one micro-batch ahead */
    order[n++] = nb++;
    while (na < c->micro) {
        if (nb < c->micro) order[n++] = nb++;
        order[n++] = -1 - na++;
    }
    for (i = 0; i < n; i++) {
        k = order[i];
        if (k >= 0) {
            if (pt_backward(gs[MAXMICRO + k], loss[k]) != PT_OK) return NAN;
        } else {
            k = -1 - k;
            if (pt_backward_from(gs[k], ha[k], xb[k]->grad) != PT_OK) return NAN;
        }
    }
    return lsum;
}

static void run(tctx *t, const run_cfg *c, run_out *o) {
    pt_desc desc;
    pt_gpt_config cfg;
    pt_optim_desc od;
    pt_gpt *m;
    pt_optim *opt;
    pt_dp *dp = NULL;
    pt_graph *g, *gs[2 * MAXMICRO];
    int s, k, nr = c->whole ? B : B / t->dpn, r0 = c->whole ? 0 : t->dprank * (B / t->dpn);
    memset(o, 0, sizeof *o);
    memset(&desc, 0, sizeof desc);
    desc.seed = 1234;
    desc.threads = 1;
    o->ctx = pt_init(&desc);
    if (!o->ctx) {
        snprintf(o->err, sizeof o->err, "pt_init failed");
        return;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 64, cfg.layers = 2, cfg.width = 32, cfg.heads = 4, cfg.max_seq = T;
    cfg.untied = c->untied || c->split;
    if (c->extras == 1) extras(o->ctx);
    m = pt_gpt_new(o->ctx, &cfg);
    if (c->extras == 2) extras(o->ctx);
    if (c->extras) o->frozen0 = pt_f32(&pt_param_find(o->ctx, "x.frozen")->value)[0];
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = LR, od.weight_decay = 0.1f, od.clip_norm = c->clip > 0 ? c->clip : 0.5f, od.eps = EPS;
    opt = pt_optim_new(o->ctx, &od);
    if (c->use_dp) {
        pt_dp_options dpo;
        memset(&dpo, 0, sizeof dpo);
        dpo.bucket_bytes = c->bucket, dpo.hier = c->hier, dpo.compress = c->compress;
        dp = pt_dp_new_opts(o->ctx, t->d, &dpo);
    }
    g = pt_graph_new(o->ctx);
    for (k = 0; k < 2 * MAXMICRO; k++) gs[k] = pt_graph_new(o->ctx);
    for (k = 0; k < 2 * MAXMICRO; k++)
        if (!gs[k]) g = NULL;
    if (!m || !opt || !g || (c->use_dp && !dp)) {
        snprintf(o->err, sizeof o->err, "setup failed: %.200s", pt_error(o->ctx));
        return;
    }
    o->state_bytes = pt_optim_state_bytes(opt);
    o->mem_optim = pt_mem(o->ctx).optim;
    for (s = 0; s < STEPS; s++) {
        double lsum = 0, gl;
        int mr = nr / c->micro;
        if (dp && s == c->zero_at) {
            if (pt_dp_zero(dp, opt, c->stage ? c->stage : 1) != PT_OK) break;
            o->state_bytes = pt_optim_state_bytes(opt);
            o->mem_optim = pt_mem(o->ctx).optim;
            if (c->no_gather) opt->post_step = NULL; /* the control: this file sees the implementation */
        }
        if (dp && s == c->unzero_at && pt_dp_zero(dp, opt, 0) != PT_OK) break;
        pt_zero_grad(o->ctx);
        if (dp && (c->step_api || c->split)) pt_dp_begin_step(dp, c->micro);
        if (c->split) lsum = split_step(t, c, m, gs, s, r0, mr);
        else
            for (k = 0; k < c->micro; k++) {
                pt_tensor *ids, *tg, *loss;
                int row = r0 + k * mr;
                pt_graph_reset(g);
                ids = pt_tensor_new(g, PT_I32, 2, mr, T, 0, 0);
                tg = pt_tensor_new(g, PT_I32, 2, mr, T, 0, 0);
                if (!ids || !tg) break;
                pt_tensor_write(ids, t->ids[s] + row * T);
                pt_tensor_write(tg, t->tgt[s] + row * T);
                loss = pt_gpt_loss(g, m, ids, tg);
                if (c->micro > 1) loss = pt_scale(g, loss, 1.0f / (float)c->micro);
                if (!loss) break;
                lsum += pt_item(loss);
                if (dp && !c->step_api) pt_dp_begin(dp, k == c->micro - 1);
                if (pt_backward(g, loss) != PT_OK) break;
                if (dp && !c->step_api && pt_dp_finish(dp) != PT_OK) break;
            }
        if (dp && (c->step_api || c->split)) pt_dp_finish(dp);
        if (pt_status_get(o->ctx) != PT_OK) break;
        gl = lsum;
#ifdef PTRAIN_MPI
        if (!c->whole) {
            MPI_Allreduce(&lsum, &gl, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_DP));
            gl /= t->dpn;
        }
#endif
        o->loss[s] = (float)gl;
        o->norm[s] = pt_optim_step(opt, LR);
        if (dp && s == c->zero_at) o->mem_optim = pt_mem(o->ctx).optim; /* the moments are made (the shard) at the first step */
        if (isnan(o->norm[s])) break;
    }
    if (pt_status_get(o->ctx) != PT_OK) {
        snprintf(o->err, sizeof o->err, "training failed: %.200s", pt_error(o->ctx));
    } else {
        o->ok = 1;
    }
    if (c->extras) o->frozen1 = pt_f32(&pt_param_find(o->ctx, "x.frozen")->value)[0];
    if (dp) o->st = pt_dp_stats_get(dp);
    o->mem_grads = pt_mem(o->ctx).grads;
    o->mem_params = pt_mem(o->ctx).params;
    pt_dp_free(dp);
    for (k = 0; k < 2 * MAXMICRO; k++) pt_graph_free(gs[k]);
    pt_graph_free(g);
    pt_gpt_free(m);
}

/* max over the reference's parameters of ||a - ref|| / ||ref|| (matched by name) */
static char worst_name[96];
static double param_diff(pt_ctx *a, pt_ctx *ref) {
    double worst = 0;
    int i;
    for (i = 0; i < pt_param_count(ref); i++) {
        pt_param *pr = pt_param_at(ref, i), *pa = pt_param_find(a, pr->spec.name);
        const float *x, *y;
        double dn = 0, rn = 0;
        int64_t j, n = pt_numel(&pr->value);
        if (!pa || pt_numel(&pa->value) != n) return INFINITY;
        x = pt_f32(&pa->value), y = pt_f32(&pr->value);
        for (j = 0; j < n; j++) dn += ((double)x[j] - y[j]) * ((double)x[j] - y[j]), rn += (double)y[j] * y[j];
        dn = sqrt(dn) / (sqrt(rn) > 0 ? sqrt(rn) : 1);
        if (!(dn <= worst)) worst = dn, snprintf(worst_name, sizeof worst_name, "%s", pr->spec.name); /* NaN sticks */
    }
    return worst;
}
static double loss_diff(const run_out *a, const run_out *r) {
    double worst = 0;
    int s;
    for (s = 0; s < STEPS; s++) {
        double d = fabs((double)a->loss[s] - r->loss[s]) / fabs((double)r->loss[s]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static double norm_diff(const run_out *a, const run_out *r) {
    double worst = 0;
    int s;
    for (s = 0; s < STEPS; s++) {
        double d = fabs((double)a->norm[s] - r->norm[s]) / fabs((double)r->norm[s]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* losses (ltol), final parameters (ptol) and gradient norms (ntol) against the reference */
static void compare_tol(tctx *t, const char *what, run_out *a, run_out *ref, double ltol, double ptol, double ntol) {
    char name[256], why[512];
    double ld, pd, nd;
    snprintf(name, sizeof name, "%s: trains without error", what);
    CHECK_WHY(a->ok, name, a->err);
    ld = a->ok ? loss_diff(a, ref) : INFINITY;
    snprintf(name, sizeof name, "%s: losses of %d steps match the reference (rel <= %g)", what, STEPS, ltol);
    snprintf(why, sizeof why, "worst relative loss difference %.3g (step 0: %.7f vs %.7f)", ld, a->loss[0], ref->loss[0]);
    CHECK_WHY(ld <= ltol, name, why);
    pd = a->ok ? param_diff(a->ctx, ref->ctx) : INFINITY;
    snprintf(name, sizeof name, "%s: final parameters match the reference (||d||/||p|| <= %g per tensor)", what, ptol);
    snprintf(why, sizeof why, "worst per-tensor relative difference %.3g (%s)", pd, worst_name);
    CHECK_WHY(pd <= ptol, name, why);
    nd = a->ok ? norm_diff(a, ref) : INFINITY;
    snprintf(name, sizeof name, "%s: gradient norms (the clip's) match the reference (rel <= %g)", what, ntol);
    snprintf(why, sizeof why, "worst relative norm difference %.3g (step 0: %.7f vs %.7f)", nd, a->norm[0], ref->norm[0]);
    CHECK_WHY(nd <= ntol, name, why);
    {
        /* every DP rank holds the same model (a hash of the parameter slab, min = max over ranks) */
        pt_tensor ps = pt_param_slab(a->ctx);
        const unsigned char *q = (const unsigned char *)pt_f32(&ps);
        unsigned long long h = 1469598103934665603ull, lo = 0, hi = 0;
        int64_t j;
        for (j = 0; a->ok && q && j < pt_numel(&ps) * 4; j++) h = (h ^ q[j]) * 1099511628211ull;
        lo = hi = h;
#ifdef PTRAIN_MPI
        MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_WORLD));
        MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_WORLD));
#endif
        snprintf(name, sizeof name, "%s: bit-identical parameters on every rank", what);
        CHECK_WHY(a->ok && lo == hi, name, "the replicas differ");
    }
    if (t->rank == 0 && getenv("DP_TEST_VERBOSE"))
        printf("  %s: loss %.3g, params %.3g, norm %.3g\n", what, ld, pd, nd);
}
static void compare(tctx *t, const char *what, run_out *a, run_out *ref) { compare_tol(t, what, a, ref, 1e-5, 1e-5, 1e-5); }

/* Shared start of test_dp and test_zero: the grid, the same data on every rank, the check that the
   batch splits, and the single-process reference run (with its checks). Returns -1 when the grid
   cannot be made (nothing to count), 0 when the run cannot go on, 1 to go on. */
static int setup(tctx *t, int *argc, char ***argv, const char *prog, const char *extra, run_out *ref) {
    char err[512], why[256];
    run_cfg c;
    pt_rng rng;
    int s, i;
    t->d = pt_dist_init(argc, argv, NULL, err, sizeof err);
    if (!t->d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return -1;
    }
    t->rank = pt_dist_rank(t->d);
    t->dpn = pt_dist_layout(t->d).dp;
    t->dprank = pt_dist_coords(t->d).dp;
    tu_mpi_init(NULL);
    rng = pt_rng_seed(42); /* the same data on every rank */
    for (s = 0; s < STEPS; s++)
        for (i = 0; i < B * T; i++) t->ids[s][i] = (int32_t)(pt_rng_u32(&rng) % 64), t->tgt[s][i] = (int32_t)(pt_rng_u32(&rng) % 64);
    if (t->rank == 0) printf("%s: %d DP ranks, GPT vocab 64, 2 layers, width 32, B=%d T=%d, %d AdamW steps%s\n", prog, t->dpn, B, T, STEPS, extra);
    if (!CHECK_WHY(B % (MAXMICRO * t->dpn) == 0, "the global batch splits into 4 micro-batches per rank", "use np 1, 2 or 4")) return 0;
    memset(&c, 0, sizeof c);
    c.whole = 1, c.micro = 1, c.zero_at = c.unzero_at = -1;
    run(t, &c, ref); /* the single-process reference */
    CHECK_WHY(ref->ok, "reference (whole batch, no DP) trains", ref->err);
    snprintf(why, sizeof why, "step-0 gradient norm %.4f", ref->norm[0]);
    CHECK_WHY(ref->norm[0] > 0.5f, "reference: clipping (clip_norm 0.5) is active at step 0, so the norm under DP/ZeRO matters", why);
    return 1;
}
